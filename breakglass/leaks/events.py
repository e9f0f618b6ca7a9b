"""One request as an audit log tells it, whichever form the log has.

kube-apiserver's audit.k8s.io Events; GKE's Cloud Logging entries, where the audit annotations are the
entry's ``labels``, ``operation.id`` is the audit ID, ``protoPayload.resourceName`` names the object and
``methodName`` ends with the verb; and either of them inside a log shipper's record. ``view`` turns any of
them into a ``View``; anything else is None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from breakglass.logs.jsonarray import TOO_DEEP, TooDeep, loads

# google.rpc.Code -> HTTP, as Google's own mapping (Cloud Logging entries carry the gRPC code)
_GRPC_HTTP = {0: 200, 1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
              12: 501, 13: 500, 14: 503, 15: 500, 16: 401}


@dataclass(slots=True)
class View:
    """One request as either log format tells it."""
    complete: bool  # the last stage: how the request ended
    time: str
    user: str
    verb: str
    resource: str  # resource[.group][/subresource]
    namespace: str
    name: str
    code: int | None  # HTTP
    audit_id: str
    annotations: dict


def ref_name(line: bytes) -> bytes | None:
    """The object name a line is about, by byte search (a regex or JSON costs more on every delete)."""
    i = line.find(b'"objectRef":{')
    if i >= 0:
        close = line.find(b"}", i)
        j = line.find(b'"name":"', i, close)
        return line[j + 8:line.find(b'"', j + 8)] if j >= 0 else None
    i = line.find(b'"resourceName":')
    if i >= 0:  # Cloud Logging: "resourceName": "core/v1/namespaces/NS/pods/NAME"
        q = line.find(b'"', i + 15)
        end = line.find(b'"', q + 1)
        return line[line.rfind(b"/", q, end) + 1:end] if q >= 0 and end > q else None
    return None


# An event carried as a JSON string inside another record's line, e.g. the "message" of
# `aws logs filter-log-events` output or the "log_s" of an Azure export: "{\"kind\":\"Event\",...}"
_EMBEDDED = re.compile(rb'"(\{\\"(?:[^"\\]|\\.)*)"')


def parse_line(line: bytes):
    """The JSON a line holds, or None; TOO_DEEP when it is nested past MAX_DEPTH (an attacker's request object
    1,200 deep is one line skipped and counted, not a RecursionError that ends the scan)."""
    try:
        return _parse_line(line)
    except TooDeep:
        return TOO_DEEP


def _parse_line(line: bytes):
    whole = line = line.strip()
    if not line.startswith(b"{"):
        brace = line.find(b"{")  # a log shipper's prefix (timestamp, file name) before the JSON
        if brace < 0:
            return None
        line = line[brace:]
    try:
        return loads(line)
    except TooDeep:
        raise
    except ValueError:
        m = _EMBEDDED.search(whole)
        try:
            return loads(json.loads(b'"' + m[1] + b'"')) if m else None
        except TooDeep:
            raise
        except ValueError:
            return None


# Where log shippers put the original line: Fluent Bit and docker ("log"), CloudWatch ("message"),
# Azure Monitor ("log_s"), Vector and others ("message").
_WRAPPERS = ("log", "message", "log_s", "msg")


def view(obj, depth: int = 0) -> View | None:
    if not isinstance(obj, dict):
        return None
    if obj.get("kind") == "Event" and str(obj.get("apiVersion", "")).startswith("audit.k8s.io/"):
        return _from_event(obj)
    payload = obj.get("protoPayload")
    if isinstance(payload, dict) and str(payload.get("methodName", "")).startswith("io.k8s."):
        return _from_cloud_logging(obj, payload)
    for key in _WRAPPERS if depth < 2 else ():
        inner = obj.get(key)
        if isinstance(inner, str) and inner.lstrip().startswith("{"):
            try:
                return view(loads(inner), depth + 1)
            except ValueError:  # TooDeep too: nothing to read in it
                continue
        if isinstance(inner, dict):
            return view(inner, depth + 1)
    return None


def _from_event(ev: dict) -> View:
    ref = ev.get("objectRef") if isinstance(ev.get("objectRef"), dict) else {}
    status = ev.get("responseStatus")
    code = status.get("code") if isinstance(status, dict) else None
    resource = str(ref.get("resource") or "")
    if ref.get("apiGroup"):
        resource += "." + str(ref["apiGroup"])
    if ref.get("subresource"):
        resource += "/" + str(ref["subresource"])
    name = ref.get("name")
    if not name:  # generateName creates: the name is only in the response, at RequestResponse level
        name = _response_name(ev.get("responseObject"))
    user = ev.get("user") if isinstance(ev.get("user"), dict) else {}
    return View(ev.get("stage") == "ResponseComplete",
                 str(ev.get("stageTimestamp") or ev.get("requestReceivedTimestamp") or ev.get("timestamp") or ""),
                 str(user.get("username") or ""), str(ev.get("verb") or ""), resource,
                 str(ref.get("namespace") or ""), str(name or ""), _int(code), str(ev.get("auditID") or ""),
                 ev.get("annotations") if isinstance(ev.get("annotations"), dict) else {})


def _from_cloud_logging(entry: dict, p: dict) -> View:
    """A GKE audit entry from Cloud Logging (a JSON-lines export or `gcloud logging read --format=json`).

    Audit annotations are the entry's ``labels``; the audit ID is ``operation.id``; ``resourceName`` is
    GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]] with "core" for the core group, and
    ``methodName`` is io.k8s.<group>.<version>.<resource>[.<subresource>].<verb>.
    """
    method = str(p.get("methodName")).split(".")
    parts = [x for x in str(p.get("resourceName") or "").split("/") if x]
    group = parts[0] if parts and parts[0] != "core" else ""
    rest = parts[2:]
    ns = name = sub = ""
    res = rest[0] if rest else (method[-2] if len(method) > 2 else "")
    if rest[:1] == ["namespaces"] and len(rest) >= 3 and not (len(rest) == 3 and method[-3:-2] == ["namespaces"]):
        ns, rest = rest[1], rest[2:]  # a namespaced object (not a Namespace's own subresource)
        res = rest[0]
    if len(rest) > 1:
        name = rest[1]
    if len(rest) > 2:
        sub = rest[2]
    status = p.get("status")
    grpc = status.get("code", 0) if isinstance(status, dict) else None
    auth = p.get("authenticationInfo") if isinstance(p.get("authenticationInfo"), dict) else {}
    op = entry.get("operation") if isinstance(entry.get("operation"), dict) else {}
    labels = entry.get("labels") if isinstance(entry.get("labels"), dict) else {}
    return View(bool(op.get("last", True)), str(entry.get("timestamp") or ""),
                 str(auth.get("principalEmail") or auth.get("principalSubject") or ""), method[-1],
                 res + (f".{group}" if group else "") + (f"/{sub}" if sub else ""), ns,
                 name or _response_name(p.get("response")),
                 _GRPC_HTTP.get(grpc, 500) if isinstance(grpc, int) else None,
                 str(op.get("id") or entry.get("insertId") or ""), labels)


def _response_name(obj) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str((meta or {}).get("name") or "") if isinstance(meta, dict) else ""


def _int(code) -> int | None:
    return code if isinstance(code, int) and not isinstance(code, bool) else None
