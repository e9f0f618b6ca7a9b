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
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Iterable, Iterator

from breakglass.errors import BadInput
from breakglass.logs import sources as logsources
from breakglass.logs.scanner import Finder

_KEY = re.compile(r"^failed-open\.(validating|mutation)\.webhook\.admission\.k8s\.io/round_\d+_index_\d+$")
_NEEDLE = b"failed-open."
_DELETE = b'"verb":"delete'
WRITES = ("create", "update", "patch")


@dataclass
class Leak:
    time: str
    user: str
    verb: str
    resource: str  # resource[.group][/subresource]
    namespace: str
    name: str
    webhooks: list[str]
    kind: str  # validating | mutating | both
    code: int | None
    audit_id: str
    source: str


@dataclass
class Window:
    start: str
    end: str
    requests: int
    webhooks: list[str]


@dataclass
class Recheck:
    resource: str
    namespace: str
    name: str
    last_write: str
    webhooks: list[str]
    kubectl: str


@dataclass
class LeakReport:
    leaks: list[Leak] = field(default_factory=list)
    by_webhook: dict[str, int] = field(default_factory=dict)
    by_resource: dict[str, int] = field(default_factory=dict)
    by_user: dict[str, int] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    recheck: list[Recheck] = field(default_factory=list)
    unnamed_writes: int = 0  # admitted writes whose object name the audit level did not record
    lines_skipped: int = 0  # matched the byte search but were not audit events (truncated, other JSON)
    sources: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def parse_time(text: str) -> datetime:
    """RFC 3339 as audit events write it (MicroTime, 'Z'); also accepted for --since/--until."""
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    t = re.sub(r"(\.\d{6})\d+", r"\1", t)  # Python takes at most microseconds
    try:
        d = datetime.fromisoformat(t)
    except ValueError:
        raise BadInput(f"{text!r}: not an RFC 3339 time (e.g. 2026-11-30T03:10:00Z)") from None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


MAX_LINE = 64 << 20  # an audit event is kilobytes; a longer "line" is dropped so memory stays bounded


def _lines_with(chunks: Iterable[bytes], finder) -> Iterator[bytes]:
    """Whole lines holding any of the finder's literals, across chunk boundaries; the rest of the
    log is only searched (one SIMD pass with Hyperscan), never split or copied."""
    rest = b""
    for chunk in chunks:
        first = chunk.find(b"\n")
        if first < 0:
            rest = rest + chunk if len(rest) + len(chunk) <= MAX_LINE else b""
            continue
        if rest:  # the line that straddles two chunks: the only bytes ever copied
            head = rest + chunk[:first]
            yield from _cut(head, finder.find(head, 0, len(head)), len(head))
        else:
            yield from _cut(chunk, finder.find(chunk, 0, first), first)
        end = chunk.rfind(b"\n")
        if end > first:
            yield from _cut(chunk, finder.find(chunk, first + 1, end), end)
        rest = chunk[end + 1:]
    if rest:
        yield from _cut(rest, finder.find(rest, 0, len(rest)), len(rest))


def _cut(data: bytes, hits: list[int], end: int) -> Iterator[bytes]:
    last = -1
    for h in hits:
        if h <= last:
            continue  # another literal on a line already cut
        s = data.rfind(b"\n", 0, h) + 1
        e = data.find(b"\n", h, end)
        last = end if e < 0 else e
        yield data[s:last]


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
    t0 = parse_time(since) if since else None
    t1 = parse_time(until) if until else None
    wanted = set(webhooks or [])
    rep = LeakReport()
    seen: set[str] = set()
    writes: dict[tuple, Recheck] = {}
    written: set[bytes] = set()  # names in `writes`, for the cheap test on delete lines
    finder = Finder((_NEEDLE, _DELETE), engine)
    srcs = logsources.expand(paths, stdin)
    rep.sources = [s.name for s in srcs]
    for src in srcs:
        for line in _lines_with(logsources.read_chunks(src), finder):
            if _NEEDLE not in line and _ref_name(line) not in written:
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
            if (t0 or t1) and (at is None or (t0 and at < t0) or (t1 and at > t1)):
                continue
            ref = ev.get("objectRef") if isinstance(ev.get("objectRef"), dict) else {}
            code = (ev.get("responseStatus") or {}).get("code") if isinstance(ev.get("responseStatus"), dict) else None
            verb = str(ev.get("verb") or "")
            if verb.startswith("delete") and writes and (code is None or 200 <= int(code) < 300):
                key = (_resource(ref), str(ref.get("namespace") or ""), str(ref.get("name") or ""))
                if verb == "delete":
                    writes.pop(key, None)
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
                        int(code) if isinstance(code, (int, float)) else None, aid, src.name)
            rep.leaks.append(leak)
            if verb in WRITES and (leak.code is None or 200 <= leak.code < 300):
                if not leak.name:
                    rep.unnamed_writes += 1
                    continue
                resource = leak.resource.split("/", 1)[0]  # a write to pods/status re-checks the pod
                key = (resource, leak.namespace, leak.name)
                prev = writes.get(key)
                hooks = sorted(set(prev.webhooks if prev else []) | set(leak.webhooks))
                writes[key] = Recheck(resource, leak.namespace, leak.name, when, hooks,
                                      _kubectl(resource, leak.namespace, leak.name))
                written.add(leak.name.encode())
    _summarise(rep, window_gap)
    rep.recheck = sorted(writes.values(), key=lambda r: (r.resource, r.namespace, r.name))
    return rep


def _kubectl(resource: str, namespace: str, name: str) -> str:
    ns = f" -n {namespace}" if namespace else ""
    return f"kubectl get {resource} {name}{ns} -o yaml"


def _summarise(rep: LeakReport, gap: float) -> None:
    for leak in rep.leaks:
        for w in leak.webhooks:
            rep.by_webhook[w] = rep.by_webhook.get(w, 0) + 1
        rep.by_resource[leak.resource] = rep.by_resource.get(leak.resource, 0) + 1
        rep.by_user[leak.user] = rep.by_user.get(leak.user, 0) + 1
    for d in (rep.by_webhook, rep.by_resource, rep.by_user):
        ordered = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))
        d.clear()
        d.update(ordered)
    timed = []
    for leak in rep.leaks:
        try:
            timed.append((parse_time(leak.time), leak))
        except BadInput:
            continue
    timed.sort(key=lambda x: x[0])
    cur: list = []
    for at, leak in timed:
        if cur and (at - cur[-1][0]).total_seconds() > gap:
            rep.windows.append(_window(cur))
            cur = []
        cur.append((at, leak))
    if cur:
        rep.windows.append(_window(cur))


def _window(items: list) -> Window:
    hooks = sorted({w for _, leak in items for w in leak.webhooks})
    return Window(items[0][1].time, items[-1][1].time, len(items), hooks)


CSV_FIELDS = ("time", "user", "verb", "resource", "namespace", "name", "webhooks", "kind", "code", "audit_id")


def to_csv(rep: LeakReport, out) -> None:
    import csv  # noqa: PLC0415

    w = csv.writer(out)
    w.writerow(CSV_FIELDS)
    for leak in rep.leaks:
        d = asdict(leak)
        d["webhooks"] = ";".join(leak.webhooks)
        w.writerow([d[f] if d[f] is not None else "" for f in CSV_FIELDS])


def recheck_yaml(rep: LeakReport) -> str:
    """The objects to re-validate, as a YAML list a controller or policy engine can read."""
    import yaml  # noqa: PLC0415

    items = [{"resource": r.resource, "namespace": r.namespace or None, "name": r.name, "lastWrite": r.last_write,
              "failedOpenWebhooks": r.webhooks} for r in rep.recheck]
    return yaml.safe_dump({"apiVersion": "breakglass/v1alpha1", "kind": "RecheckList", "items": items},
                          sort_keys=False)
