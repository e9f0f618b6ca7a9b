"""Backend readiness asks what the apiserver asks (issue 33): the real kube-apiserver calls each backend through a
fail-closed webhook, and breakglass' reading (webhooks/readiness.py) agrees with it: every backend the apiserver
cannot call is not ready, the one it calls is ready. Then a Service's backend read from a real etcd (no Service, the
wrong port, endpoints that answer or cannot be called from here), and the CLI's revert refused for every lying
``url:`` backend, reverted once the real one answers.

Every backend listens on 127.0.0.1; an endpoint "not callable from here" is a loopback port nothing listens on (a
refused connection to an endpoint means "not called from here", as a pod's address seen from outside the
cluster). Nothing is sent off this machine.

The apiserver loads a new configuration through its informer a moment after it is stored, so each test repeats a
dry-run ConfigMap create until the webhook visibly takes part (the apiserver names it in a failure, or admits once
the failing configuration was replaced): that wait is for the apiserver, never an assertion on time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from breakglass.access.etcd import EtcdSettings
from breakglass.flows import recovery, revert_guard
from breakglass.webhooks import backend, codec, model, readiness, sources
from tests import etcd_server as es
from tests import webhook_backends as wb
from tests.conftest import run_cli
from tests.real_apiserver_session import ADMISSION, kube, real_apiserver  # noqa: F401

NS = "readiness-test"  # made once: without kube-controller-manager a namespace is never really deleted
HOOK = "probe.readiness.example.com"
VWC = "validatingwebhookconfigurations"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("readiness-pki"))
    ca, other = wb.Ca(), wb.Ca("a CA outside the caBundle")
    return {"dir": d, "ca": ca,
            "good": ca.issue(d, "good", ips=("127.0.0.1",)),
            "foreign": other.issue(d, "foreign", ips=("127.0.0.1",)),
            "misnamed": ca.issue(d, "misnamed", dns=("other.example",)),
            "service": ca.issue(d, "service", dns=("hooks.policy.svc",))}


def _liar(kind: str, pki, port: int = 0):
    return wb.liar(kind, pki["good"], pki["foreign"], pki["misnamed"], port)


def _config(name: str, url: str, ca_bundle: str) -> dict:
    """A fail-closed webhook on ConfigMap creates in NS only (out of every other test's way), timeout 1 s."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": HOOK, "clientConfig": {"url": url, "caBundle": ca_bundle},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["configmaps"]}],
                          "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                          "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 1,
                          "admissionReviewVersions": ["v1"]}]}


def _reading(obj: dict) -> readiness.Reading:
    """breakglass' reading of the configuration's webhook, from the object as the apiserver stored it."""
    cfg = model.from_json(obj, "api")
    [w] = cfg.webhooks
    return readiness.of_url(readiness.Spec.of(w), f"{cfg.kind}/{cfg.name}", w.name)


def _create(kube, n: int) -> tuple[int, str]:
    status, body = kube.client.call("POST", f"/api/v1/namespaces/{NS}/configmaps?dryRun=All",
                                    {"metadata": {"name": f"probe-{n}"}})
    return status, (body or {}).get("message", "")


def _until(kube, done, what: str) -> tuple[int, str]:
    """Dry-run creates until ``done(status, message)``: the apiserver has loaded the configuration."""
    deadline = time.monotonic() + 60
    n = 0
    while True:
        n += 1
        got = _create(kube, n)
        if done(*got):
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: the apiserver still answers {got}")
        time.sleep(0.2)


@pytest.fixture
def cluster(kube):
    status, _ = kube.client.call("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    assert status in (201, 409)
    return kube


def _calls_fail(status: int, message: str) -> bool:
    return status == 500 and f'failed calling webhook "{HOOK}"' in message


@pytest.mark.parametrize("kind", sorted(wb.LIARS))
def test_every_backend_the_apiserver_cannot_call_is_not_ready(cluster, pki, kind):
    stage, words = wb.LIARS[kind]
    s = _liar(kind, pki)
    try:
        cluster.client.must("POST", ADMISSION + VWC, _config("readiness-liar", f"https://127.0.0.1:{s.port}/validate",
                                                              pki["ca"].bundle))
        status, message = _until(cluster, _calls_fail, f"the {kind} backend")
        stored = cluster.client.must("GET", f"{ADMISSION}{VWC}/readiness-liar")
        reading = _reading(stored)
    finally:
        s.stop()
    assert _calls_fail(status, message)  # the apiserver refuses the write: its call to the backend failed
    assert reading.state == "down" and words in reading.detail, (reading, message)


@pytest.mark.parametrize("answer", ["allow", "deny"])
def test_the_backend_the_apiserver_calls_is_ready(cluster, pki, answer, tmp_path):
    """The real backend admits; one that denies (leaving ``allowed`` out, which Go reads as false) answers too:
    the apiserver reports the denial, not a failed call. First a configuration whose calls fail, so the
    apiserver's answer afterwards is known to be the new configuration's."""
    dead = wb.closed_port()
    cluster.client.must("POST", ADMISSION + VWC, _config("readiness-good", f"https://127.0.0.1:{dead}/validate",
                                                          pki["ca"].bundle))
    _until(cluster, _calls_fail, "the failing configuration")
    if answer == "allow":
        s = wb.RealBackend(*pki["good"], str(tmp_path / "backend.log"))
    else:
        s = wb.HttpsBackend(*pki["good"], lambda r: (200, wb.review_answer(r, allowed=None)))
    try:
        obj = cluster.client.must("GET", f"{ADMISSION}{VWC}/readiness-good")
        obj["webhooks"][0]["clientConfig"]["url"] = f"https://127.0.0.1:{s.port}/validate"
        cluster.client.must("PUT", f"{ADMISSION}{VWC}/readiness-good", obj)
        if answer == "allow":
            status, message = _until(cluster, lambda st, _m: st == 201, "the real backend admitting")
        else:
            status, message = _until(cluster, lambda st, m: st == 400 and f'"{HOOK}" denied' in m, "the denial")
        reading = _reading(cluster.client.must("GET", f"{ADMISSION}{VWC}/readiness-good"))
    finally:
        s.stop()
    assert reading.state == "ready", (reading, status, message)
    assert "AdmissionReview v1 answered" in reading.detail and "TLS verified against the webhook's caBundle" in \
        reading.detail
    if answer == "deny":
        assert "without explanation" in message and "denied the probe" in reading.detail


# -- a Service's backend, read from etcd while the apiserver is down ------------------------------------------

SERVICE = "policy/hooks"


def _service_obj(port: int = 443, target: int | str = 9443, name: str = "https") -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "policy"},
            "spec": {"ports": [{"name": name, "port": port, "targetPort": target, "protocol": "TCP"}],
                     "selector": {"app": "hooks"}, "type": "ClusterIP"}}


def _slice(port: int, address: str = "127.0.0.1", ready: bool = True, name: str = "https") -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "hooks-x1", "namespace": "policy", "labels": {backend.SERVICE_NAME_LABEL: "hooks"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": ready},
                           "targetRef": {"kind": "Pod", "namespace": "policy", "name": "hooks-0"}}],
            "ports": [{"name": name, "port": port, "protocol": "TCP"}]}


def _seed(srv, service: dict | None, slices: list[dict] = (), endpoints: dict | None = None) -> None:
    svc_prefix, eps_prefix, slice_prefix = backend.etcd_prefixes("policy")
    pairs = [(slice_prefix + s["metadata"]["name"].encode(), codec.encode_value(s)) for s in slices]
    if service is not None:
        pairs.append((svc_prefix + b"hooks", codec.encode_value(service)))
    if endpoints is not None:
        pairs.append((eps_prefix + b"hooks", codec.encode_value(endpoints)))
    c = es.raw_client(srv)
    es.put_many(c, pairs)
    c.close()


def _service_hook(pki, port: int | None = None) -> revert_guard.Hook:
    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": "policy-hooks"},
           "webhooks": [{"name": HOOK, "clientConfig": {"service": {"namespace": "policy", "name": "hooks",
                                                                    "path": "/validate",
                                                                    **({"port": port} if port else {})},
                                                        "caBundle": pki["ca"].bundle},
                         "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 2,
                         "admissionReviewVersions": ["v1"]}]}
    [hook] = revert_guard.hooks_from_cluster_configs([model.from_json(obj, "etcd")])
    return hook


def _verdict(srv, pki, port: int | None = None) -> revert_guard.BackendState:
    target = recovery.EtcdTarget(EtcdSettings(endpoints=(srv.endpoint,)))
    [b] = revert_guard.check([_service_hook(pki, port)], etcd=target).backends
    return b


@pytest.fixture(scope="module")
def service_backend(pki):
    """The real backend, serving a certificate for hooks.policy.svc (not for 127.0.0.1, where it listens)."""
    b = wb.RealBackend(*pki["service"], f"{pki['dir']}/service-backend.log")
    yield b
    b.stop()


def test_an_endpointslice_left_without_its_service_is_down(etcd_clean, pki, service_backend):
    _seed(etcd_clean, None, [_slice(service_backend.port)])
    b = _verdict(etcd_clean, pki)
    assert b.ready is False
    assert "backend policy/hooks: no such Service (read from etcd), though 1 ready endpoint(s) are listed" in b.detail
    assert b.check.startswith("kubectl -n policy get service hooks")


def test_a_service_without_the_webhooks_port_is_down(etcd_clean, pki, service_backend):
    _seed(etcd_clean, _service_obj(port=8443, target=service_backend.port), [_slice(service_backend.port)])
    b = _verdict(etcd_clean, pki)
    assert b.ready is False and "Service policy/hooks has no port 443 (ports: 8443; read from etcd)" in b.detail
    assert _verdict(etcd_clean, pki, port=8443).ready is True  # the webhook that names 8443 is served


def test_a_ready_endpoint_that_answers_as_the_service_is_ready(etcd_clean, pki, service_backend):
    _seed(etcd_clean, _service_obj(target=service_backend.port), [_slice(service_backend.port)])
    b = _verdict(etcd_clean, pki)
    assert b.ready is True, b.detail
    assert f"called https://127.0.0.1:{service_backend.port}/validate: AdmissionReview v1 answered" in b.detail
    assert "as hooks.policy.svc" in b.detail and "checked from this machine" in b.detail
    assert b.what == "service policy/hooks path /validate" and b.webhooks == [HOOK]


def test_the_endpoints_object_counts_where_no_slice_exists(etcd_clean, pki, service_backend):
    eps = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hooks", "namespace": "policy"},
           "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https",
                                                                       "port": service_backend.port}]}]}
    _seed(etcd_clean, _service_obj(target=service_backend.port), endpoints=eps)
    assert _verdict(etcd_clean, pki).ready is True


@pytest.mark.parametrize("case", ["not-ready", "other-port-name"])
def test_no_ready_endpoint_serving_the_port_is_down(etcd_clean, pki, service_backend, case):
    sl = _slice(service_backend.port, ready=case != "not-ready", name="metrics" if case == "other-port-name"
                else "https")
    _seed(etcd_clean, _service_obj(target=service_backend.port), [sl])
    b = _verdict(etcd_clean, pki)
    assert b.ready is False and "no ready endpoints serve port 443" in b.detail, b.detail


def test_endpoints_not_callable_from_here_are_unchecked(etcd_clean, pki):
    port = wb.closed_port()
    _seed(etcd_clean, _service_obj(target=port), [_slice(port)])
    b = _verdict(etcd_clean, pki)
    assert b.ready is None  # neither ready nor down: the verdict is "unchecked"
    assert "1 serve port 443" in b.detail and "endpoints ready, not called from here" in b.detail
    assert f"127.0.0.1:{port}: connection refused" in b.detail


def test_an_endpoint_reached_from_here_that_fails_the_call_is_down(etcd_clean, pki):
    s = _liar("foreign-ca", pki)
    try:
        _seed(etcd_clean, _service_obj(target=s.port), [_slice(s.port)])
        b = _verdict(etcd_clean, pki)
    finally:
        s.stop()
    assert b.ready is False and "TLS: certificate signed by unknown authority" in b.detail


# -- the CLI's revert ---------------------------------------------------------------------------------------------

def _recover_url_hook(srv, state: str, url: str, pki) -> str:
    obj = _config("url-hooks", url, pki["ca"].bundle)
    obj["webhooks"][0]["timeoutSeconds"] = 1
    c = es.raw_client(srv)
    es.put_many(c, [(sources.etcd_key("validating", "url-hooks"), codec.encode_value(obj))])
    c.close()
    remedy, steps = recovery.plan_etcd(recovery.EtcdTarget(EtcdSettings(endpoints=(srv.endpoint,))), ["url-hooks"])
    return recovery.execute(remedy, steps, state, {"refs": ["url-hooks"]}).run


def _stored(srv) -> bytes | None:
    c = es.raw_client(srv)
    try:
        return c.get(sources.etcd_key("validating", "url-hooks"))[0]
    finally:
        c.close()


def test_the_cli_refuses_to_re_arm_a_lying_backend_and_reverts_once_the_real_one_answers(etcd_clean, pki, tmp_path):
    state = str(tmp_path / "state")
    port = wb.closed_port()
    _recover_url_hook(etcd_clean, state, f"https://127.0.0.1:{port}/validate", pki)
    env = {"BREAKGLASS_STATE_DIR": state, "KUBECONFIG": ""}
    for kind in sorted(wb.LIARS):
        _, words = wb.LIARS[kind]
        s = _liar(kind, pki, port)
        try:
            r = run_cli("revert", "--yes", "--etcd-endpoints", etcd_clean.endpoint, env=env)
        finally:
            s.stop()
        err = r.stderr.decode()
        assert r.returncode == 4, (kind, err)
        assert "backend is not ready" in err and words in err, (kind, err)
        assert _stored(etcd_clean) is None, kind  # nothing re-armed
    real = wb.RealBackend(*pki["good"], str(tmp_path / "backend.log"), port)
    try:
        r = run_cli("revert", "--yes", "--etcd-endpoints", etcd_clean.endpoint, "-o", "json", env=env)
    finally:
        real.stop()
    assert r.returncode == 0, r.stderr
    assert _stored(etcd_clean) is not None
    guard = json.loads(r.stdout)["result"]["guard"]
    assert guard["state"] == "ready" and "AdmissionReview v1 answered" in " ".join(guard["lines"])


# -- the exporter ---------------------------------------------------------------------------------------------------

def test_the_exporter_reads_url_backends_and_a_service_without_the_port(cluster, pki, tmp_path):
    """url: webhooks get a breakglass_webhook_backend_ready series too (1: answered the apiserver's call from the
    exporter, 0: not); a Service lacking the webhook's port counts 0 however many endpoints are ready."""
    from breakglass.access import kubeapi
    from breakglass.flows import exporter

    dead = wb.closed_port()
    real = wb.RealBackend(*pki["good"], str(tmp_path / "backend.log"))
    svc = {"metadata": {"name": "hooks"}, "spec": {"clusterIP": "None", "ports": [{"name": "https", "port": 8443}]}}
    sl = {"metadata": {"name": "hooks-x1", "labels": {backend.SERVICE_NAME_LABEL: "hooks"}}, "addressType": "IPv4",
          "ports": [{"name": "https", "port": 8443}],
          "endpoints": [{"addresses": ["239.255.0.7"], "conditions": {"ready": True}}]}  # accepted, never dialled
    service_hook = _config("readiness-svc", "https://unused.example", pki["ca"].bundle)
    service_hook["webhooks"][0]["clientConfig"] = {"service": {"namespace": NS, "name": "hooks", "port": 443}}
    try:
        cluster.client.must("POST", ADMISSION + VWC, _config("readiness-up", f"https://127.0.0.1:{real.port}/v",
                                                              pki["ca"].bundle))
        cluster.client.must("POST", ADMISSION + VWC, _config("readiness-dead", f"https://127.0.0.1:{dead}/v",
                                                              pki["ca"].bundle))
        cluster.client.must("POST", ADMISSION + VWC, service_hook)
        cluster.client.must("POST", f"/api/v1/namespaces/{NS}/services", svc, ok=(201, 409))
        cluster.client.must("POST", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", sl, ok=(201, 409))
        api = kubeapi.connect(cluster.kubeconfig(str(tmp_path / "kubeconfig")), None, 10.0)
        snap = exporter.audit_once(api)
        text = exporter.metrics_text(snap, 0, snap.taken_at, 60)
    finally:
        real.stop()
        cluster.client.must("DELETE", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/hooks-x1",
                            ok=(200, 202, 404))
        cluster.client.must("DELETE", f"/api/v1/namespaces/{NS}/services/hooks", ok=(200, 202, 404))
    rows = {r.configuration: r for r in snap.backends}
    up = rows["ValidatingWebhookConfiguration/readiness-up"]
    down = rows["ValidatingWebhookConfiguration/readiness-dead"]
    assert (up.url, up.service, up.ready) == (f"https://127.0.0.1:{real.port}/v", "", 1)
    assert (down.url, down.ready) == (f"https://127.0.0.1:{dead}/v", 0)
    assert rows["ValidatingWebhookConfiguration/readiness-svc"].ready == 0  # the Service has no port 443
    assert (f'breakglass_webhook_backend_ready{{configuration="ValidatingWebhookConfiguration/readiness-up",'
            f'webhook="{HOOK}",url="https://127.0.0.1:{real.port}/v"}} 1') in text
    assert (f'breakglass_webhook_backend_ready{{configuration="ValidatingWebhookConfiguration/readiness-svc",'
            f'webhook="{HOOK}",service="{NS}/hooks"}} 0') in text


def test_the_backend_down_alert_fires_for_a_url_webhook_too(tmp_path):
    """deploy/prometheus's rule, run by promtool on a url: series: the alert matches it to its fail-closed series."""
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    rules = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy", "prometheus",
                         "breakglass-rules.yaml")
    labels = 'configuration="ValidatingWebhookConfiguration/hooks",webhook="w.example.com"'
    test = {"rule_files": [rules], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": f'breakglass_webhook_backend_ready{{{labels},url="https://10.9.8.7/v",instance="a",job="b"}}',
             "values": "0x10"},
            {"series": f'breakglass_webhook_fail_closed{{{labels},instance="a",job="b"}}', "values": "1x10"}],
        "alert_rule_test": [{"eval_time": "6m", "alertname": "BreakglassFailClosedWebhookBackendDown", "exp_alerts": [{
            "exp_labels": {"severity": "critical", "configuration": "ValidatingWebhookConfiguration/hooks",
                           "webhook": "w.example.com", "url": "https://10.9.8.7/v", "instance": "a", "job": "b"},
            "exp_annotations": {
                "summary": "ValidatingWebhookConfiguration/hooks webhook w.example.com fails closed and its backend "
                           "https://10.9.8.7/v does not answer",
                "description": "Every request it intercepts is refused until https://10.9.8.7/v answers, or the "
                               "webhook fails open or is removed; `breakglass diagnose` says what it blocks."}}]}]}]}
    path = tmp_path / "url-rule-test.yaml"
    path.write_text(json.dumps(test))  # JSON is YAML
    p = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_kubeapi_ways_revert_blocker_asks_the_same(cluster, pki, tmp_path):
    """The kubeapi way holds a revert back while a fail-closed webhook's backend cannot answer: a lying url:, a
    Service that does not exist; not the real backend."""
    from breakglass.access import kubeapi
    from breakglass.ways.kubeapi_patch import KubeapiPatch

    patch = KubeapiPatch(kubeapi.connect(cluster.kubeconfig(str(tmp_path / "kubeconfig")), None, 10.0), ["x"])
    s = _liar("wrong-uid", pki)
    real = wb.RealBackend(*pki["good"], str(tmp_path / "backend.log"))
    try:
        [down] = patch._backend_ready(_config("blocked", f"https://127.0.0.1:{s.port}/v", pki["ca"].bundle))
        assert down.state == "down" and 'expected response.uid="' in down.detail
        assert patch._backend_ready(_config("fine", f"https://127.0.0.1:{real.port}/v", pki["ca"].bundle)) == []
    finally:
        s.stop()
        real.stop()
    gone = _config("gone", "https://unused.example", pki["ca"].bundle)
    gone["webhooks"][0]["clientConfig"] = {"service": {"namespace": NS, "name": "no-such-service"}}
    [down] = patch._backend_ready(gone)
    assert f"backend {NS}/no-such-service: no such Service (read from api), no ready endpoints" == down.detail
    assert "get endpointslices" in down.check
    gone["webhooks"][0]["failurePolicy"] = "Ignore"  # fails open: re-arming it locks nothing
    assert patch._backend_ready(gone) == []
