"""Issue 20: the configuration behind a webhook a log names is read from the cluster, not guessed.

A real etcd holds configurations whose names follow no vendor convention (one webhook name defined by two
configurations that call the same backend, another by two that call different backends); `recover --auto
--diagnosis` and `recover --webhook` must act on the right key, say where the mapping came from and who owns it,
and refuse an ambiguous name unless the engineer says which (or --yes, when the configurations fail together).
"""

from __future__ import annotations

import json

import pytest

from breakglass.webhooks import codec, model, resolve, sources
from tests import etcd_server as es
from tests import logbuild as lb
from tests import webhook_backends as wb
from tests.apiserver_standin import serve_readyz
from tests.conftest import run_cli

CORP = "validate.policy.corp.example.com"
SHARED = "audit.corp.example.com"
SPLIT = "x.corp.example.com"


def _cfg(name: str, hooks: list[tuple[str, str]], kind: str = "ValidatingWebhookConfiguration",
         meta: dict | None = None) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, **(meta or {})},
            "webhooks": [{"name": h, "clientConfig": {"service": {"namespace": svc.split("/")[0],
                                                                  "name": svc.split("/")[1], "port": 443}},
                          "rules": [{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                                     "resources": ["*"]}],
                          "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"]}
                         for h, svc in hooks]}


# issue 33: corp-policy-hooks trusts CA, so its backends can be a real one that answers the apiserver's call
CA = wb.Ca()
HELM = {"labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": "policy", "meta.helm.sh/release-namespace": "corp"}}
CONFIGS = [
    wb.with_ca_bundle(_cfg("corp-policy-hooks", [("other.corp.example.com", "corp/other"), (CORP, "corp/policy")],
                           meta=HELM), CA.bundle),
    _cfg("audit-a", [(SHARED, "corp/audit")]),
    _cfg("audit-b", [(SHARED, "corp/audit")], kind="MutatingWebhookConfiguration"),
    _cfg("split-a", [(SPLIT, "corp/one")]),
    _cfg("split-b", [(SPLIT, "corp/two")]),
    _cfg("kyverno-resource-validating-webhook-cfg", [("validate.kyverno.svc-fail", "kyverno/kyverno-svc")]),
]


def _key(obj: dict) -> bytes:
    kind = "validating" if obj["kind"].startswith("Validating") else "mutating"
    return sources.etcd_key(kind, obj["metadata"]["name"])


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Issue 33, what makes a run here verifiable: the real backend (breakglass/sandbox/backend.py) serving a
    certificate from CA for policy.corp.svc and other.corp.svc on loopback, where the seeded endpoints point, and
    an apiserver /readyz answering 200 (the apiserver back after the change) to wait on."""
    d = str(tmp_path_factory.mktemp("corp-backend"))
    crt, key = CA.issue(d, "corp", dns=("policy.corp.svc", "other.corp.svc"))
    backend = wb.RealBackend(crt, key, f"{d}/backend.log")
    try:
        with serve_readyz([], "none") as url:
            yield {"port": backend.port, "apiserver": url}
    finally:
        backend.stop()


@pytest.fixture
def cluster(etcd_clean):
    c = es.raw_client(etcd_clean)
    es.put_many(c, [(_key(o), codec.encode_value(o)) for o in CONFIGS])
    c.close()
    return etcd_clean


def _keys(srv) -> set[bytes]:
    c = es.raw_client(srv)
    try:
        return {m.key for _, m in c.get_prefix(b"/registry/")}
    finally:
        c.close()


def _cli(srv, tmp_path, *args):
    return run_cli(*args, "--etcd-endpoints", srv.endpoint, env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})


def _diagnosis(tmp_path, hook: str, url: str) -> str:
    log = tmp_path / "apiserver.log"
    log.write_text(lb.klog(lb.fail_closed(hook, "dial tcp 10.96.0.50:443: connect: connection refused", url=url),
                           "W") + "\n")
    out = run_cli("diagnose", str(log), "-o", "json")
    assert out.returncode == 3, out.stderr
    doc = json.loads(out.stdout)
    assert not any(t.get("configuration") for r in doc["result"]["remedies"] for t in r.get("targets") or []), \
        "the log names no configuration: breakglass must not know it yet"
    path = tmp_path / "diag.json"
    path.write_bytes(out.stdout)
    return str(path)


def test_auto_from_a_diagnosis_finds_the_configuration_in_etcd(cluster, tmp_path, live):
    _seed_backend(cluster, ready=1, port=live["port"])  # back by the time of the revert, which re-arms the webhook
    diag = _diagnosis(tmp_path, CORP, "https://policy.corp.svc:443/validate?timeout=10s")
    dry = _cli(cluster, tmp_path, "recover", "--auto", "--diagnosis", diag, "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    steps = doc["result"]["steps"]
    assert [s["target"] for s in steps] == ["/registry/validatingwebhookconfigurations/corp-policy-hooks"]
    assert CORP in steps[0]["summary"]
    assert b"read from etcd" in dry.stderr and b"Helm release corp/policy" in dry.stderr
    # a webhook on one namespace only, down: DEGRADED by the heal model, and --auto says so before it acts
    assert b"note: the diagnosis says DEGRADED" in dry.stderr
    before = _keys(cluster)
    # issue 33: --apiserver, whose /readyz is waited for (else none is known for this etcd: exit 8)
    done = _cli(cluster, tmp_path, "recover", "--auto", "--diagnosis", diag, "--yes", "--apiserver", live["apiserver"])
    assert done.returncode == 0, done.stderr
    assert before - _keys(cluster) == {b"/registry/validatingwebhookconfigurations/corp-policy-hooks"}
    back = _cli(cluster, tmp_path, "revert", "--yes")
    assert back.returncode == 0, back.stderr
    assert _keys(cluster) == before


def test_webhook_option_and_reference_resolve_the_same(cluster, tmp_path):
    a = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--webhook", CORP, "--dry-run", "-o", "json")
    b = _cli(cluster, tmp_path, "recover", "--method", "etcd", "-w", f"webhook:{CORP}", "--dry-run", "-o", "json")
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert json.loads(a.stdout)["result"]["steps"] == json.loads(b.stdout)["result"]["steps"]


def test_a_name_in_two_configurations_that_fail_together(cluster, tmp_path):
    asked = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--webhook", SHARED, "--dry-run")
    assert asked.returncode == 2
    err = asked.stderr.decode()
    assert "validating/audit-a" in err and "mutating/audit-b" in err and "-w" in err
    both = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--webhook", SHARED, "--dry-run", "--yes",
                "-o", "json")
    assert both.returncode == 0, both.stderr
    assert sorted(s["target"] for s in json.loads(both.stdout)["result"]["steps"]) == [
        "/registry/mutatingwebhookconfigurations/audit-b", "/registry/validatingwebhookconfigurations/audit-a"]


def test_a_name_in_two_configurations_with_different_backends_is_never_taken_whole(cluster, tmp_path):
    before = _keys(cluster)
    out = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--webhook", SPLIT, "--yes")
    assert out.returncode == 2 and b"different backends" in out.stderr
    assert _keys(cluster) == before
    one = _cli(cluster, tmp_path, "recover", "--method", "etcd", "-w", "validating/split-b", "--dry-run", "-o", "json")
    assert [s["target"] for s in json.loads(one.stdout)["result"]["steps"]] == [
        "/registry/validatingwebhookconfigurations/split-b"]


def test_a_webhook_no_configuration_defines(cluster, tmp_path):
    before = _keys(cluster)
    out = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--webhook", "nobody.example.com", "--yes")
    assert out.returncode == 2 and b"no webhook configuration defines a webhook named" in out.stderr
    assert _keys(cluster) == before


def test_owner_comes_from_the_object_before_any_vendor_table():
    helm = model.from_json(CONFIGS[0], "t")
    assert resolve.owner_of(helm) == "Helm release corp/policy (meta.helm.sh annotations)"
    owned = model.from_json(_cfg("o", [("a.b", "x/y")], meta={"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "operator", "uid": "1"}]}), "t")
    assert resolve.owner_of(owned) == "owned by Deployment/operator (ownerReferences)"
    labelled = model.from_json(_cfg("l", [("a.b", "x/y")], meta={"labels": {
        "app.kubernetes.io/part-of": "corp-policy", "app.kubernetes.io/instance": "prod"}}), "t")
    assert resolve.owner_of(labelled) == "part of corp-policy, instance prod (app.kubernetes.io labels)"
    assert resolve.owner_of(model.from_json(CONFIGS[1], "t")) is None


def _seed_backend(srv, ready: int, port: int = 9443) -> None:
    from breakglass.webhooks import backend

    svc_prefix, _, slice_prefix = backend.etcd_prefixes("corp")
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "policy", "namespace": "corp"},
           "spec": {"ports": [{"port": 443, "targetPort": port}], "selector": {"app": "policy"}}}
    # loopback: with ``port`` of the live backend, a ready endpoint that answers the revert guard's call (127.0.0.1;
    # the not-ready one is never called); at 9443, where nothing listens, ready endpoints it cannot call from here
    sl = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
          "metadata": {"name": "policy-x1", "namespace": "corp", "labels": {backend.SERVICE_NAME_LABEL: "policy"}},
          "addressType": "IPv4", "ports": [{"port": port}],
          "endpoints": [{"addresses": [f"127.0.0.{i + 1}"], "conditions": {"ready": i < ready},
                         "targetRef": {"kind": "Pod", "namespace": "corp", "name": f"policy-{i}"}} for i in range(2)]}
    from tests import backend_seed

    c = es.raw_client(srv)
    c.put(svc_prefix + b"policy", codec.encode_value(svc))
    c.put(slice_prefix + b"policy-x1", codec.encode_value(sl))
    # the configuration's other webhook is re-armed by a revert too: its backend answers
    es.put_many(c, backend_seed.healthy("corp", "other", port=port))
    c.close()


def test_the_wizard_finds_the_configuration_and_reads_the_backend_from_etcd(cluster, tmp_path, live):
    from breakglass.flows import wizard
    from breakglass.present.prompts import ScriptedPrompter

    _seed_backend(cluster, ready=1, port=live["port"])
    diag_log = tmp_path / "apiserver.log"
    diag_log.write_text(lb.klog(lb.fail_closed(CORP, "dial tcp 10.96.0.50:443: connect: connection refused",
                                               url="https://policy.corp.svc:443/validate?timeout=10s"), "W") + "\n")
    before = _keys(cluster)
    # log, a way out anyway (the diagnosis is degraded: nothing the cluster needs is blocked), way in, etcd endpoint,
    # CA, cert, key, the apiserver to watch, way out, confirmation word, revert now. Issue 33: an apiserver to watch
    # (without one the run is not verified, exit 8) and backends that answer the call (endpoints that cannot be
    # called from here are unchecked: the revert would ask for the typed override, and the wizard exit 8)
    p = ScriptedPrompter([str(diag_log), True, "etcd", cluster.endpoint, "", "", "", live["apiserver"], "etcd",
                          "corp-policy-hooks", True])
    assert wizard.run(p, str(tmp_path / "state")) == 0, "\n".join(p.transcript)
    text = "\n".join(p.transcript)
    assert f"webhook {CORP} is in validating/corp-policy-hooks (read from etcd)" in text
    assert "Helm release corp/policy" in text
    assert "/registry/validatingwebhookconfigurations/corp-policy-hooks" in text  # the plan names the key
    assert "backend corp/policy: 1 ready endpoint(s), 1 not ready (read from etcd" in text
    assert _keys(cluster) == before  # deleted, then reverted


def test_the_wizard_asks_which_when_a_webhook_is_in_two_configurations(cluster, tmp_path, live):
    from breakglass.flows import wizard
    from breakglass.present.prompts import ScriptedPrompter

    diag_log = tmp_path / "apiserver.log"
    diag_log.write_text(lb.klog(lb.fail_closed(SPLIT, "context deadline exceeded",
                                               url="https://one.corp.svc:443/x?timeout=10s"), "W") + "\n")
    # issue 33: the apiserver to watch (it was none: the run is then not verified, exit 8)
    p = ScriptedPrompter([str(diag_log), True, "etcd", cluster.endpoint, "", "", "", live["apiserver"], "etcd",
                          "validating/split-b", "split-b", False])
    assert wizard.run(p, str(tmp_path / "state")) == 0, "\n".join(p.transcript)
    text = "\n".join(p.transcript)
    assert f"Webhook {SPLIT} is in 2 configurations. Which?" in text and "all of them" not in text
    assert b"/registry/validatingwebhookconfigurations/split-b" not in _keys(cluster)
    assert b"/registry/validatingwebhookconfigurations/split-a" in _keys(cluster)


def test_recover_with_a_diagnosis_and_a_method(cluster, tmp_path):
    diag = _diagnosis(tmp_path, CORP, "https://policy.corp.svc:443/validate?timeout=10s")
    out = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--diagnosis", diag, "--dry-run", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert [s["target"] for s in json.loads(out.stdout)["result"]["steps"]] == [
        "/registry/validatingwebhookconfigurations/corp-policy-hooks"]


def test_diagnose_given_etcd_places_each_webhook_in_its_configuration(cluster, tmp_path):
    log = tmp_path / "apiserver.log"
    log.write_text(lb.klog(lb.fail_closed(CORP, "dial tcp 10.96.0.50:443: connect: connection refused",
                                          url="https://policy.corp.svc:443/validate?timeout=10s"), "W") + "\n"
                   + lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "context deadline exceeded"), "W") + "\n")
    plain = json.loads(run_cli("diagnose", str(log), "-o", "json").stdout)["result"]
    assert {f["webhook"]: f["configuration_source"] for f in plain["findings"]} == {
        CORP: None, "validate.kyverno.svc-fail": "convention: Kyverno"}
    manual = next(r for r in plain["remedies"] if r["method"] == "etcd")["manual"]
    assert any(m.startswith(f"breakglass recover --method etcd --webhook {CORP} --dry-run") for m in manual)
    out = run_cli("diagnose", str(log), "--etcd-endpoints", cluster.endpoint, "-o", "json")
    assert out.returncode == 3, out.stderr
    doc = json.loads(out.stdout)["result"]
    placed = {f["webhook"]: (f["configuration"], f["configuration_source"]) for f in doc["findings"]}
    assert placed == {CORP: ("corp-policy-hooks", "etcd"),
                      "validate.kyverno.svc-fail": ("kyverno-resource-validating-webhook-cfg", "etcd")}
    corp = next(f for f in doc["findings"] if f["webhook"] == CORP)
    assert corp["operator_note"].startswith("Helm release corp/policy")
    etcd = next(r for r in doc["remedies"] if r["method"] == "etcd")
    assert "/registry/validatingwebhookconfigurations/corp-policy-hooks" in [t["etcd_key"] for t in etcd["targets"]]


def test_diagnose_with_an_unreachable_etcd_still_diagnoses(tmp_path):
    log = tmp_path / "apiserver.log"
    log.write_text(lb.klog(lb.fail_closed(CORP, "connection refused"), "W") + "\n")
    out = run_cli("diagnose", str(log), "--etcd-endpoints", "http://127.0.0.1:1", "--timeout", "1", "-o", "json")
    assert out.returncode == 3, out.stderr
    doc = json.loads(out.stdout)
    assert any("could not read the webhook configurations from etcd" in w for w in doc["warnings"])


@pytest.mark.parametrize("name", ["a;rm -rf /", "$(id)", "x" * 100_000, "hook\nname", "-rf"])
def test_a_webhook_name_that_cannot_be_one_is_refused_in_one_line(cluster, tmp_path, name):
    before = _keys(cluster)
    out = _cli(cluster, tmp_path, "recover", "--method", "etcd", "--webhook", name, "--yes")
    err = out.stderr.decode()
    assert out.returncode == 2 and "not a webhook name" in err and "Traceback" not in err
    assert len(err.splitlines()) <= 2 and len(err) < 400  # one line (and a hint), never the whole input
    assert _keys(cluster) == before


def test_kubeapi_checks_webhook_names_before_asking_the_api():
    from breakglass.core.errors import BadInput
    from breakglass.ways.kubeapi_patch import KubeapiPatch

    with pytest.raises(BadInput, match="not a webhook name"):
        KubeapiPatch(None, [], None, "ignore", ["$(id)"]).plan()  # no API: it must not be reached
