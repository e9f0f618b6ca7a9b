"""Decode and encode what kube-apiserver stores in etcd for admission configurations.

Values are (shared reference §4.2): ``k8s\\x00`` + a protobuf ``runtime.Unknown``
(TypeMeta, raw object bytes, contentEncoding, contentType); plain JSON starting with
``{``; or ``k8s:enc:…`` when encryption at rest covers the resource, which is reported
as opaque and never guessed at.

The schema below carries the field numbers of k8s.io/api/admissionregistration and
apimachinery meta/v1 (reference §4.3, checked against the Go types), and for each field
whether Go holds it as a pointer. That decides the wire layout the encoder reproduces,
as the generated Marshal code writes it: fields in number order; non-pointer strings,
ints, bools and embedded structs always; pointer fields only when set; map entries
sorted by key. Decoding yields the object in its JSON API shape (camelCase names, zero
non-pointer values left out), so ``decode(encode(x)) == x`` for such objects, and unknown
fields are skipped.
"""

from __future__ import annotations

import base64
import calendar
import datetime as _dt
import json
from dataclasses import dataclass
from typing import Any

from breakglass.core.errors import BadInput

MAGIC = b"k8s\x00"
ENCRYPTED = b"k8s:enc:"


class CodecError(BadInput):
    """A stored value that cannot be decoded (truncated, corrupt, or not an object)."""


@dataclass(frozen=True)
class F:
    num: int
    name: str
    type: str  # string bytes int32 int64 bool time map fieldsv1, or a message name
    ptr: bool = False  # Go pointer / optional: written only when set, kept when zero
    rep: bool = False
    inline: bool = False  # an embedded struct whose JSON fields sit in the parent


def _m(*fields: F) -> tuple[F, ...]:
    return tuple(sorted(fields, key=lambda f: f.num))


S, B, I32, I64, BOOL, TIME, MAP = "string", "bytes", "int32", "int64", "bool", "time", "map"
INTSTR = "intstr"  # intstr.IntOrString: {type, intVal, strVal} on the wire, a number or a string in JSON

SCHEMA: dict[str, tuple[F, ...]] = {
    # k8s.io/apimachinery/pkg/apis/meta/v1
    "ObjectMeta": _m(F(1, "name", S), F(2, "generateName", S), F(3, "namespace", S), F(4, "selfLink", S),
                     F(5, "uid", S), F(6, "resourceVersion", S), F(7, "generation", I64),
                     F(8, "creationTimestamp", TIME), F(9, "deletionTimestamp", TIME, ptr=True),
                     F(10, "deletionGracePeriodSeconds", I64, ptr=True), F(11, "labels", MAP),
                     F(12, "annotations", MAP), F(13, "ownerReferences", "OwnerReference", rep=True),
                     F(14, "finalizers", S, rep=True), F(17, "managedFields", "ManagedFieldsEntry", rep=True)),
    "OwnerReference": _m(F(1, "kind", S), F(3, "name", S), F(4, "uid", S), F(5, "apiVersion", S),
                         F(6, "controller", BOOL, ptr=True), F(7, "blockOwnerDeletion", BOOL, ptr=True)),
    "ManagedFieldsEntry": _m(F(1, "manager", S), F(2, "operation", S), F(3, "apiVersion", S),
                             F(4, "time", TIME, ptr=True), F(6, "fieldsType", S),
                             F(7, "fieldsV1", "fieldsv1", ptr=True), F(8, "subresource", S)),
    "LabelSelector": _m(F(1, "matchLabels", MAP), F(2, "matchExpressions", "LabelSelectorRequirement", rep=True)),
    "LabelSelectorRequirement": _m(F(1, "key", S), F(2, "operator", S), F(3, "values", S, rep=True)),
    "Condition": _m(F(1, "type", S), F(2, "status", S), F(3, "observedGeneration", I64),
                    F(4, "lastTransitionTime", TIME), F(5, "reason", S), F(6, "message", S)),
    # k8s.io/api/admissionregistration/v1 (v1beta1 uses the same numbers)
    "ValidatingWebhookConfiguration": _m(F(1, "metadata", "ObjectMeta"),
                                         F(2, "webhooks", "ValidatingWebhook", rep=True)),
    "MutatingWebhookConfiguration": _m(F(1, "metadata", "ObjectMeta"),
                                       F(2, "webhooks", "MutatingWebhook", rep=True)),
    "ValidatingWebhook": _m(F(1, "name", S), F(2, "clientConfig", "WebhookClientConfig"),
                            F(3, "rules", "RuleWithOperations", rep=True), F(4, "failurePolicy", S, ptr=True),
                            F(5, "namespaceSelector", "LabelSelector", ptr=True), F(6, "sideEffects", S, ptr=True),
                            F(7, "timeoutSeconds", I32, ptr=True), F(8, "admissionReviewVersions", S, rep=True),
                            F(9, "matchPolicy", S, ptr=True), F(10, "objectSelector", "LabelSelector", ptr=True),
                            F(11, "matchConditions", "MatchCondition", rep=True)),
    "MutatingWebhook": _m(F(1, "name", S), F(2, "clientConfig", "WebhookClientConfig"),
                          F(3, "rules", "RuleWithOperations", rep=True), F(4, "failurePolicy", S, ptr=True),
                          F(5, "namespaceSelector", "LabelSelector", ptr=True), F(6, "sideEffects", S, ptr=True),
                          F(7, "timeoutSeconds", I32, ptr=True), F(8, "admissionReviewVersions", S, rep=True),
                          F(9, "matchPolicy", S, ptr=True), F(10, "reinvocationPolicy", S, ptr=True),
                          F(11, "objectSelector", "LabelSelector", ptr=True),
                          F(12, "matchConditions", "MatchCondition", rep=True)),
    "WebhookClientConfig": _m(F(1, "service", "ServiceReference", ptr=True), F(2, "caBundle", B, ptr=True),
                              F(3, "url", S, ptr=True)),
    "ServiceReference": _m(F(1, "namespace", S), F(2, "name", S), F(3, "path", S, ptr=True),
                           F(4, "port", I32, ptr=True)),
    "RuleWithOperations": _m(F(1, "operations", S, rep=True), F(2, "rule", "Rule", inline=True)),
    "Rule": _m(F(1, "apiGroups", S, rep=True), F(2, "apiVersions", S, rep=True), F(3, "resources", S, rep=True),
               F(4, "scope", S, ptr=True)),
    "MatchCondition": _m(F(1, "name", S), F(2, "expression", S)),
    "ValidatingAdmissionPolicy": _m(F(1, "metadata", "ObjectMeta"), F(2, "spec", "ValidatingAdmissionPolicySpec"),
                                    F(3, "status", "ValidatingAdmissionPolicyStatus")),
    "ValidatingAdmissionPolicySpec": _m(F(1, "paramKind", "ParamKind", ptr=True),
                                        F(2, "matchConstraints", "MatchResources", ptr=True),
                                        F(3, "validations", "Validation", rep=True), F(4, "failurePolicy", S, ptr=True),
                                        F(5, "auditAnnotations", "AuditAnnotation", rep=True),
                                        F(6, "matchConditions", "MatchCondition", rep=True),
                                        F(7, "variables", "Variable", rep=True)),
    "ValidatingAdmissionPolicyStatus": _m(F(1, "observedGeneration", I64),
                                          F(2, "typeChecking", "TypeChecking", ptr=True),
                                          F(3, "conditions", "Condition", rep=True)),
    "TypeChecking": _m(F(1, "expressionWarnings", "ExpressionWarning", rep=True)),
    "ExpressionWarning": _m(F(2, "fieldRef", S), F(3, "warning", S)),
    "ParamKind": _m(F(1, "apiVersion", S), F(2, "kind", S)),
    "MatchResources": _m(F(1, "namespaceSelector", "LabelSelector", ptr=True),
                         F(2, "objectSelector", "LabelSelector", ptr=True),
                         F(3, "resourceRules", "NamedRuleWithOperations", rep=True),
                         F(4, "excludeResourceRules", "NamedRuleWithOperations", rep=True),
                         F(7, "matchPolicy", S, ptr=True)),
    "NamedRuleWithOperations": _m(F(1, "resourceNames", S, rep=True),
                                  F(2, "ruleWithOperations", "RuleWithOperations", inline=True)),
    "Validation": _m(F(1, "expression", S), F(2, "message", S), F(3, "reason", S, ptr=True),
                     F(4, "messageExpression", S)),
    "AuditAnnotation": _m(F(1, "key", S), F(2, "valueExpression", S)),
    "Variable": _m(F(1, "name", S), F(2, "expression", S)),
    "ValidatingAdmissionPolicyBinding": _m(F(1, "metadata", "ObjectMeta"),
                                           F(2, "spec", "ValidatingAdmissionPolicyBindingSpec")),
    "ValidatingAdmissionPolicyBindingSpec": _m(F(1, "policyName", S), F(2, "paramRef", "ParamRef", ptr=True),
                                               F(3, "matchResources", "MatchResources", ptr=True),
                                               F(4, "validationActions", S, rep=True)),
    "ParamRef": _m(F(1, "name", S), F(2, "namespace", S), F(3, "selector", "LabelSelector", ptr=True),
                   F(4, "parameterNotFoundAction", S, ptr=True)),
    # MutatingAdmissionPolicy (v1beta1 numbering, 1.34)
    "MutatingAdmissionPolicy": _m(F(1, "metadata", "ObjectMeta"), F(2, "spec", "MutatingAdmissionPolicySpec")),
    "MutatingAdmissionPolicySpec": _m(F(1, "paramKind", "ParamKind", ptr=True),
                                      F(2, "matchConstraints", "MatchResources", ptr=True),
                                      F(3, "variables", "Variable", rep=True), F(4, "mutations", "Mutation", rep=True),
                                      F(5, "failurePolicy", S, ptr=True),
                                      F(6, "matchConditions", "MatchCondition", rep=True),
                                      F(7, "reinvocationPolicy", S)),
    "Mutation": _m(F(2, "patchType", S), F(3, "applyConfiguration", "Expression", ptr=True),
                   F(4, "jsonPatch", "Expression", ptr=True)),
    "Expression": _m(F(1, "expression", S)),
    "MutatingAdmissionPolicyBinding": _m(F(1, "metadata", "ObjectMeta"),
                                         F(2, "spec", "MutatingAdmissionPolicyBindingSpec")),
    "MutatingAdmissionPolicyBindingSpec": _m(F(1, "policyName", S), F(2, "paramRef", "ParamRef", ptr=True),
                                             F(3, "matchResources", "MatchResources", ptr=True)),
    # k8s.io/api/core/v1 Service and discovery/v1 EndpointSlice: a webhook's backend, read from etcd when the
    # apiserver is down (field numbers and pointers from their generated.proto and types.go)
    "Service": _m(F(1, "metadata", "ObjectMeta"), F(2, "spec", "ServiceSpec"), F(3, "status", "ServiceStatus")),
    "ServiceSpec": _m(F(1, "ports", "ServicePort", rep=True), F(2, "selector", MAP), F(3, "clusterIP", S),
                      F(18, "clusterIPs", S, rep=True), F(4, "type", S), F(5, "externalIPs", S, rep=True),
                      F(7, "sessionAffinity", S), F(8, "loadBalancerIP", S),
                      F(9, "loadBalancerSourceRanges", S, rep=True), F(10, "externalName", S),
                      F(11, "externalTrafficPolicy", S), F(12, "healthCheckNodePort", I32),
                      F(13, "publishNotReadyAddresses", BOOL),
                      F(14, "sessionAffinityConfig", "SessionAffinityConfig", ptr=True),
                      F(19, "ipFamilies", S, rep=True), F(17, "ipFamilyPolicy", S, ptr=True),
                      F(20, "allocateLoadBalancerNodePorts", BOOL, ptr=True),
                      F(21, "loadBalancerClass", S, ptr=True), F(22, "internalTrafficPolicy", S, ptr=True),
                      F(23, "trafficDistribution", S, ptr=True)),
    "ServicePort": _m(F(1, "name", S), F(2, "protocol", S), F(6, "appProtocol", S, ptr=True), F(3, "port", I32),
                      F(4, "targetPort", INTSTR), F(5, "nodePort", I32)),
    "ServiceStatus": _m(F(1, "loadBalancer", "LoadBalancerStatus"), F(2, "conditions", "Condition", rep=True)),
    "LoadBalancerStatus": _m(F(1, "ingress", "LoadBalancerIngress", rep=True)),
    "LoadBalancerIngress": _m(F(1, "ip", S), F(2, "hostname", S), F(3, "ipMode", S, ptr=True),
                              F(4, "ports", "PortStatus", rep=True)),
    "PortStatus": _m(F(1, "port", I32), F(2, "protocol", S), F(3, "error", S, ptr=True)),
    "SessionAffinityConfig": _m(F(1, "clientIP", "ClientIPConfig", ptr=True)),
    "ClientIPConfig": _m(F(1, "timeoutSeconds", I32, ptr=True)),
    "ObjectReference": _m(F(1, "kind", S), F(2, "namespace", S), F(3, "name", S), F(4, "uid", S),
                          F(5, "apiVersion", S), F(6, "resourceVersion", S), F(7, "fieldPath", S)),
    "Endpoints": _m(F(1, "metadata", "ObjectMeta"), F(2, "subsets", "EndpointSubset", rep=True)),
    "EndpointSubset": _m(F(1, "addresses", "EndpointAddress", rep=True),
                         F(2, "notReadyAddresses", "EndpointAddress", rep=True),
                         F(3, "ports", "CoreEndpointPort", rep=True)),
    "EndpointAddress": _m(F(1, "ip", S), F(3, "hostname", S), F(4, "nodeName", S, ptr=True),
                          F(2, "targetRef", "ObjectReference", ptr=True)),
    "CoreEndpointPort": _m(F(1, "name", S), F(2, "port", I32), F(3, "protocol", S), F(4, "appProtocol", S, ptr=True)),
    "EndpointSlice": _m(F(1, "metadata", "ObjectMeta"), F(4, "addressType", S), F(2, "endpoints", "Endpoint", rep=True),
                        F(3, "ports", "EndpointPort", rep=True)),
    "Endpoint": _m(F(1, "addresses", S, rep=True), F(2, "conditions", "EndpointConditions"),
                   F(3, "hostname", S, ptr=True), F(4, "targetRef", "ObjectReference", ptr=True),
                   F(5, "deprecatedTopology", MAP), F(6, "nodeName", S, ptr=True), F(7, "zone", S, ptr=True),
                   F(8, "hints", "EndpointHints", ptr=True)),
    "EndpointConditions": _m(F(1, "ready", BOOL, ptr=True), F(2, "serving", BOOL, ptr=True),
                             F(3, "terminating", BOOL, ptr=True)),
    "EndpointHints": _m(F(1, "forZones", "ForZone", rep=True), F(2, "forNodes", "ForNode", rep=True)),
    "ForZone": _m(F(1, "name", S)),
    "ForNode": _m(F(1, "name", S)),
    "EndpointPort": _m(F(1, "name", S, ptr=True), F(2, "protocol", S, ptr=True), F(3, "port", I32, ptr=True),
                       F(4, "appProtocol", S, ptr=True)),
    # Any other kind: every Kubernetes object keeps its ObjectMeta in field 1.
    "Object": _m(F(1, "metadata", "ObjectMeta")),
    # runtime.Unknown, the storage envelope
    "Unknown": _m(F(1, "typeMeta", "TypeMeta"), F(2, "raw", B, ptr=True), F(3, "contentEncoding", S),
                  F(4, "contentType", S)),
    "TypeMeta": _m(F(1, "apiVersion", S), F(2, "kind", S)),
}
_BY_NUM = {name: {f.num: f for f in fields} for name, fields in SCHEMA.items()}

ADMISSION_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                   "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
# core/v1 Service and Endpoints, discovery.k8s.io/v1 EndpointSlice (checked on k8s.io/api's fixtures)
BACKEND_KINDS = ("Service", "Endpoints", "EndpointSlice")
DECODED_KINDS = ADMISSION_KINDS + BACKEND_KINDS


# -- wire primitives ----------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # Go writes negative int32/int64 as ten-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= end:
            raise CodecError("truncated protobuf (varint runs past the end)")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise CodecError("corrupt protobuf (varint longer than 10 bytes)")


def _signed(n: int, bits: int) -> int:
    n &= (1 << 64) - 1
    if n >= 1 << 63:
        n -= 1 << 64
    if bits == 32:
        n = (n + (1 << 31)) % (1 << 32) - (1 << 31)
    return n


def _fields(buf: bytes, pos: int, end: int):
    """Yield (field number, wire type, value) for one message; values of length-delimited fields as (start, stop)."""
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise CodecError("corrupt protobuf (field number 0)")
        if wt == 0:
            val, pos = _read_varint(buf, pos, end)
            yield num, wt, val
        elif wt == 2:
            ln, pos = _read_varint(buf, pos, end)
            if ln > end - pos:
                raise CodecError("truncated protobuf (length runs past the end)")
            yield num, wt, (pos, pos + ln)
            pos += ln
        elif wt == 1:
            if pos + 8 > end:
                raise CodecError("truncated protobuf (fixed64)")
            pos += 8
        elif wt == 5:
            if pos + 4 > end:
                raise CodecError("truncated protobuf (fixed32)")
            pos += 4
        elif wt == 3:  # deprecated group: skip to its end marker
            depth = 1
            while depth:
                k, pos = _read_varint(buf, pos, end)
                if k & 7 == 3:
                    depth += 1
                elif k & 7 == 4:
                    depth -= 1
                else:
                    pos = _skip(buf, pos, end, k & 7)
        else:
            raise CodecError(f"corrupt protobuf (wire type {wt})")


def _skip(buf: bytes, pos: int, end: int, wt: int) -> int:
    if wt == 0:
        return _read_varint(buf, pos, end)[1]
    if wt == 2:
        ln, pos = _read_varint(buf, pos, end)
        return pos + ln
    if wt == 1:
        return pos + 8
    if wt == 5:
        return pos + 4
    raise CodecError(f"corrupt protobuf (wire type {wt})")


# -- time ---------------------------------------------------------------------------------------

def _time_to_json(seconds: int, nanos: int) -> str:
    # metav1.Time marshals to JSON as RFC 3339 with second precision
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(seconds=seconds)
    except OverflowError:
        raise CodecError(f"time out of range ({seconds} s)") from None
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _time_from_json(value: str) -> int:
    try:
        t = _dt.datetime.strptime(value.replace("+00:00", "Z"), "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        raise CodecError(f"not an RFC 3339 time: {value!r}") from None
    return calendar.timegm(t.timetuple())


# -- decode -------------------------------------------------------------------------------------

def _decode_msg(msg: str, buf: bytes, start: int, end: int) -> dict:
    by_num = _BY_NUM[msg]
    out: dict[str, Any] = {}
    for num, wt, val in _fields(buf, start, end):
        f = by_num.get(num)
        if f is None:
            continue  # unknown field (a newer version's): skipped, never guessed
        want_len = f.type not in (I32, I64, BOOL)
        if want_len != (wt == 2):
            raise CodecError(f"corrupt protobuf ({msg}.{f.name} has wire type {wt})")
        if f.type in (I32, I64):
            v: Any = _signed(val, 32 if f.type == I32 else 64)
        elif f.type == BOOL:
            v = bool(val)
        else:
            s, e = val
            if f.type == S:
                try:
                    v = buf[s:e].decode("utf-8")
                except UnicodeDecodeError:
                    raise CodecError(f"invalid UTF-8 in {msg}.{f.name}") from None
            elif f.type == B:
                v = base64.b64encode(buf[s:e]).decode() if f.name != "raw" else buf[s:e]
            elif f.type == TIME:
                t = _decode_time(buf, s, e)
                if t is None:
                    continue
                v = t
            elif f.type == MAP:
                k, mv = _decode_entry(buf, s, e)
                out.setdefault(f.name, {})[k] = mv
                continue
            elif f.type == INTSTR:
                parts = {n: v for n, w, v in _fields(buf, s, e)}
                if parts.get(1, 0) == 1:  # intstr.String
                    a, b = parts.get(3, (0, 0))
                    v = buf[a:b].decode("utf-8", "replace")
                else:
                    v = _signed(parts.get(2, 0), 32)
            elif f.type == "fieldsv1":
                raw = b"".join(buf[span[0]:span[1]] for n, w, span in _fields(buf, s, e) if n == 1 and w == 2)
                try:
                    v = json.loads(raw) if raw else {}
                except (ValueError, RecursionError):
                    raise CodecError("corrupt managedFields (fieldsV1 is not JSON)") from None
            else:
                v = _decode_msg(f.type, buf, s, e)
                if f.inline:
                    out.update(v)
                    continue
        if f.rep:
            out.setdefault(f.name, []).append(v)
        else:
            out[f.name] = v
    # Zero non-pointer values are left out, as the JSON API leaves them out.
    for f in SCHEMA[msg]:
        if f.ptr or f.rep or f.name not in out:
            continue
        v = out[f.name]
        if v == "" or v == {} or (type(v) in (int, bool) and not v):
            del out[f.name]
    return out


def _decode_time(buf: bytes, s: int, e: int) -> str | None:
    seconds = nanos = 0
    seen = False
    for num, wt, val in _fields(buf, s, e):
        if wt != 0:
            continue
        seen = True
        if num == 1:
            seconds = _signed(val, 64)
        elif num == 2:
            nanos = _signed(val, 32)
    if not seen:
        return None  # a zero metav1.Time marshals as an empty message
    return _time_to_json(seconds, nanos)


def _decode_entry(buf: bytes, s: int, e: int) -> tuple[str, str]:
    k = v = ""
    for num, wt, val in _fields(buf, s, e):
        if wt != 2:
            raise CodecError("corrupt protobuf (map entry)")
        try:
            text = buf[val[0]:val[1]].decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError("invalid UTF-8 in a label or annotation") from None
        if num == 1:
            k = text
        elif num == 2:
            v = text
    return k, v


def decode_message(msg: str, data: bytes) -> dict:
    """Decode one protobuf message of the schema (no envelope)."""
    if msg not in SCHEMA:
        raise KeyError(msg)
    return _decode_msg(msg, data, 0, len(data))


@dataclass
class Decoded:
    """One stored value: the object, or why it could not be read."""

    encoding: str  # protobuf | json | encrypted
    obj: dict | None  # JSON-shaped object with apiVersion and kind; None when encrypted
    detail: str = ""  # e.g. the encryption provider for k8s:enc values


def decode_value(value: bytes) -> Decoded:
    """Decode a value exactly as read from etcd."""
    if value.startswith(ENCRYPTED):
        provider = value[len(ENCRYPTED):].split(b":", 3)
        detail = ":".join(p.decode("ascii", "replace") for p in provider[:3])
        return Decoded("encrypted", None, detail)
    if value.startswith(MAGIC):
        env = _decode_msg("Unknown", value, len(MAGIC), len(value))
        tm = env.get("typeMeta", {})
        kind = tm.get("kind")
        if not kind or "raw" not in env:
            raise CodecError("not a Kubernetes object (envelope without kind or raw bytes)")
        if env.get("contentEncoding"):
            raise CodecError(f"unsupported content encoding {env['contentEncoding']!r}")
        raw = env["raw"]
        obj = _decode_msg(kind if kind in DECODED_KINDS else "Object", raw, 0, len(raw))
        return Decoded("protobuf", {"apiVersion": tm.get("apiVersion", ""), "kind": kind, **obj})
    if value[:1] == b"{":
        try:
            obj = json.loads(value)
        except UnicodeDecodeError:
            raise CodecError("corrupt JSON value (not UTF-8)") from None
        except (ValueError, RecursionError) as e:
            raise CodecError(f"corrupt JSON value ({getattr(e, 'msg', type(e).__name__)})") from None
        if not isinstance(obj, dict) or "kind" not in obj:
            raise CodecError("JSON value is not a Kubernetes object")
        return Decoded("json", obj)
    raise CodecError("unknown value encoding (neither k8s protobuf, JSON nor k8s:enc)")


# -- encode -------------------------------------------------------------------------------------

def _tag(num: int, wt: int) -> bytes:
    return _varint(num << 3 | wt)


def _len(num: int, payload: bytes) -> bytes:
    return _tag(num, 2) + _varint(len(payload)) + payload


def _encode_scalar(f: F, v: Any) -> bytes:
    if f.type == S:
        return _len(f.num, str(v).encode())
    if f.type in (I32, I64):
        return _tag(f.num, 0) + _varint(int(v))
    if f.type == BOOL:
        return _tag(f.num, 0) + _varint(1 if v else 0)
    if f.type == B:
        return _len(f.num, v if isinstance(v, bytes) else base64.b64decode(v))
    if f.type == TIME:
        if v is None:
            return _len(f.num, b"")
        return _len(f.num, _tag(1, 0) + _varint(_time_from_json(v)) + _tag(2, 0) + _varint(0))
    if f.type == "fieldsv1":
        return _len(f.num, _len(1, json.dumps(v, separators=(",", ":"), sort_keys=True).encode()))
    if f.type == INTSTR:  # Go writes all three fields of the struct, zero or not
        text = isinstance(v, str)
        return _len(f.num, _tag(1, 0) + _varint(1 if text else 0) + _tag(2, 0) + _varint(0 if text else int(v))
                    + _len(3, v.encode() if text else b""))
    return _len(f.num, encode_message(f.type, v or {}))


_ZERO = {S: "", I32: 0, I64: 0, BOOL: False, TIME: None, INTSTR: 0}


def encode_message(msg: str, obj: dict) -> bytes:
    """Encode a JSON-shaped dict as the Go generated code would marshal the message."""
    out = bytearray()
    for f in SCHEMA[msg]:
        if f.inline:
            out += _len(f.num, encode_message(f.type, obj))
            continue
        present = f.name in obj and obj[f.name] is not None
        if f.type == MAP:
            for k in sorted(obj.get(f.name) or {}):
                out += _len(f.num, _len(1, k.encode()) + _len(2, str(obj[f.name][k]).encode()))
        elif f.rep:
            for item in obj.get(f.name) or []:
                out += _encode_scalar(f, item)
        elif f.ptr:
            if present:
                out += _encode_scalar(f, obj[f.name])
        else:
            out += _encode_scalar(f, obj[f.name] if present else _ZERO.get(f.type, {}))
    return bytes(out)


def encode_value(obj: dict) -> bytes:
    """The exact bytes kube-apiserver stores for ``obj`` (protobuf storage, identity transformer)."""
    kind = obj.get("kind")
    if kind not in DECODED_KINDS:
        raise ValueError(f"cannot encode kind {kind!r}")
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    raw = encode_message(kind, body)
    env = encode_message("Unknown", {"typeMeta": {"apiVersion": obj.get("apiVersion", ""), "kind": kind},
                                     "raw": raw})
    return MAGIC + env
