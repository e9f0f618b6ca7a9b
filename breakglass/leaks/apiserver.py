"""Fail-open calls from kube-apiserver's own log, for clusters that keep no audit log.

The dispatchers log ``Failed calling webhook, failing open NAME: ERR`` (and ``Panic calling
webhook, failing open``) for every call they ignored (reference §1.2). That names the webhook,
the time and the cause, never the request. A webhook call slower than 500 ms also leaves a
utiltrace (k8s.io/utils/trace, apiserver ``--v=2``, the default of most installers)::

    Trace[N]: "Call validating webhook" configuration:C,webhook:W,resource:G/V, Resource=R,subresource:S,operation:OP,UID:U (02-Jan-2006 15:04:05.000) (total time: Nms):

Since component-base tracing (1.27) that trace is nested in the request handler's, which also
carries the audit ID, the URL (namespace, and the name for updates and patches) and the verb::

    Trace[N]: "Create" accept:…,audit-id:A,client:IP,protocol:HTTP/2.0,resource:pods,scope:…,url:/api/v1/namespaces/NS/pods,user-agent:UA,verb:POST (02-Jan-2006 15:04:05.000) (total time: Nms):
    Trace[N]: ["Call validating webhook" configuration:C,webhook:W,…,UID:U 10001ms (15:04:05.000)]

Calls that time out, the way a broken konnectivity tunnel shows, are slow enough to be traced;
calls refused at once are not. No line ties a fail-open warning to its trace, so they are paired
by time (see ``_pair``). The report says how many calls were tied this way and that none name the object
the way an audit event does.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Iterator

from breakglass.diagnose import causes, signatures
from breakglass.leaks.model import Leak, LeakReport, Rechecks, TimeRange, admitted_write, finish
from breakglass.logs import formats
from breakglass.logs import sources as logsources
from breakglass.logs.lines import LineTap
from breakglass.logs.scanner import Finder, Scanner, cut_warning

# Warnings and webhook traces say "webhook"; request-handler trace headers (1.27+) carry "audit-id:".
_ANCHORS = (b"ebhook",)
_HEADER_ANCHORS = (b"audit-id:",)
_GATE = re.compile(rb"failing\s*open|Call\s*(?:validating|mutating)\s*webhook")
_HEADER_NUM = re.compile(rb'Trace\[(\d+)\]:\s*\\?"')
_HEADER = re.compile(r'Trace\[(?P<n>\d+)\]:\s*"(?P<name>[^"]+)"\s*(?P<fields>.*?)\s*'
                     r'\((?P<start>\d\d-[A-Z][a-z]{2}-\d{4} \d\d:\d\d:\d\d\.\d{3})\)\s*\(total\s*time:\s*(?P<ms>\d+)\s*ms\)')
# k8s.io/utils before 2020 (Kubernetes ~1.16-1.19): Go's default time and duration formats, no nesting.
_HEADER_STARTED = re.compile(
    r'Trace\[(?P<n>\d+)\]:\s*"(?P<name>[^"]+)"\s*(?P<fields>.*?)\s*\(started:\s*(?P<start>\d{4}-\d\d-\d\d '
    r'\d\d:\d\d:\d\d(?:\.\d+)?)\s*(?P<tz>[+-]\d{4})?[^)]*\)\s*\(total\s*time:\s*(?P<dur>(?:\d+(?:\.\d+)?(?:h|ms|m|s|us|µs|ns))+)\)')
_GO_DURATION = re.compile(r"(\d{1,20}(?:\.\d{1,20})?)(h|ms|m|s|us|µs|ns)")  # bounded: linear on digit runs
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_NESTED = re.compile(r'Trace\[(?P<n>\d+)\]:\s*\[\s*"Call\s*(?P<kind>validating|mutating)\s*webhook"\s*'
                     r'(?P<fields>.*?)\s*(?P<ms>\d+)ms\s*\((?P<tod>\d\d:\d\d:\d\d\.\d{3})\)')
_CALL = re.compile(r"^Call\s*(validating|mutating)\s*webhook$")
_CALL_FIELDS = re.compile(r"configuration:(?P<cfg>[^,]*),\s*webhook:(?P<hook>[^,\s]*),\s*resource:(?P<gv>[^,]*),\s*"
                          r"Resource=(?P<res>[^,]*),\s*subresource:(?P<sub>[^,]*),\s*operation:(?P<op>[A-Z]*)")
# Handler trace fields that breakglass reads (namespace and name are there in some versions only).
_FIELDS = {k: re.compile(r"(?:^|,)\s*" + k + r":(?P<v>[^,\s]*)") for k in ("audit-id", "url", "verb", "namespace",
                                                                        "name")}
_PATH = re.compile(r"^/(?:api/[^/]+|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<ns>[^/]+)(?=/))?"
                   r"/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?/?$")
_TIMEOUT = re.compile(r"[?&]timeout=(\d+(?:\.\d+)?)s")
_HTTP_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
END_SLACK = 1.0  # seconds between a warning and the end of its traced span (ms times, request wrap-up)
MAX_OPEN_HEADERS = 4096  # handler traces remembered for the nested lines that follow them
CAVEAT = ("kube-apiserver's log names the webhook, time and cause of each fail-open call but not the request; "
          "resource, operation, namespace and (for updates) name come only from slow-call traces (over 500 ms), "
          "paired by time. Audit logs (--audit-log) name every object.")


@dataclass(slots=True)
class _Call:
    """One webhook call a trace shows: the span it ran in and the request it belonged to."""
    webhook: str
    kind: str
    start: float
    end: float
    resource: str
    operation: str
    audit_id: str = ""
    url: str = ""
    verb: str = ""
    namespace: str = ""  # handler fields of some versions; otherwise read from the URL
    name: str = ""


@dataclass(slots=True)
class _Open:
    at: float | None
    webhook: str
    kind: str
    cause: str
    location: str
    timeout: float | None  # the call's timeoutSeconds when it timed out (the URL's ?timeout=)
    year_known: bool = True  # klog headers carry no year


def scan(paths: list[str], since: str | None = None, until: str | None = None,
         webhooks: list[str] | None = None, window_gap: float = 60.0, stdin=None,
         engine: str = "auto", sources=None, year: int | None = None) -> LeakReport:
    span = TimeRange(since, until)
    wanted = set(webhooks or [])
    assumed = year or _dt.datetime.now(_dt.timezone.utc).year
    rep = LeakReport(basis="apiserver-log", caveat=CAVEAT)
    opens: list[_Open] = []
    calls: dict[str, list[_Call]] = {}
    headers = _Headers(assumed)
    scanner = Scanner(_ANCHORS, engine)
    header_finder = Finder(_HEADER_ANCHORS, engine)
    srcs = sources if sources is not None else logsources.expand(paths, stdin)  # remote ones come ready
    rep.sources = [s.name for s in srcs]
    for src in srcs:
        chunks = _tap_headers(logsources.read_chunks(src), LineTap(header_finder), headers, src.name)
        for raw in scanner.records(chunks):
            if not ((b"ailing" in raw.text or b"Call" in raw.text) and _GATE.search(raw.text)):
                continue
            rec = formats.parse_record(raw.text.decode("utf-8", "replace"), src.name, raw.line, raw.end_line,
                                       assumed)
            if "Trace[" in rec.message:
                for call in _traced_calls(rec, headers):
                    calls.setdefault(call.webhook, []).append(call)
            for ev in signatures.classify(rec):
                if (ev.kind == "webhook-call" and ev.mode == "open" and not ev.echo) or ev.kind == "webhook-panic":
                    opens.append(_Open(rec.ts, ev.webhook or "", ev.webhook_type or "validating",
                                       ev.cause.detail if ev.cause else "panic", rec.location, _timed_out(ev),
                                       rec.year_known))
        if scanner.cut_count:  # as diagnose says it: a fail-open warning past a line's first 4 MiB is not counted
            import sys  # noqa: PLC0415

            print(f"warning: {cut_warning(src.name, scanner.cuts, scanner.cut_count)}", file=sys.stderr)
    if year is None:
        _year_from_traces(opens, calls, assumed)
    rechecks = Rechecks()
    for op, call in _pair(opens, calls):
        if (wanted and op.webhook not in wanted) or (_utc(op.at) if op.at is not None else None) not in span:
            continue
        leak = _leak(op, call, _iso(op.at) if op.at is not None else "")
        rep.leaks.append(leak)
        rep.traced += call is not None
        if admitted_write(leak) and not rechecks.add(leak):
            rep.unnamed_writes += 1
    return finish(rep, rechecks, window_gap)


class _Headers:
    """Request-handler trace headers by trace number, the last MAX_OPEN_HEADERS of them.

    Most are never needed, so a header seen on its own is kept as the raw record and parsed only
    when a nested webhook trace asks for it.
    """

    def __init__(self, year: int) -> None:
        self._year = year
        self._items: OrderedDict[str, object] = OrderedDict()  # _Unparsed or (start, fields)

    def _put(self, n: str, value) -> None:
        self._items[n] = value
        if len(self._items) > MAX_OPEN_HEADERS:
            self._items.popitem(last=False)

    def remember(self, n: str, line: bytes, source: str) -> None:
        self._put(n, _Unparsed(line, source))

    def put(self, n: str, start: float, fields: str) -> None:
        self._put(n, (start, fields))

    def get(self, n: str) -> tuple[float, str] | None:
        """(start, fields) of trace ``n``'s header, if it was seen."""
        entry = self._items.get(n)
        if isinstance(entry, _Unparsed):
            msg = formats.parse_record(entry.line.decode("utf-8", "replace"), entry.source, 0, 0,
                                       self._year).message
            entry = next(((start, fields) for num, _, fields, start, _ in _trace_headers(msg) if num == n), None)
            self._items[n] = entry
        return entry


@dataclass(slots=True)
class _Unparsed:
    line: bytes
    source: str


def _year_from_traces(opens: list[_Open], calls: dict[str, list[_Call]], assumed: int) -> None:
    """klog lines carry no year, but trace headers do (02-Jan-2006): a log from another year than this
    one would pair nothing, so its warnings take the traces' year when the traces agree on one."""
    years = {_utc(c.start).year for cs in calls.values() for c in cs}
    if len(years) != 1 or (found := years.pop()) == assumed:
        return
    for op in opens:
        if op.at is not None and not op.year_known:
            t = _utc(op.at)
            try:
                op.at = t.replace(year=found).timestamp()
            except ValueError:  # 29 February
                continue


def _tap_headers(chunks: Iterable[bytes], tap: LineTap, headers: _Headers, source: str) -> Iterator[bytes]:
    """Pass the chunks on, remembering the request-handler trace headers in them on the way: in CRI
    and other prefixed logs a nested webhook trace is a record of its own, apart from its header."""
    for chunk in chunks:
        for line in tap.feed(chunk):
            _remember_headers(line, headers, source)
        yield chunk
    for line in tap.close():
        _remember_headers(line, headers, source)


def _remember_headers(line: bytes, headers: _Headers, source: str) -> None:
    for m in _HEADER_NUM.finditer(line):
        headers.remember(m[1].decode(), line, source)


def _traced_calls(rec, headers: _Headers) -> list[_Call]:
    """The webhook calls one record's trace lines show; its handler headers are remembered for later lines."""
    out = []
    msg = rec.message
    for num, name, fields, start, total in _trace_headers(msg):
        kind = _CALL.match(name)
        if kind:  # a top-level webhook trace (before nesting): its total time is the call's own
            call = _call(fields, kind[1], start, start + total)
            if call:
                out.append(call)
        else:
            headers.put(num, start, fields)
    for n in _NESTED.finditer(msg):
        parent = headers.get(n["n"])
        start = _time_of_day(n["tod"], parent[0] if parent else rec.ts)
        if start is None:
            continue
        # A nested trace prints time.Since(its start) when the parent is logged, so this span ends at the
        # request's end, not the call's: what pairing with the warning needs (see _pair).
        call = _call(n["fields"], n["kind"], start, start + int(n["ms"]) / 1000)
        if call is None:
            continue
        if parent:
            fields = parent[1]
            call.audit_id, call.url, call.verb, call.namespace, call.name = (_field(k, fields) for k in _FIELDS)
        out.append(call)
    return out


def _timed_out(ev) -> float | None:
    if ev.cause is None or ev.cause.cls != causes.TIMEOUT:
        return None
    m = _TIMEOUT.search(ev.url or "")
    return float(m[1]) if m else None


def _call(fields: str, kind: str, start: float, end: float) -> _Call | None:
    m = _CALL_FIELDS.search(fields)
    if not m:
        return None
    group = m["gv"].split("/", 1)[0] if "/" in m["gv"] else ""
    resource = m["res"] + (f".{group}" if group else "") + (f"/{m['sub']}" if m["sub"] else "")
    return _Call(m["hook"], kind, start, end, resource, m["op"].lower())


def _field(key: str, fields: str) -> str:
    m = _FIELDS[key].search(fields)
    return m["v"] if m else ""


def _pair(opens: list[_Open], calls: dict[str, list[_Call]]):
    """Each fail-open warning with the traced call it most likely was, or None.

    A warning is logged as its call ends, and the request ends soon after: a nested trace's span
    ends with the request, a top-level one with the call. So the candidate is the unpaired trace of
    the same webhook whose span ends closest to the warning, within END_SLACK. A call that timed out
    after N seconds (the URL's ``?timeout=Ns``) must also have started N seconds before.
    """
    by_end = {w: sorted(cs, key=lambda c: c.end) for w, cs in calls.items()}
    ends = {w: [c.end for c in cs] for w, cs in by_end.items()}
    used: set[int] = set()
    for op in sorted((o for o in opens if o.at is not None), key=lambda o: o.at):
        cs = by_end.get(op.webhook, [])
        lo = bisect.bisect_left(ends.get(op.webhook, []), op.at - END_SLACK)
        hi = bisect.bisect_right(ends.get(op.webhook, []), op.at + END_SLACK)
        latest_start = op.at + END_SLACK - (op.timeout or 0)
        best = min((c for c in cs[lo:hi] if id(c) not in used and c.start <= latest_start),
                   key=lambda c: abs(c.end - op.at), default=None)
        if best is not None:
            used.add(id(best))
        yield op, best
    for op in opens:
        if op.at is None:
            yield op, None


def _leak(op: _Open, call: _Call | None, at: str) -> Leak:
    resource = namespace = name = verb = audit_id = ""
    if call:
        resource, verb, audit_id = call.resource, call.operation, call.audit_id
        verb = _HTTP_VERBS.get(call.verb.upper(), call.verb.lower()) if call.verb else verb
        path = _PATH.match(call.url) if call.url else None
        if path:
            namespace = path["ns"] or ""
            name = path["name"] or ""
            if not resource:
                resource = path["res"] + (f".{path['group']}" if path["group"] else "")
        namespace, name = call.namespace or namespace, call.name or name
    kind = call.kind if call else op.kind
    return Leak(at, "", verb, resource, namespace, name, [op.webhook], kind, None, audit_id, op.location, op.cause)


def _trace_headers(msg: str) -> Iterator[tuple[str, str, str, float, float]]:
    """(number, name, fields, start, total seconds) of each trace header in a message, in either shape."""
    for h in _HEADER.finditer(msg):
        try:
            d = _dt.datetime.strptime(h["start"], "%d-%b-%Y %H:%M:%S.%f")
        except ValueError:
            continue
        yield h["n"], h["name"], h["fields"], d.replace(tzinfo=_dt.timezone.utc).timestamp(), int(h["ms"]) / 1000
    for h in _HEADER_STARTED.finditer(msg):
        stamp = h["start"][:26]  # Go prints nanoseconds; Python takes microseconds
        tz = h["tz"] or "+0000"
        try:
            d = _dt.datetime.fromisoformat(f"{stamp}{tz[:3]}:{tz[3:]}")
        except ValueError:
            continue
        total = sum(float(v) * _GO_UNITS[u] for v, u in _GO_DURATION.findall(h["dur"]))
        yield h["n"], h["name"], h["fields"], d.timestamp(), total


def _time_of_day(tod: str, near: float | None) -> float | None:
    """A nested trace prints only the time of day: put it on the day of ``near`` (the parent's start,
    or the record's time), across midnight when that is closer."""
    if near is None:
        return None
    day = _dt.datetime.fromtimestamp(near, _dt.timezone.utc).date()
    try:
        t = _dt.datetime.strptime(tod, "%H:%M:%S.%f").time()
    except ValueError:
        return None
    guess = _dt.datetime.combine(day, t, _dt.timezone.utc).timestamp()
    return min((guess - 86400, guess, guess + 86400), key=lambda g: abs(g - near))


def _utc(ts: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc)


def _iso(ts: float) -> str:
    return _utc(ts).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
