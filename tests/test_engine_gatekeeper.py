"""The real Gatekeeper in the loop (issue 35): its shipped webhooks, one of them fail-closed, on a real
kube-apiserver 1.34; what breakglass' audit and diagnose say of them; and the lasting fix in Gatekeeper's own
Helm value.

Gatekeeper's manager is upstream's module root built by `make go-components`, out of cluster on loopback with the
sandbox's serving certificate (its cert rotation names only the Service, which a url: call cannot verify), its
install from deploy/gatekeeper.yaml in the same module zip with the webhooks sent to it by url:. A separate
apiserver for the module (tests/real_apiserver_session.RealApiserver), its log and Gatekeeper's kept in the test's
directory. Nothing is timed.
"""

from __future__ import annotations

import json
import os

import pytest

from breakglass.sandbox import engines
from tests.real_apiserver_session import RealApiserver
from tests.real_control_plane import binary_for, require
from tests.real_engines import Gatekeeper, denying as _denying

CFG = "gatekeeper-validating-webhook-configuration"
FAIL_OPEN, FAIL_CLOSED = "validation.gatekeeper.sh", "check-ignore-label.gatekeeper.sh"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"


@pytest.fixture(scope="module")
def gk(tmp_path_factory):
    _, apiserver_bin = binary_for("1.34")
    version = engines.versions("gatekeeper")[-1]
    require(engines.binary("gatekeeper") or os.path.join(engines.ROOT, "build", "gatekeeper", f"v{version}",
                                                         "gatekeeper"))
    directory = str(tmp_path_factory.mktemp("gatekeeper"))
    api = RealApiserver(directory, apiserver_bin).start()
    g = Gatekeeper(directory, api)
    try:
        g.install_and_start(version)
        g.probes = _denying(g)
        yield g
    finally:
        g.kill()
        api.stop()


def test_gatekeeper_denies_while_it_runs(gk):
    status, doc = gk.configmap("no-owner")
    assert status == 403 and "missing required labels" in doc.get("message", ""), doc
    status, _ = gk.configmap("has-owner", {"owner": "team-a"})
    assert status == 201


def test_audit_names_gatekeepers_fail_closed_namespace_webhook_and_its_owner(gk):
    p = gk.cli("audit", "--kubeconfig", gk.kubeconfig, "-o", "json", "--verbose")
    assert p.returncode in (0, 3, 4, 5, 6), p.stderr.decode()
    findings = json.loads(p.stdout)["result"]["findings"]
    closed = [f for f in findings if f["webhook"] == FAIL_CLOSED]
    assert closed, findings
    assert any("Namespace" in (f.get("kinds") or []) or "namespace" in f["explanation"].lower() for f in closed)
    text = gk.cli("audit", "--kubeconfig", gk.kubeconfig, "--verbose")
    out = text.stdout.decode()
    assert FAIL_CLOSED in out


def test_the_lasting_fix_for_gatekeeper_is_its_helm_value(gk):
    from breakglass.webhooks import audit, model

    status, cfg = gk.client.call("GET", VWC + CFG)
    assert status == 200
    c = model.from_json(cfg, "api")
    fix = audit.fix_for(c.resource, c.name, FAIL_OPEN, cfg=c)
    assert fix.lasting is not None and fix.lasting.form == "gatekeeper-values", fix
    assert "validatingWebhookMatchConditions" in fix.lasting.snippet
    assert "helm upgrade" in fix.lasting.command and "--reuse-values" in fix.lasting.command


def test_killed_gatekeeper_fails_open_on_configmaps_and_closed_on_namespaces_and_diagnose_says_which(gk):
    gk.kill()
    try:
        status, doc = gk.configmap("leaked-no-owner")
        assert status == 201, doc  # validation.gatekeeper.sh fails open: the violation gets in
        status, doc = gk.configmap("leaked-with-owner", {"owner": "team-a"})
        assert status == 201, doc  # a compliant one gets in the same way
        status, doc = gk.client.call("POST", "/api/v1/namespaces", {"metadata": {"name": "blocked-ns"}})
        assert status >= 500 and FAIL_CLOSED in json.dumps(doc), doc  # check-ignore-label fails closed
        p = gk.cli("diagnose", gk.api.layout.log, "-o", "json")
        assert p.returncode not in (1, 2), p.stderr.decode()
        doc = json.loads(p.stdout)["result"]
        named = {f.get("webhook") for f in doc.get("findings") or []}
        assert FAIL_CLOSED in named, doc
        closed = next(f for f in doc["findings"] if f.get("webhook") == FAIL_CLOSED)
        assert closed.get("failure_policy", closed.get("failurePolicy", "Fail")) != "Ignore"
    finally:
        gk.start()


def test_leaks_finds_what_got_in_and_recheck_asks_gatekeeper_again(gk):
    """The fail-open seed's accounting: what got in while Gatekeeper was down, from the real audit log; then,
    with Gatekeeper back, which of those it now rejects (the violating ConfigMap) and which it admits."""
    probes = _denying(gk)
    p = gk.cli("leaks", "--audit-log", gk.api.layout.audit_log, "--webhook", FAIL_OPEN, "--recheck",
               "--kubeconfig", gk.kubeconfig, "-o", "json")
    assert p.returncode == 3, p.stderr.decode()  # requests got in
    rep = json.loads(p.stdout)["result"]
    leaked = {(x["verb"], x["namespace"], x["name"]) for x in rep["leaks"] if x["resource"] == "configmaps"}
    # nothing missed: both made while it was down; nothing invented: besides them, only probes that got a 201
    # while it started (one admitted by a Gatekeeper not yet synced is no leak, one it could not answer is)
    known = {("create", "default", "leaked-no-owner"), ("create", "default", "leaked-with-owner")}
    assert known <= leaked <= known | {("create", "default", n) for n in probes | gk.probes}, leaked
    now = {(v["name"]): v for v in rep["rechecked"] if v["resource"] == "configmaps"}
    assert now["leaked-no-owner"]["outcome"] == "rejected", now
    assert "missing required labels" in now["leaked-no-owner"]["reason"]
    assert now["leaked-with-owner"]["outcome"] == "admitted", now
    text = gk.cli("leaks", "--audit-log", gk.api.layout.audit_log, "--webhook", FAIL_OPEN, "--recheck",
                  "--kubeconfig", gk.kubeconfig)
    out = text.stdout.decode()
    assert "REJECTED" in out and "leaked-no-owner" in out, out
    # nothing changed: both still there, as they were
    for name in ("leaked-no-owner", "leaked-with-owner"):
        status, _ = gk.client.call("GET", f"/api/v1/namespaces/default/configmaps/{name}")
        assert status == 200


def test_the_sandbox_leak_rehearsal_with_the_real_gatekeeper(tmp_path):
    """`sandbox up --engine gatekeeper --scenario fail-open`: Gatekeeper's shipped webhooks on a 1.34 sandbox,
    Gatekeeper down, and requests a user sent meanwhile. leaks names exactly those from the sandbox's audit log;
    `sandbox backend start` is Gatekeeper coming back, and --recheck then reports the ConfigMap its constraint
    refuses.

    Cost: `sandbox up` starts konnectivity's server and agent, boots kube-apiserver twice and runs Gatekeeper until
    it denies; `backend start` runs it again until it denies; --recheck is polled until its constraint is synced;
    the agent is killed for 2 s under traffic, then 5 more denials awaited: the real leak, through the real tunnel."""
    from tests.real_control_plane import engine_sandbox

    sb = engine_sandbox(tmp_path, "gatekeeper", "fail-open")
    try:
        st = sb.wait(ready=True)
        assert st["engine"] == "gatekeeper" and not st["backend_running"], st
        hooks = {w["name"]: w["failurePolicy"] for w in sb.client().call("GET", VWC + CFG)[1]["webhooks"]}
        assert hooks == {FAIL_OPEN: "Ignore", FAIL_CLOSED: "Fail"}, hooks  # the shipped ones, not a stand-in's
        p = sb.cli("leaks", "--audit-log", sb.api["audit_log"], "--webhook", FAIL_OPEN, "-o", "json")
        assert p.returncode == 3, p.stderr.decode()
        leaks = json.loads(p.stdout)["result"]["leaks"]
        # (besides them only what the install itself sent while Gatekeeper was starting: its constraint, say)
        got = {(x["resource"], x["namespace"], x["name"]) for x in leaks
               if x["resource"] in ("configmaps", "clusterrolebindings.rbac.authorization.k8s.io")}
        assert got == {("configmaps", "default", "unlabelled-config"),
                       ("clusterrolebindings.rbac.authorization.k8s.io", "", "team-a-is-cluster-admin")}, leaks
        p = sb.cli("sandbox", "backend", "start", "--dir", sb.dir)
        assert p.returncode == 0, p.stderr.decode()
        assert sb.status()["backend_running"]
        kubeconfig = sb.info["files"]["kubeconfig"]
        rechecked = wait_until_rejected(sb, kubeconfig)
        assert "missing required labels" in rechecked["reason"], rechecked
        _the_tunnel_restarts_under_traffic(sb)
    finally:
        sb.down()
    assert not [ln for ln in os.popen("pgrep -af 'build/gatekeeper|build/konnectivity'").read().splitlines()
                if sb.dir in ln]
    assert not os.path.exists(sb.dir)


def _the_tunnel_restarts_under_traffic(sb) -> None:
    """The seed's leak, rehearsed: the sandbox's webhook calls go through a real konnectivity server and agent;
    `sandbox tunnel restart` kills the agent while violating ConfigMaps keep coming. What got in is exactly what
    `leaks` reports from the sandbox's audit log."""
    from tests.real_engines import Traffic, wait_for

    tunnel = sb.status()["tunnel"]
    assert tunnel and tunnel["connected"], tunnel
    assert "--egress-selector-config-file=" in open(sb.api["node_config"], encoding="utf-8").read()
    traffic = Traffic(sb.client())
    traffic.start()
    try:
        wait_for("denials through the tunnel", lambda: traffic.count(403) >= 5, logs=f"(logs in {sb.dir})")
        p = sb.cli("sandbox", "tunnel", "restart", "--dir", sb.dir, "--down-for", "2s", "-o", "json")
        assert p.returncode == 0, p.stderr.decode()
        assert json.loads(p.stdout)["result"]["killed"] is True
        denied = traffic.count(403)
        wait_for("denials again after the agent's return", lambda: traffic.count(403) >= denied + 5,
                 logs=f"(logs in {sb.dir})")
    finally:
        got_in = traffic.finish()
    assert got_in, traffic.answers  # no agent for 2 s: the fail-open webhook admitted what it should have judged
    assert set(traffic.answers.values()) <= {201, 403}, traffic.answers
    p = sb.cli("leaks", "--audit-log", sb.api["audit_log"], "--webhook", FAIL_OPEN, "-o", "json")
    assert p.returncode == 3, p.stderr.decode()
    leaked = {x["name"] for x in json.loads(p.stdout)["result"]["leaks"]
              if x["resource"] == "configmaps" and x["name"].startswith("traffic-")}
    assert leaked == got_in, sorted(leaked ^ got_in)


def wait_until_rejected(sb, kubeconfig: str) -> dict:
    """--recheck once Gatekeeper has synced its constraint (until then it admits: its readiness, not a timer)."""
    from tests.real_engines import wait_for

    def asked():
        p = sb.cli("leaks", "--audit-log", sb.api["audit_log"], "--webhook", FAIL_OPEN, "--recheck",
                   "--kubeconfig", kubeconfig, "-o", "json")
        now = {v["name"]: v for v in json.loads(p.stdout)["result"]["rechecked"] if v["resource"] == "configmaps"}
        got = now.get("unlabelled-config") or {}
        return got if got.get("outcome") == "rejected" else None

    return wait_for("Gatekeeper rejecting the leaked ConfigMap on --recheck", asked, logs=f"(logs in {sb.dir})")
