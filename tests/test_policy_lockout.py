"""Issue 47: the lockout with no webhook to call (and §5: the same with a MutatingAdmissionPolicy, on 1.36). A fail-closed ValidatingAdmissionPolicy and binding (the sandbox's
``policy-deadlock`` scenario) refuse the default ServiceCIDR a 1.34 apiserver must create after an upgrade from 1.32.
Real kube-apiserver and etcd: the apiserver's own log names no one, its audit log names the policy; the etcd way out
lets it start; the revert is refused while the apiserver says the binding would refuse its writes again, and goes
through once the audit's fix is on the policy, which then holds on a restart that must create the ServiceCIDR again.
"""

from __future__ import annotations

import json
import os
import signal

from breakglass.sandbox import controlplane
from tests.real_control_plane import binary_for, later_build, real_sandbox  # noqa: F401 - the fixture
from tests.real_engines import wait_for

HOOK = "poststarthook/start-kubernetes-service-cidr-controller"
BINDING_KEY = "/registry/validatingadmissionpolicybindings/require-owner-label"
POLICY = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/require-owner-label"


def _json(p) -> dict:
    assert p.stdout, p.stderr.decode()
    return json.loads(p.stdout)["result"]


def test_a_fail_closed_policy_locks_the_upgrade_and_the_revert_asks_the_apiserver_first(real_sandbox, tmp_path):
    """Stuck, diagnosed from the apiserver's lines, recovered through etcd, the revert refused until the policy is
    fixed, and the fix proven on a restart.

    Cost: one sandbox (kube-apiserver booted once, restarted by the kubelet stand-in into the outage), two of
    1.34's 60 s exits in the restart loop (the way out must land in it), the recovery's wait for /readyz, two policy trials through the apiserver (each loads a copy and a marker policy),
    and one more restart of the apiserver after the fix: each waited for on the apiserver's own readiness."""
    _, binary = binary_for("1.34")
    sb = real_sandbox(binary, "policy-deadlock")
    sb.wait(False, failing=HOOK)
    # 1.33+: a post-start hook unfinished after 60 s kills the apiserver; its kubelet starts it again, and again
    wait_for("the apiserver's restart loop", lambda: sb.kubelet().get("restarts", 0) >= 2, 240)
    # the apiserver's own log: a policy's refusal leaves no line there; stuck, and it says where to look
    alone = sb.cli("diagnose", sb.api["log"], "-o", "json")
    assert alone.returncode == 3, alone.stderr.decode()
    verdict = _json(alone)["verdict"]
    assert verdict["state"] == "stuck" and "audit log" in verdict["explanation"], verdict
    # with its audit log: the policy and the binding, the refused write, and no backend to wait for
    both = sb.cli("diagnose", sb.api["log"], sb.api["audit_log"], "-o", "json")
    assert both.returncode == 3, both.stderr.decode()
    result = _json(both)
    lead = result["findings"][0]
    assert (lead["family"], lead["policy"], lead["binding"]) == (
        "policy-rejects-bootstrap", "require-owner-label", "require-owner-label"), lead
    assert any("ServiceCIDR" in b for b in lead["blocked"]), lead
    assert result["verdict"]["state"] == "deadlocked" and "no backend" in result["verdict"]["explanation"]
    ways = {r["method"]: r for r in result["remedies"]}
    assert ways["talos"]["plugins"] == ["ValidatingAdmissionPolicy"]
    assert any(t["etcd_key"] == BINDING_KEY for t in ways["etcd"]["targets"]), ways["etcd"]
    diag = tmp_path / "diag.json"
    diag.write_bytes(both.stdout)

    # the way out lands in etcd whichever start of the loop is running, and is verified on a start that comes up
    rec = sb.cli("recover", "etcd", "--diagnosis", str(diag), "--etcd-endpoints", sb.endpoint, "--apiserver",
                 sb.api["url"], "--yes", "-o", "json", timeout=600)
    assert rec.returncode == 0, rec.stdout.decode() + rec.stderr.decode()
    assert sb.etcd_value(BINDING_KEY) is None
    [check] = _json(rec)["ready_check"]["checks"]
    assert check["ready"] is True and isinstance(check["restarts"], int), check  # restarts seen while waiting
    sb.wait(True)

    # the revert asks the apiserver, as kube-apiserver, whether the binding it puts back refuses its writes: it does
    refused = sb.cli("revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], timeout=300)
    err = refused.stderr.decode()
    assert refused.returncode == 4, err
    assert "refuses the apiserver's own ServiceCIDR" in err and "owner label" in err, err
    assert sb.etcd_value(BINDING_KEY) is None  # nothing put back
    # no trial object is left behind
    names = [p["metadata"]["name"] for p in sb.client().call(
        "GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")[1]["items"]]
    assert names == ["require-owner-label"], names

    # the audit sees the unbound policy and gives the fix; applied as printed, the revert goes through
    audit = sb.cli("audit", "--etcd-endpoints", sb.endpoint, "-o", "json")
    [finding] = [f for f in _json(audit)["findings"] if f["configuration"].endswith("require-owner-label")]
    assert finding["fix"] and "validatingadmissionpolicy require-owner-label" in finding["fix"]["command"]
    import yaml

    patch = yaml.safe_load(finding["fix"]["patch_yaml"])
    status, out = sb.client().call("PATCH", POLICY, patch, "application/strategic-merge-patch+json")
    assert status == 200, out
    ok = sb.cli("revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], "-o", "json", timeout=300)
    assert ok.returncode == 0, ok.stdout.decode() + ok.stderr.decode()
    assert sb.etcd_value(BINDING_KEY) is not None
    assert "let the apiserver's writes through" in ok.stdout.decode()

    # the lasting fix holds where it matters: a restart that must create the default ServiceCIDR again
    removed = controlplane._remove_upgrade_missing(sb.endpoint)
    assert "/registry/servicecidrs/kubernetes" in removed
    before = sb.kubelet().get("restarts", 0)
    os.kill(int(sb.status()["pid"]), signal.SIGTERM)  # the kubelet stand-in starts it again
    wait_for("the apiserver restarted", lambda: sb.kubelet().get("restarts", 0) > before, 120)
    sb.wait(True, seconds=180)
    assert sb.etcd_value("/registry/servicecidrs/kubernetes") is not None


def test_the_same_policy_is_harmless_to_a_132_upgrade_source(real_sandbox):
    """1.32 creates no ServiceCIDR at start: the same policy leaves it ready (the outage is the upgrade's).

    Cost: one sandbox on kube-apiserver 1.32 (booted, then restarted by the kubelet stand-in)."""
    _, binary = binary_for("1.32")
    sb = real_sandbox(binary, "policy-deadlock")
    assert sb.wait(True)["ready"]


@later_build
def test_a_mutating_policy_that_fails_closed_is_named_got_past_and_its_revert_checked(real_sandbox, tmp_path):
    """1.36 serves MutatingAdmissionPolicy: one whose expression fails on an object without an annotation refuses
    the default ServiceCIDR. Its refusal says only `policy 'NAME' with binding 'B'`; diagnose calls it mutating,
    recover removes the binding's key, the revert's trial (a mutating copy and marker) refuses to put it back until
    the audit's fix is on the policy.

    Cost: one sandbox on kube-apiserver 1.36 (booted, restarted into the outage), the recovery's wait for
    /readyz, two trials through the apiserver."""
    _, binary = binary_for("1.36")
    sb = real_sandbox(binary, "mutating-policy-deadlock")
    sb.wait(False, failing=HOOK)
    both = sb.cli("diagnose", sb.api["log"], sb.api["audit_log"], "-o", "json")
    assert both.returncode == 3, both.stderr.decode()
    result = _json(both)
    lead = result["findings"][0]
    assert (lead["policy"], lead["binding"], lead["webhook_type"]) == ("stamp-owner", "stamp-owner", "mutating")
    ways = {r["method"]: r for r in result["remedies"]}
    assert ways["talos"]["plugins"] == ["MutatingAdmissionPolicy"]
    diag = tmp_path / "diag.json"
    diag.write_bytes(both.stdout)
    rec = sb.cli("recover", "etcd", "--diagnosis", str(diag), "--etcd-endpoints", sb.endpoint, "--apiserver",
                 sb.api["url"], "--yes", timeout=600)
    assert rec.returncode == 0, rec.stdout.decode() + rec.stderr.decode()
    key = "/registry/mutatingadmissionpolicybindings/stamp-owner"
    assert sb.etcd_value(key) is None
    refused = sb.cli("revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], timeout=300)
    assert refused.returncode == 4 and "MutatingAdmissionPolicy 'stamp-owner'" in refused.stderr.decode()
    audit = sb.cli("audit", "--etcd-endpoints", sb.endpoint, "-o", "json")
    [finding] = [f for f in _json(audit)["findings"] if f["configuration"].endswith("stamp-owner")]
    import yaml

    status, out = sb.client().call("PATCH", "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/"
                                   "stamp-owner", yaml.safe_load(finding["fix"]["patch_yaml"]),
                                   "application/strategic-merge-patch+json")
    assert status == 200, out
    ok = sb.cli("revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], timeout=300)
    assert ok.returncode == 0, ok.stdout.decode() + ok.stderr.decode()
    assert sb.etcd_value(key) is not None


def test_the_wizard_gets_past_a_policy_lockout_and_says_what_makes_its_revert_safe(tmp_path):
    """The wizard on the policy-deadlock sandbox, both logs given: it names the policy, offers the binding's own
    changes (audit instead of deny, or delete), the apiserver comes up ready, and it says the revert waits for the
    policy's fix (not for a backend, which a policy does not have).

    Cost: one sandbox (kube-apiserver booted, restarted into the outage) and the wizard's wait for /readyz."""
    from breakglass import sandbox
    from breakglass.flows import wizard
    from breakglass.present.prompts import ScriptedPrompter

    _, binary = binary_for("1.34")
    state = str(tmp_path / "state")
    d = sandbox.default_dir(state)
    try:
        sb = sandbox.up(d, apiserver=binary, scenario="policy-deadlock")
        p = ScriptedPrompter([f"{sb.apiserver['log']} {sb.apiserver['audit_log']}", "sandbox", "kubeapi", "ignore",
                              "require-owner-label", False])
        assert wizard.run(p, state) == 0
        text = "\n".join(p.transcript)
        assert "ValidatingAdmissionPolicy 'require-owner-label'" in text
        assert "-  - Deny" in text and "+  - Audit" in text
        assert "the policy must skip the apiserver's own writes" in text and "backend must be healthy" not in text
        assert sandbox.status(d)["apiserver"]["ready"]
    finally:
        sandbox.down(d)


def test_the_plugin_flag_way_and_its_revert_checked_by_the_apiservers_own_writes(real_sandbox, tmp_path):
    """The kubeadm way switches the ValidatingAdmissionPolicy plugin off (the diagnosis names it, not the webhook
    plugins); the apiserver comes up. Its revert turns the plugin back on, and the canary (the apiserver's own
    start-up writes as dry runs, as system:apiserver) finds the policy still refusing them: exit 8, with the
    command that takes the revert back.

    Cost: one sandbox, and two restarts of kube-apiserver by the kubelet stand-in (the flag, its revert), each
    waited for on the apiserver's answer."""
    _, binary = binary_for("1.34")
    sb = real_sandbox(binary, "policy-deadlock")
    sb.wait(False, failing=HOOK)
    both = sb.cli("diagnose", sb.api["log"], sb.api["audit_log"], "-o", "json")
    diag = tmp_path / "diag.json"
    diag.write_bytes(both.stdout)
    manifest = sb.api["manifest"]
    rec = sb.cli("recover", "kubeadm", "--manifest", manifest, "--diagnosis", str(diag), "--apiserver",
                 sb.api["url"], "--yes", timeout=600)
    assert rec.returncode == 0, rec.stdout.decode() + rec.stderr.decode()
    with open(manifest, encoding="utf-8") as f:
        assert "--disable-admission-plugins=ValidatingAdmissionPolicy" in f.read()
    sb.wait(True)
    back = sb.cli("revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], timeout=600)
    out = back.stdout.decode()
    assert back.returncode == 8, out + back.stderr.decode()
    assert "refused by ValidatingAdmissionPolicy 'require-owner-label'" in out
    assert "an admission policy refuses the apiserver's own writes" in " ".join(out.replace("\\\n", " ").split())


def test_a_mutating_policy_lockout_on_an_apiserver_that_does_not_serve_them_is_refused_before_anything(tmp_path):
    """1.34 serves no MutatingAdmissionPolicy by default: one line, exit 2, no directory made.

    Cost: kube-apiserver --version."""
    from tests.conftest import run_cli

    _, binary = binary_for("1.34")
    d = str(tmp_path / "sb")
    p = run_cli("sandbox", "up", "--dir", d, "--apiserver", binary, "--scenario", "mutating-policy-deadlock",
                env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
    err = p.stderr.decode()
    assert p.returncode == 2 and "does not serve MutatingAdmissionPolicy" in err and "Traceback" not in err, err
    assert not os.path.exists(d)
