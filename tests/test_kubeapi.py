"""The kubeconfig remedy against a real kube-apiserver on a real etcd (tests/real_apiserver_session.py: one
for the session). breakglass talks to it through the official client with a ServiceAccount's bearer token
unless a test says otherwise; the apiserver validates, defaults, manages fields, authenticates, authorizes
with RBAC, enforces preconditions and writes its audit log; raw etcd reads, decoded with breakglass' codec,
show what it stored."""

from __future__ import annotations

import json
import os

import pytest

from breakglass.webhooks import codec, sources
from tests.conftest import run_cli
from tests.real_apiserver_session import ADMISSION, NO_RIGHTS_SA, SCRATCH_NS, kube, real_apiserver  # noqa: F401
from tests.real_control_plane import binary_for, real_sandbox  # noqa: F401 - the fixture
from tests.test_codec import KYVERNO

NAME = KYVERNO["metadata"]["name"]
BINDING = "require-owner-binding"
RESOURCE = {"validating": "validatingwebhookconfigurations", "mutating": "mutatingwebhookconfigurations",
            "vapbinding": "validatingadmissionpolicybindings"}
SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def manifest(obj: dict) -> dict:
    """What an operator applies: the object without the metadata the apiserver sets."""
    out = json.loads(json.dumps(obj))
    for k in SERVER_SET:
        out["metadata"].pop(k, None)
    return out


def content(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Cluster:
    """One test's view of the session's apiserver: a kubeconfig, a state directory, and an operator's
    client (the admin certificate) to set things up and change them behind breakglass' back."""

    def __init__(self, real, tmp_path) -> None:
        self.real, self.tmp = real, tmp_path
        self.state = tmp_path / "state"
        self.kc = real.kubeconfig(str(tmp_path / "kubeconfig"))
        self.admin = real.client

    def create(self, kind: str, obj: dict, manager: str = "kyverno") -> dict:
        return self.admin.must("POST", f"{ADMISSION}{RESOURCE[kind]}?fieldManager={manager}", manifest(obj))

    def get(self, kind: str, name: str) -> dict | None:
        status, out = self.admin.call("GET", f"{ADMISSION}{RESOURCE[kind]}/{name}")
        assert status in (200, 404), out
        return out if status == 200 else None

    def update(self, kind: str, obj: dict, manager: str = "kyverno") -> dict:
        name = obj["metadata"]["name"]
        return self.admin.must("PUT", f"{ADMISSION}{RESOURCE[kind]}/{name}?fieldManager={manager}", obj)

    def etcd_obj(self, kind: str = "validating", name: str = NAME) -> dict | None:
        """The object as the apiserver stored it in etcd."""
        value = self.real.etcd_value(sources.etcd_key(kind, name))
        return codec.decode_value(value).obj if value is not None else None

    def ready_endpoints(self, ready: int = 1, not_ready: int = 0) -> None:
        """The webhook's backend back as far as this machine can tell: its Service (headless: a cluster IP would be
        an IPAddress object, which the fixture's Kyverno webhook may intercept) and ready Endpoints. The apiserver
        refuses loopback endpoints, so they are multicast addresses, which it accepts and the kernel refuses to
        connect to (nothing is sent): ready endpoints the revert guard cannot call from here, as a pod's address
        seen from outside the cluster."""
        self.admin.must("POST", f"/api/v1/namespaces/{SCRATCH_NS}/services",
                        {"metadata": {"name": "kyverno-svc"},
                         "spec": {"clusterIP": "None", "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}},
                        ok=(201, 409))
        self.admin.must("POST", f"/api/v1/namespaces/{SCRATCH_NS}/endpoints", {
            "metadata": {"name": "kyverno-svc"},
            "subsets": [{"addresses": [{"ip": f"239.255.0.{9 + i}"} for i in range(ready)],
                         "notReadyAddresses": [{"ip": f"239.255.1.{9 + i}"} for i in range(not_ready)],
                         "ports": [{"name": "https", "port": 9443}]}]})

    def cli(self, *args, kubeconfig: str | None = None):
        return run_cli(*args, "--kubeconfig", kubeconfig or self.kc, env={"BREAKGLASS_STATE_DIR": str(self.state)})


@pytest.fixture
def api(kube, tmp_path):
    """Kyverno's configuration as Kyverno creates it, and an admission policy binding, on the real apiserver."""
    c = Cluster(kube, tmp_path)
    c.kyverno = c.create("validating", KYVERNO)
    c.binding = c.create("vapbinding", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": BINDING}, "spec": {"policyName": "require-owner", "validationActions": ["Deny"]}})
    yield c
    # ready_endpoints' Service (kube's reset removes the Endpoints): the next test starts with no such Service
    c.admin.must("DELETE", f"/api/v1/namespaces/{SCRATCH_NS}/services/kyverno-svc", ok=(200, 202, 404))


def _audited(api, since, verb=None, name=NAME):
    return [e for e in api.real.audit_events(since, api.real.user_name())
            if (e.get("objectRef") or {}).get("name") == name and (verb is None or e["verb"] == verb)]


def test_ignore_then_revert_through_the_api(api):
    mark = api.real.audit_mark()
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    p = api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "ignore", "--yes")
    assert p.returncode == 0, p.stderr
    stored = api.etcd_obj()
    assert stored["webhooks"][0]["failurePolicy"] == "Ignore"
    assert stored["metadata"]["uid"] == api.kyverno["metadata"]["uid"]  # patched in place, not replaced
    assert b"Kyverno rewrites this configuration wholesale" in p.stderr  # operator awareness
    # the change went through the API as the kubeconfig's identity, and the apiserver audited it
    [patch] = _audited(api, mark, "patch")
    assert patch["responseStatus"]["code"] == 200 and patch["stage"] == "ResponseComplete"
    r = api.cli("revert", "--yes")
    assert r.returncode == 4 and b"no ready endpoints" in r.stdout + r.stderr  # would brick the cluster again
    # a safety refusal, not a conflict: it names the check, suggests no overwrite, and marks nothing
    assert b"backend is not ready" in r.stderr and b"get endpoints" in r.stderr and b"changed since" not in r.stderr
    runs = json.loads(run_cli("runs", "-o", "json", env={"BREAKGLASS_STATE_DIR": str(api.state)}).stdout)["result"]
    assert runs[-1]["status"] == "applied"
    api.ready_endpoints()
    r = api.cli("revert", "--yes")
    # issue 33: reverted, but ready_endpoints' endpoints cannot be called from here: the re-armed webhook's backend is
    # unchecked, exit 8 (was 0)
    assert r.returncode == 8 and b"not called from here" in r.stdout, (r.stdout, r.stderr)
    assert api.etcd_obj()["webhooks"] == api.kyverno["webhooks"]  # exactly as stored, defaults included


def test_exclude_adds_the_audit_match_conditions_and_revert_removes_them(api):
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    p = api.cli("recover", "--method", "kubeapi", "-w", f"validating/{NAME}", "--action", "exclude", "--yes")
    assert p.returncode == 0, p.stderr  # the apiserver compiled the CEL expressions and accepted them
    names = [c["name"] for c in api.etcd_obj()["webhooks"][0]["matchConditions"]]
    assert names == ["skip", "breakglass-skip-apiserver-self", "breakglass-skip-bootstrap-kinds"]
    api.ready_endpoints()
    assert api.cli("revert", "--yes").returncode == 8  # issue 33: backend unchecked (not called from here), was 0
    assert api.etcd_obj()["webhooks"] == api.kyverno["webhooks"]


def test_delete_and_recreate_from_backup(api):
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    p = api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--yes")
    assert p.returncode == 0, p.stderr
    assert api.etcd_obj() is None and api.get("validating", NAME) is None
    api.ready_endpoints()
    r = api.cli("revert", "--yes")
    # issue 33: re-created (the apiserver refuses a create carrying a resourceVersion, 400: that would be exit 1),
    # but the re-armed webhook's backend cannot be called from here: unchecked, exit 8 (was 0)
    assert r.returncode == 8 and b"not called from here" in r.stdout, (r.stdout, r.stderr)
    back = api.etcd_obj()
    assert back["webhooks"] == api.kyverno["webhooks"] and back["metadata"]["labels"] == KYVERNO["metadata"]["labels"]
    assert back["metadata"]["uid"] != api.kyverno["metadata"]["uid"] and back["metadata"]["generation"] == 1
    # a new object with breakglass' own field management, not Kyverno's carried over from the backup
    assert [m["manager"] for m in back["metadata"]["managedFields"]] == ["OpenAPI-Generator"]


def test_recreated_by_an_operator_is_reported_not_overwritten(api):
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    assert api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--yes").returncode == 0
    recreated = json.loads(json.dumps(KYVERNO))
    recreated["webhooks"][0]["timeoutSeconds"] = 30
    recreated["metadata"].pop("labels", None)  # an operator's copy: Kyverno's own is left as Kyverno wrote it (issue
    api.create("validating", recreated)  # 35, tests/test_engine_kyverno.py), an operator's is a conflict
    api.ready_endpoints()
    r = api.cli("revert", "--yes")
    assert r.returncode == 4 and b"timeoutSeconds: 30" in r.stdout
    assert api.etcd_obj()["webhooks"][0]["timeoutSeconds"] == 30
    r = api.cli("revert", "--yes", "--force")  # a PUT carrying the resourceVersion just read
    assert r.returncode == 8, r.stderr  # issue 33: the re-armed backend cannot be called from here: unchecked
    assert api.etcd_obj()["webhooks"] == api.kyverno["webhooks"]


def _guard_of(name: str, rules: list, service: str = "guard-svc") -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.breakglass.test", "failurePolicy": "Fail", "sideEffects": "None",
                          "admissionReviewVersions": ["v1"], "timeoutSeconds": 2, "rules": rules,
                          "clientConfig": {"service": {"namespace": SCRATCH_NS, "name": service}}}]}


BOOTSTRAP_RULES = [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["servicecidrs", "ipaddresses"]},
                   {"apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["clusterroles", "clusterrolebindings"]}]


def test_revert_re_arms_at_once_when_the_heal_model_says_the_cluster_can_heal(kube, tmp_path):
    """Issue 35 §5: the webhook blocked only the bootstrap writes; they are settled (this apiserver came up at 1.34:
    the kubernetes ServiceCIDR is Ready, every ClusterIP has its IPAddress), so with its backend still down the
    revert re-arms it at once instead of refusing, says why, and the report says how long nothing enforced."""
    c = Cluster(kube, tmp_path)
    c.create("validating", _guard_of("bootstrap-guard", BOOTSTRAP_RULES))
    assert c.cli("recover", "--method", "kubeapi", "-w", "validating/bootstrap-guard", "--action", "delete",
                 "--yes").returncode == 0
    r = c.cli("revert", "--yes", "-o", "json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0, json.dumps(doc["outcome"]["notVerified"])
    guard = doc["result"]["guard"]
    assert guard["state"] == "can-heal" and guard["heal"]["safe"], guard
    reasons = "; ".join(guard["heal"]["reasons"])
    assert "ServiceCIDR exists and is Ready" in reasons and "ClusterIP has its IPAddress" in reasons, reasons
    assert f"{SCRATCH_NS}'s pods are not sent to it" in reasons
    assert guard["canary"]["ok"] is False  # the apiserver calls it: armed, and failing closed as it should
    assert any("fails closed until its backend is back" in v for v in doc["outcome"]["verified"]), doc["outcome"]
    assert guard["off_for"]["seconds"] >= 0 and "did not enforce" in guard["off_for"]["line"]
    assert c.get("validating", "bootstrap-guard") is not None
    # the apiserver itself now sends a ServiceCIDR write to it, and refuses it
    status, out = c.admin.call("POST", "/apis/networking.k8s.io/v1/servicecidrs?dryRun=All", {
        "metadata": {"name": "breakglass-heal"}, "spec": {"cidrs": ["10.201.0.0/24"]}})
    assert status >= 500 and "bootstrap-guard.breakglass.test" in json.dumps(out), out
    run = doc["result"]["run"]
    report = open(os.path.join(c.state, "runs", run, "report.md"), encoding="utf-8").read()
    assert "## Time without enforcement" in report and "did not enforce for" in report


def test_revert_still_refuses_a_webhook_on_node_heartbeats_with_its_backend_down_and_says_why(kube, tmp_path):
    c = Cluster(kube, tmp_path)
    c.create("validating", _guard_of("lease-guard", [{"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
                                                       "operations": ["CREATE", "UPDATE"], "resources": ["leases"]}]))
    assert c.cli("recover", "--method", "kubeapi", "-w", "validating/lease-guard", "--action", "delete",
                 "--yes").returncode == 0
    r = c.cli("revert", "--yes")
    text = (r.stdout + r.stderr).decode()
    assert r.returncode == 4, text
    assert "not safe to re-arm while its backend is down" in text and "Lease in kube-node-lease (kubelet)" in text
    assert c.get("validating", "lease-guard") is None  # nothing re-armed


def test_binding_ignore_sets_audit(api):
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    p = api.cli("recover", "--method", "kubeapi", "-w", f"vapbinding/{BINDING}", "--yes")
    assert p.returncode == 0, p.stderr
    assert api.etcd_obj("vapbinding", BINDING)["spec"]["validationActions"] == ["Audit"]
    assert api.cli("revert", "--yes").returncode == 0
    assert api.etcd_obj("vapbinding", BINDING)["spec"] == api.binding["spec"]


def test_dry_run_only_reads(api):
    before = api.real.etcd_value(sources.etcd_key("validating", NAME))
    mark = api.real.audit_mark()
    p = api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--dry-run")
    assert p.returncode == 0, p.stderr
    events = api.real.audit_events(mark, api.real.user_name())
    assert events and {e["verb"] for e in events} == {"get"}, [(e["verb"], e["requestURI"]) for e in events]
    assert api.real.etcd_value(sources.etcd_key("validating", NAME)) == before


@pytest.mark.parametrize("kind,ref,action", [("validating", NAME, "ignore"), ("validating", NAME, "exclude"),
                                             ("mutating", "istio-sidecar-injector", "ignore"),
                                             ("vapbinding", BINDING, "ignore")])
def test_the_plan_shows_exactly_what_the_apiserver_would_write(api, kind, ref, action):
    """The patch of each step, sent with dryRun=All, comes back from the real apiserver exactly as the plan's
    locally computed preview (kubeapi_ops), and nothing is stored."""
    from breakglass.flows import recovery
    from breakglass.ways.kubeapi_ops import apply_ops

    if kind == "mutating":
        api.create("mutating", _mutating())
    remedy, [step] = recovery.plan_kubeapi(api.kc, None, [f"{kind}/{ref}"], None, action, [])
    obj = remedy._get(step.data["kind"], ref)
    before = api.real.etcd_value(sources.etcd_key(kind, ref))
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": step.data["rv"]}] + step.data["ops"]
    status, answer = remedy.api.request("PATCH", remedy._path(step.data["kind"], ref), ops,
                                        content_type="application/json-patch+json", query="dryRun=All")
    assert status == 200, answer
    assert content(answer) == content(apply_ops(obj, step.data["ops"]))
    assert answer["metadata"]["resourceVersion"] == step.data["rv"]
    assert api.real.etcd_value(sources.etcd_key(kind, ref)) == before


def test_a_change_before_the_backup_is_never_overwritten(api):
    from breakglass.flows import recovery
    from breakglass.core.errors import PreconditionFailed

    remedy, steps = recovery.plan_kubeapi(api.kc, None, [NAME], None, "ignore", [])
    changed = api.get("validating", NAME)
    changed["webhooks"][0]["timeoutSeconds"] = 5
    api.update("validating", changed)  # someone else wins the race
    with pytest.raises(PreconditionFailed):
        recovery.execute(remedy, steps, str(api.state), {})
    stored = api.etcd_obj()
    assert stored["webhooks"][0]["failurePolicy"] == "Fail" and stored["webhooks"][0]["timeoutSeconds"] == 5


@pytest.mark.parametrize("action,answer", [("ignore", (422, "Invalid")), ("exclude", (422, "Invalid")),
                                           ("delete", (409, "Conflict"))])
def test_a_change_racing_the_write_is_refused_by_the_apiserver(api, monkeypatch, action, answer):
    """The object changes after breakglass backed it up and before it writes: the apiserver itself refuses the
    write. A JSON patch whose `test` of metadata.resourceVersion fails is 422 Invalid (the apiserver's
    message does not say which operation failed); a delete whose preconditions fail is 409 Conflict."""
    from breakglass.flows import recovery
    from breakglass.core.errors import PreconditionFailed

    remedy, steps = recovery.plan_kubeapi(api.kc, None, [NAME], None, action, [])
    backup, request, answers = remedy.backup, remedy.api.request, []

    def backup_then_race(step, run):
        out = backup(step, run)
        changed = api.get("validating", NAME)
        changed["webhooks"][0]["timeoutSeconds"] = 5
        api.update("validating", changed)
        return out

    def recording(method, path, *a, **k):
        status, doc = request(method, path, *a, **k)
        answers.append((method, status, doc.get("reason")))
        return status, doc

    monkeypatch.setattr(remedy, "backup", backup_then_race)
    monkeypatch.setattr(remedy.api, "request", recording)
    with pytest.raises(PreconditionFailed, match="changed since it was backed up") as e:
        recovery.execute(remedy, steps, str(api.state), {})
    assert ("not deleted" if action == "delete" else "not patched") in str(e.value)
    assert [a for a in answers if a[0] != "GET"] == [("DELETE" if action == "delete" else "PATCH", *answer)]
    stored = api.etcd_obj()
    assert stored["webhooks"][0]["timeoutSeconds"] == 5 and stored["webhooks"][0]["failurePolicy"] == "Fail"
    assert [c["name"] for c in stored["webhooks"][0]["matchConditions"]] == ["skip"]


def test_a_patch_the_apiserver_refuses_as_invalid_is_not_called_a_race(kube, tmp_path):
    """Kyverno's configuration already at the apiserver's limit of 64 matchConditions: --action exclude adds
    two more, which the apiserver refuses as invalid, with the same 422 as a failed `test`. breakglass must say
    so rather than claim the object changed, and nothing is written."""
    c = Cluster(kube, tmp_path)
    full = json.loads(json.dumps(KYVERNO))
    full["webhooks"][0]["matchConditions"] += [{"name": f"c{i}", "expression": "true"} for i in range(63)]
    c.create("validating", full)
    before = kube.etcd_value(sources.etcd_key("validating", NAME))
    p = c.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "exclude", "--yes", "--no-wait")
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "refused the patch" in err and "must have at most 64 items" in err and "changed since" not in err
    assert kube.etcd_value(sources.etcd_key("validating", NAME)) == before


def test_mixing_paths_delete_through_etcd_seen_through_the_api(api):
    env = {"BREAKGLASS_STATE_DIR": str(api.state)}
    # issue 33: --apiserver, the real apiserver in front of this etcd (else none is known for it: exit 8)
    p = run_cli("recover", "--method", "etcd", "-w", NAME, "--yes", "--etcd-endpoints", api.real.etcd_endpoint,
                "--apiserver", api.real.url, env=env)
    assert p.returncode == 0, p.stderr
    listed = run_cli("webhooks", "--kubeconfig", api.kc, "-o", "json")
    assert listed.returncode == 0 and NAME not in listed.stdout.decode()
    assert api.get("validating", NAME) is None  # the apiserver's watch saw the key go
    api.ready_endpoints()  # the webhook's backend is back: the revert may re-arm it
    r = run_cli("revert", "--yes", "--etcd-endpoints", api.real.etcd_endpoint, env=env)
    # issue 33: the backend cannot be called from here: unchecked, exit 8 (was 0)
    assert r.returncode == 8 and b"not called from here" in r.stdout, (r.stdout, r.stderr)
    listed = run_cli("webhooks", "--kubeconfig", api.kc, "-o", "json")
    assert NAME in listed.stdout.decode()
    assert api.get("validating", NAME)["metadata"]["uid"] == api.kyverno["metadata"]["uid"]  # the same object


def test_client_certificate_auth(api):
    user = api.real.client_cert(str(api.tmp / "certs"), "breakglass-operator", ("system:masters",))
    kc = api.real.kubeconfig(str(api.tmp / "cert-kubeconfig"), user)
    mark = api.real.audit_mark()
    p = api.cli("recover", "--method", "kubeapi", "-w", NAME, "--dry-run", kubeconfig=kc)
    assert p.returncode == 0, p.stderr
    seen = [e["user"] for e in api.real.audit_events(mark) if (e.get("objectRef") or {}).get("name") == NAME]
    assert seen and all(u["username"] == "breakglass-operator" and "system:masters" in u["groups"] for u in seen)


def test_the_bearer_token_never_appears_in_output_or_state(api):
    token = api.real.token()
    outs = []
    for args in (["recover", "--method", "kubeapi", "-w", NAME, "--yes", "-v"],
                 ["recover", "--method", "kubeapi", "-w", f"vapbinding/{BINDING}", "--yes", "-o", "json"]):
        p = api.cli(*args)
        assert p.returncode == 0, p.stderr
        outs += [p.stdout, p.stderr]
    api.ready_endpoints()
    p = api.cli("revert", "--yes", "-v")
    assert p.returncode == 0, p.stderr
    outs += [p.stdout, p.stderr]
    assert not [o for o in outs if token.encode() in o]
    for root, _, files in os.walk(api.state):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                assert token.encode() not in fh.read(), f


CREDENTIAL_CASES = {
    # case: (what the apiserver answers, if it is reached)
    "unknown-token": 401, "expired-cert": 401, "foreign-ca-cert": 401, "forbidden-cert": 403,
    "forbidden-token": 403, "wrong-context": None, "unreachable": None, "untrusted-server-ca": None,
}


@pytest.mark.parametrize("case", CREDENTIAL_CASES)
def test_credential_and_reachability_failures_are_exit_5(api, case):
    """Each credential or reachability failure of `recover kubeapi` is exit 5 with one line (naming the 401 or 403
    where the apiserver answered), and nothing in etcd changes.

    Cost: the unreachable case takes about 60 s: recover asks a refused apiserver again for RETRY_SECONDS (60 s,
    a restart gap; --timeout only lengthens it) before exit 5, which is the path a user meets there. The other
    cases are one CLI run each."""
    from tests import etcd_server as es

    real, certs = api.real, str(api.tmp / "certs")
    before = real.etcd_value(sources.etcd_key("validating", NAME))
    args = ["recover", "--method", "kubeapi", "-w", NAME, "--yes", "--no-wait"]
    kc = str(api.tmp / "case-kubeconfig")
    if case == "unknown-token":
        real.kubeconfig(kc, {"token": "never-issued"})
    elif case == "expired-cert":
        real.kubeconfig(kc, real.client_cert(certs, "expired", ("system:masters",), expired=True))
    elif case == "foreign-ca-cert":
        real.kubeconfig(kc, real.client_cert(certs, "stranger", ("system:masters",), foreign=True))
    elif case == "forbidden-cert":  # authenticated by the trusted CA, but no RBAC grants it anything
        real.kubeconfig(kc, real.client_cert(certs, "nobody-in-particular"))
    elif case == "forbidden-token":
        real.kubeconfig(kc, {"token": real.token(NO_RIGHTS_SA)})
    elif case == "wrong-context":
        kc = api.kc
        args += ["--context", "nope"]
    elif case == "unreachable":
        real.kubeconfig(kc, server=f"https://127.0.0.1:{es.free_port()}")
    else:
        real.kubeconfig(kc, ca=real.client_ca_path)  # a CA that did not sign the serving certificate
    p = api.cli(*args, kubeconfig=kc)
    assert p.returncode == 5, (p.stdout, p.stderr)
    # issue 33: a refused connection is retried (a restart gap), each retry on its own "retrying:" line when
    # stderr is not a terminal; the error itself is still one line and a hint
    said = [ln for ln in p.stderr.decode().strip().splitlines() if not ln.startswith("retrying: ")]
    assert len(said) <= 2 and b"Traceback" not in p.stderr, p.stderr
    if CREDENTIAL_CASES[case]:
        assert f" {CREDENTIAL_CASES[case]} ".encode() in p.stderr
    assert real.etcd_value(sources.etcd_key("validating", NAME)) == before


def test_readiness_is_read_through_the_api_after_the_change(api):
    p = api.cli("recover", "--method", "kubeapi", "-w", NAME, "--yes", "-o", "json")
    assert p.returncode == 0, p.stderr
    [state] = json.loads(p.stdout)["result"]["readiness"]
    assert state["ready"] is True and state["status"] == 200 and state["failing"] == []
    assert state["url"] == api.real.url + "/readyz?verbose"


def test_readiness_of_a_deadlocked_apiserver_names_the_hook_it_waits_for(real_sandbox):
    """Only a stuck apiserver fails a readiness check: the seed's deadlock on 1.34 (its own sandbox). A change
    that leaves the culprit alone leaves it stuck, and the result says on which post-start hook."""
    from breakglass.sandbox import INNOCENT, scenarios

    hook = "poststarthook/start-kubernetes-service-cidr-controller"
    _, binary = binary_for("1.34")
    sb = real_sandbox(binary)
    sb.wait(ready=False, failing=hook)
    sb.client().must("POST", scenarios.VWC_PATH, manifest(INNOCENT[0]))  # never sent to webhooks
    # issue 33: the wait for /readyz up to --wait-timeout (a deadline for a state that does not change here), and
    # not ready at the deadline is exit 8, "applied, not verified" (was exit 0 after one probe)
    p = sb.cli("recover", "--method", "kubeapi", "-w", INNOCENT[0]["metadata"]["name"], "--kubeconfig",
               sb.api["kubeconfig"], "--yes", "-o", "json", "--wait-timeout", "5")
    assert p.returncode == 8, p.stderr
    assert json.loads(p.stdout)["result"]["status"] == "applied-unverified"
    [state] = json.loads(p.stdout)["result"]["readiness"]
    assert state["ready"] is False and state["status"] == 500 and hook in state["failing"]


def _mutating() -> dict:
    mutating = json.loads(json.dumps(KYVERNO))
    mutating["kind"] = "MutatingWebhookConfiguration"
    mutating["metadata"]["name"] = "istio-sidecar-injector"
    return mutating


def test_mutating_configuration(api):
    created = api.create("mutating", _mutating())
    assert created["webhooks"][0]["reinvocationPolicy"] == "Never"  # the apiserver's default
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    p = api.cli("recover", "--method", "kubeapi", "-w", "mutating/istio-sidecar-injector", "--yes")
    assert p.returncode == 0, p.stderr
    assert api.etcd_obj("mutating", "istio-sidecar-injector")["webhooks"][0]["failurePolicy"] == "Ignore"
    api.ready_endpoints()
    assert api.cli("revert", "--yes").returncode == 8  # issue 33: backend unchecked (not called from here), was 0
    assert api.etcd_obj("mutating", "istio-sidecar-injector")["webhooks"] == created["webhooks"]


def test_wizard_checks_the_culprits_backend_through_the_api(api):
    """Issue 33: the wizard's backend check is the engine's revert guard for the run it would revert (it took the
    Services to read before), read through the API: the same reading `revert` acts on."""
    from breakglass.core import journal
    from breakglass.flows import planner, wizard
    from breakglass.present.prompts import ScriptedPrompter

    assert api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "ignore", "--yes").returncode == 0
    [run] = journal.list_runs(str(api.state))
    p = ScriptedPrompter([])
    access = planner.Access(kubeconfig=api.kc)

    def check() -> str:
        before = len(p.transcript)
        wizard._check_backends(p, access, run.id, str(api.state))
        return "\n".join(line.strip() for line in p.transcript[before:])

    said = check()
    assert "backend kyverno/kyverno-svc: no such Service (read from api)" in said, said
    # headless: a cluster IP would be an IPAddress object, which the fixture's Kyverno webhook (down) intercepts
    api.admin.must("POST", f"/api/v1/namespaces/{SCRATCH_NS}/services",
                   {"metadata": {"name": "kyverno-svc"},
                    "spec": {"clusterIP": "None", "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}})
    try:
        said = check()
        assert "backend kyverno/kyverno-svc: 0 ready endpoint(s), 0 not ready (read from api, 0 EndpointSlice(s))" \
            in said, said
        assert "not called from here" not in said, said
        api.ready_endpoints(ready=1, not_ready=2)  # an Endpoints object, no slice: it counts instead
        said = check()
        assert "backend kyverno/kyverno-svc: 1 ready endpoint(s), 2 not ready (read from api, 0 EndpointSlice(s))" \
            in said, said
        assert "endpoints ready, not called from here" in said, said  # never plain "ready": no call was made
    finally:
        api.admin.must("DELETE", f"/api/v1/namespaces/{SCRATCH_NS}/services/kyverno-svc", ok=(200, 202, 404))
