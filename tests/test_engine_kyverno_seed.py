"""The bootstrap-deadlock seed with the seed's own software (issue 35 §2): a cluster made at 1.32 with the real
Kyverno installed and a policy on every kind, upgraded to 1.34 while Kyverno is down. The 1.34 apiserver cannot
finish its start (its default ServiceCIDR, and the ClusterRoles new in 1.34, are refused by Kyverno's fail-closed
webhook); diagnose names Kyverno's webhook; the etcd way out (the seed's second exit, with the apiserver down)
lets it start; Kyverno comes back and re-creates its configuration itself; the revert finds Kyverno's copy and
leaves it. Real kube-apiserver 1.32.13 and 1.34.4, real etcd, real Kyverno 1.19.1; nothing timed.
"""

from __future__ import annotations

import json
import os

import pytest


from breakglass.sandbox import apiserver as launcher
from breakglass.sandbox import engines, free_port
from tests.conftest import run_cli
from tests.real_apiserver_session import RealApiserver
from tests.real_control_plane import binary_for, require, stop_group
from tests.real_engines import kill, wait_for

CFG = "kyverno-resource-validating-webhook-cfg"
HOOK = "validate.kyverno.svc-fail"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"


class Upgradable(RealApiserver):
    """The test apiserver, restartable on the same etcd and flags with another kube-apiserver binary."""

    def _spawn(self, argv, log):
        if argv and argv[0] == self.binary:
            self.argv = argv[1:]  # the flags, kept for the upgrade
        return super()._spawn(argv, log)

    def restart_as(self, binary: str):
        stop_group(self.proc)
        self.binary = binary
        self.proc = super()._spawn([binary, *self.argv], self.layout.log)
        return self.proc


def _wait(what: str, test, seconds: float = 180, logs: str = ""):
    return wait_for(what, test, seconds, logs=logs)


def test_the_seed_upgrade_deadlocks_on_kyverno_and_the_etcd_way_out_heals_it(tmp_path):
    """The seed's upgrade for real: 1.32 with Kyverno and its policy, Kyverno down, 1.34 cannot start; diagnose
    names Kyverno's webhook, the etcd way out lets 1.34 start, Kyverno re-creates its configuration, and the revert
    leaves Kyverno's copy.

    Cost: kube-apiserver starts at 1.32 and again at 1.34, the real Kyverno twice (before the outage and after the
    recovery), each waited for until it has registered its webhook; the 1.34 start is watched until its log shows
    the refused bootstrap write, and then until it is ready: the upgrade's own course, not a timer."""
    _, old = binary_for("1.32")
    _, new = binary_for("1.34")
    require(engines.binary("kyverno") or os.path.join(engines.ROOT, "build", "kyverno", "missing"))
    d = str(tmp_path)
    api = Upgradable(d, old).start()
    kyverno_proc = None
    env = {"BREAKGLASS_STATE_DIR": os.path.join(d, "state"), "KUBECONFIG": api.layout.kubeconfig}
    logs = f"(logs in {d})"
    try:
        c = api.client
        engines.apply(c, engines.kyverno_install(engines.versions("kyverno")[-1]))
        eng = engines.kyverno(d, api.layout.kubeconfig, free_port())
        kyverno_proc = eng.start()
        _wait("Kyverno's configurations", lambda: c.call("GET", VWC + CFG)[0] == 200, logs=logs)
        _wait("the ClusterPolicy", lambda: c.call("POST", "/apis/kyverno.io/v1/clusterpolicies",
                                                   engines.KYVERNO_POLICY)[0] in (200, 201, 409), logs=logs)
        _wait(f"{HOOK} registered", lambda: any(w["name"] == HOOK for w in c.call("GET", VWC + CFG)[1].get(
            "webhooks") or []), logs=logs)
        # the outage: Kyverno down (its pods not scheduled yet), then the control plane upgraded to 1.34
        kill(kyverno_proc)
        kyverno_proc = None
        proc = api.restart_as(new)
        client = launcher.Client(api.url, api.pki)
        status = _wait("the 1.34 apiserver failing its start", lambda: (
            proc.poll() is not None or (client.readyz()[0] not in (None, 200) and _blocked(api.layout.log))),
            seconds=240, logs=logs)
        assert status
        assert client.readyz()[0] != 200
        p = run_cli("diagnose", api.layout.log, "-o", "json", env=env)
        assert p.returncode == 3, p.stderr.decode()
        diag = json.loads(p.stdout)["result"]
        hooks = {f.get("webhook") for f in diag["findings"]}
        assert HOOK in hooks, diag
        text = json.dumps(diag)
        assert "ServiceCIDR" in text or "servicecidrs" in text, text[:3000]
        # the way out with the apiserver down: Kyverno's configuration deleted from etcd (backed up first)
        p = run_cli("recover", "etcd", "-w", f"webhook:{HOOK}", "--etcd-endpoints", api.etcd_endpoint,
                    "--no-wait", "--yes", "-o", "json", env=env, timeout=400)
        said = (p.stdout + p.stderr).decode()
        assert p.returncode == 8, said  # applied; not verified (it was told not to wait): said so
        assert "Kyverno" in said, said  # its owner named before the delete
        assert c.call("GET", VWC + CFG)[0] != 200 if proc.poll() is None else True
        if proc.poll() is not None:  # the apiserver had exited (its fatal start-up timers): the kubelet restarts it
            proc = api.restart_as(new)
        _wait("the 1.34 apiserver ready", lambda: client.readyz()[0] == 200, seconds=240, logs=logs)
        assert c.call("GET", "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")[0] == 200
        # Kyverno back: it re-creates its own configuration
        kyverno_proc = eng.start()
        back = _wait("Kyverno's copy", lambda: (r := c.call("GET", VWC + CFG))[0] == 200 and any(
            w["name"] == HOOK for w in r[1].get("webhooks") or []) and r[1], logs=logs)
        p = run_cli("revert", "--yes", "-o", "json", env=env, timeout=400)
        said = (p.stdout + p.stderr).decode()
        assert "put back by its owner, Kyverno" in said, said
        now = c.call("GET", VWC + CFG)[1]
        assert now["metadata"]["uid"] == back["metadata"]["uid"]  # Kyverno's own, not our backup
        assert client.readyz()[0] == 200
    finally:
        kill(kyverno_proc)
        api.stop()


def _blocked(log: str) -> bool:
    """The apiserver's log shows a bootstrap write failed (its start cannot finish): the ServiceCIDR controller's
    error or the RBAC hook's. (Not a mere mention: "starting ServiceCIDR Allocator Controller" is an ordinary
    start-up line, and the webhook's name is already in the log from before the upgrade.)"""
    try:
        with open(log, "rb") as f:
            text = f.read()
    except OSError:
        return False
    return b"KubernetesDefaultServiceCIDRError" in text or b"unable to initialize roles" in text


def test_the_sandbox_rehearsal_with_the_real_kyverno_from_up_to_revert(tmp_path):
    """`sandbox up --engine kyverno`: the deadlock's webhook is the one the real Kyverno registered for the seed's
    policy (its label), Kyverno is down and the 1.34 apiserver cannot finish its start. The
    rehearsal as a user walks it: diagnose names Kyverno's webhook, the engine cannot come back before the
    recovery, the etcd way out, `sandbox backend start` is Kyverno coming back (it takes over its configuration),
    and the revert finds Kyverno's copy and leaves it.

    Cost: the real Kyverno starts twice (in `sandbox up` and at `backend start`, each waited for until it refuses
    what its policy forbids) and kube-apiserver boots twice (first boot, the deadlocked restart); the recover then
    waits for /readyz until the deadlocked apiserver gets past its bootstrap."""
    from tests.real_control_plane import engine_sandbox

    sb = engine_sandbox(tmp_path, "kyverno", "deadlock")
    try:
        st = sb.wait(ready=False)
        assert st["engine"] == "kyverno" and not st["backend_running"], st
        c = sb.client()
        registered = c.call("GET", VWC + CFG)[1]
        assert (registered["metadata"].get("labels") or {}).get("webhook.kyverno.io/managed-by") == "kyverno"
        assert any(w["name"] == HOOK for w in registered["webhooks"])
        text = sb.cli("sandbox", "status", "--dir", sb.dir).stdout.decode()
        assert "webhook backend: down (kyverno (the real engine))" in text, text
        wait_for("the bootstrap write refused in the log", lambda: _blocked(sb.api["log"]),
                 logs=f"(logs in {sb.dir})")
        p = sb.cli("diagnose", sb.api["log"], "-o", "json")
        said = p.stdout.decode()
        assert HOOK in said and CFG in said, said[-2000:]
        p = sb.cli("sandbox", "backend", "start", "--dir", sb.dir)
        assert p.returncode == 2 and "not ready" in p.stderr.decode(), p.stderr.decode()  # it installs through it
        p = sb.cli("recover", "--method", "etcd", "-w", f"webhook:{HOOK}", "--etcd-endpoints", sb.endpoint,
                   "--apiserver", sb.api["url"], "--yes")
        assert p.returncode == 0, (p.stdout + p.stderr).decode()
        p = sb.cli("sandbox", "backend", "start", "--dir", sb.dir)
        assert p.returncode == 0, p.stderr.decode()
        cfg = wait_for("Kyverno's own configuration", lambda: (r := c.call("GET", VWC + CFG))[0] == 200 and (
            r[1]["metadata"].get("labels") or {}).get("webhook.kyverno.io/managed-by") == "kyverno" and any(
            w["name"] == HOOK for w in r[1]["webhooks"]) and r[1], logs=f"(logs in {sb.dir})")
        assert cfg["metadata"]["uid"] != registered["metadata"]["uid"]  # re-created by Kyverno after the delete
        p = sb.cli("revert", "--yes")
        said = (p.stdout + p.stderr).decode()
        assert "put back by its owner, Kyverno" in said, said
        assert c.call("GET", VWC + CFG)[1]["metadata"]["uid"] == cfg["metadata"]["uid"]
        assert sb.status()["ready"] and sb.status()["backend_running"]
        p = sb.cli("sandbox", "backend", "stop", "--dir", sb.dir)
        assert p.returncode == 0, p.stderr.decode()
        assert not sb.status()["backend_running"]
    finally:
        sb.down()
    assert not [ln for ln in os.popen("pgrep -af build/kyverno").read().splitlines() if sb.dir in ln]


@pytest.mark.parametrize("node", ["kubeadm", "talos"])
def test_the_plugin_flag_way_out_with_the_real_kyverno_on_each_node_kind(tmp_path, node):
    """The seed's first way out, with Kyverno's own webhook: the admission plugins turned off in what the node
    obeys (the kubeadm static-pod manifest, or the Talos machine config through talosctl), the 1.34 apiserver
    then ready; Kyverno comes back; the revert (its guard calls Kyverno as the apiserver would, then a canary
    through the apiserver) turns them on again, and the end state is right: ready, the plugins on, Kyverno
    enforcing its policy.

    Cost: Kyverno starts at least twice (sandbox up, `backend start`; again if it exits across the revert's restart,
    the canary then resent up to 90 s), kube-apiserver four times (first boot, deadlocked, plugins off, reverted),
    and `revert --dry-run` runs until the guard's own call reaches Kyverno: each start is the way out at work."""
    from tests.real_control_plane import engine_sandbox
    from tests.test_real_apiserver import _talosctl

    sb = engine_sandbox(tmp_path, "kyverno", "deadlock", "--node", node)
    try:
        sb.wait(ready=False)
        if node == "kubeadm":
            way, env = ["kubeadm", "--manifest", sb.api["manifest"], "--verify-timeout", "120"], {}
        else:
            flags, env = _talosctl(tmp_path, os.path.dirname(os.path.dirname(sb.api["node_config"])))
            way = ["talos", "-n", "controlplane", *flags, "--apiserver", sb.api["url"], "--wait-timeout", "120"]
        env = {**sb.env, **env}
        p = run_cli("recover", *way, "--yes", "-o", "json", env=env, timeout=300)
        assert p.returncode == 0, (p.stdout + p.stderr).decode()
        assert sb.status()["ready"]
        p = sb.cli("sandbox", "backend", "start", "--dir", sb.dir)  # Kyverno back
        assert p.returncode == 0, p.stderr.decode()
        c = sb.client()
        node_flags = way[3:7] if node == "talos" else []  # how the revert reaches the node: the same talosctl
        revert = ["revert", "--yes", "--kubeconfig", sb.api["kubeconfig"], *node_flags, "-o", "json"]

        def guard_sees_kyverno():  # the guard's own call (TLS against the caBundle, an AdmissionReview)
            p = run_cli(*revert, "--dry-run", env=env, timeout=300)
            return json.loads(p.stdout or b"{}").get("result", {}).get("guard", {}).get("state") == "ready"

        # (with the plugins off the apiserver calls no webhook: the guard asks Kyverno itself, until it answers)
        wait_for("the revert guard seeing Kyverno serve", guard_sees_kyverno, logs=f"(logs in {sb.dir})")
        p = run_cli(*revert, env=env, timeout=300)
        doc = json.loads(p.stdout or b"{}")
        canary = ((doc.get("result") or {}).get("guard") or {}).get("canary") or {}
        assert p.returncode == 0, [ln for ln in canary.get("lines", []) if "failed" in ln] or p.stderr.decode()
        assert canary["ok"], canary
        sb.wait(ready=True)
        status, out = c.call("POST", "/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "refused", "labels": {"breakglass-deny": "x"}}})
        assert status == 400 or status == 403, out  # the webhook is called again, and Kyverno refuses
        assert HOOK in json.dumps(out) or "breakglass-deny" in json.dumps(out), out
    finally:
        sb.down()


def test_sandbox_up_with_an_engine_refuses_what_it_cannot_rehearse_before_anything_starts(tmp_path):
    """--engine without --apiserver, an engine with the other seed's scenario: one line, exit 2, no directory."""
    d = str(tmp_path / "sb")
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": ""}
    for args, said in ((["--engine", "kyverno"], "--engine needs --apiserver"),
                       (["--apiserver", "/bin/true", "--engine", "gatekeeper", "--scenario", "deadlock"],
                        "--engine gatekeeper rehearses fail-open, policy-deadlock, healthy, not deadlock"),
                       (["--engine", "kyvern"], "kyvern")):
        p = run_cli("sandbox", "up", "--dir", d, *args, env=env, timeout=60)
        err = p.stderr.decode()
        assert p.returncode == 2 and said in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) <= 3, err
        assert not os.path.exists(d)
