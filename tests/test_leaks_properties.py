"""Property-based: leaks never crashes on what real logs and exports can hold, and the JSON-array reader
gives exactly json.loads's elements however the bytes are split."""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakglass.core.errors import BadInput
from breakglass.leaks import apiserver, audit
from breakglass.logs.jsonarray import json_array
from tests.test_leaks import event, fo
from tests.test_leaks_apiserver import story as apiserver_story
from tests.test_leaks_gke import entries as gke_entries

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=20)


def _scan(module, data: bytes, **kw):
    try:
        return module.scan(["-"], stdin=io.BytesIO(data), **kw)
    except BadInput as e:  # binary junk, broken arrays: one line, never a traceback
        assert "\n" not in str(e)
        return None


@SETTINGS
@given(st.lists(JSON, max_size=8), st.sampled_from([None, 0, 1, 2, 4]), st.integers(1, 64))
def test_json_array_elements_whatever_the_split(items, indent, size):
    text = json.dumps(items, indent=indent).encode()
    chunks = [text[i:i + size] for i in range(0, len(text), size)]
    assert list(json_array(chunks, "t")) == json.loads(text)


@SETTINGS
@given(st.binary(max_size=3000))
def test_random_bytes_are_no_leak_or_one_line(data):
    for module in (audit, apiserver):
        rep = _scan(module, data, **({"year": 2026} if module is apiserver else {}))
        assert rep is None or rep.leaks == [] or module is apiserver


@SETTINGS
@given(st.data())
def test_mutated_real_lines_never_crash(data):
    lines = ([event("a1", ann=fo()), event("d1", "delete", code=200)] + [json.dumps(e) for e in gke_entries()]
             + apiserver_story())
    line = data.draw(st.sampled_from(lines))
    pos = data.draw(st.integers(0, len(line)))
    cut = data.draw(st.integers(0, 40))
    junk = data.draw(st.text(max_size=12))
    mutated = (line[:pos] + junk + line[pos + cut:]).encode("utf-8", "replace")
    _scan(audit, mutated + b"\n")
    _scan(apiserver, mutated + b"\n", year=2026)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["kind", "apiVersion", "stage", "verb", "objectRef", "annotations",
                                        "responseStatus", "user", "auditID", "protoPayload", "labels", "operation",
                                        "timestamp", "log", "message", "items"]), JSON, max_size=10))
def test_audit_shaped_objects_of_any_field_types(obj):
    # the right keys with the wrong types: a real export's surprise, never a traceback
    for o in (obj, {**obj, "kind": "Event", "apiVersion": "audit.k8s.io/v1", "stage": "ResponseComplete",
                    "annotations": {"failed-open.validating.webhook.admission.k8s.io/round_0_index_0": "w"}},
              {"protoPayload": {**obj, "methodName": "io.k8s.core.v1.pods.create"}, "labels": obj.get("labels")}):
        _scan(audit, json.dumps(o).encode() + b"\n")
