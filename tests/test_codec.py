"""The storage codec: exact wire layout, round trips for every kind and field, safe on junk."""

from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakglass.webhooks import codec
from breakglass.webhooks.codec import SCHEMA, CodecError

KYVERNO = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "kyverno-resource-validating-webhook-cfg", "uid": "8f3c", "generation": 3,
                 "creationTimestamp": "2026-02-24T15:32:50Z", "labels": {"webhook.kyverno.io/managed-by": "kyverno"},
                 "managedFields": [{"manager": "kyverno", "operation": "Update", "apiVersion": "admissionregistration.k8s.io/v1",
                                    "time": "2026-02-24T15:32:50Z", "fieldsType": "FieldsV1",
                                    "fieldsV1": {"f:webhooks": {}}}]},
    "webhooks": [{"name": "validate.kyverno.svc-fail",
                  "clientConfig": {"service": {"namespace": "kyverno", "name": "kyverno-svc", "path": "/validate/fail",
                                               "port": 443}, "caBundle": base64.b64encode(b"PEM").decode()},
                  "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                             "resources": ["*/*"], "scope": "*"}],
                  "failurePolicy": "Fail", "namespaceSelector": {"matchExpressions": [
                      {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kyverno"]}]},
                  "sideEffects": "NoneOnDryRun", "timeoutSeconds": 10, "admissionReviewVersions": ["v1"],
                  "matchPolicy": "Equivalent", "objectSelector": {},
                  "matchConditions": [{"name": "skip", "expression": "true"}]}],
}


def test_golden_layout_of_a_small_message():
    # ServiceReference{namespace:"a", name:"b"}: strings always written, pointer path/port not at all.
    assert codec.encode_message("ServiceReference", {"namespace": "a", "name": "b"}) == b"\x0a\x01a\x12\x01b"
    # ...and an unset non-pointer string is still written, empty, in number order.
    assert codec.encode_message("ServiceReference", {"name": "b", "port": 443}) == b"\x0a\x00\x12\x01b\x20\xbb\x03"
    # Negative int32 is ten bytes, as Go writes it.
    assert codec.encode_message("ServiceReference", {"name": "", "port": -1}).endswith(b"\x20" + b"\xff" * 9 + b"\x01")


def test_envelope_layout():
    b = codec.encode_value(KYVERNO)
    assert b.startswith(b"k8s\x00\x0a")
    assert b"\x0a\x1fadmissionregistration.k8s.io/v1\x12\x1eValidatingWebhookConfiguration" in b
    assert b.endswith(b"\x1a\x00\x22\x00")  # contentEncoding and contentType, empty but present
    assert b"\x42" in b  # ObjectMeta creationTimestamp (field 8)


def test_round_trip_kyverno():
    dec = codec.decode_value(codec.encode_value(KYVERNO))
    assert dec.encoding == "protobuf" and dec.obj == KYVERNO


def test_map_entries_are_sorted():
    a = codec.encode_message("ObjectMeta", {"name": "x", "labels": {"b": "2", "a": "1"}})
    assert a.index(b"\x0a\x01a") < a.index(b"\x0a\x01b")


def test_unknown_fields_are_skipped():
    raw = codec.encode_message("ServiceReference", {"namespace": "a", "name": "b"})
    extra = (b"\xf8\x06\x2a"                      # field 111 varint
             + b"\xfa\x06\x03abc"                 # field 111 bytes
             + b"\xfd\x06\x00\x00\x00\x00"        # field 111 fixed32
             + b"\xf9\x06" + b"\x00" * 8          # field 111 fixed64
             + b"\xfb\x06\x08\x01\xfc\x06")       # field 111 group
    assert codec.decode_message("ServiceReference", raw + extra) == {"namespace": "a", "name": "b"}


@pytest.mark.parametrize("cut", [1, 5, 20, 60])
def test_truncated_values_are_codec_errors(cut):
    b = codec.encode_value(KYVERNO)
    with pytest.raises(CodecError):
        codec.decode_value(b[:-cut])


def test_json_and_encrypted_values():
    import json
    assert codec.decode_value(json.dumps(KYVERNO).encode()).obj == KYVERNO
    enc = codec.decode_value(b"k8s:enc:aescbc:v1:key1:\x8a\x01binaryciphertext")
    assert enc.encoding == "encrypted" and enc.obj is None and enc.detail == "aescbc:v1:key1"
    with pytest.raises(CodecError):
        codec.decode_value(b"garbage")


def test_other_kinds_decode_their_metadata():
    raw = codec.encode_message("Object", {"metadata": {"name": "kubernetes", "uid": "u"}}) + b"\x12\x05junk!"
    env = codec.encode_message("Unknown", {"typeMeta": {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR"},
                                           "raw": raw})
    dec = codec.decode_value(codec.MAGIC + env)
    assert dec.obj == {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                       "metadata": {"name": "kubernetes", "uid": "u"}}


# -- every field of every message: round trip on generated canonical objects ------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_ne_text = _text.filter(bool)


def _value(f, depth):
    if f.type == "string":
        return _text if (f.ptr or f.rep) else _ne_text
    if f.type in ("int32", "int64"):
        bits = 31 if f.type == "int32" else 63
        ints = st.integers(-(1 << bits), (1 << bits) - 1)
        return ints if (f.ptr or f.rep) else ints.filter(bool)
    if f.type == "bool":
        return st.booleans() if f.ptr else st.just(True)
    if f.type == "bytes":
        return st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode())
    if f.type == "time":
        return st.integers(0, 4102444800).map(lambda s: codec._time_to_json(s, 0))
    if f.type == "fieldsv1":
        return st.dictionaries(st.sampled_from(["f:a", "f:b"]), st.just({}), max_size=2)
    return _message(f.type, depth + 1)


def _message(name, depth=0):
    if depth > 4:
        return st.just({})
    fields = SCHEMA[name]

    @st.composite
    def build(draw):
        out = {}
        for f in fields:
            if f.inline:
                out.update(draw(_message(f.type, depth)))
                continue
            if f.type == "map":
                m = draw(st.dictionaries(_ne_text, _text, max_size=2))
                if m:
                    out[f.name] = m
            elif f.rep:
                items = draw(st.lists(_value(f, depth), max_size=2))
                if items:
                    out[f.name] = items
            elif draw(st.booleans()):
                v = draw(_value(f, depth))
                if f.ptr or v != {}:
                    out[f.name] = v
        return out
    return build()


@pytest.mark.parametrize("kind", codec.ADMISSION_KINDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_round_trip_every_field(kind, data):
    body = data.draw(_message(kind))
    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, **body}
    b = codec.encode_value(obj)
    dec = codec.decode_value(b)
    assert dec.obj == obj
    assert codec.encode_value(dec.obj) == b  # and the bytes are stable


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_decoder_never_raises_anything_but_codec_error(data):
    for value in (data, codec.MAGIC + data):
        try:
            codec.decode_value(value)
        except CodecError as e:
            assert "\n" not in str(e)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.integers(0, 255))
def test_fuzz_mutated_real_value(pos, byte):
    b = bytearray(codec.encode_value(KYVERNO))
    b[pos % len(b)] = byte
    try:
        codec.decode_value(bytes(b))
    except CodecError:
        pass
