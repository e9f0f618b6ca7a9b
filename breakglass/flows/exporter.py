"""The in-cluster guard: `breakglass audit` run on a timer, its verdicts served as Prometheus metrics.

Every interval the exporter reads the cluster exactly as `breakglass audit` does (``sources.load_api_with``: every
admission configuration and the namespaces' labels; ``audit.audit`` over them), reads each webhook's backend
(``webhooks.readiness``: for a Service, the ready endpoints serving the port the webhook names, 0 when the Service
or that port is missing; a ``url:`` webhook is called as the apiserver calls it, 1 if it answered), and keeps the
result for scrapes. A Service's pods are counted, not called: the count is what the alert reads, and an
AdmissionReview per pod per interval is load the webhook's owner never asked for. Nothing is computed per scrape:
a scrape never reaches the apiserver, and a Prometheus scraping often cannot load it. A failed audit keeps the
last good metrics and counts the error; the last success's time shows how stale they are (the stale alert).

Metrics (Prometheus text format 0.0.4):
  breakglass_webhook_risk{configuration,webhook,rule,severity}        findings with these labels (1 per finding)
  breakglass_webhook_risk_info{configuration,webhook,rule,severity,title,explanation,fix}
                                                                       1: the text `breakglass audit -o json`
                                                                       gives, for the alerts' annotations
  breakglass_webhook_backend_ready{configuration,webhook,service}     ready endpoints serving the webhook's port
  breakglass_webhook_backend_ready{configuration,webhook,url}         1 if the url: webhook answered, else 0
  breakglass_webhook_fail_closed{configuration,webhook}               1 if failurePolicy is Fail, else 0
  breakglass_audit_last_success_timestamp_seconds                     0 until an audit succeeds
  breakglass_audit_errors_total                                       audits that failed
  breakglass_audit_interval_seconds                                   the exporter's interval (stale = N of them)
/findings serves the last audit as `breakglass audit -o json` prints it (the same envelope); /healthz says ok
while the server runs.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from breakglass.core.envelope import dumps, envelope
from breakglass.core.errors import BadInput, BreakglassError, ExitCode, Unreachable
from breakglass.webhooks import audit as _audit
from breakglass.webhooks import backend as _backend
from breakglass.webhooks import readiness, sources

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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

    report: _audit.AuditReport
    warnings: list[str]
    backends: list[BackendRow]
    fail_closed: dict[tuple[str, str], bool]  # (configuration, webhook) -> failurePolicy Fail
    taken_at: float


def audit_once(api, target_version: str | None = None) -> Snapshot:
    """The same reads and rules as `breakglass audit` (cli/inventory.py's audit), plus each webhook's backend."""
    _audit.parse_version(target_version)
    inv = sources.load_api_with(api)
    rep = _audit.audit(inv.configs, target_version, inv.namespaces)
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
    return Snapshot(rep, warnings, rows, fail_closed, time.time())


def report_json(snap: Snapshot, fail_on: str = "high") -> str:
    """The last audit exactly as `breakglass audit -o json --fail-on FAIL_ON` prints it."""
    worst = _audit.RANK[snap.report.worst] if snap.report.worst else -1
    code = int(ExitCode.FOUND if worst >= _audit.RANK[fail_on] else ExitCode.OK)
    return dumps(envelope("AuditReport", snap.report, code, snap.warnings))


# -- the text format ----------------------------------------------------------------------------

def _label_value(v: str) -> str:
    """Escaped as the exposition format says: backslash, double quote and line feed."""
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    num = repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))
    return f"{name}{{{inner}}} {num}" if inner else f"{name} {num}"


def _family(name: str, kind: str, help_text: str, lines: list[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *lines]


def metrics_text(snap: Snapshot | None, errors: int, last_success: float, interval: float) -> str:
    risk: dict[tuple, int] = {}
    info: dict[tuple, dict[str, str]] = {}
    if snap is not None:
        for f in snap.report.findings:
            key = (f.configuration, f.webhook or "", f.rule, f.severity)
            risk[key] = risk.get(key, 0) + 1
            # one info series per risk series: two findings under the same labels (rare) share one, texts joined
            text = info.setdefault(key, {"title": "", "explanation": "", "fix": ""})
            for label, value in (("title", f.title), ("explanation", f.explanation),
                                 ("fix", f.fix.command if f.fix else "")):
                if value and value not in text[label].split("\n"):
                    text[label] = f"{text[label]}\n{value}" if text[label] else value
    names = ("configuration", "webhook", "rule", "severity")
    out: list[str] = []
    out += _family("breakglass_webhook_risk", "gauge",
                   "Deadlock-risk findings of breakglass audit, by configuration, webhook, rule and severity.",
                   [_series("breakglass_webhook_risk", dict(zip(names, k)), n) for k, n in sorted(risk.items())])
    out += _family("breakglass_webhook_risk_info", "gauge",
                   "A finding's title, explanation and matchConditions fix command, as breakglass audit gives them.",
                   [_series("breakglass_webhook_risk_info", {**dict(zip(names, k)), **info[k]}, 1)
                    for k in sorted(info)])
    rows = sorted(snap.backends, key=lambda r: (r.configuration, r.webhook)) if snap else []
    out += _family("breakglass_webhook_backend_ready", "gauge",
                   "Ready endpoints serving a webhook's Service port (0: none, no such Service, or no such port); "
                   "for a url: webhook, 1 if it answered the apiserver's call from the exporter, else 0.",
                   [_series("breakglass_webhook_backend_ready", {"configuration": r.configuration,
                                                                 "webhook": r.webhook,
                                                                 **({"url": r.url} if r.url else
                                                                    {"service": r.service})}, r.ready)
                    for r in rows])
    fc = sorted(snap.fail_closed.items()) if snap else []
    out += _family("breakglass_webhook_fail_closed", "gauge",
                   "1 if the webhook fails closed (failurePolicy Fail): a down backend refuses what it intercepts.",
                   [_series("breakglass_webhook_fail_closed", {"configuration": c, "webhook": w}, int(v))
                    for (c, w), v in fc])
    out += _family("breakglass_audit_last_success_timestamp_seconds", "gauge",
                   "Unix time of the last audit that succeeded (0: none yet).",
                   [_series("breakglass_audit_last_success_timestamp_seconds", {}, float(last_success))])
    out += _family("breakglass_audit_errors_total", "counter", "Audits that failed since the exporter started.",
                   [_series("breakglass_audit_errors_total", {}, errors)])
    out += _family("breakglass_audit_interval_seconds", "gauge", "Seconds between audits.",
                   [_series("breakglass_audit_interval_seconds", {}, float(interval))])
    return "\n".join(out) + "\n"


# -- the long-running exporter ------------------------------------------------------------------

@dataclass
class Exporter:
    """Audits on its own thread every ``interval`` seconds; ``serve`` answers scrapes from the last result."""

    connect: object  # () -> an access.kubeapi.Api; called per audit, so a rotated token or CA is picked up
    interval: float
    target_version: str | None = None
    log: object = print  # one line per failed audit (to stderr in the CLI)
    snapshot: Snapshot | None = None
    errors: int = 0
    last_success: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def run_once(self) -> bool:
        try:
            snap = audit_once(self.connect(), self.target_version)
        except BreakglassError as e:
            return self._failed(f"{e.kind}: {e}")
        except Exception as e:  # noqa: BLE001 - a bug in one audit must not stop the guard: counted, said, retried
            return self._failed(f"unexpected {type(e).__name__}: {e}")
        with self._lock:
            self.snapshot, self.last_success = snap, snap.taken_at
        return True

    def _failed(self, why: str) -> bool:
        with self._lock:
            self.errors += 1
        self.log("audit failed: " + " ".join(why.split())[:300])
        return False

    def metrics(self) -> str:
        with self._lock:
            return metrics_text(self.snapshot, self.errors, self.last_success, self.interval)

    def findings(self) -> str | None:
        with self._lock:
            return report_json(self.snapshot) if self.snapshot else None

    def loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    def stop(self) -> None:
        self._stop.set()

    def server(self, host: str, port: int) -> http.server.ThreadingHTTPServer:
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE, exporter.metrics())
                elif path == "/healthz":
                    self._send(200, "text/plain; charset=utf-8", "ok\n")
                elif path == "/findings":
                    body = exporter.findings()
                    if body is None:
                        self._send(503, "text/plain; charset=utf-8", "no audit has succeeded yet\n")
                    else:
                        self._send(200, "application/json", body + "\n")
                else:
                    self._send(404, "text/plain; charset=utf-8", "not found: /metrics, /findings, /healthz\n")

            def _send(self, status: int, ctype: str, text: str) -> None:
                data = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # scrapes every few seconds would flood the pod's log
                pass

        srv = http.server.ThreadingHTTPServer((host, port), Handler)
        srv.daemon_threads = True
        return srv


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (``[::]:9847`` for IPv6, ``:9847`` for every address; port 0: one the system picks)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise BadInput(f"--listen {text!r}: use HOST:PORT, e.g. 0.0.0.0:9847")
    host = host.strip("[]")
    return host or "0.0.0.0", int(port)


def serve(exporter: Exporter, listen: str, ready=None) -> None:
    """Audit once, then serve and audit every interval until interrupted. ``ready(server)`` is called once the
    socket listens (a test learns the port; the CLI says where it listens)."""
    host, port = parse_listen(listen)
    try:
        srv = exporter.server(host, port)
    except OSError as e:
        raise BadInput(f"--listen {listen}: {e.strerror or e}") from None
    exporter.run_once()  # before serving: the first scrape already has an audit (or a counted error)
    worker = threading.Thread(target=exporter.loop, name="breakglass-audit", daemon=True)
    worker.start()
    if ready is not None:
        ready(srv)
    try:
        srv.serve_forever()
    finally:
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


__all__ = ["Exporter", "Snapshot", "audit_once", "metrics_text", "once_metrics", "parse_listen", "push",
           "report_json", "serve"]
