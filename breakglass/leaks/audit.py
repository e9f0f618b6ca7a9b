"""Which requests got in while a webhook was failing open, from kube-apiserver audit logs.

kube-apiserver marks every webhook call that failed and was ignored (failurePolicy Ignore) with an
audit annotation ``failed-open.validating.webhook.admission.k8s.io/round_0_index_N`` or
``failed-open.mutation.webhook.admission.k8s.io/round_R_index_N`` whose value is the webhook's name
(reference §2). Only ResponseComplete events say how the request ended; an event is counted once
per auditID.

Streaming: a line is parsed only when it holds ``failed-open.`` or a delete verb (for "deleted later"),
so the cost is a byte search over the log plus JSON for the few lines that matter. Memory grows with
the leaks found, not with the log.
"""

from __future__ import annotations

import json
import re

from breakglass.errors import BadInput
from breakglass.leaks.model import Leak, LeakReport, Rechecks, TimeRange, admitted_write, finish, parse_time
from breakglass.logs import sources as logsources
from breakglass.logs.lines import lines_with
from breakglass.logs.scanner import Finder

_KEY = re.compile(r"^failed-open\.(validating|mutation)\.webhook\.admission\.k8s\.io/round_\d+_index_\d+$")
_NEEDLE = b"failed-open."
_DELETE = b'"verb":"delete'


def _ref_name(line: bytes) -> bytes | None:
    """The name in a line's objectRef, by byte search (a regex or JSON costs more on every delete)."""
    i = line.find(b'"objectRef":{')
    if i < 0:
        return None
    close = line.find(b"}", i)
    j = line.find(b'"name":"', i, close)
    if j < 0:
        return None
    return line[j + 8:line.find(b'"', j + 8)]


def _event(line: bytes) -> dict | None:
    line = line.strip()
    if not line.startswith(b"{"):
        brace = line.find(b"{")  # a log shipper's prefix (timestamp, file name) before the JSON
        if brace < 0:
            return None
        line = line[brace:]
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict) or ev.get("kind") != "Event" or not str(ev.get("apiVersion", "")).startswith(
            "audit.k8s.io/"):
        return None
    return ev


def _code(ev: dict) -> int | None:
    status = ev.get("responseStatus")
    code = status.get("code") if isinstance(status, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _resource(ref: dict) -> str:
    r = str(ref.get("resource") or "")
    if ref.get("apiGroup"):
        r += "." + str(ref["apiGroup"])
    if ref.get("subresource"):
        r += "/" + str(ref["subresource"])
    return r


def _name(ev: dict, ref: dict) -> str:
    name = ref.get("name")
    if not name:  # generateName creates: the name is only in the response, at RequestResponse level
        meta = (ev.get("responseObject") or {}).get("metadata") if isinstance(ev.get("responseObject"), dict) else None
        name = (meta or {}).get("name")
    return str(name or "")


def scan(paths: list[str], since: str | None = None, until: str | None = None,
         webhooks: list[str] | None = None, window_gap: float = 60.0, stdin=None,
         engine: str = "auto") -> LeakReport:
    span = TimeRange(since, until)
    wanted = set(webhooks or [])
    rep = LeakReport(basis="audit-log")
    seen: set[str] = set()
    rechecks = Rechecks()
    finder = Finder((_NEEDLE, _DELETE), engine)
    srcs = logsources.expand(paths, stdin)
    rep.sources = [s.name for s in srcs]
    for src in srcs:
        for line in lines_with(logsources.read_chunks(src), finder):
            if _NEEDLE not in line and (not rechecks or _ref_name(line) not in rechecks.names):
                continue  # a delete matters only for an object that leaked in before it
            ev = _event(line)
            if ev is None:
                rep.lines_skipped += _NEEDLE in line
                continue
            if ev.get("stage") != "ResponseComplete":
                continue
            when = str(ev.get("stageTimestamp") or ev.get("requestReceivedTimestamp") or ev.get("timestamp") or "")
            try:
                at = parse_time(when) if when else None
            except BadInput:
                at = None
            if at not in span:
                continue
            ref = ev.get("objectRef") if isinstance(ev.get("objectRef"), dict) else {}
            code = _code(ev)
            verb = str(ev.get("verb") or "")
            if verb.startswith("delete") and rechecks and (code is None or 200 <= code < 300):
                if verb == "delete":
                    rechecks.deleted(_resource(ref), str(ref.get("namespace") or ""), str(ref.get("name") or ""))
                continue
            annotations = ev.get("annotations") if isinstance(ev.get("annotations"), dict) else {}
            failed = {}
            for k, v in annotations.items():
                m = _KEY.match(str(k))
                if m:
                    failed.setdefault(str(v), set()).add(m[1])
            if wanted:
                failed = {w: k for w, k in failed.items() if w in wanted}
            if not failed:
                continue
            aid = str(ev.get("auditID") or "")
            if aid and aid in seen:
                continue
            seen.add(aid)
            kinds = set().union(*failed.values())
            leak = Leak(when, str((ev.get("user") or {}).get("username") or ""), verb, _resource(ref),
                        str(ref.get("namespace") or ""), _name(ev, ref), sorted(failed),
                        "both" if len(kinds) > 1 else ("mutating" if "mutation" in kinds else "validating"),
                        code, aid, src.name)
            rep.leaks.append(leak)
            if admitted_write(leak) and not rechecks.add(leak):
                rep.unnamed_writes += 1
    return finish(rep, rechecks, window_gap)
