"""The exporter's server and its metrics under hostile clients and a large or hostile apiserver (issue 34 §5):
a flood of clients sending half a request, 3,000 risky webhooks, a lone surrogate in a name, SIGTERM. The
apiserver is a loopback server with a real kube-apiserver's recorded answers (tests/recorded_apiserver.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from tests.conftest import ROOT, run_cli
from tests.recorded_apiserver import Recorded, answers, configurations, kubeconfig
from tests.webhook_backends import closed_port


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    from breakglass.sandbox import pki

    return pki.make(str(tmp_path_factory.mktemp("pki")))


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 - loopback test servers
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Process:
    """`breakglass exporter` as the chart's Deployment runs it, on 127.0.0.1:0; the port from its start line."""

    def __init__(self, tmp_path, *args: str) -> None:
        self.err_path = tmp_path / f"exporter-{time.monotonic_ns()}.stderr"
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "breakglass", "exporter", *args], cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=self._err, start_new_session=True,
                                     env={**os.environ, "KUBERNETES_SERVICE_HOST": ""})

    def started(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.stderr()
            line = next((ln for ln in self.stderr().splitlines() if "serving http://" in ln), None)
            if line:
                return line.split("serving ", 1)[1].split("/metrics", 1)[0]
            time.sleep(0.2)
        pytest.fail(f"the exporter never said where it serves: {self.stderr()}")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._err.close()


def _dead_kubeconfig(tmp_path) -> str:
    return kubeconfig(str(tmp_path / "dead.kubeconfig"), {"dead": f"https://127.0.0.1:{closed_port()}"})


# -- the server -------------------------------------------------------------------------------------------

def test_a_flood_of_half_sent_requests_holds_no_threads_and_a_scrape_is_still_answered(tmp_path):
    """1,000 clients each sending half a request held 695 threads for as long as they liked (a thread per
    connection, no timeout). Here 300 do it to the exporter as a process: its thread count stays what it was
    idle, and a scrape made in the middle of the flood is answered."""
    exporter = Process(tmp_path, "--listen", "127.0.0.1:0", "--interval", "3600", "--kubeconfig",
                       _dead_kubeconfig(tmp_path))
    clients = []
    try:
        url = exporter.started()
        host, port = url.split("://", 1)[1].rsplit(":", 1)
        idle = exporter.threads()
        for _ in range(300):
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(b"GET /metr")
            clients.append(s)
        status, body = _get(url + "/metrics")
        assert status == 200 and b"breakglass_audit_errors_total 1" in body
        assert exporter.threads() <= idle, (idle, exporter.threads())
        assert _get(url + "/healthz") == (200, b"ok\n")
    finally:
        for s in clients:
            s.close()
        exporter.stop()


def test_a_connection_that_never_finishes_its_request_is_closed_at_its_deadline():
    """Per-connection deadlines: a client that sends half a request is closed (the server said nothing, sent
    nothing) once its time is up; one that finished its request in time has its answer. The server is in-process
    with a short deadline; the client's own timeout is long and only ends a hang."""
    from breakglass.flows import exporter

    exp = exporter.Exporter(connect=lambda: None, interval=60)
    srv = exp.server("127.0.0.1", 0, timeout=0.5, max_connections=8)
    serving = threading.Thread(target=srv.serve_forever, daemon=True)
    serving.start()
    try:
        slow = socket.create_connection(srv.server_address, timeout=60)
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        assert slow.recv(1024) == b""  # closed by the server, not by this side's timeout (that would raise)
        slow.close()
        # the cap: 20 half-sent requests on a server that keeps 8 open; the oldest are dropped, a scrape answered
        flood = [socket.create_connection(srv.server_address, timeout=60) for _ in range(20)]
        for s in flood:
            s.sendall(b"GET /")
        status, body = _get(f"http://127.0.0.1:{srv.server_address[1]}/metrics")
        assert status == 200 and b"breakglass_audit_errors_total 0" in body
        assert len(srv._conns) <= 8
        for s in flood:
            s.close()
        # a head that never ends is refused once it passes the limit
        big = socket.create_connection(srv.server_address, timeout=60)
        big.sendall(b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * 40000)
        assert big.recv(100).startswith(b"HTTP/1.0 431 ")
        big.close()
    finally:
        srv.shutdown()
        serving.join(60)
        srv.server_close()


# -- a large cluster ---------------------------------------------------------------------------------------

# 1,500 configurations of the recorded Kyverno shape: 3,000 webhooks, 7,500 findings. Before, /metrics was
# about 16.5 KB per configuration here (58 MB for 3,000 risky webhooks in the red team's cluster), nearly all of
# it breakglass_webhook_risk_info's full explanations and patches. The bound: 3 KB per webhook, 1 KB a line.
CONFIGS = 1500
BYTES_PER_WEBHOOK = 3072


def test_metrics_stay_small_at_three_thousand_risky_webhooks(tmp_path, keys):
    """/metrics of `exporter --once` at 3,000 risky webhooks stays under 3 KB a webhook and 1 KB a line, and every
    finding keeps its series and its text.

    Cost: one `exporter --once` listing, auditing and rendering 1,500 configurations (3,000 webhooks, 7,500
    findings) from the recorded apiserver, all CPU: the size is the red team's cluster, where /metrics was 58 MB."""
    srv = Recorded(answers(configurations(CONFIGS)), keys)
    try:
        kc = kubeconfig(str(tmp_path / "kubeconfig"), {"big": srv.url}, ca=keys.ca)
        p = run_cli("exporter", "--once", "--kubeconfig", kc, timeout=600)
        assert p.returncode == 0, p.stderr
        text = p.stdout.decode()
        print(f"/metrics at {CONFIGS * 2} webhooks: {len(p.stdout)} bytes ({len(p.stdout) / (CONFIGS * 2):.0f} per "
              f"webhook)")
        assert len(p.stdout) < BYTES_PER_WEBHOOK * CONFIGS * 2
        assert max(len(line.encode()) for line in text.splitlines()) < 1024
        risk = [ln for ln in text.splitlines() if ln.startswith("breakglass_webhook_risk{")]
        info = [ln for ln in text.splitlines() if ln.startswith("breakglass_webhook_risk_info{")]
        assert len(risk) == len(info) == CONFIGS * 5  # every finding still has its series and its text
        assert sum('severity="critical"' in ln for ln in risk) == 2 * CONFIGS  # bootstrap- and recovery-intercept
        # the fix the label cannot hold is the command that prints it, for this very finding
        first = next(ln for ln in info if "cfg-00000" in ln and 'rule="bootstrap-intercept"' in ln)
        assert "breakglass audit -o json | jq -r" in first and "cfg-00000" in first.split('fix="', 1)[1]
    finally:
        srv.close()


def test_the_chunked_audit_keeps_the_same_series_as_the_whole_audit():
    """Without /findings the exporter audits a few hundred configurations at a time (memory): the metrics must be
    exactly those of one audit over all of them, policies and their bindings included."""
    import glob

    from breakglass.flows import exporter
    from breakglass.webhooks import audit, sources

    files = sorted(glob.glob(os.path.join(ROOT, "examples", "webhooks", "*.yaml")))
    configs = sources.load_files(files).configs
    assert any(c.kind == "vapbinding" for c in configs) and len(configs) > 4
    whole = exporter.risks_of(audit.audit(configs, "1.33").findings)
    old = exporter.AUDIT_CHUNK
    try:
        exporter.AUDIT_CHUNK = 2
        chunked, worst = exporter._risks_in_chunks(configs, "1.33", None)
    finally:
        exporter.AUDIT_CHUNK = old
    assert sorted(chunked, key=lambda r: r.key) == sorted(whole, key=lambda r: r.key)
    assert worst == audit.audit(configs, "1.33").worst


# -- a hostile apiserver ------------------------------------------------------------------------------------

def test_a_lone_surrogate_from_the_apiserver_does_not_crash_exporter_once(tmp_path, keys):
    """JSON may carry "\\ud800", which no UTF-8 can: `exporter --once` crashed printing it. It is written
    visibly in the metrics (\\ud800 as text) and escaped in JSON."""
    cfg = configurations(1)
    cfg[0]["metadata"]["name"] = "evil\ud800name"
    cfg[0]["webhooks"][0]["name"] = "hook\udfff.example.com"
    srv = Recorded(answers(cfg), keys)  # json.dumps writes them as \ud800 escapes, as a hostile server would
    try:
        kc = kubeconfig(str(tmp_path / "kubeconfig"), {"hostile": srv.url}, ca=keys.ca)
        p = run_cli("exporter", "--once", "--kubeconfig", kc)
        assert p.returncode == 0, p.stderr
        text = p.stdout.decode("utf-8")  # strict: it is UTF-8
        assert 'configuration="ValidatingWebhookConfiguration/evil\\\\ud800name"' in text
        assert 'webhook="hook\\\\udfff.example.com"' in text
        p = run_cli("exporter", "--once", "--kubeconfig", kc, "-o", "json")
        assert p.returncode == 0, p.stderr
        names = {f["configuration"] for f in json.loads(p.stdout)["result"]["findings"]}
        assert names == {"ValidatingWebhookConfiguration/evil\ud800name"}
    finally:
        srv.close()


# -- stopping ----------------------------------------------------------------------------------------------

def test_sigterm_is_a_clean_exit_0(tmp_path):
    """A pod is stopped with SIGTERM: that is the exporter's normal end (exit 0), not `error: interrupted`."""
    exporter = Process(tmp_path, "--listen", "127.0.0.1:0", "--kubeconfig", _dead_kubeconfig(tmp_path))
    try:
        exporter.started()
        exporter.proc.send_signal(signal.SIGTERM)
        assert exporter.proc.wait(60) == 0, exporter.stderr()
        assert "interrupted" not in exporter.stderr() and "stopped: SIGTERM" in exporter.stderr()
    finally:
        exporter.stop()


def test_sigterm_during_the_first_audit_is_a_clean_exit_0_too(tmp_path):
    """The first audit runs before the server listens; an apiserver that accepts and never answers holds it
    there. SIGTERM then ends it at once, exit 0."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    silent.settimeout(120)
    kc = kubeconfig(str(tmp_path / "silent.kubeconfig"), {"silent": f"https://127.0.0.1:{silent.getsockname()[1]}"})
    exporter = Process(tmp_path, "--listen", "127.0.0.1:0", "--kubeconfig", kc, "--timeout", "600")
    try:
        held, _ = silent.accept()  # the exporter's first audit is connecting now
        exporter.proc.send_signal(signal.SIGTERM)
        assert exporter.proc.wait(60) == 0, exporter.stderr()
        assert "interrupted" not in exporter.stderr() and "serving http://" not in exporter.stderr()
        held.close()
    finally:
        silent.close()
        exporter.stop()


# -- what is served, and where ------------------------------------------------------------------------------

def test_findings_can_be_turned_off_and_the_default_listen_is_loopback_outside_a_pod(monkeypatch):
    from breakglass.cli import guard
    from breakglass.flows import exporter

    exp = exporter.Exporter(connect=lambda: None, interval=60, findings_enabled=False)
    status, _, body = exp.respond("/findings")
    assert status == 404 and b"/findings is off" in body
    assert exp.respond("/metrics")[0] == 200
    assert exporter.Exporter(connect=lambda: None, interval=60).respond("/findings")[0] == 503  # on: no audit yet

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert guard.default_listen(None, None) == "127.0.0.1:9847"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert guard.default_listen(None, None) == "0.0.0.0:9847"  # a pod: its own addresses (probes, the scrape)
    assert guard.default_listen("/some/kubeconfig", None) == "127.0.0.1:9847"  # a kubeconfig: not the pod's guard
