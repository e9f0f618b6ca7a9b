"""Issue 47 §1, §3, §4 with the real Gatekeeper 3.23.1: its generated ValidatingAdmissionPolicy and binding (made by
default from a ConstraintTemplate's CEL source and a constraint) lock a 1.34 upgrade with no webhook in it. The
audit gives the fix in the template, where Gatekeeper keeps it; applied after the way out, Gatekeeper's own
reconcile removes the policy and keeps it removed across its restart, and the apiserver then restarts ready with
Gatekeeper down, creating the ServiceCIDR the policy had refused.
"""

from __future__ import annotations

import json
import os
import shlex
import signal

from breakglass.sandbox import controlplane, engines
from tests.real_control_plane import Sandbox, binary_for, require
from tests.real_engines import wait_for

HOOK = "poststarthook/start-kubernetes-service-cidr-controller"
GROUP = "/apis/admissionregistration.k8s.io/v1"
VAP = f"{GROUP}/validatingadmissionpolicies/{engines.GATEKEEPER_VAP}"
VAPB = f"{GROUP}/validatingadmissionpolicybindings/{engines.GATEKEEPER_VAPB}"


def _json(p) -> dict:
    assert p.stdout, p.stderr.decode()
    return json.loads(p.stdout)["result"]


def test_gatekeepers_generated_policy_locks_the_upgrade_and_its_own_template_keeps_the_fix(tmp_path):
    """Generated, diagnosed, got past through etcd; Gatekeeper re-creating it before the fix makes the revert say
    so (exit 8); fixed in the template, kept by Gatekeeper's reconcile, and a restart with Gatekeeper down comes up
    ready.

    Cost: one sandbox with the real Gatekeeper (installed from its manifests, started, waited for until it has
    generated the policy and binding and the apiserver enforces them), the 1.34 restart into the outage, the
    recovery's wait for /readyz, Gatekeeper started twice more (each waited for until its reconcile removed the
    policy) and one more apiserver restart: each waited for on what it shows, never a fixed time."""
    _, binary = binary_for("1.34")
    require(engines.binary("gatekeeper") or os.path.join(engines.ROOT, "build", "gatekeeper", "missing"))
    sb = Sandbox(tmp_path, binary, "policy-deadlock", "--engine", "gatekeeper")
    try:
        sb.wait(False, failing=HOOK)
        c = sb.client()
        status, pol = c.call("GET", VAP)
        assert status == 200, pol
        refs = pol["metadata"].get("ownerReferences") or []
        assert any(r["kind"] == "ConstraintTemplate" and r["name"] == "k8srequiredlabels" for r in refs), refs
        assert pol["spec"]["failurePolicy"] == "Fail"
        assert c.call("GET", VAPB)[0] == 200

        both = sb.cli("diagnose", sb.api["log"], sb.api["audit_log"], "-o", "json")
        assert both.returncode == 3, both.stderr.decode()
        result = _json(both)
        lead = result["findings"][0]
        assert lead["policy"] == engines.GATEKEEPER_VAP and "Gatekeeper" in lead["advice"], lead
        assert result["verdict"]["state"] == "deadlocked"
        diag = tmp_path / "diag.json"
        diag.write_bytes(both.stdout)

        # the audit names Gatekeeper as the policy's keeper and gives the change in its template
        audit = _json(sb.cli("audit", "--etcd-endpoints", sb.endpoint, "-o", "json"))
        [f] = [f for f in audit["findings"] if f["configuration"].endswith(engines.GATEKEEPER_VAP)]
        lasting = f["fix"]["lasting"]
        assert lasting["form"] == "gatekeeper-template" and "generateVAP" in lasting["command"], lasting
        assert "/source/matchCondition" in lasting["alternative"]  # the form that keeps the policy, said whole

        rec = sb.cli("recover", "etcd", "--diagnosis", str(diag), "--etcd-endpoints", sb.endpoint, "--apiserver",
                     sb.api["url"], "--yes", "-o", "json", timeout=600)
        assert rec.returncode == 0, rec.stdout.decode() + rec.stderr.decode()
        sb.wait(True)

        # Gatekeeper comes back before the fix and re-creates what the run deleted: the revert leaves its copies and
        # finds, through the apiserver, that they refuse its own writes again (exit 8, with the way to take it back)
        up = sb.cli("sandbox", "backend", "start", "--dir", sb.dir, timeout=600)
        assert up.returncode == 0, up.stderr.decode()
        wait_for("Gatekeeper re-creating its policy and binding", lambda: c.call("GET", VAP)[0] == 200
                 and c.call("GET", VAPB)[0] == 200, 180)
        assert sb.cli("sandbox", "backend", "stop", "--dir", sb.dir).returncode == 0
        back = sb.cli("revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], timeout=300)
        said = " ".join(back.stdout.decode().replace("\\\n", " ").split())
        assert back.returncode == 8, said + back.stderr.decode()
        assert "by its owner, Gatekeeper" in said and f"refused by ValidatingAdmissionPolicy '{engines.GATEKEEPER_VAP}'" \
            in said, said
        redo = said.split("next: ", 1)[1].split(" (takes the change back")[0]
        again = sb.cli(*shlex.split(redo)[1:], timeout=600)  # the command it printed, as printed
        # it names etcd only: the deletion is verified, the apiserver's readiness is said not checked (exit 8)
        assert again.returncode in (0, 8) and "key absent" in again.stdout.decode(), again.stdout.decode()
        wait_for("the binding gone again", lambda: c.call("GET", VAPB)[0] == 404 or c.call("GET", VAP)[0] == 404, 60)

        # the fix, as the audit printed it (a JSON patch of the template), while the binding is gone
        argv = shlex.split(lasting["command"])
        ops = json.loads(argv[argv.index("-p") + 1])
        # (the apiserver drops a deleted policy from its watch a moment after etcd does: until then it refuses)
        wait_for("the template patched", lambda: c.call(
            "PATCH", "/apis/templates.gatekeeper.sh/v1/constrainttemplates/k8srequiredlabels", ops,
            "application/json-patch+json")[0] == 200, 60)
        # Gatekeeper's own reconcile, twice over: it removes the generated policy and does not bind it again
        for _ in range(2):
            up = sb.cli("sandbox", "backend", "start", "--dir", sb.dir, timeout=600)
            assert up.returncode == 0, up.stderr.decode()
            # the policy first, then its binding (its constraint's controller, a moment later)
            wait_for("Gatekeeper removing its generated policy and binding", lambda: c.call("GET", VAP)[0] == 404
                     and c.call("GET", VAPB)[0] == 404, 180)
            down = sb.cli("sandbox", "backend", "stop", "--dir", sb.dir)
            assert down.returncode == 0, down.stderr.decode()

        # with Gatekeeper down, a restart that must create the default ServiceCIDR again comes up ready
        assert "/registry/servicecidrs/kubernetes" in controlplane._remove_upgrade_missing(sb.endpoint)
        before = sb.kubelet().get("restarts", 0)
        os.kill(int(sb.status()["pid"]), signal.SIGTERM)
        wait_for("the apiserver restarted", lambda: sb.kubelet().get("restarts", 0) > before, 120)
        sb.wait(True, seconds=180)
        assert sb.etcd_value("/registry/servicecidrs/kubernetes") is not None
    finally:
        sb.down()
