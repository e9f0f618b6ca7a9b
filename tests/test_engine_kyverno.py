"""The real Kyverno in the loop (issue 35): what it does to its own webhook configurations, and whether what
breakglass says and does holds while it acts.

One real kube-apiserver 1.34 and etcd for the module (tests/real_apiserver_session.RealApiserver, a second
instance: Kyverno's webhooks and CRDs must not reach the shared one), Kyverno's own install from its module zip,
its admission controller built from upstream's cmd/kyverno, out of cluster on loopback, and a ClusterPolicy on
every kind (the seed's shape: Kyverno registers validate.kyverno.svc-fail, Fail, on every resource). Nothing
is timed: each wait polls until Kyverno has acted (or a generous deadline says it never did). Kyverno's log and
the apiserver's stay in the test's directory (printed on failure).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from breakglass.sandbox import engines, free_port
from tests.real_apiserver_session import RealApiserver
from tests.real_control_plane import binary_for, require
from tests.conftest import ROOT, unfold_lines
from tests.real_engines import EngineUnderTest

RESOURCE_CFG = "kyverno-resource-validating-webhook-cfg"
HOOK = "validate.kyverno.svc-fail"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"


class Kyverno(EngineUnderTest):
    name = "Kyverno"

    def __init__(self, directory: str, apiserver: RealApiserver) -> None:
        super().__init__(directory, apiserver)
        self.port = free_port()
        self.engine = engines.kyverno(directory, self.kubeconfig, self.port)

    def stop(self) -> None:
        self.kill()

    def get(self, name: str = RESOURCE_CFG) -> dict | None:
        status, doc = self.client.call("GET", VWC + name)
        return doc if status == 200 else None

    def hook(self, cfg: dict | None, name: str = HOOK) -> dict | None:
        return next((w for w in (cfg or {}).get("webhooks") or [] if w.get("name") == name), None)


@pytest.fixture(scope="module")
def kyverno(tmp_path_factory):
    """The module's own etcd and kube-apiserver 1.34 with Kyverno installed and running, its webhook registered.

    Cost: a second real etcd and kube-apiserver (about 5 s), Kyverno's install (each CRD waited for until
    Established) and its start, waited for until its webhook for the policy is registered: once for the module,
    on an apiserver of its own so that Kyverno's webhooks and CRDs reach no other module's tests."""
    _, apiserver_bin = binary_for("1.34")
    built = engines.binary("kyverno")
    require(built or os.path.join(engines.ROOT, "build", "kyverno", f"v{engines.versions('kyverno')[-1]}",
                                  "kyverno"))
    directory = str(tmp_path_factory.mktemp("kyverno"))
    api = RealApiserver(directory, apiserver_bin).start()
    k = Kyverno(directory, api)
    # Kyverno's default metrics port taken, as by another sandbox's Kyverno (it exited at start, "listen tcp
    # :8000: bind: address already in use"): the engine is started on ports of its own
    squatter = socket.socket()
    try:
        squatter.bind(("0.0.0.0", 8000))
        squatter.listen()
    except OSError:
        pass  # already taken by something else: the same case
    try:
        engines.apply(api.client, engines.kyverno_install(engines.versions("kyverno")[-1]))
        k.start()
        k.until("its webhook configurations registered", lambda: k.get())
        k.until("the ClusterPolicy accepted", lambda: k.client.call(
            "POST", "/apis/kyverno.io/v1/clusterpolicies", engines.KYVERNO_POLICY)[0] in (200, 201, 409))
        k.until(f"{HOOK} registered for the policy", lambda: k.hook(k.get()))
        yield k
    finally:
        k.stop()
        api.stop()
        squatter.close()


def _running(k: Kyverno) -> dict:
    """Kyverno up and its fail-closed webhook registered, whatever the test before left."""
    if k.proc is None:
        k.start()
    return k.until(f"{HOOK} in {RESOURCE_CFG}", lambda: (c := k.get()) and k.hook(c) and c)


def test_the_webhook_is_the_seeds_and_kyverno_owns_it(kyverno):
    cfg = _running(kyverno)
    w = kyverno.hook(cfg)
    assert w["failurePolicy"] == "Fail"
    assert cfg["metadata"]["labels"].get("webhook.kyverno.io/managed-by") == "kyverno"
    p = kyverno.cli("webhooks", "--kubeconfig", kyverno.kubeconfig, "-o", "json")
    assert p.returncode == 0, p.stderr.decode()


def test_a_delete_while_kyverno_runs_is_futile_and_breakglass_says_so_first(kyverno):
    cfg = _running(kyverno)
    p = kyverno.cli("recover", "kubeapi", "--kubeconfig", kyverno.kubeconfig, "--webhook", HOOK, "--action",
                    "delete", "--dry-run")
    said = (p.stdout + p.stderr).decode()
    assert "Kyverno re-creates this configuration within a second while it is healthy" in said, said
    assert kyverno.get()["metadata"]["uid"] == cfg["metadata"]["uid"]  # a dry run changed nothing
    # and what it said is what Kyverno does: deleted, it is back (another object)
    status, _ = kyverno.client.call("DELETE", VWC + RESOURCE_CFG)
    assert status == 200
    back = kyverno.until("the deleted configuration re-created", lambda: (c := kyverno.get()) and
                         c["metadata"]["uid"] != cfg["metadata"]["uid"] and kyverno.hook(c) and c)
    assert kyverno.hook(back)["failurePolicy"] == "Fail"


def test_a_patch_kyverno_undoes_is_not_verified_and_the_revert_asks_the_apiserver_anyway(kyverno):
    """`recover kubeapi` patched failurePolicy while Kyverno ran and said "verified": Kyverno had put it back
    within a second. Read again a moment later, it is "applied, not verified" (exit 8), naming Kyverno; the
    revert then has nothing to put back, and still asks the apiserver to call the webhook its owner re-armed."""
    _running(kyverno)
    p = kyverno.cli("recover", "kubeapi", "--kubeconfig", kyverno.kubeconfig, "-w", RESOURCE_CFG, "--yes",
                    "-o", "json")
    said = (p.stdout + p.stderr).decode()
    assert p.returncode == 8, said
    out = json.loads(p.stdout)["outcome"]
    assert any("undone by its owner Kyverno" in x for x in out["notVerified"]), out
    assert not any("patched (resourceVersion" in x for x in out["verified"]), out
    assert kyverno.hook(kyverno.get())["failurePolicy"] == "Fail"  # what the apiserver calls now
    p = kyverno.cli("revert", "--yes", "-o", "json")
    said = (p.stdout + p.stderr).decode()
    assert p.returncode == 0, said
    doc = json.loads(p.stdout)
    assert [s["outcome"] for s in _steps(p)] == ["already-restored"], said
    assert doc["outcome"]["changed"] == [], said
    assert any("canary through the apiserver (re-armed by their owner" in x and "passed" in x
               for x in doc["outcome"]["verified"]), said


def test_a_direct_patch_is_undone_and_the_audit_gives_kyvernos_own_form(kyverno):
    """The audit's direct patch is undone by Kyverno; its lasting form, Kyverno's ConfigMap as the text shows it,
    is kept through Kyverno's reconciles, and with it 1.34 starts past the webhook while Kyverno is down.

    Cost: a sleep until 60 s after the ConfigMap patch, so that the conditions are seen to outlive several of
    Kyverno's 10 s watchdog reconciles; then a restart of kube-apiserver (about 5 s) with the default ServiceCIDR
    gone, to show the bootstrap write no longer meets the webhook."""
    _running(kyverno)
    p = kyverno.cli("audit", "--kubeconfig", kyverno.kubeconfig, "-o", "json")
    assert p.returncode in (0, 3, 4, 5, 6), p.stderr.decode()  # findings have their own exit code
    findings = json.loads(p.stdout)["result"]["findings"]
    fix = next(f["fix"] for f in findings if f["webhook"] == HOOK and f.get("fix"))
    assert fix["lasting"]["form"] == "kyverno-config" and fix["lasting"]["owner"] == "Kyverno", fix["lasting"]
    # the direct patch (what audit printed before issue 35): Kyverno undoes it
    direct = subprocess.run(["bash", "-c", fix["command"]], env={**os.environ, "KUBECONFIG": kyverno.kubeconfig},
                            capture_output=True, timeout=60)
    assert direct.returncode == 0, direct.stderr.decode()
    names = {c["name"] for c in fix["match_conditions"]}
    kyverno.until("the patched matchConditions undone", lambda: not names & {
        c["name"] for c in kyverno.hook(kyverno.get()).get("matchConditions") or []})
    # the lasting form: Kyverno's ConfigMap, as the text at 80 columns gives it (the patch as YAML to save, and
    # `--patch-file`; -o json's one-line command is the same change: tests/test_width). Kyverno puts the
    # conditions in its webhook itself...
    env = {**os.environ, "KUBECONFIG": kyverno.kubeconfig, "COLUMNS": "80"}
    text = subprocess.run([sys.executable, "-m", "breakglass", "audit"], env={
        **env, "BREAKGLASS_STATE_DIR": os.path.join(kyverno.dir, "state")}, cwd=ROOT, capture_output=True,
        timeout=120).stdout.decode()
    shown = re.search(r"by \(this patch, saved as (kyverno-config\.yaml)\):\n(.*?)\n    then:\n([^\n]*)",
                      "\n".join(unfold_lines(text.splitlines())), re.S)
    assert shown, text
    work = os.path.join(kyverno.dir, "paste")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, shown.group(1)), "w") as fh:
        fh.write(shown.group(2) + "\n")  # what the engineer selects and saves, indentation and all
    command = shown.group(3).strip().removeprefix("$ ")
    assert command == "kubectl -n kyverno patch configmap kyverno --type=merge --patch-file=kyverno-config.yaml"
    lasting = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, timeout=60)
    assert lasting.returncode == 0, lasting.stderr.decode()
    applied = time.monotonic()
    kyverno.until("Kyverno's own webhook carrying the ConfigMap's matchConditions", lambda: names <= {
        c["name"] for c in kyverno.hook(kyverno.get()).get("matchConditions") or []})
    # ...and keeps them through a reconcile: a patch of another field is rewritten, the conditions stay
    cur = kyverno.get()
    i = [w["name"] for w in cur["webhooks"]].index(HOOK)
    status, _ = kyverno.client.call("PATCH", VWC + RESOURCE_CFG, [
        {"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": "Ignore"}], "application/json-patch+json")
    assert status == 200
    kyverno.until("the failurePolicy rewritten to Fail", lambda: kyverno.hook(kyverno.get())["failurePolicy"] == "Fail")
    assert names <= {c["name"] for c in kyverno.hook(kyverno.get()).get("matchConditions") or []}
    # still there a minute after it was set, through Kyverno's periodic reconciles (its watchdog: every 10 s)
    time.sleep(max(0.0, 60 - (time.monotonic() - applied)))
    assert names <= {c["name"] for c in kyverno.hook(kyverno.get()).get("matchConditions") or []}
    # the conditions do what they say: a ServiceCIDR no longer goes to the webhook, with Kyverno stopped
    kyverno.stop()
    try:
        status, doc = kyverno.client.call("POST", "/apis/networking.k8s.io/v1/servicecidrs", {
            "metadata": {"name": "breakglass-test"}, "spec": {"cidrs": ["10.200.0.0/24"]}})
        assert status == 201, doc  # as the apiserver's own bootstrap write would be
        status, doc = kyverno.client.call("POST", "/api/v1/namespaces/default/configmaps", {
            "metadata": {"name": "not-exempt"}})
        assert status >= 500 and HOOK in json.dumps(doc), doc  # everything else still fails closed
        # and the seed's restart: the default ServiceCIDR and its IPAddress gone (a cluster upgraded from 1.32
        # has neither), Kyverno down, its fail-closed webhook on every resource registered: 1.34 becomes ready
        removed = kyverno.api.etcd_delete("/registry/servicecidrs/") + kyverno.api.etcd_delete("/registry/ipaddresses/")
        assert "/registry/servicecidrs/kubernetes" in removed and any("/ipaddresses/" in k for k in removed), removed
        kyverno.api.restart()
        status, cidr = kyverno.client.call("GET", "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")
        assert status == 200, cidr  # created at boot: the apiserver's own write no longer goes to the webhook
        assert HOOK in json.dumps(kyverno.get())  # with the fail-closed webhook still registered all along
    finally:
        kyverno.client.call("DELETE", "/apis/networking.k8s.io/v1/servicecidrs/breakglass-test")
        status, _ = kyverno.client.call("PATCH", "/api/v1/namespaces/kyverno/configmaps/kyverno",
                                        {"data": {"matchConditions": "[]"}}, "application/merge-patch+json")
        kyverno.start()


def test_revert_of_a_delete_meets_kyvernos_own_copy_and_leaves_it(kyverno):
    """Kyverno down, the configuration deleted through the API (the seed's way out); Kyverno comes back and
    re-creates it; the revert finds its owner's copy, says so, and does not overwrite it."""
    cfg = _running(kyverno)
    kyverno.stop()
    p = kyverno.cli("recover", "kubeapi", "--kubeconfig", kyverno.kubeconfig, "-w", RESOURCE_CFG, "--action",
                    "delete", "--yes", "-o", "json")
    assert p.returncode in (0, 8), p.stderr.decode()
    assert kyverno.get() is None
    kyverno.start()
    back = kyverno.until("Kyverno's copy", lambda: (c := kyverno.get()) and kyverno.hook(c) and c)
    assert back["metadata"]["uid"] != cfg["metadata"]["uid"]
    p = kyverno.cli("revert", "--yes", "--re-arm", "-o", "json")
    said = (p.stdout + p.stderr).decode()
    assert "put back by its owner, Kyverno" in said, said
    assert "conflict" not in json.dumps([s.get("outcome") for s in _steps(p)]), said
    now = kyverno.get()
    assert now["metadata"]["uid"] == back["metadata"]["uid"]  # Kyverno's object, untouched by the revert


def _steps(p) -> list[dict]:
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return []
    res = doc.get("result") or {}
    return res.get("steps") or res.get("outcomes") or []


def test_revert_with_kyverno_still_down_drops_a_dead_owner_and_takes_the_current_ca(kyverno):
    """The backup names an ownerReference by uid and a caBundle; by the time of the revert the owner was
    re-created (another uid) and the CA rotated. The copy breakglass re-creates must not carry either."""
    cfg = _running(kyverno)
    refs = cfg["metadata"].get("ownerReferences") or []
    if not refs:  # an owner for the test where this Kyverno set none (its ClusterRole selector found no match)
        role = kyverno.client.must("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
            "metadata": {"name": "breakglass-test:webhook"}, "rules": []})  # (made while Kyverno admits it)
        refs = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": role["metadata"]["name"],
                 "uid": role["metadata"]["uid"]}]
    kyverno.stop()
    if not cfg["metadata"].get("ownerReferences"):
        cfg = kyverno.get()
        cfg["metadata"]["ownerReferences"] = refs  # (a webhook configuration is never sent to webhooks)
        cfg = kyverno.client.must("PUT", VWC + RESOURCE_CFG, cfg)
    p = kyverno.cli("recover", "kubeapi", "--kubeconfig", kyverno.kubeconfig, "-w", RESOURCE_CFG, "--action",
                    "delete", "--yes", "-o", "json")
    assert p.returncode in (0, 8), p.stderr.decode()
    # the owner re-created (a reinstall) and Kyverno's CA rotated
    owner = refs[0]
    path = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{owner['name']}"
    old = kyverno.client.must("GET", path)
    kyverno.client.must("DELETE", path)
    kyverno.client.must("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                        {k: v for k, v in old.items() if k != "metadata"} | {"metadata": {
                            "name": old["metadata"]["name"], "labels": old["metadata"].get("labels") or {}}})
    ns, name, key = ("kyverno", "kyverno-svc.kyverno.svc.kyverno-tls-ca", "tls.crt")
    secret = kyverno.client.must("GET", f"/api/v1/namespaces/{ns}/secrets/{name}")
    import base64

    rotated = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nrotated-for-the-test\n-----END CERTIFICATE-----\n") \
        .decode()
    secret["data"][key] = rotated
    kyverno.client.must("PUT", f"/api/v1/namespaces/{ns}/secrets/{name}", secret)
    # Kyverno is still down: the guard refuses a re-arm over a dead backend (exit 4); re-arming anyway is --force
    p = kyverno.cli("revert", "--yes", "-o", "json")
    assert p.returncode == 4 and kyverno.get() is None, p.stderr.decode()
    p = kyverno.cli("revert", "--yes", "--force", "-o", "json")
    said = (p.stdout + p.stderr).decode()
    restored = kyverno.get()
    assert restored is not None, said
    assert "dropped the ownerReference" in said and "current CA" in said, said
    assert not any(r.get("uid") == owner["uid"] for r in restored["metadata"].get("ownerReferences") or [])
    assert {w["clientConfig"].get("caBundle") for w in restored["webhooks"]} == {rotated}
