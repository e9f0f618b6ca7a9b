"""The in-cluster guard: `breakglass audit` run on a timer, its verdicts served as Prometheus metrics.

Every interval the exporter reads the cluster exactly as `breakglass audit` does (``sources.load_api_with``: every
admission configuration and the namespaces' labels; ``audit.audit`` over them), reads each webhook's backend
(``webhooks.readiness``: for a Service, the ready endpoints serving the port the webhook names, 0 when the Service
or that port is missing; a ``url:`` webhook is called as the apiserver calls it, 1 if it answered), and keeps the
result for scrapes. A Service's pods are counted, not called: the count is what the alert reads, and an
AdmissionReview per pod per interval is load the webhook's owner never asked for. Nothing is computed per scrape:
the metrics text (and /findings) is rendered once per audit, a scrape never reaches the apiserver, and a
Prometheus scraping often cannot load it. A failed audit keeps the last good metrics and counts the error; the
last success's time shows how stale they are (the stale alert).

Metrics (Prometheus text format 0.0.4):
  breakglass_webhook_risk{configuration,webhook,rule,severity}        findings with these labels (1 per finding)
  breakglass_webhook_risk_info{configuration,webhook,rule,severity,title,explanation,fix}
                                                                       1: the finding's title, the first sentence
                                                                       of its explanation and its fix command, each
                                                                       at most LABEL_TEXT characters (a longer fix
                                                                       command: the command that prints it); the
                                                                       full text is /findings' and `breakglass
                                                                       audit`'s
  breakglass_webhook_backend_ready{configuration,webhook,service}     ready endpoints serving the webhook's port
  breakglass_webhook_backend_ready{configuration,webhook,url}         1 if the url: webhook answered, else 0
  breakglass_webhook_fail_closed{configuration,webhook}               1 if failurePolicy is Fail, else 0
  breakglass_audit_last_success_timestamp_seconds                     0 until an audit succeeds
  breakglass_audit_errors_total                                       audits that failed
  breakglass_audit_interval_seconds                                   the exporter's interval (stale = N of them)
/findings (unless turned off: ``findings=False``) serves the last audit as `breakglass audit -o json` prints it (the
same envelope); /healthz says ok while the server runs.

Bounded for thousands of webhooks: the labels are short (3,000 risky webhooks made a 58 MB /metrics of full
explanations and patches), and without /findings the audit is run over a few hundred configurations at a time and
only each finding's labels are kept, so memory grows with the number of findings' short labels, not with their
full text. The server (``Server``) is one thread answering from memory: per-connection deadlines, a cap on open
connections (the oldest unfinished request is dropped first), a bounded request head, a listen backlog of 128;
a thousand clients each sending half a request hold no thread and do not stop a scrape.
"""

from __future__ import annotations

import json
import re
import selectors
import shlex
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from breakglass.core.envelope import dumps, envelope, json_bytes
from breakglass.core.errors import BadInput, BreakglassError, ExitCode, Unreachable
from breakglass.webhooks import audit as _audit
from breakglass.webhooks import backend as _backend
from breakglass.webhooks import readiness, sources
from breakglass.webhooks.model import MAP_BINDING, VAP_BINDING

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LABEL_TEXT = 200  # characters: the most of a finding's title, explanation or fix one _info label carries
AUDIT_CHUNK = 200  # configurations audited at once when only the labels are kept (memory: one chunk's full text)


@dataclass(frozen=True)
class Risk:
    """One finding as the metrics carry it: its identity labels and the short texts of its _info series."""

    configuration: str
    webhook: str
    rule: str
    severity: str
    title: str
    explanation: str
    fix: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.configuration, self.webhook, self.rule, self.severity


def _short(text: str, limit: int = LABEL_TEXT) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026"


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return _short(text[:end + 1] if end >= 0 else text)


def _fix_label(f) -> str:
    """The fix command itself when it is short; else the command that prints it from `breakglass audit` (a cut
    command would not run). Names go in as JSON strings, ASCII-escaped, and the program is shell-quoted: the
    alert's text may be pasted into a shell."""
    if not f.fix:
        return ""
    if len(f.fix.command) <= LABEL_TEXT:
        return f.fix.command
    select = (f".result.findings[]|select(.configuration=={json.dumps(f.configuration)} and "
              f".webhook=={json.dumps(f.webhook)} and .rule=={json.dumps(f.rule)}).fix.command")
    return "breakglass audit -o json | jq -r " + shlex.quote(select)


def risks_of(findings) -> list[Risk]:
    return [Risk(f.configuration, f.webhook or "", f.rule, f.severity, _short(f.title), _first_sentence(f.explanation),
                 _fix_label(f)) for f in findings]


def _risks_in_chunks(configs, target_version, namespaces, running=None) -> tuple[list[Risk], str | None]:
    """The audit's findings, as risks, AUDIT_CHUNK configurations at a time: the findings of a configuration
    depend on it alone, and on the policy bindings (passed with every chunk; a binding has no finding of its
    own). Only each chunk's short labels outlive it."""
    bindings = [c for c in configs if c.kind in (VAP_BINDING, MAP_BINDING)]
    rest = [c for c in configs if c.kind not in (VAP_BINDING, MAP_BINDING)]
    risks: list[Risk] = []
    worst = None
    for i in range(0, len(rest), AUDIT_CHUNK):
        rep = _audit.audit(rest[i:i + AUDIT_CHUNK] + bindings, target_version, namespaces, running=running)
        risks += risks_of(rep.findings)
        if rep.worst and (worst is None or _audit.RANK[rep.worst] > _audit.RANK[worst]):
            worst = rep.worst
    return risks, worst


@dataclass
class BackendRow:
    configuration: str  # Kind/name, as audit findings name it
    webhook: str
    service: str  # namespace/name; "" for a url: webhook
    ready: int
    url: str = ""


@dataclass
class Snapshot:
    """One audit of the cluster: what a scrape serves until the next one succeeds."""

    report: _audit.AuditReport | None  # None when only the metrics are kept (no /findings)
    warnings: list[str]
    backends: list[BackendRow]
    fail_closed: dict[tuple[str, str], bool]  # (configuration, webhook) -> failurePolicy Fail
    taken_at: float
    risks: list[Risk] = field(default_factory=list)
    worst: str | None = None
    findings_json: bytes | None = None  # /findings, rendered once (the long-running exporter)


def audit_once(api, target_version: str | None = None, keep_report: bool = True) -> Snapshot:
    """The same reads and rules as `breakglass audit` (cli/inventory.py's audit), plus each webhook's backend.
    ``keep_report=False``: only what the metrics need is kept (``Snapshot.report`` is None)."""
    _audit.parse_version(target_version)
    inv = sources.load_api_with(api)
    if keep_report:
        rep = _audit.audit(inv.configs, target_version, inv.namespaces, running=_audit.running_minor(inv.version))
        risks, worst = risks_of(rep.findings), rep.worst
    else:
        rep = None
        risks, worst = _risks_in_chunks(inv.configs, target_version, inv.namespaces,
                                        _audit.running_minor(inv.version))
    services: dict[str, _backend.Backend] = {}  # a Service behind several webhooks is read once per audit
    counted: dict[tuple, int] = {}  # and a URL called once
    rows, fail_closed = [], {}
    for cfg in inv.configs:
        ident = f"{cfg.kind_name}/{cfg.name}"
        for w in cfg.webhooks:
            fail_closed[(ident, w.name)] = w.failure_policy == "Fail"
            if not (w.service or w.url):
                continue
            spec = readiness.Spec.of(w)
            if spec.key not in counted:
                if w.service:
                    if w.service not in services:
                        ns, _, name = w.service.partition("/")
                        services[w.service] = _backend.from_api(api, ns, name)
                    counted[spec.key] = readiness.of_service(spec, services[w.service], call=False).endpoints
                else:
                    counted[spec.key] = readiness.of_url(spec).endpoints
            rows.append(BackendRow(ident, w.name, w.service or "", counted[spec.key],
                                   "" if w.service else w.url or ""))
    warnings = inv.warnings + [f"encrypted, not audited: {k}" for k in inv.opaque]
    return Snapshot(rep, warnings, rows, fail_closed, time.time(), risks, worst)


def _report_envelope(snap: Snapshot, fail_on: str) -> dict:
    worst = _audit.RANK[snap.report.worst] if snap.report.worst else -1
    code = int(ExitCode.FOUND if worst >= _audit.RANK[fail_on] else ExitCode.OK)
    return envelope("AuditReport", snap.report, code, snap.warnings)


def report_json(snap: Snapshot, fail_on: str = "high") -> str:
    """The last audit exactly as `breakglass audit -o json --fail-on FAIL_ON` prints it."""
    return dumps(_report_envelope(snap, fail_on))


def report_bytes(snap: Snapshot, fail_on: str = "high") -> bytes:
    """``report_json`` as UTF-8 with its newline, the same text, written piece by piece (``json_bytes``)."""
    return json_bytes(_report_envelope(snap, fail_on))


# -- the text format ----------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def _label_value(v: str) -> str:
    """Escaped as the exposition format says: backslash, double quote and line feed. A lone surrogate (a hostile
    apiserver's JSON can carry one, ``"\\ud800"``) has no UTF-8 form: it crashed `exporter --once` and every
    scrape; it is written visibly as its escape, ``\\ud800``, first."""
    if _SURROGATE.search(v):
        v = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", v)
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    num = repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))
    return f"{name}{{{inner}}} {num}" if inner else f"{name} {num}"


def _family(name: str, kind: str, help_text: str, lines: list[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *lines]


def _grouped(risks: list[Risk]):
    """(key, count, texts) per risk series, in key order: two findings under the same labels (rare) share one
    series, their texts joined."""
    key, count, texts = None, 0, {}
    for r in sorted(risks, key=lambda r: r.key):
        if r.key != key:
            if key is not None:
                yield key, count, texts
            key, count, texts = r.key, 0, {"title": "", "explanation": "", "fix": ""}
        count += 1
        for label, value in (("title", r.title), ("explanation", r.explanation), ("fix", r.fix)):
            if value and value not in texts[label].split("\n"):
                texts[label] = f"{texts[label]}\n{value}" if texts[label] else value
    if key is not None:
        yield key, count, texts


_NAMES = ("configuration", "webhook", "rule", "severity")


def _audit_lines(snap: Snapshot | None):
    """The series one audit gives, line by line (the bulk of /metrics: rendered once per audit, never per scrape)."""
    groups = list(_grouped(snap.risks)) if snap is not None else []
    yield from _family("breakglass_webhook_risk", "gauge",
                       "Deadlock-risk findings of breakglass audit, by configuration, webhook, rule and severity.", [])
    for k, n, _ in groups:
        yield _series("breakglass_webhook_risk", dict(zip(_NAMES, k)), n)
    yield from _family("breakglass_webhook_risk_info", "gauge",
                       "A finding's title, the first sentence of its explanation and its matchConditions fix command "
                       "(or the command that prints it), each short; breakglass audit and /findings have the full "
                       "text.", [])
    for k, _, texts in groups:
        yield _series("breakglass_webhook_risk_info", {**dict(zip(_NAMES, k)), **texts}, 1)
    yield from _family("breakglass_webhook_backend_ready", "gauge",
                       "Ready endpoints serving a webhook's Service port (0: none, no such Service, or no such port); "
                       "for a url: webhook, 1 if it answered the apiserver's call from the exporter, else 0.", [])
    for r in sorted(snap.backends, key=lambda r: (r.configuration, r.webhook)) if snap else []:
        yield _series("breakglass_webhook_backend_ready", {"configuration": r.configuration, "webhook": r.webhook,
                                                           **({"url": r.url} if r.url else {"service": r.service})},
                      r.ready)
    yield from _family("breakglass_webhook_fail_closed", "gauge",
                       "1 if the webhook fails closed (failurePolicy Fail): a down backend refuses what it "
                       "intercepts.", [])
    for (c, w), v in sorted(snap.fail_closed.items()) if snap else []:
        yield _series("breakglass_webhook_fail_closed", {"configuration": c, "webhook": w}, int(v))


def _status_lines(errors: int, last_success: float, interval: float) -> list[str]:
    """The series that change without an audit (a failed one counts): rendered on their own."""
    return [*_family("breakglass_audit_last_success_timestamp_seconds", "gauge",
                     "Unix time of the last audit that succeeded (0: none yet).",
                     [_series("breakglass_audit_last_success_timestamp_seconds", {}, float(last_success))]),
            *_family("breakglass_audit_errors_total", "counter", "Audits that failed since the exporter started.",
                     [_series("breakglass_audit_errors_total", {}, errors)]),
            *_family("breakglass_audit_interval_seconds", "gauge", "Seconds between audits.",
                     [_series("breakglass_audit_interval_seconds", {}, float(interval))])]


def _encoded(lines) -> bytes:
    """Lines as UTF-8, each ended by a newline, written one at a time: no second copy of the whole text as a
    list or a str (at 10,000 webhooks the text is 23 MB; joined, then encoded, it cost 110 MB at its peak)."""
    import io  # noqa: PLC0415

    buf = io.BytesIO()
    for line in lines:
        buf.write(line.encode("utf-8"))
        buf.write(b"\n")
    return buf.getvalue()


def audit_metrics(snap: Snapshot | None) -> bytes:
    return _encoded(_audit_lines(snap))


def status_metrics(errors: int, last_success: float, interval: float) -> bytes:
    return _encoded(_status_lines(errors, last_success, interval))


def metrics_text(snap: Snapshot | None, errors: int, last_success: float, interval: float) -> str:
    return (audit_metrics(snap) + status_metrics(errors, last_success, interval)).decode("utf-8")


# -- the long-running exporter ------------------------------------------------------------------

@dataclass
class Exporter:
    """Audits on its own thread every ``interval`` seconds; ``server`` answers scrapes from the last result.
    ``findings_enabled``: whether /findings is served (the full audit; the chart turns it off unless asked)."""

    connect: object  # () -> an access.kubeapi.Api; called per audit, so a rotated token or CA is picked up
    interval: float
    target_version: str | None = None
    log: object = print  # one line per failed audit (to stderr in the CLI)
    findings_enabled: bool = True
    snapshot: Snapshot | None = None
    errors: int = 0
    last_success: float = 0.0
    _audit_part: bytes | None = field(default=None, repr=False)  # the last audit's series, rendered once
    _status_part: bytes | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def run_once(self) -> bool:
        try:
            snap = audit_once(self.connect(), self.target_version, keep_report=self.findings_enabled)
            if snap.report is not None:
                # rendered once per audit, and the report's objects let go: a scrape reads only bytes
                snap.findings_json = report_bytes(snap)
                snap.report = None
            part = audit_metrics(snap)
            snap.risks, snap.backends, snap.fail_closed = [], [], {}  # in `part` now; kept twice, they cost twice
        except BreakglassError as e:
            return self._failed(f"{e.kind}: {e}")
        except Exception as e:  # noqa: BLE001 - a bug in one audit must not stop the guard: counted, said, retried
            return self._failed(f"unexpected {type(e).__name__}: {e}")
        with self._lock:
            self.snapshot, self.last_success, self._audit_part = snap, snap.taken_at, part
            self._status_part = status_metrics(self.errors, self.last_success, self.interval)
        return True

    def _failed(self, why: str) -> bool:
        with self._lock:
            self.errors += 1
            self._status_part = status_metrics(self.errors, self.last_success, self.interval)
        self.log("audit failed: " + " ".join(why.split())[:300])
        return False

    def metrics(self) -> tuple[bytes, bytes]:
        """/metrics as two buffers, sent one after the other: the last audit's series and the status series."""
        with self._lock:
            if self._audit_part is None:
                self._audit_part = audit_metrics(None)
            if self._status_part is None:
                self._status_part = status_metrics(self.errors, self.last_success, self.interval)
            return self._audit_part, self._status_part

    def findings(self) -> bytes | None:
        with self._lock:
            return self.snapshot.findings_json if self.snapshot else None

    def loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    def stop(self) -> None:
        self._stop.set()

    def respond(self, path: str) -> tuple[int, str, bytes | tuple[bytes, ...]]:
        """(status, content type, body: bytes or buffers sent in turn) of a GET of ``path``."""
        path = path.split("?", 1)[0]
        if path == "/metrics":
            return 200, CONTENT_TYPE, self.metrics()
        if path == "/healthz":
            return 200, _TEXT, b"ok\n"
        if path == "/findings":
            if not self.findings_enabled:
                return 404, _TEXT, b"not served: /findings is off (breakglass exporter --findings; the chart's " \
                                   b"findings.enabled)\n"
            body = self.findings()
            if body is None:
                return 503, _TEXT, b"no audit has succeeded yet\n"
            return 200, "application/json", body
        return 404, _TEXT, b"not found: /metrics, /findings, /healthz\n"

    def server(self, host: str, port: int, **limits) -> "Server":
        return Server(host, port, self.respond, **limits)


_TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable"}


class _Conn:
    __slots__ = ("sock", "head", "out", "deadline")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.head, self.out, self.deadline = sock, bytearray(), None, deadline


class Server:
    """HTTP/1.0 GETs answered from memory by one thread, with non-blocking sockets.

    Every answer is bytes already rendered (``respond`` is the exporter's: no I/O, no rendering per request), so
    one thread serves every client and none can hold it: a connection has ``timeout`` seconds to send its request
    head (at most ``max_head`` bytes) and as long again to read the answer, then it is closed; at most
    ``max_connections`` are open, and a new one drops the oldest still sending its request. The thread-per-
    connection server before held a thread for as long as a client liked (1,000 half-sent requests: 695
    threads). ``shutdown`` may be called from another thread or a signal handler."""

    def __init__(self, host: str, port: int, respond, *, timeout: float = 10.0, max_connections: int = 256,
                 max_head: int = 16384, backlog: int = 128) -> None:
        self._respond = respond
        self.timeout, self.max_connections, self.max_head = timeout, max_connections, max_head
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=backlog)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stopping = False
        self._conns: dict[socket.socket, _Conn] = {}  # in the order they came: the first is the oldest

    def shutdown(self) -> None:
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:  # closed, or its buffer full: the loop wakes anyway
            pass

    def serve_forever(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.socket, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        self._sel = sel
        sweep = 0.0
        try:
            while not self._stopping:
                for key, mask in sel.select(timeout=0.5):
                    sock = key.fileobj
                    if sock is self.socket:
                        self._accept()
                    elif sock is self._wake_r:
                        try:
                            self._wake_r.recv(64)
                        except OSError:
                            pass
                    elif sock in self._conns:
                        conn = self._conns[sock]
                        if conn.out is None:
                            self._read(conn)
                        else:
                            self._write(conn)
                now = time.monotonic()
                if now >= sweep:  # deadlines, a few times a second
                    for conn in [c for c in self._conns.values() if c.deadline <= now]:
                        self._close(conn)
                    sweep = now + min(0.25, self.timeout / 4)
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            sel.close()

    def _accept(self) -> None:
        for _ in range(64):  # a burst at a time; the rest on the next turn
            try:
                sock, _ = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors (EMFILE): free one, the oldest unfinished request
                self._evict()
                return
            if len(self._conns) >= self.max_connections:
                self._evict()
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic() + self.timeout)
            self._conns[sock] = conn
            self._sel.register(sock, selectors.EVENT_READ)

    def _evict(self) -> None:
        victim = next((c for c in self._conns.values() if c.out is None), None) or \
            next(iter(self._conns.values()), None)
        if victim is not None:
            self._close(victim)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.head += data
        if b"\r\n\r\n" in conn.head or b"\n\n" in conn.head:
            self._answer(conn, *self._handle(bytes(conn.head)))
        elif len(conn.head) > self.max_head:
            self._answer(conn, 431, _TEXT, b"request head too large\n")

    def _handle(self, head: bytes) -> tuple[int, str, bytes | tuple[bytes, ...]]:
        words = head.split(b"\n", 1)[0].rstrip(b"\r").split()
        if len(words) != 3 or not words[2].startswith(b"HTTP/"):
            return 400, _TEXT, b"bad request\n"
        if words[0] != b"GET":
            return 501, _TEXT, b"only GET is served\n"
        try:
            return self._respond(words[1].decode("latin-1"))
        except Exception as e:  # noqa: BLE001 - a bug answers this request with 500; the server goes on
            return 500, _TEXT, f"unexpected {type(e).__name__}\n".encode()

    def _answer(self, conn: _Conn, status: int, ctype: str, body) -> None:
        """``body``: bytes, or a tuple of bytes sent one after the other."""
        parts = body if isinstance(body, tuple) else (body,)
        head = (f"HTTP/1.0 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {sum(len(p) for p in parts)}\r\nConnection: close\r\n\r\n").encode("latin-1")
        conn.head = bytearray()
        conn.out = [memoryview(head), *(memoryview(p) for p in parts if p)]  # shared, never copied per client
        conn.deadline = time.monotonic() + self.timeout
        self._sel.modify(conn.sock, selectors.EVENT_WRITE)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        while conn.out:
            try:
                sent = conn.sock.send(conn.out[0])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._close(conn)
                return
            if sent < len(conn.out[0]):
                conn.out[0] = conn.out[0][sent:]
                return
            conn.out.pop(0)
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        if self._conns.pop(conn.sock, None) is None:
            return
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def server_close(self) -> None:
        for s in (self.socket, self._wake_r, self._wake_w):
            s.close()


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (``[::]:9847`` for IPv6, ``:9847`` for every address; port 0: one the system picks)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise BadInput(f"--listen {text!r}: use HOST:PORT, e.g. 127.0.0.1:9847")
    host = host.strip("[]")
    return host or "0.0.0.0", int(port)


class _Terminated(BaseException):
    """SIGTERM before the server loop runs (in the first audit): ends it where it is. A BaseException, so no
    ``except Exception`` on the way swallows it."""


def serve(exporter: Exporter, listen: str, ready=None) -> None:
    """Audit once, then serve and audit every interval until SIGTERM (a clean stop: the caller exits 0, as a pod
    is stopped) or an interrupt. ``ready(server)`` is called once the socket listens (a test learns the port; the
    CLI says where it listens)."""
    host, port = parse_listen(listen)
    try:
        srv = exporter.server(host, port)
    except OSError as e:
        raise BadInput(f"--listen {listen}: {e.strerror or e}") from None
    serving = False

    def on_sigterm(signum, frame):
        if serving:
            srv.shutdown()
        else:
            raise _Terminated()

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if main else None
    try:
        exporter.run_once()  # before serving: the first scrape already has an audit (or a counted error)
        worker = threading.Thread(target=exporter.loop, name="breakglass-audit", daemon=True)
        worker.start()
        if ready is not None:
            ready(srv)
        serving = True
        srv.serve_forever()
        exporter.log("stopped: SIGTERM")
    except _Terminated:
        exporter.log("stopped: SIGTERM")
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        exporter.stop()
        srv.server_close()


def push(url: str, text: str, job: str = "breakglass", timeout: float = 10.0) -> None:
    """PUT the metrics to a Prometheus Pushgateway (a CronJob has no server to scrape): the group of ``job`` is
    replaced as a whole, so a risk that is gone is gone from the gateway too."""
    target = url.rstrip("/") + f"/metrics/job/{urllib.parse.quote(job, safe='')}"
    req = urllib.request.Request(target, data=text.encode("utf-8"), method="PUT",
                                 headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own gateway URL
            resp.read()
    except urllib.error.HTTPError as e:
        raise Unreachable(f"pushgateway {target}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise Unreachable(f"pushgateway {target}: {getattr(e, 'reason', e)}") from None
    except ValueError as e:
        raise BadInput(f"--push {url!r}: {e}") from None


def once_metrics(snap: Snapshot, interval: float) -> str:
    return metrics_text(snap, 0, snap.taken_at, interval)


__all__ = ["Exporter", "Risk", "Server", "Snapshot", "audit_metrics", "audit_once", "metrics_text", "once_metrics",
           "parse_listen", "push", "report_json", "risks_of", "serve", "status_metrics"]
