"""Which requests got in while a webhook was failing open, from kube-apiserver audit logs.

kube-apiserver marks every webhook call that failed and was ignored (failurePolicy Ignore) with an
audit annotation ``failed-open.validating.webhook.admission.k8s.io/round_0_index_N`` or
``failed-open.mutation.webhook.admission.k8s.io/round_R_index_N`` whose value is the webhook's name
(reference §2). Only ResponseComplete events say how the request ended; an event is counted once
per auditID.

Two formats: kube-apiserver's own audit.k8s.io Events, one per line (files, webhook backends, EKS and
other exports), and GKE's Cloud Logging entries, where the annotations are the entry's ``labels``
(JSON lines from a sink, or the JSON array of ``gcloud logging read --format=json``).

Streaming: a line is parsed only when it holds ``failed-open.`` or a delete (for "deleted later"),
so the cost is a byte search over the log plus JSON for the few lines that matter. Memory grows with
the leaks found, not with the log.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from breakglass.errors import BadInput
from breakglass.leaks.model import Leak, LeakReport, Rechecks, TimeRange, admitted_write, finish, parse_time
from breakglass.logs import sources as logsources
from breakglass.logs.lines import lines_with
from breakglass.logs.scanner import Finder

_KEY = re.compile(r"^failed-open\.(validating|mutation)\.webhook\.admission\.k8s\.io/round_\d+_index_\d+$")
_NEEDLE = b"failed-open."
_DELETE = b'"verb":"delete'  # audit.k8s.io Events
_GKE_DELETE = b'.delete"'  # Cloud Logging entries: "methodName": "io.k8s.core.v1.pods.delete"
# google.rpc.Code -> HTTP, as Google's own mapping (Cloud Logging entries carry the gRPC code)
_GRPC_HTTP = {0: 200, 1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
              12: 501, 13: 500, 14: 503, 15: 500, 16: 401}


@dataclass(slots=True)
class _View:
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


def _ref_name(line: bytes) -> bytes | None:
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


def _parse(line: bytes):
    whole = line = line.strip()
    if not line.startswith(b"{"):
        brace = line.find(b"{")  # a log shipper's prefix (timestamp, file name) before the JSON
        if brace < 0:
            return None
        line = line[brace:]
    try:
        return json.loads(line)
    except ValueError:
        m = _EMBEDDED.search(whole)
        try:
            return json.loads(json.loads(b'"' + m[1] + b'"')) if m else None
        except ValueError:
            return None


# Where log shippers put the original line: Fluent Bit and docker ("log"), CloudWatch ("message"),
# Azure Monitor ("log_s"), Vector and others ("message").
_WRAPPERS = ("log", "message", "log_s", "msg")


def _view(obj, depth: int = 0) -> _View | None:
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
                return _view(json.loads(inner), depth + 1)
            except ValueError:
                continue
        if isinstance(inner, dict):
            return _view(inner, depth + 1)
    return None


def _from_event(ev: dict) -> _View:
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
    return _View(ev.get("stage") == "ResponseComplete",
                 str(ev.get("stageTimestamp") or ev.get("requestReceivedTimestamp") or ev.get("timestamp") or ""),
                 str(user.get("username") or ""), str(ev.get("verb") or ""), resource,
                 str(ref.get("namespace") or ""), str(name or ""), _int(code), str(ev.get("auditID") or ""),
                 ev.get("annotations") if isinstance(ev.get("annotations"), dict) else {})


def _from_cloud_logging(entry: dict, p: dict) -> _View:
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
    return _View(bool(op.get("last", True)), str(entry.get("timestamp") or ""),
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


def _views(src, finders, rechecks: Rechecks, rep: LeakReport) -> Iterator[_View]:
    """The requests worth a look in one source: JSON lines found by byte search, or the elements of a
    JSON array (`gcloud logging read --format=json`), which are all parsed."""
    chunks = logsources.read_chunks(src)
    first = next(chunks, b"")
    chunks = itertools.chain([first], chunks)
    if first.lstrip()[:1] == b"[":
        for obj in json_array(chunks, src.name):
            v = _view(obj)
            if v is not None:
                yield v
        return
    # Cloud Logging names a delete in methodName, not verb: one more literal, searched only where needed
    finder = finders[1] if b'"protoPayload"' in first else finders[0]
    # The audit webhook backend posts EventLists, and some sinks store each batch as one line: a delete
    # there may be any item, so those lines skip the one-name shortcut below.
    batches = b'"EventList"' in first
    for line in lines_with(chunks, finder):
        if _NEEDLE not in line and (not rechecks or (_ref_name(line) not in rechecks.names and not batches)):
            continue  # a delete matters only for an object that leaked in before it
        obj = _parse(line)
        items = obj.get("items") if batches and isinstance(obj, dict) and obj.get("kind") == "EventList" else None
        views = [v for v in map(_view, items if isinstance(items, list) else [obj]) if v is not None]
        if not views:
            rep.lines_skipped += _NEEDLE in line
            continue
        yield from views


def scan(paths: list[str], since: str | None = None, until: str | None = None,
         webhooks: list[str] | None = None, window_gap: float = 60.0, stdin=None,
         engine: str = "auto", sources=None) -> LeakReport:
    span = TimeRange(since, until)
    wanted = set(webhooks or [])
    rep = LeakReport(basis="audit-log")
    seen: set[str] = set()
    rechecks = Rechecks()
    finders = (Finder((_NEEDLE, _DELETE), engine), Finder((_NEEDLE, _DELETE, _GKE_DELETE), engine))
    srcs = sources if sources is not None else logsources.expand(paths, stdin)  # remote ones come ready
    rep.sources = [s.name for s in srcs]
    for src in srcs:
        for v in _views(src, finders, rechecks, rep):
            if not v.complete:
                continue
            try:
                at = parse_time(v.time) if v.time else None
            except BadInput:
                at = None
            if at not in span:
                continue
            if v.verb.startswith("delete") and rechecks and (v.code is None or 200 <= v.code < 300):
                if v.verb == "delete":
                    rechecks.deleted(v.resource, v.namespace, v.name)
                continue
            failed = {}
            for k, val in v.annotations.items():
                m = _KEY.match(str(k))
                if m:
                    failed.setdefault(str(val), set()).add(m[1])
            if wanted:
                failed = {w: k for w, k in failed.items() if w in wanted}
            if not failed:
                continue
            if v.audit_id and v.audit_id in seen:
                continue
            seen.add(v.audit_id)
            kinds = set().union(*failed.values())
            leak = Leak(v.time, v.user, v.verb, v.resource, v.namespace, v.name, sorted(failed),
                        "both" if len(kinds) > 1 else ("mutating" if "mutation" in kinds else "validating"),
                        v.code, v.audit_id, src.name)
            rep.leaks.append(leak)
            if admitted_write(leak) and not rechecks.add(leak):
                rep.unnamed_writes += 1
    return finish(rep, rechecks, window_gap)


MAX_ELEMENT = 64 << 20


def json_array(chunks: Iterable[bytes], name: str) -> Iterator:
    """The elements of one JSON array, parsed as they arrive: memory holds one element, not the array."""
    decoder = json.JSONDecoder()
    text = codecs.getincrementaldecoder("utf-8")("replace")
    buf, pos, opened = "", 0, False
    for chunk in itertools.chain(chunks, [None]):
        final = chunk is None
        buf = buf[pos:] + text.decode(chunk or b"", final=final)
        pos = 0
        while True:
            pos = _skip(buf, pos, " \t\r\n,")
            if pos >= len(buf):
                break
            if not opened:
                if buf[pos] != "[":
                    raise BadInput(f"{name}: not a JSON array")
                opened, pos = True, pos + 1
                continue
            if buf[pos] == "]":
                return
            obj, end = _element(decoder, buf, pos)
            if end < 0:
                if final:
                    raise BadInput(f"{name}: a JSON array that is cut off or broken")
                if len(buf) - pos > MAX_ELEMENT:
                    raise BadInput(f"{name}: an element of the JSON array is over 64 MiB")
                break  # the element continues in the next chunk
            yield obj
            pos = end
    if opened:
        raise BadInput(f"{name}: the JSON array is not closed (a cut-off file?)")


def _element(decoder: json.JSONDecoder, buf: str, pos: int) -> tuple:
    """(element, end) once it is complete, else (None, -1). Complete means a comma or the closing bracket
    follows it: "1" may be the start of "1.5", and the rest of an object may be in the next chunk."""
    try:
        obj, end = decoder.raw_decode(buf, pos)
    except ValueError:
        return None, -1
    after = _skip(buf, end, " \t\r\n")
    return (obj, end) if after < len(buf) and buf[after] in ",]" else (None, -1)


def _skip(buf: str, pos: int, chars: str) -> int:
    while pos < len(buf) and buf[pos] in chars:
        pos += 1
    return pos
