"""`breakglass audit` over a fleet, against real kube-apiservers: one deadlocked by the seed's Kyverno webhook
(the sandbox's deadlock scenario), one healthy (the healthy scenario with its risky webhook replaced by a safe
one, as an operator fixes it), one unreachable (a context pointing at a closed loopback port) and one slow (a
port that accepts connections and never answers). Each cluster must be reported on its own, in every format,
with the very findings `breakglass audit --kubeconfig K --context C -o json` gives for it alone.

The two sandboxes are started once for the module (two cores): about a minute."""

from __future__ import annotations

import json
import re
import os
import pty
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.conftest import ROOT, run_cli

KYVERNO_WEBHOOK = "validate.kyverno.svc-fail"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
SAFE = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "widgets-policy"},
        "webhooks": [{"name": "widgets.example.com", "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                      "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"],
                                 "apiVersions": ["v1"], "resources": ["widgets"], "scope": "Namespaced"}],
                      "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "timeoutSeconds": 5}]}


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    return port


def _kubeconfig_entries(path: str, name: str) -> dict:
    """A sandbox's admin kubeconfig, its cluster, user and context renamed ``name`` (to merge several)."""
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return {"clusters": [{"name": name, "cluster": doc["clusters"][0]["cluster"]}],
            "users": [{"name": name, "user": doc["users"][0]["user"]}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}


def _dead_entries(name: str, port: int) -> dict:
    return {"clusters": [{"name": name, "cluster": {"server": f"https://127.0.0.1:{port}",
                                                    "insecure-skip-tls-verify": True}}],
            "users": [{"name": name, "user": {"token": "not-a-real-token"}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}


def _write_kubeconfig(path: str, *parts: dict) -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
           "current-context": parts[0]["contexts"][0]["name"]}
    for p in parts:
        for k in ("clusters", "users", "contexts"):
            doc[k] += p[k]
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f)
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two real sandboxes (deadlocked; healthy, its risky webhook replaced by a safe one) and two dead contexts,
    merged from two kubeconfig files.

    Cost: two `sandbox.up`s one after the other, each booting kube-apiserver twice (first boot, then the restart
    into its scenario), once for the module; fleet_json's audit then gives the slow context its --timeout 3. Each
    cluster is a real apiserver, so that the fleet's findings can be compared with a single audit's."""
    from breakglass import sandbox
    from breakglass.access import kubeapi
    from tests.real_control_plane import binary_for

    _, binary = binary_for("1.34")
    base = tmp_path_factory.mktemp("fleet")
    started = []
    slow = socket.socket()  # accepts (the kernel completes the handshake) and never says a word
    slow.bind(("127.0.0.1", 0))
    slow.listen(16)
    try:
        dead = sandbox.up(str(base / "deadlocked"), apiserver=binary)
        started.append(dead.dir)
        ok = sandbox.up(str(base / "healthy"), apiserver=binary, scenario="healthy")
        started.append(ok.dir)
        api = kubeapi.connect(ok.apiserver["kubeconfig"], None, 30)
        from breakglass.sandbox.scenarios import KYVERNO_NAME

        status, doc = api.request("DELETE", f"{VWC}/{KYVERNO_NAME}")
        assert status == 200, doc
        status, doc = api.request("POST", VWC, SAFE)
        assert status == 201, doc
        first = _write_kubeconfig(str(base / "clusters.yaml"),
                                  _kubeconfig_entries(dead.apiserver["kubeconfig"], "deadlocked"),
                                  _kubeconfig_entries(ok.apiserver["kubeconfig"], "healthy"))
        second = _write_kubeconfig(str(base / "more.yaml"), _dead_entries("unreachable", _closed_port()),
                                   _dead_entries("slow", slow.getsockname()[1]))
        yield {"files": [first, second], "KUBECONFIG": f"{first}:{second}", "base": base}
    finally:
        slow.close()
        for d in started:
            sandbox.down(d)


def _audit(fleet, *args, env=None):
    e = {"KUBECONFIG": fleet["KUBECONFIG"], "BREAKGLASS_STATE_DIR": str(fleet["base"] / "state"), **(env or {})}
    return run_cli("audit", *args, env=e, timeout=300)


def _fleet_json(fleet, *args) -> dict:
    p = _audit(fleet, "--all-contexts", "--timeout", "3", "-o", "json", *args)
    doc = json.loads(p.stdout)
    assert doc["exitCode"] == p.returncode
    return doc


@pytest.fixture(scope="module")
def fleet_json(fleet):
    return _fleet_json(fleet)


def _by_name(doc: dict) -> dict:
    return {c["name"]: c for c in doc["result"]["clusters"]}


def test_all_contexts_of_a_merged_kubeconfig_each_reported_on_its_own(fleet, fleet_json):
    """KUBECONFIG's two files merged as kubectl merges them: four clusters, each with its own verdict; the exit
    code is 3 (one needs action) although two could not be reached."""
    doc = fleet_json
    assert doc["apiVersion"] == "breakglass/v1alpha1" and doc["kind"] == "FleetAuditReport"
    assert doc["exitCode"] == 3
    assert [c["name"] for c in doc["result"]["clusters"]] == ["deadlocked", "healthy", "unreachable", "slow"]
    c = _by_name(doc)
    dead = c["deadlocked"]
    assert dead["status"] == "audited" and dead["version"].startswith("v1.34.")
    assert dead["target_version"] == "1.35"  # its minor plus one, read from /version
    crit = [f for f in dead["report"]["findings"] if f["severity"] == "critical"]
    assert any(f["webhook"] == KYVERNO_WEBHOOK and f["rule"] == "bootstrap-intercept" for f in crit)
    fix = next(f["fix"] for f in crit if f["webhook"] == KYVERNO_WEBHOOK)
    assert fix["match_conditions"] and "kubectl patch validatingwebhookconfiguration" in fix["command"]
    healthy = c["healthy"]
    assert healthy["status"] == "audited" and healthy["error"] is None
    assert [(f["severity"], f["rule"]) for f in healthy["report"]["findings"]] == [("info", "fails-open")]
    assert healthy["audited"] == ["ValidatingWebhookConfiguration/widgets-policy/widgets.example.com"]
    assert c["unreachable"]["status"] == "unreachable" and c["unreachable"]["report"] is None
    assert "connection refused" in c["unreachable"]["error"]
    assert c["slow"]["status"] == "timeout" and c["slow"]["report"] is None
    # the outcome names the fix, aimed at its cluster, and the clusters not audited
    nxt = doc["outcome"]["next"]
    assert any(n.startswith("kubectl --context deadlocked patch validatingwebhookconfiguration") for n in nxt)
    assert any(n.startswith("unreachable: unreachable:") for n in nxt)


def test_each_cluster_has_the_verdicts_of_its_own_audit(fleet, fleet_json):
    """The same verdicts everywhere: a cluster's findings in the fleet report are exactly what `breakglass audit
    --kubeconfig K --context C --target-version T -o json` reports for it alone."""
    for name, c in _by_name(fleet_json).items():
        if c["status"] != "audited":
            continue
        p = _audit(fleet, "--kubeconfig", c["kubeconfig"], "--context", c["context"], "--target-version",
                   c["target_version"], "-o", "json")
        single = json.loads(p.stdout)
        assert single["kind"] == "AuditReport", name
        assert single["result"] == c["report"], name
        assert p.returncode == (3 if name == "deadlocked" else 0)


def test_text_is_one_line_per_cluster_and_the_findings_as_audit_prints_them_on_request(fleet):
    p = _audit(fleet, "--all-contexts", "--timeout", "3", env={"COLUMNS": "80"})
    assert p.returncode == 3, p.stderr.decode()
    out = p.stdout.decode()
    assert "fleet audit of 4 cluster(s)" in out and "== deadlocked" not in out
    lines = out.splitlines()
    head = lines.index(next(ln for ln in lines if ln.startswith("CLUSTER")))
    rows = {ln.split()[0]: ln for ln in lines[head + 1:head + 5]}  # one line each, at 80 columns
    assert set(rows) == {"deadlocked", "healthy", "unreachable", "slow"} and all(len(r) <= 80 for r in rows.values())
    assert re.search(r"v1\.34\.\d+ → 1\.35\s+NEEDS ACTION: \d+ critical", rows["deadlocked"]), rows
    assert rows["healthy"].endswith("ok: 1 info") and "unreachable: " in rows["unreachable"]
    assert "timeout: " in rows["slow"] and "add -v" in out
    p = _audit(fleet, "--all-contexts", "--timeout", "3", "-v", env={"COLUMNS": "200"})
    out = p.stdout.decode()
    dead_part = out.split("== deadlocked")[1].split("== healthy")[0]
    single = _audit(fleet, "--kubeconfig", fleet["files"][0], "--context", "deadlocked", "--target-version", "1.35",
                    env={"COLUMNS": "200"}).stdout.decode()
    assert single.strip() in dead_part  # word for word, the fix included
    assert "fix: add these matchConditions" in dead_part
    healthy_part = out.split("== healthy")[1].split("== unreachable")[0]
    assert "1 info" in healthy_part and "CRITICAL" not in healthy_part
    assert "breakglass: error: unreachable: unreachable: apiserver" in out
    assert "breakglass: error: slow: timeout:" in out


def test_junit_one_suite_per_cluster_failures_and_errors(fleet):
    p = _audit(fleet, "--all-contexts", "--timeout", "3", "-o", "junit")
    assert p.returncode == 3, p.stderr.decode()
    root = ET.fromstring(p.stdout)
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["deadlocked", "healthy", "unreachable", "slow"]
    dead = suites["deadlocked"]
    case = next(c for c in dead.findall("testcase") if c.get("name").endswith("/" + KYVERNO_WEBHOOK))
    fails = case.findall("failure")
    assert any(f.get("type") == "bootstrap-intercept" for f in fails)
    assert "matchConditions" in fails[0].text and "kubectl patch" in fails[0].text
    assert int(dead.get("failures")) >= 1 and dead.get("errors") == "0"
    healthy = suites["healthy"]
    assert [c.get("name") for c in healthy.findall("testcase")] == [
        "ValidatingWebhookConfiguration/widgets-policy/widgets.example.com"]
    assert healthy.get("tests") == "1" and healthy.get("failures") == "0" and not healthy.findall(".//failure")
    for name, reason in (("unreachable", "unreachable"), ("slow", "timeout")):
        err = suites[name].find("testcase/error")
        assert err is not None and err.get("type") == reason and suites[name].get("errors") == "1"
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites.values())


def test_sarif_2_1_0_one_run_results_with_rule_level_and_location(fleet):
    p = _audit(fleet, "--all-contexts", "--timeout", "3", "-o", "sarif")
    assert p.returncode == 3, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert doc["version"] == "2.1.0" and "sarif" in doc["$schema"]
    assert len(doc["runs"]) == 1
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "breakglass"
    rule_ids = {r["id"] for r in driver["rules"]}
    assert run["results"]
    for r in run["results"]:  # SARIF 2.1.0: every result has a message; ruleId names a rule of the driver
        assert r["message"]["text"] and r["ruleId"] in rule_ids
        assert r["level"] in ("none", "note", "warning", "error")
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    kyv = [r for r in run["results"] if r["ruleId"] == "bootstrap-intercept"
           and r["properties"]["webhook"] == KYVERNO_WEBHOOK]
    assert kyv and kyv[0]["level"] == "error"
    names = {(loc["kind"], loc["name"]) for loc in kyv[0]["locations"][0]["logicalLocations"]}
    assert ("cluster", "deadlocked") in names and ("webhook", KYVERNO_WEBHOOK) in names
    assert any(k == "ValidatingWebhookConfiguration" for k, _ in names)
    healthy = [r for r in run["results"] if r["properties"]["cluster"] == "healthy"]
    assert [r["level"] for r in healthy] == ["note"]
    inv = run["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert {n["descriptor"]["id"] for n in inv["toolExecutionNotifications"]} == {"unreachable", "timeout"}


def test_exit_5_when_a_cluster_is_not_audited_and_none_needs_action(fleet):
    """--context healthy,unreachable (comma-separated), from two --kubeconfig files: the healthy one audited
    clean, the other one's error line; exit 5, not 0."""
    p = _audit(fleet, "--kubeconfig", fleet["files"][0], "--kubeconfig", fleet["files"][1],
               "--context", "healthy,unreachable", "-o", "json")
    assert p.returncode == 5, p.stderr.decode()
    c = _by_name(json.loads(p.stdout))
    assert set(c) == {"healthy", "unreachable"}
    assert c["healthy"]["status"] == "audited" and c["unreachable"]["status"] == "unreachable"
    p = _audit(fleet, "--context", "healthy", "--context", "deadlocked", "--target-version", "1.33", "-o", "json")
    c = _by_name(json.loads(p.stdout))
    assert p.returncode == 3 and {x["target_version"] for x in c.values()} == {"1.33"}  # fixed for all


def test_a_context_in_no_kubeconfig_is_bad_input(fleet):
    p = _audit(fleet, "--context", "healthy,no-such-context")
    assert p.returncode == 2
    assert p.stderr.decode().strip().splitlines()[-1] == (
        f"breakglass: error: context no-such-context is in no kubeconfig read ({fleet['KUBECONFIG']})")
    assert p.stdout == b""


def test_progress_bar_on_a_terminal_only(fleet):
    """stderr a terminal: a bar counting the clusters; stderr a pipe: nothing but what went wrong."""
    args = [sys.executable, "-m", "breakglass", "audit", "--kubeconfig", fleet["files"][1], "--all-contexts",
            "--timeout", "2"]
    env = {**os.environ, "KUBECONFIG": ""}
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    proc.stdout.read()
    assert proc.wait(60) == 5
    os.close(master)
    assert b"auditing 2/2 cluster(s)" in seen and b"auditing 0/2" in seen
    piped = subprocess.run(args, capture_output=True, cwd=ROOT, env=env, timeout=60)
    assert piped.returncode == 5 and b"auditing" not in piped.stderr
