"""The wizard: flows through the prompts interface without a terminal, and once in a real pty."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from breakglass import sandbox

from breakglass.flows import planner, wizard
from breakglass.core.errors import Declined, Interrupted
from breakglass.present.prompts import ScriptedPrompter
from tests.real_control_plane import builds_settled, later_build
from tests.conftest import ROOT

LOG = os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")
CFG = "kyverno-resource-validating-webhook-cfg"


@pytest.fixture
def state(tmp_path):
    yield str(tmp_path / "state")
    sandbox.down(sandbox.default_dir(str(tmp_path / "state")))


def _etcd_values(state):
    import pyetcd
    sb = sandbox.load(sandbox.default_dir(state))
    host, port = sb.endpoint.split("://")[1].split(":")
    c = pyetcd.client(host, int(port))
    try:
        return {m.key: v for v, m in c.get_all()}
    finally:
        c.close()


def test_full_flow_on_the_sandbox_through_the_prompts_interface(state):
    sandbox.up(sandbox.default_dir(state))
    before = _etcd_values(state)
    # the sandbox's webhook backend is not running: reverting takes the typed word after the risk is stated
    p = ScriptedPrompter([LOG, "sandbox", "etcd", CFG, True, wizard.OVERRIDE_WORD])
    # issue 33: the etcd-only sandbox has no apiserver to see ready, and the revert re-armed a webhook whose backend
    # is down (the typed word): not verified, exit 8
    assert wizard.run(p, state) == 8
    text = "\n".join(p.transcript)
    assert "No apiserver address to check /readyz after the change" in text
    assert "re-armed while its backend is not ready (overridden)" in text
    assert "BOOTSTRAP DEADLOCK" in text
    assert "Not safe to revert yet" in text
    # unavailable options are shown greyed out, with the reason
    assert "kubeapi: Patch or delete the configuration through the apiserver." in text and "(no apiserver access given)" in text
    assert "+++ (deleted)" in text and "revert of run" in text
    assert _etcd_values(state) == before  # deleted, then reverted byte for byte
    assert "[REHEARSAL] " in text  # every message after choosing the sandbox says where it acts
    report = next(line for line in p.transcript if line.startswith("[REHEARSAL] Report for the postmortem: "))
    body = open(report.split(": ", 1)[1]).read()
    assert "## Permanent fix" in body and "breakglass-skip-apiserver-self" in body and "status: **reverted**" in body
    assert "## Findings" in body and "BOOTSTRAP DEADLOCK" in body


def test_a_wrong_confirmation_changes_nothing(state):
    sandbox.up(sandbox.default_dir(state))
    before = _etcd_values(state)
    # a wrong word is asked again; Enter declines and goes back to the ways out; back, then quit, leaves
    p = ScriptedPrompter([LOG, "sandbox", "etcd", "yes", "", "back", "quit"])
    with pytest.raises(Declined, match="declined at the confirmation"):
        wizard.run(p, state)
    assert any(line.startswith("! that is not") for line in p.transcript)
    assert _etcd_values(state) == before


def test_keep_the_change_and_revert_later(state):
    sandbox.up(sandbox.default_dir(state))
    p = ScriptedPrompter([LOG, "sandbox", "etcd", CFG, False])
    assert wizard.run(p, state) == 8  # issue 33: no apiserver was seen ready after the change
    assert p.transcript[-1] == "[REHEARSAL] Not verified: the apiserver was not seen ready after the change (exit 8)."
    assert any(line.startswith("[REHEARSAL] When the webhook is healthy: breakglass revert ") for line in p.transcript)
    assert len(_etcd_values(state)) == 2  # the culprit stays deleted until the revert


def test_ctrl_c_at_a_prompt_is_interrupted_with_a_hint(state):
    class CtrlC(ScriptedPrompter):
        def select(self, message, choices):
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as e:
        wizard.run(CtrlC([LOG]), state)
    assert e.value.hint.startswith("no run of breakglass has a change left to revert"), e.value.hint


def test_ctrl_c_after_a_change_names_the_run_to_revert(state):
    """The second Ctrl-C (the wizard started again over an open run, then stopped) names the run (issue 37 §3)."""
    from breakglass.core import journal

    sandbox.up(sandbox.default_dir(state))
    assert wizard.run(ScriptedPrompter([LOG, "sandbox", "etcd", CFG, False]), state) == 8  # kept, not reverted
    run_id = journal.list_runs(state)[-1].id

    class CtrlC(ScriptedPrompter):
        def select(self, message, choices):
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as e:
        wizard.run(CtrlC([]), state)
    assert f"`breakglass revert {run_id}` undoes it" in e.value.hint, e.value.hint


def test_planner_orders_options_and_explains_missing_access():
    probes = {"etcd": planner.Probe("etcd", True, "ok"), "ssh": planner.Probe("ssh", False, "ssh cp1: refused")}
    opts = planner.options(probes)
    assert [o.method for o in opts] == ["kubeapi", "talos", "kubeadm", "k3s", "rke2", "etcd"]
    assert [o.available for o in opts] == [False, False, False, False, False, True]
    assert opts[2].reason == "ssh cp1: refused" and opts[0].reason == "no apiserver access given"
    assert "security gap" in opts[1].tradeoff


def test_waiting_for_readyz_shows_progress_and_the_failing_hooks():
    from tests.apiserver_standin import serve_readyz

    with serve_readyz([500], "start-service-ip-repair-controllers") as url:
        p = ScriptedPrompter([])
        wizard._wait_ready(p, planner.Access(readyz_urls=[url]), "after the change")
    ticks = [line for line in p.transcript if line.startswith("~ ")]
    assert "start-service-ip-repair-controllers" in ticks[0] and ticks[-1].endswith("s left: waiting for /readyz: ready")
    assert re.match(r"~ \d+s left: ", ticks[0])  # the time left, on every tick
    assert p.transcript[-1] == f"  {url}/readyz?verbose: ready"


@later_build  # it counts the built apiservers the wizard lists: after the background build
def test_the_real_wizard_in_a_pseudo_terminal(state):
    """questionary on a real pty: diagnosis, the options, the typed confirmation, the revert.

    Cost: a few seconds of prompts once the background build has ended; it waits for that build first
    (builds_settled: the wizard lists every built kube-apiserver, and the test counts what the wizard sees), so on
    a fresh machine its time is mostly the build's. It runs last for that reason (later_build)."""
    builds_settled()
    import pexpect
    env = {**os.environ, "BREAKGLASS_STATE_DIR": state, "TERM": "xterm", "COLUMNS": "200", "LINES": "50"}
    child = pexpect.spawn(sys.executable, ["-m", "breakglass", "wizard"], cwd=ROOT, env=env, timeout=60,
                          encoding="utf-8", dimensions=(50, 200))
    try:
        child.expect("Logs to diagnose")
        child.sendline(LOG)
        child.expect("How can you reach the cluster")
        child.send("\x1b[B" * len(wizard.WAYS_IN) + "\r")  # the sandbox is the last choice: never by accident
        child.expect("Rehearse on")
        child.send("\x1b[B" * len(sandbox.built_apiservers()) + "\r")  # etcd only: the example log's sandbox
        child.expect("Which way out")
        child.send("\r")  # the first available option: etcd (the others are greyed out)
        child.expect(f"Type {CFG} to apply")
        child.sendline(CFG)
        child.expect("Revert the temporary change now")
        # issue 37: y, then Enter, as people type it: the Enter belongs to this question, not to the next one
        child.send("y\r")
        child.expect(f"Type {wizard.OVERRIDE_WORD}")  # the etcd-only sandbox's webhook backend is not running
        child.sendline(wizard.OVERRIDE_WORD)
        child.expect("Report for the postmortem: (\\S+)/report.md")
        report = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 8, child.before  # issue 33: etcd only: no /readyz seen; re-armed over a down backend
    assert "status: **reverted**" in open(os.path.join(report, "report.md")).read()


# -- scripted recovery ----------------------------------------------------------------------------

def _cli_state(state, *args):
    from tests.conftest import run_cli
    return run_cli(*args, env={"BREAKGLASS_STATE_DIR": state})


def test_plan_file_flags_win_and_dry_run(state, tmp_path):
    import json
    sb = sandbox.up(sandbox.default_dir(state))
    plan = tmp_path / "plan.yaml"
    plan.write_text(open(os.path.join(ROOT, "examples", "plans", "etcd.yaml")).read())
    # the example plan names an endpoint; the command line's wins over it (its certificates come from the command
    # line only: a plan never names them)
    p = _cli_state(state, "recover", "--plan", str(plan), "--etcd-endpoints", sb.endpoint, "--etcd-cacert", "",
                   "--etcd-cert", "", "--etcd-key", "", "--dry-run", "-o", "json")
    assert p.returncode == 0, p.stderr
    plan.write_text(plan.read_text() + "etcd_cacert: /etc/kubernetes/pki/etcd/ca.crt\n")
    p = _cli_state(state, "recover", "--plan", str(plan), "--etcd-endpoints", sb.endpoint, "--dry-run")
    assert p.returncode == 2 and b"etcd_cacert is not set from a plan" in p.stderr  # issue 34: trust is not planned
    plan.write_text(f"method: etcd\nwebhook_config: [validating/{CFG}]\netcd_endpoints: http://127.0.0.1:1\n")
    p = _cli_state(state, "recover", "--plan", str(plan), "--etcd-endpoints", sb.endpoint, "--dry-run", "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"]["steps"][0]["target"].endswith(CFG)
    p = _cli_state(state, "recover", "--plan", str(plan), "--etcd-endpoints", sb.endpoint)
    assert p.returncode == 2 and b"without --yes" in p.stderr  # never hangs on a prompt without a terminal


@pytest.mark.parametrize("content,match", [("method: teleport\n", "unknown method"),
                                           ("frobnicate: 1\n", "unknown option"),
                                           ("output: json\n", "not set from a plan"),
                                           ("- a list\n", "a plan is a mapping"),
                                           ("", "a plan is a mapping"),
                                           ("method: [etcd\n", "invalid YAML"),
                                           (b"\x96\xff" * 5000, "not UTF-8 text"),
                                           (os.urandom(4000) + b"\x00", "binary data")])
def test_bad_plans(state, tmp_path, content, match):
    plan = tmp_path / "plan.yaml"
    plan.write_bytes(content if isinstance(content, bytes) else content.encode())
    p = _cli_state(state, "recover", "--plan", str(plan), "--dry-run")
    assert p.returncode == 2 and match in p.stderr.decode()
    assert len(p.stderr.decode().strip().splitlines()) == 1


def test_auto_takes_the_first_viable_option(state, tmp_path):
    import json
    sb = sandbox.up(sandbox.default_dir(state))
    diag = tmp_path / "diag.json"
    diag.write_bytes(_cli_state(state, "diagnose", LOG, "-o", "json").stdout)
    p = _cli_state(state, "recover", "--auto", "--diagnosis", str(diag), "--etcd-endpoints", sb.endpoint,
                   "--yes", "-o", "json")
    assert p.returncode == 8, p.stderr  # issue 33: the etcd-only sandbox has no apiserver to see ready
    assert json.loads(p.stdout)["result"]["method"] == "etcd"
    p = _cli_state(state, "recover", "--auto", "--diagnosis", str(diag), "--etcd-endpoints", "http://127.0.0.1:1",
                   "--timeout", "1", "--yes")
    assert p.returncode == 5 and b"no way out is reachable" in p.stderr


@pytest.mark.parametrize("name", ["etcd.yaml", "talos.yaml", "kubeadm.yaml", "kubeapi.yaml"])
def test_example_plans_load(name):
    from breakglass.flows import scripted
    from breakglass.cli.recover import recover
    import inspect
    allowed = set(inspect.signature(recover).parameters) - {"plan", "auto"}
    plan = scripted.load_plan(os.path.join(ROOT, "examples", "plans", name), allowed)
    assert plan["method"] == name.split(".")[0]


def test_a_leaking_cluster_gets_the_leak_report_not_a_recovery(state):
    """Fail open only: the wizard lists what got in (the example audit log) and stops unless asked to go on."""
    log = os.path.join(ROOT, "examples", "logs", "gke-gatekeeper-fail-open.jsonl")
    audit_log = os.path.join(ROOT, "examples", "audit", "gke-gatekeeper-rollout.audit.log")
    p = ScriptedPrompter([log, audit_log, False])
    assert wizard.run(p, state) == 0
    text = "\n".join(p.transcript)
    assert "LEAKING" in text and "33 request(s) admitted while a webhook failed open" in text
    assert "kubectl get rolebindings.rbac.authorization.k8s.io debug-admin -n payments -o yaml" in text
    assert not any(line.startswith("? Which way out") for line in p.transcript)  # no recovery was offered
    assert p.answers == []


def test_after_a_k3s_change_the_wizard_waits_through_the_nodes_own_kubeconfig(monkeypatch):
    # k3s and RKE2 answer an anonymous /readyz with 401: the wizard asks each node's own kubectl instead
    from breakglass.flows import planner, wizard
    from breakglass.access import readyz

    monkeypatch.setattr(readyz.time, "sleep", lambda s: None)
    asked = []

    class K3sLike:
        local = False
        nodes = {"cp1": None, "cp2": None}

        def readiness_probes(self):  # as K3sFlags gives them
            return [lambda h=h: self.node_readiness(h) for h in self.nodes]

        def node_readiness(self, host):
            asked.append(host)
            return readyz.Readiness(f"{host} (the node's /etc/rancher/k3s/k3s.yaml)", True, len(asked) > 2, 200,
                                    [] if len(asked) > 2 else ["poststarthook/start-kubernetes-service-cidr-controller"])

    def anonymous(*_a, **_k):
        raise AssertionError("an anonymous /readyz probe was made")

    monkeypatch.setattr(readyz, "probe", anonymous)
    p = ScriptedPrompter([])
    access = planner.Access()
    access.readyz_urls = ["cp1", "cp2"]
    wizard._wait_ready(p, access, "after the change", K3sLike())
    said = "\n".join(p.transcript)
    assert asked[:2] == ["cp1", "cp2"] and len(asked) == 4
    assert "cp1 (the node's /etc/rancher/k3s/k3s.yaml): ready" in said and "NOT READY" not in said


def test_after_reverting_a_k3s_run_the_wizard_asks_the_nodes_kubectl(tmp_path):
    from breakglass.core import journal
    from breakglass.flows import planner, wizard
    from tests.conftest import run_cli

    cfg = tmp_path / "config.yaml"
    cfg.write_text("token: x\n")
    state = str(tmp_path / "state")
    assert run_cli("recover", "--method", "rke2", "--config-file", str(cfg), "--yes",
                   env={"BREAKGLASS_STATE_DIR": state}).returncode == 8  # edited, not applied
    run_id = journal.list_runs(state)[-1].id
    access = planner.Access()
    assert wizard._node_prober(run_id, state, access) is None  # no SSH: the URLs the access names
    access.ssh_nodes = {"cp1": object()}
    prober = wizard._node_prober(run_id, state, access)
    assert prober.distro.name == "rke2" and list(prober.nodes) == ["cp1"] and not prober.local


@pytest.mark.parametrize("distro, service", [("k3s", "k3s"), ("rke2", "rke2-server")])
def test_a_k3s_or_rke2_config_file_here_is_a_way_in(tmp_path, distro, service):
    """On the server node (or a config managed as code): the wizard offers k3s and RKE2 through a file that does
    not tell them apart, writes the drop-in beside it with the flag, restarts nothing and says so: edited, not
    applied, with the commands, exit 8 when not applied yet; the scripted revert removes the drop-in and says the
    backend it re-armed was not checked."""
    from breakglass.core import journal
    from tests.conftest import run_cli

    cfg = tmp_path / "config.yaml"
    cfg.write_text('write-kubeconfig-mode: "0644"\nkube-apiserver-arg:\n  - audit-log-maxage=30\n')
    before = cfg.read_bytes()
    state = str(tmp_path / "state")
    p = ScriptedPrompter([LOG, "k3s-file", str(cfg), distro, "ValidatingAdmissionWebhook", False])
    assert wizard.run(p, state) == 8  # edited, not applied: not applied yet
    text = "\n".join(p.transcript)
    assert f"{distro} (in a config.yaml here (no restart))" in text
    assert "nothing in it tells k3s from RKE2" in text and "both are offered" in text
    costs = {o.method: o.tradeoff for o in planner.options(planner.Access(k3s_files=[str(cfg)]).local_probes())}
    assert "nothing restarts" in costs[distro] and "restarts." not in costs[distro].replace("nothing restarts", "")
    dropin = tmp_path / "config.yaml.d" / "99-breakglass.yaml"
    assert "disable-admission-plugins=ValidatingAdmissionWebhook" in dropin.read_text()
    assert oct(dropin.stat().st_mode & 0o777) == "0o600" and cfg.read_bytes() == before
    assert f"systemctl restart {service}" in text  # nothing restarted: the engineer is told what to run
    assert "Edited, not applied" in text and dropin.exists()
    run = journal.list_runs(state)[-1]
    # the scripted revert says before and after that the backend it re-arms was not read, and how to check it;
    # issue 33: with nothing to read the cluster through (no kubeconfig here) it is a blind re-arm, refused (exit 4)
    # unless --re-arm, and then not verified (exit 8)
    env = {"BREAKGLASS_STATE_DIR": state, "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    refused = run_cli("revert", run.id, "--yes", "-o", "json", env=env)
    assert refused.returncode == 4 and b"unseen" in refused.stderr, refused.stderr
    assert dropin.exists()
    done = run_cli("revert", run.id, "--yes", "--re-arm", "-o", "json", env=env)
    assert done.returncode == 8, done.stderr
    doc = json.loads(done.stdout)
    assert doc["result"]["guard"]["state"] == "unchecked" and doc["result"]["guard"]["rearms"] is True
    assert doc["result"]["guard"]["blind"] is True  # issue 33
    assert any("backends not checked" in line and "kyverno/kyverno-svc" in line
               for line in doc["outcome"]["notVerified"]), doc["outcome"]
    # issue 33 (one backend check everywhere): the check is the Service and its EndpointSlices
    assert doc["outcome"]["next"] == ["kubectl -n kyverno get service kyverno-svc -o wide && kubectl -n kyverno get "
                                      "endpointslices -l kubernetes.io/service-name=kyverno-svc -o wide"]
    assert not dropin.exists() and cfg.read_bytes() == before


DEGRADED = ('W0224 15:32:50.984784       1 dispatcher.go:217] Failed calling webhook, failing closed '
            'validate.kyverno.svc-fail: failed calling webhook "validate.kyverno.svc-fail": failed to call webhook: '
            'Post "https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s": dial tcp 10.96.12.7:443: connect: '
            'connection refused\n')


@pytest.mark.parametrize("go_on", [False, True])
def test_a_degraded_cluster_is_sent_to_its_backend_first_with_the_ways_out_one_answer_away(state, tmp_path, go_on):
    log = tmp_path / "apiserver.log"
    log.write_text(DEGRADED)
    p = ScriptedPrompter([str(log), go_on] + (["quit"] if go_on else []))
    if go_on:
        with pytest.raises(Declined):
            wizard.run(p, state)
    else:
        assert wizard.run(p, state) == 0
    text = "\n".join(p.transcript)
    assert "Fix the backend first" in text and "kubectl -n kyverno get endpointslices" in text
    assert ("? How can you reach the cluster?" in text) is go_on


def test_a_url_webhooks_backend_is_named_by_its_url_never_by_placeholders(state, tmp_path):
    """The backend hint was `kubectl -n NAMESPACE get endpointslices … SERVICE` for a url: webhook, which has no
    Service: now its URL's server is named, a Service's pods and endpoints otherwise, and with nothing known the
    command that lists every webhook's backend."""
    log = tmp_path / "apiserver.log"
    log.write_text(DEGRADED.replace("kyverno-svc.kyverno.svc:443", "10.0.7.9:8443").replace(
        "dial tcp 10.96.12.7:443", "dial tcp 10.0.7.9:8443"))
    p = ScriptedPrompter([str(log), False])
    assert wizard.run(p, state) == 0
    text = "\n".join(p.transcript)
    assert "Fix the backend first" in text and "the server at https://10.0.7.9:8443/validate/fail" in text, text
    assert "NAMESPACE" not in text and "SERVICE" not in text, text
    assert wizard._backend_commands([], []) == [
        "  $ breakglass webhooks   # every webhook with its backend (add your way in: --kubeconfig, --etcd-endpoints)"]
    assert wizard._backend_commands(["kyverno/kyverno-svc"], []) == [
        "  $ kubectl -n kyverno get pods; kubectl -n kyverno get endpointslices "
        "-l kubernetes.io/service-name=kyverno-svc"]


def test_the_wizards_lasting_fix_is_kyvernos_own_form_for_kyvernos_configuration_and_a_patch_otherwise():
    """Issue 35 §4: the wizard gives the fix where the owner keeps it (a patch of Kyverno's configuration is undone
    within a second); an unowned configuration gets the direct patch."""
    from tests.test_codec import KYVERNO

    name = KYVERNO["metadata"]["name"]
    hook = KYVERNO["webhooks"][0]["name"]
    targets = [{"kind": "validating", "configuration": name, "webhook": hook}]
    owned = wizard._permanent_fix(targets, {name: KYVERNO})
    assert "Kyverno would undo it" in owned and "kyverno-config" in owned and "configmap" in owned.lower(), owned
    assert "kubectl patch validatingwebhookconfiguration" not in owned
    plain = json.loads(json.dumps(KYVERNO))
    plain["metadata"].pop("labels", None)
    plain["metadata"].pop("ownerReferences", None)
    unowned = wizard._permanent_fix(targets, {name: plain})
    assert "strategic-merge patch" in unowned and f"kubectl patch validatingwebhookconfiguration {name}" in unowned


def test_a_stuck_start_no_line_ties_to_a_webhook_offers_no_way_out_unless_asked(state, tmp_path):
    """issue 36: the verdict `stuck` (no webhook named) says what to check; declining leaves with exit 3, nothing
    changed and no way out offered."""
    log = tmp_path / "stuck.log"
    log.write_text(
        'F0122 06:54:22.457615      10 hooks.go:203] PostStartHook "scheduling/bootstrap-system-priority-classes" '
        'failed: unable to add default system priority classes: timed out waiting for the condition\n')
    p = ScriptedPrompter([str(log), False])
    assert wizard.run(p, state) == 3
    text = "\n".join(p.transcript)
    assert "no line ties it to a webhook" in text and "no webhook way out is proposed" in text
    assert "Which way out?" not in text and "How can you reach the cluster?" not in text


def test_which_configuration_has_a_way_back(state, tmp_path):
    """No culprit in the log: the configuration is chosen from what etcd holds, and that list has a way back to
    the ways out (it was a dead end only Ctrl-C left, issue 37 §3); nothing is changed."""
    sandbox.up(sandbox.default_dir(state))
    before = _etcd_values(state)
    healthy = tmp_path / "healthy.log"
    healthy.write_text("I0501 10:00:00.000000       1 server.go:100] \"Serving securely\" address=\"[::]:6443\"\n")
    p = ScriptedPrompter([str(healthy), "sandbox", "etcd", "back", "back", "quit"])
    with pytest.raises(Declined):
        wizard.run(p, state)
    said = "\n".join(p.transcript)
    listed = said.split("Which configuration?", 1)[0].rsplit("Which way out?", 1)[1]  # choices come first
    assert "  - back: another way out" in listed, said
    assert said.count("Which way out") == 2  # back at the ways out after it
    assert _etcd_values(state) == before


def test_an_etcd_endpoint_and_an_apiserver_port_are_checked_where_they_are_typed(state):
    """A typo in the etcd endpoint is asked again before the CA, cert and key are; an apiserver to watch where
    nothing listens is said at once (not after a 5-minute `not answering` wait), and taken when typed again
    (issue 37 §4)."""
    import socket

    sb = sandbox.up(sandbox.default_dir(state))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    p = ScriptedPrompter([LOG, "etcd", "htps//127.0.0.1:50389", sb.endpoint, "", "", "",
                          f"https://127.0.0.1:{dead}", "", "back", "quit"])
    with pytest.raises(Declined):
        wizard.run(p, state)
    said = "\n".join(p.transcript)
    typo = said.index("! not an etcd endpoint: 'htps//127.0.0.1:50389'")
    assert typo < said.index("etcd CA file"), said
    assert f"! nothing listens at 127.0.0.1:{dead} (connection refused)" in said, said
    again = ScriptedPrompter([LOG, "etcd", sb.endpoint, "", "", "", f"https://127.0.0.1:{dead}",
                              f"https://127.0.0.1:{dead}", "back", "quit"])
    with pytest.raises(Declined):
        wizard.run(again, state)
    assert "\n".join(again.transcript).count("! nothing listens") == 1  # typed again: taken


def test_the_manual_commands_carry_what_was_typed_and_quote_what_came_from_a_log():
    """The etcdctl commands shown by hand name the endpoints and TLS files typed for the way in (they left them
    out, issue 37 §9); a name read from a log is quoted for the shell."""
    from breakglass.access.etcd import EtcdSettings
    from breakglass.flows import recovery

    access = planner.Access(etcd=recovery.EtcdTarget(EtcdSettings(("https://10.0.0.2:2379",), "/pki/ca.crt",
                                                                  "/pki/c.crt", "/pki/c.key")))
    text = wizard._manual([{"configuration": "x;rm -rf /", "etcd_key": "/registry/validatingwebhookconfigurations/x;rm"}],
                          access)
    etcd = next(line for line in text.splitlines() if "etcdctl" in line)
    assert ("etcdctl --endpoints=https://10.0.0.2:2379 --cacert=/pki/ca.crt --cert=/pki/c.crt --key=/pki/c.key get "
            "'/registry/validatingwebhookconfigurations/x;rm'") in etcd, etcd
    assert "'x;rm -rf /'" in text


def test_a_restart_gap_while_planning_keeps_the_choices_and_says_why(state):
    """The plan is retried through a restart gap: the configuration and the change chosen are kept, and the
    engineer is told why nothing is asked again (they were asked again with the choice reset, issue 37 §3)."""
    from breakglass.access.etcd import EtcdSettings
    from breakglass.flows import recovery

    sb = sandbox.up(sandbox.default_dir(state))
    access = planner.Access(etcd=recovery.EtcdTarget(EtcdSettings((sb.endpoint,))))
    answered: dict = {}
    first = ScriptedPrompter([f"validating/{CFG}"])
    wizard._plan(first, "etcd", "etcd", access, [], [], wizard.Typed(), None, answered)
    again = ScriptedPrompter([])  # asks nothing: a question would fail here
    _remedy, steps, word, _refs = wizard._plan(again, "etcd", "etcd", access, [], [], wizard.Typed(), None, answered)
    assert word == CFG and steps
    assert any("between restarts: the same configuration" in line for line in again.transcript), again.transcript
