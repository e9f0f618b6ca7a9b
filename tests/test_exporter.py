"""The in-cluster guard's exporter (`breakglass exporter`, breakglass/flows/exporter.py) against the real
kube-apiserver, scraped by a real Prometheus (Debian's package) that also loads deploy/prometheus's alert rules.

Every check compares with `breakglass audit -o json` run on the same cluster: the exporter's series, texts and
fixes must be that audit's, not a second opinion."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from breakglass.sandbox import free_port
from tests.conftest import ROOT, run_cli
from tests.real_apiserver_session import NO_RIGHTS_SA, SCRATCH_NS, real_apiserver  # noqa: F401
from tests.real_control_plane import stop_group

RULES = os.path.join(ROOT, "deploy", "prometheus", "breakglass-rules.yaml")
RISKY = os.path.join(ROOT, "examples", "webhooks", "kyverno-risky.yaml")
SERVICE = "kyverno-svc"  # what kyverno-risky.yaml's webhooks call, in SCRATCH_NS (kyverno)
# One ready and one not-ready endpoint: the exporter must say 1, a count read from the cluster (not a default 0).
SLICE = {"metadata": {"name": "kyverno-svc-exporter", "labels": {"kubernetes.io/service-name": SERVICE}},
         "addressType": "IPv4", "ports": [{"name": "https", "port": 9443, "protocol": "TCP"}],
         "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": True}},
                       {"addresses": ["10.0.0.8"], "conditions": {"ready": False}}]}


def _get(url: str, timeout: float = 10) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback test servers
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError):  # not listening yet
        return 0, ""


def _until(what: str, probe, seconds: float = 90):
    """Poll ``probe`` until it returns something truthy (never a timed assertion: the deadline only ends a hang)."""
    deadline = time.monotonic() + seconds
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not seen in {seconds:g} s")
        time.sleep(0.5)


@pytest.fixture
def risky_cluster(real_apiserver, tmp_path):  # noqa: F811
    """kyverno-risky.yaml applied to the real apiserver, its Service with one ready endpoint; all removed after."""
    kube = real_apiserver
    admin = kube.client
    admin.must("POST", f"/api/v1/namespaces/{SCRATCH_NS}/services",
               {"metadata": {"name": SERVICE}, "spec": {"ports": [{"port": 443, "targetPort": 9443}]}},
               ok=(201, 409))
    admin.must("POST", f"/apis/discovery.k8s.io/v1/namespaces/{SCRATCH_NS}/endpointslices", SLICE)
    with open(RISKY, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if doc:
                admin.must("POST", f"/apis/admissionregistration.k8s.io/v1/{doc['kind'].lower()}s", doc)
    try:
        yield kube, kube.kubeconfig(str(tmp_path / "admin.kubeconfig"))
    finally:
        kube.reset()  # the webhook configurations first: nothing of the test's judges the deletes after
        admin.must("DELETE", f"/apis/discovery.k8s.io/v1/namespaces/{SCRATCH_NS}/endpointslices/"
                             f"{SLICE['metadata']['name']}", ok=(200, 202, 404))
        admin.must("DELETE", f"/api/v1/namespaces/{SCRATCH_NS}/services/{SERVICE}", ok=(200, 202, 404))


class Exporter:
    """`breakglass exporter` as a process, as the chart's Deployment runs it; the port it listens on is read
    from its own start line (it binds port 0)."""

    def __init__(self, tmp_path, *args: str, env: dict | None = None) -> None:
        self.stderr_path = str(tmp_path / "exporter.stderr")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "breakglass", "exporter", "--listen", "127.0.0.1:0",
                                      *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self._err,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        line = _until("the exporter's start line", self._start_line, 120)
        self.url = line.split("serving ", 1)[1].split("/metrics", 1)[0]

    def _start_line(self):
        if self.proc.poll() is not None:
            pytest.fail(f"the exporter exited {self.proc.returncode}: {self.stderr()}")
        return next((ln for ln in self.stderr().splitlines() if "serving http://" in ln), None)

    def stderr(self) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        stop_group(self.proc)
        self._err.close()


def _samples(text: str) -> dict[str, list[tuple[dict, float]]]:
    """The exposition text read back with Prometheus' own rules for label values (\\\\, \\", \\n)."""
    out: dict[str, list] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, rest = (line.split("{", 1) + [""])[:2] if "{" in line else (line.split(" ", 1)[0], "")
        labels, i = {}, 0
        if rest:
            while rest[i] != "}":
                eq = rest.index("=", i)
                key, j, val = rest[i:eq].lstrip(","), eq + 2, []
                while rest[j] != '"':
                    if rest[j] == "\\":
                        val.append({"n": "\n", "\\": "\\", '"': '"'}[rest[j + 1]])
                        j += 2
                    else:
                        val.append(rest[j])
                        j += 1
                labels[key], i = "".join(val), j + 1
            value = rest[i + 1:].strip()
        else:
            value = line.split(" ", 1)[1]
        out.setdefault(name, []).append((labels, float(value)))
    return out


def _audit_json(kubeconfig: str) -> dict:
    p = run_cli("audit", "--kubeconfig", kubeconfig, "-o", "json")
    assert p.returncode == 3, p.stderr  # kyverno-risky.yaml is critical: exit 3 at the default --fail-on high
    return json.loads(p.stdout)


def test_a_real_prometheus_scrapes_the_audits_findings_and_evaluates_the_alerts(risky_cluster, tmp_path):
    kube, kubeconfig = risky_cluster
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("Debian's prometheus package is not installed (apt-get install prometheus)")
    expected = _audit_json(kubeconfig)
    findings = expected["result"]["findings"]
    assert any(f["severity"] == "critical" for f in findings)

    exporter = Exporter(tmp_path, "--interval", "5", "--kubeconfig", kubeconfig)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [RULES],
        "scrape_configs": [{"job_name": "breakglass",
                            "static_configs": [{"targets": [exporter.url.split("://", 1)[1]]}]}]}))
    with open(tmp_path / "prometheus.log", "wb") as log:
        prom = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log,
                                start_new_session=True)
    api = f"http://127.0.0.1:{port}/api/v1"

    def query(q: str) -> list[dict]:
        status, body = _get(f"{api}/query?query={urllib.parse.quote(q)}")
        return json.loads(body)["data"]["result"] if status == 200 else []

    try:
        risk = _until("breakglass_webhook_risk in Prometheus", lambda: query("breakglass_webhook_risk"))
        want = {}
        for f in findings:
            key = (f["configuration"], f["webhook"] or "", f["rule"], f["severity"])
            want[key] = want.get(key, 0) + 1
        got = {(r["metric"]["configuration"], r["metric"]["webhook"], r["metric"]["rule"], r["metric"]["severity"]):
               int(float(r["value"][1])) for r in risk}
        assert got == want
        assert {r["metric"]["job"] for r in risk} == {"breakglass"}

        # the alerts' text: each finding's title, the start of its explanation and its fix command (or, when that
        # is too long for a label, the command that prints it), from what audit -o json gives; all of it short
        info = {(r["metric"]["configuration"], r["metric"]["webhook"], r["metric"]["rule"], r["metric"]["severity"]):
                r["metric"] for r in query("breakglass_webhook_risk_info")}
        assert set(info) == set(want)
        for f in findings:
            m = {"fix": "", **info[(f["configuration"], f["webhook"] or "", f["rule"], f["severity"])]}  # "": no label
            assert len(m["title"]) <= 200 and len(m["explanation"]) <= 200
            assert len(m["fix"]) <= 200 + len(f["configuration"]) + len(f["webhook"] or "") + len(f["rule"])
            assert f["title"] in m["title"].split("\n")
            assert f["explanation"].startswith(m["explanation"].rstrip("\u2026"))
            if f["fix"] and len(f["fix"]["command"]) <= 200:
                assert f["fix"]["command"] in m["fix"].split("\n")
            elif f["fix"]:  # the command that prints it: run its jq program on the audit it names
                program = shlex.split(m["fix"])
                assert program[:5] == ["breakglass", "audit", "-o", "json", "|"] and program[5:7] == ["jq", "-r"]
                if shutil.which("jq"):
                    out = subprocess.run(["jq", "-r", program[7]], input=json.dumps(expected), capture_output=True,
                                         text=True, check=True).stdout
                    assert out.strip() == f["fix"]["command"]

        ready = {(r["metric"]["webhook"], r["metric"]["service"]): float(r["value"][1])
                 for r in query("breakglass_webhook_backend_ready")}
        assert ready == {(w, f"{SCRATCH_NS}/{SERVICE}"): 1.0
                         for w in ("validate.kyverno.svc-fail", "validate.kyverno.svc-ignore")}
        closed = {r["metric"]["webhook"]: float(r["value"][1]) for r in query("breakglass_webhook_fail_closed")}
        assert closed == {"validate.kyverno.svc-fail": 1.0, "validate.kyverno.svc-ignore": 0.0}
        last = query("breakglass_audit_last_success_timestamp_seconds")
        assert last and float(last[0]["value"][1]) > 0
        assert [float(r["value"][1]) for r in query("breakglass_audit_errors_total")] == [0.0]

        # the rules loaded and evaluated on what was scraped: the critical risk is pending (for: 10m), its
        # description the finding's own title
        def pending():
            status, body = _get(f"{api}/alerts")
            alerts = json.loads(body)["data"]["alerts"] if status == 200 else []
            return [a for a in alerts if a["labels"]["alertname"] == "BreakglassWebhookCriticalRisk"]

        alerts = _until("the pending BreakglassWebhookCriticalRisk alert", pending)
        critical = [f for f in findings if f["severity"] == "critical"]
        assert {(a["labels"]["configuration"], a["labels"]["webhook"], a["labels"]["rule"]) for a in alerts} == \
            {(f["configuration"], f["webhook"] or "", f["rule"]) for f in critical}
        for a in alerts:
            f = next(f for f in critical if (f["webhook"] or "", f["rule"]) == (a["labels"]["webhook"],
                                                                                a["labels"]["rule"]))
            assert a["state"] == "pending"
            m = info[(f["configuration"], f["webhook"] or "", f["rule"], f["severity"])]
            assert a["annotations"]["description"] == f"{m['title']}. {m['explanation']}"
            assert a["annotations"]["fix"] == m["fix"]
        _, body = _get(f"{api}/rules")
        rules = [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]]
        assert {r["name"] for r in rules} == {"BreakglassWebhookCriticalRisk", "BreakglassFailClosedWebhookBackendDown",
                                              "BreakglassAuditStale", "BreakglassAuditMissing"}
        assert all(r["health"] == "ok" for r in rules), rules
        # backend has a ready endpoint, the audit is fresh: neither fires
        firing = {a["labels"]["alertname"] for a in json.loads(_get(f"{api}/alerts")[1])["data"]["alerts"]}
        assert not firing & {"BreakglassFailClosedWebhookBackendDown", "BreakglassAuditStale", "BreakglassAuditMissing"}

        # /findings: the very envelope `breakglass audit -o json` printed
        status, body = _get(exporter.url + "/findings")
        assert status == 200
        served = json.loads(body)
        assert served["kind"] == "AuditReport" and served["exitCode"] == expected["exitCode"]
        assert served["result"] == expected["result"]
        assert _get(exporter.url + "/healthz") == (200, "ok\n")
        assert _get(exporter.url + "/nothing")[0] == 404
    finally:
        stop_group(prom)
        exporter.stop()


def test_a_failing_audit_is_counted_and_never_served_as_all_clear(real_apiserver, tmp_path):  # noqa: F811
    """Credentials that may read nothing: every audit fails (403). The exporter keeps serving, counts each
    failure, says why on stderr, and never shows a last success or an empty (all-clear) /findings."""
    kubeconfig = real_apiserver.kubeconfig(str(tmp_path / "no-rights.kubeconfig"),
                                           {"token": real_apiserver.token(NO_RIGHTS_SA)})
    exporter = Exporter(tmp_path, "--interval", "5", "--kubeconfig", kubeconfig)
    try:
        def two_errors():
            status, text = _get(exporter.url + "/metrics")
            s = _samples(text) if status == 200 else {}
            errs = s.get("breakglass_audit_errors_total", [({}, 0)])[0][1]
            return s if errs >= 2 else None

        s = _until("two failed audits", two_errors)
        assert s["breakglass_audit_last_success_timestamp_seconds"] == [({}, 0.0)]
        assert "breakglass_webhook_risk" not in s
        assert _get(exporter.url + "/findings")[0] == 503
        assert "audit failed: unreachable:" in exporter.stderr() and "403" in exporter.stderr()
        assert exporter.proc.poll() is None
    finally:
        exporter.stop()


def test_once_prints_the_same_audit_and_reads_the_api_as_a_pod_does(risky_cluster, tmp_path):
    """--once (the CronJob's run) in a pod's setting: no kubeconfig, KUBERNETES_SERVICE_HOST/PORT and a mounted
    token and CA, read through breakglass.access.kubeapi.connect_in_cluster."""
    kube, kubeconfig = risky_cluster
    expected = _audit_json(kubeconfig)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(kube.token())
    shutil.copy(kube.pki.ca, account / "ca.crt")
    host, port = kube.url.split("://", 1)[1].rsplit(":", 1)
    pod = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "KUBECONFIG": str(tmp_path / "none")}

    p = run_cli("exporter", "--once", "--service-account-dir", str(account), "-o", "json", env=pod)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["result"] == expected["result"]

    p = run_cli("exporter", "--once", "--service-account-dir", str(account), env=pod)
    assert p.returncode == 0, p.stderr
    s = _samples(p.stdout.decode())
    assert sorted((m["configuration"], m["webhook"], m["rule"], m["severity"]) for m, _ in s["breakglass_webhook_risk"]) \
        == sorted({(f["configuration"], f["webhook"] or "", f["rule"], f["severity"])
                   for f in expected["result"]["findings"]})
    assert s["breakglass_audit_last_success_timestamp_seconds"][0][1] > 0

    # no token mounted: one line, exit 5 (unreachable), nothing printed as metrics
    p = run_cli("exporter", "--once", "--service-account-dir", str(tmp_path / "missing"), env=pod)
    assert p.returncode == 5
    assert p.stdout == b""
    assert len(p.stderr.decode().strip().splitlines()) <= 2 and "in-cluster config" in p.stderr.decode()


@pytest.mark.parametrize("args, message", [
    (["--listen", "nowhere"], "--listen 'nowhere': use HOST:PORT"),
    (["--listen", "127.0.0.1:99999"], "use HOST:PORT"),
    (["--push", "http://127.0.0.1:1"], "--push goes with --once"),
])
def test_bad_options_are_one_line_and_exit_2(args, message):
    p = run_cli("exporter", "--kubeconfig", "/nonexistent", *args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr.decode()
    assert "Traceback" not in p.stderr.decode()
