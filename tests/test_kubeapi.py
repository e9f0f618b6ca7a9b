"""The kubeconfig remedy against the apiserver stand-in, which stores objects in the real etcd."""

from __future__ import annotations

import json

import pytest
import yaml

from breakglass.webhooks import codec, sources
from tests import etcd_server as es
from tests.apiserver_standin import StandinApiserver
from tests.conftest import run_cli
from tests.test_codec import KYVERNO

NAME = KYVERNO["metadata"]["name"]


@pytest.fixture
def api(etcd_clean, tmp_path):
    pki = es.make_pki(str(tmp_path))
    srv = StandinApiserver(etcd_clean, pki, token="s3cret")
    c = es.raw_client(etcd_clean)
    c.put(sources.etcd_key("validating", NAME), codec.encode_value(KYVERNO))
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "require-owner-binding", "uid": "b1"},
               "spec": {"policyName": "require-owner", "validationActions": ["Deny"]}}
    c.put(sources.etcd_key("vapbinding", "require-owner-binding"), codec.encode_value(binding))
    c.close()
    kc = tmp_path / "kubeconfig"

    def kubeconfig(user=None):
        kc.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": srv.url, "certificate-authority": pki["ca"]}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "users": [{"name": "u", "user": user or {"token": "s3cret"}}]}))
        return str(kc)

    srv.kubeconfig = kubeconfig
    srv.pki = pki
    srv.state = tmp_path / "state"
    srv.etcd_srv = etcd_clean
    kubeconfig()
    yield srv
    srv.stop()


def _etcd_obj(srv, kind="validating", name=NAME):
    c = es.raw_client(srv.etcd_srv)
    value, _ = c.get(sources.etcd_key(kind, name))
    c.close()
    return codec.decode_value(value).obj if value is not None else None


def _cli(srv, *args, env=None):
    return run_cli(*args, "--kubeconfig", str(srv.state.parent / "kubeconfig"),
                   env={"BREAKGLASS_STATE_DIR": str(srv.state), **(env or {})})


def _ready_endpoints(srv):
    srv.endpoints["kyverno/kyverno-svc"] = {"kind": "Endpoints", "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]}


def test_ignore_then_revert_through_the_api_on_the_same_storage(api):
    p = _cli(api, "recover", "--method", "kubeapi", "-w", NAME, "--action", "ignore", "--yes", "--no-wait")
    assert p.returncode == 0, p.stderr
    assert _etcd_obj(api)["webhooks"][0]["failurePolicy"] == "Ignore"  # the API wrote etcd as kube-apiserver would
    assert b"Kyverno manages this configuration" in p.stderr  # operator awareness
    r = _cli(api, "revert", "--yes")
    assert r.returncode == 4 and b"no ready endpoints" in r.stdout + r.stderr  # would brick the cluster again
    _ready_endpoints(api)
    r = _cli(api, "revert", "--yes")
    assert r.returncode == 0, r.stderr
    assert _etcd_obj(api)["webhooks"] == KYVERNO["webhooks"]


def test_exclude_adds_the_audit_match_conditions_and_revert_removes_them(api):
    p = _cli(api, "recover", "--method", "kubeapi", "-w", f"validating/{NAME}", "--action", "exclude", "--yes",
             "--no-wait")
    assert p.returncode == 0, p.stderr
    names = [c["name"] for c in _etcd_obj(api)["webhooks"][0]["matchConditions"]]
    assert names == ["skip", "breakglass-skip-apiserver-self", "breakglass-skip-bootstrap-kinds"]
    _ready_endpoints(api)
    assert _cli(api, "revert", "--yes").returncode == 0
    assert _etcd_obj(api)["webhooks"] == KYVERNO["webhooks"]


def test_delete_and_recreate_from_backup(api):
    p = _cli(api, "recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--yes", "--no-wait")
    assert p.returncode == 0, p.stderr
    assert _etcd_obj(api) is None
    _ready_endpoints(api)
    assert _cli(api, "revert", "--yes").returncode == 0
    back = _etcd_obj(api)
    assert back["webhooks"] == KYVERNO["webhooks"] and back["metadata"]["uid"] != KYVERNO["metadata"]["uid"]
    assert "managedFields" not in back["metadata"]  # server-set fields were stripped before re-creating


def test_recreated_by_an_operator_is_reported_not_overwritten(api):
    assert _cli(api, "recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--yes",
                "--no-wait").returncode == 0
    c = es.raw_client(api.etcd_srv)
    recreated = json.loads(json.dumps(KYVERNO))
    recreated["webhooks"][0]["timeoutSeconds"] = 30
    c.put(sources.etcd_key("validating", NAME), codec.encode_value(recreated))
    c.close()
    _ready_endpoints(api)
    r = _cli(api, "revert", "--yes")
    assert r.returncode == 4 and b"timeoutSeconds: 30" in r.stdout
    assert _etcd_obj(api)["webhooks"][0]["timeoutSeconds"] == 30
    assert _cli(api, "revert", "--yes", "--force").returncode == 0
    assert _etcd_obj(api)["webhooks"] == KYVERNO["webhooks"]


def test_binding_ignore_sets_audit(api):
    p = _cli(api, "recover", "--method", "kubeapi", "-w", "vapbinding/require-owner-binding", "--yes", "--no-wait")
    assert p.returncode == 0, p.stderr
    assert _etcd_obj(api, "vapbinding", "require-owner-binding")["spec"]["validationActions"] == ["Audit"]
    assert _cli(api, "revert", "--yes").returncode == 0
    assert _etcd_obj(api, "vapbinding", "require-owner-binding")["spec"]["validationActions"] == ["Deny"]


def test_dry_run_only_reads(api):
    p = _cli(api, "recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert {m for m, _ in api.requests} == {"GET"} and _etcd_obj(api) is not None


def test_a_concurrent_change_is_never_overwritten(api):
    from breakglass import recovery
    remedy, steps = recovery.plan_kubeapi(str(api.state.parent / "kubeconfig"), None, [NAME], None, "ignore", [])
    c = es.raw_client(api.etcd_srv)
    changed = json.loads(json.dumps(KYVERNO))
    changed["webhooks"][0]["timeoutSeconds"] = 5
    c.put(sources.etcd_key("validating", NAME), codec.encode_value(changed))  # someone else wins the race
    c.close()
    from breakglass.errors import PreconditionFailed
    with pytest.raises(PreconditionFailed):
        recovery.execute(remedy, steps, str(api.state), {})
    assert _etcd_obj(api)["webhooks"][0]["failurePolicy"] == "Fail"


def test_mixing_paths_delete_through_etcd_seen_through_the_api(api):
    env = {"BREAKGLASS_STATE_DIR": str(api.state)}
    p = run_cli("recover", "--method", "etcd", "-w", NAME, "--yes", "--etcd-endpoints", api.etcd_srv.endpoint, env=env)
    assert p.returncode == 0, p.stderr
    listed = run_cli("webhooks", "--kubeconfig", str(api.state.parent / "kubeconfig"), "-o", "json")
    assert NAME not in listed.stdout.decode()
    assert run_cli("revert", "--yes", "--etcd-endpoints", api.etcd_srv.endpoint, env=env).returncode == 0
    listed = run_cli("webhooks", "--kubeconfig", str(api.state.parent / "kubeconfig"), "-o", "json")
    assert NAME in listed.stdout.decode()


def test_client_certificate_auth(api):
    api.kubeconfig({"client-certificate": api.pki["client_cert"], "client-key": api.pki["client_key"]})
    p = _cli(api, "recover", "--method", "kubeapi", "-w", NAME, "--dry-run")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("case", ["expired", "forbidden", "wrong-context", "unreachable", "untrusted-ca"])
def test_credential_and_reachability_failures_are_exit_5(api, case, tmp_path):
    before = _etcd_obj(api)
    args = ["recover", "--method", "kubeapi", "-w", NAME, "--yes", "--no-wait"]
    if case == "expired":
        api.kubeconfig({"token": "expired"})
    elif case == "forbidden":
        api.kubeconfig({"token": "forbidden"})
        api.token = "forbidden"
    elif case == "wrong-context":
        args += ["--context", "nope"]
    elif case == "unreachable":
        text = open(api.state.parent / "kubeconfig").read().replace(api.url, f"https://127.0.0.1:{es.free_port()}")
        open(api.state.parent / "kubeconfig", "w").write(text)
    else:
        text = open(api.state.parent / "kubeconfig").read().replace(api.pki["ca"], api.pki["other-ca"])
        open(api.state.parent / "kubeconfig", "w").write(text)
    p = _cli(api, *args)
    assert p.returncode == 5, (p.stdout, p.stderr)
    assert len(p.stderr.decode().strip().splitlines()) <= 2 and b"Traceback" not in p.stderr
    assert _etcd_obj(api) == before


def test_readiness_is_read_through_the_api_after_the_change(api):
    api.failing = ["poststarthook/start-kubernetes-service-cidr-controller"]
    p = _cli(api, "recover", "--method", "kubeapi", "-w", NAME, "--yes", "-o", "json")
    assert p.returncode == 0, p.stderr
    [state] = json.loads(p.stdout)["result"]["readiness"]
    assert state["ready"] is False and state["failing"] == ["poststarthook/start-kubernetes-service-cidr-controller"]


def test_mutating_configuration(api):
    mutating = json.loads(json.dumps(KYVERNO))
    mutating["kind"] = "MutatingWebhookConfiguration"
    mutating["metadata"]["name"] = "istio-sidecar-injector"
    c = es.raw_client(api.etcd_srv)
    c.put(sources.etcd_key("mutating", "istio-sidecar-injector"), codec.encode_value(mutating))
    c.close()
    p = _cli(api, "recover", "--method", "kubeapi", "-w", "mutating/istio-sidecar-injector", "--yes", "--no-wait")
    assert p.returncode == 0, p.stderr
    assert _etcd_obj(api, "mutating", "istio-sidecar-injector")["webhooks"][0]["failurePolicy"] == "Ignore"
    _ready_endpoints(api)
    assert _cli(api, "revert", "--yes").returncode == 0
    assert _etcd_obj(api, "mutating", "istio-sidecar-injector")["webhooks"] == mutating["webhooks"]


def test_wizard_checks_the_culprits_backend_through_the_api(api):
    from breakglass import planner, wizard
    from breakglass.prompts import ScriptedPrompter
    p = ScriptedPrompter([])
    access = planner.Access(kubeconfig=str(api.state.parent / "kubeconfig"))
    wizard._check_backends(p, access, ["kyverno/kyverno-svc"])
    assert [line.strip() for line in p.transcript] == [
        "backend kyverno/kyverno-svc: 0 ready endpoint(s), 0 not ready — do not revert yet"]
    _ready_endpoints(api)
    wizard._check_backends(p, access, ["kyverno/kyverno-svc"])
    assert p.transcript[-1].strip() == "backend kyverno/kyverno-svc: 1 ready endpoint(s), 0 not ready"
