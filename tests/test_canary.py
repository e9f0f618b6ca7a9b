"""The post-re-arm canary against the real kube-apiserver (tests/real_apiserver_session.py): webhook configurations
with ``url:`` backends on loopback (the sandbox's admit-everything backend, or a recording one here that allows or
denies), dry-run writes sent through breakglass' kubeapi client, and the apiserver's own answers read back.

The apiserver loads a new configuration through its informer a moment after it is stored, so a test first
repeats the canary until the webhook visibly takes part (its backend saw a canary, or the call failed): that wait
is for the apiserver, never an assertion on time."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from breakglass.access import kubeapi
from breakglass.sandbox import free_port, pki as pkimod, wait_listening
from breakglass.webhooks import canary, codec, model, sources
from tests.real_apiserver_session import ADMISSION, kube, real_apiserver  # noqa: F401
from tests.real_control_plane import stop_group

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "canary-test"  # made once: without kube-controller-manager a namespace is never really deleted
VWC, MWC = "validatingwebhookconfigurations", "mutatingwebhookconfigurations"
ONLY_NS = {"matchLabels": {"kubernetes.io/metadata.name": NS}}  # the tests' webhooks stay out of everyone's way


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """The sandbox's PKI: its webhook serving certificate (127.0.0.1) and the CA that goes into caBundle."""
    p = pkimod.make(str(tmp_path_factory.mktemp("canary-pki")))
    with open(p.ca, "rb") as f:
        p_ca = base64.b64encode(f.read()).decode()
    return p, p_ca


@pytest.fixture
def cluster(kube, tmp_path):
    status, _ = kube.client.call("POST", "/api/v1/namespaces", {"metadata": {"name": NS, "labels": {"team": "a"}}})
    assert status in (201, 409)
    api = kubeapi.connect(kube.kubeconfig(str(tmp_path / "kubeconfig")), None, 10.0)
    return kube, api


class Recorder:
    """An HTTPS admission backend that keeps every AdmissionReview it is sent and allows, or denies with
    ``deny`` (status code, message)."""

    def __init__(self, pki, deny: tuple[int | None, str] | None = None, hang: bool = False) -> None:
        self.reviews: list[dict] = []
        self.deny = deny
        self.hang = threading.Event() if hang else None  # set at stop: until then, no answer
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                rec.reviews.append(review["request"])
                if rec.hang is not None:
                    rec.hang.wait()
                    return
                resp = {"uid": review["request"]["uid"], "allowed": rec.deny is None}
                if rec.deny is not None:
                    code, msg = rec.deny
                    resp["status"] = {"message": msg, **({"code": code} if code else {})}
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": resp}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.webhook_cert, pki.webhook_key)
        self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def canaries(self) -> list[dict]:
        return [r for r in self.reviews if (r.get("name") or "").startswith("breakglass-canary-")
                or ((r.get("object") or {}).get("metadata") or {}).get("annotations", {}).get(canary.ANNOTATION)]

    def stop(self) -> None:
        if self.hang is not None:
            self.hang.set()
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def recorder(certs):
    made = []

    def make(deny=None, hang=False):
        made.append(Recorder(certs[0], deny, hang))
        return made[-1]

    yield make
    for r in made:
        r.stop()


def hook(name: str, port: int, ca: str, **over) -> dict:
    h = {"name": name, "clientConfig": {"url": f"https://127.0.0.1:{port}/validate", "caBundle": ca},
         "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
         "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
         "namespaceSelector": ONLY_NS}
    h.update(over)
    return {k: v for k, v in h.items() if v is not None}


def create(kube, name: str, hooks: list[dict], resource: str = VWC) -> dict:
    """The configuration as the apiserver stored it (defaults filled in): what a revert just put back."""
    kind = "ValidatingWebhookConfiguration" if resource == VWC else "MutatingWebhookConfiguration"
    return kube.client.must("POST", ADMISSION + resource, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks})


def create_in_etcd(kube, name: str, hooks: list[dict]) -> dict:
    """A configuration the v1 API would refuse (sideEffects Some or Unknown, as v1beta1 allowed): what an etcd run's
    revert puts back from an old backup, byte for byte as kube-apiserver stores it. The apiserver serves it."""
    import pyetcd

    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": "2026-01-01T00:00:00Z"},
           "webhooks": [{"matchPolicy": "Equivalent", "objectSelector": {}, **h} for h in hooks]}
    host, port = kube.etcd_endpoint.split("://")[1].split(":")
    c = pyetcd.client(host, int(port), timeout=10)
    try:
        c.put(sources.etcd_key("validating", name), codec.encode_value(obj))
    finally:
        c.close()
    return obj


def until(probe, done, what: str, seconds: float = 30):
    """Repeat ``probe`` until ``done`` says the apiserver has caught up; fail with what it last gave."""
    deadline = time.monotonic() + seconds
    while True:
        out = probe()
        if done(out):
            return out
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: still {out.lines() if hasattr(out, 'lines') else out}")
        time.sleep(0.2)


def result(summary: canary.Summary, webhook: str) -> canary.Result:
    [r] = [r for r in summary.results if r.webhook == webhook]
    return r


def writes(kube, mark: int) -> list[dict]:
    """The create/update/patch requests breakglass' identity made since ``mark``, as the apiserver audited them."""
    return [e for e in kube.audit_events(mark, kube.user_name()) if e["verb"] in ("create", "update", "patch")]


# --- against the real apiserver -----------------------------------------------------------------------------


def test_the_sandbox_backend_passes_and_the_same_webhook_fails_once_it_is_stopped(cluster, certs):
    kube, api = cluster
    pki, ca = certs
    port = free_port()
    stored = create(kube, "canary-sandbox", [hook("sandbox.canary.test", port, ca)])
    cfg = model.from_json(stored, "api")

    # nothing listens yet: once the apiserver has loaded the webhook, its call fails, and the canary says so
    down = until(lambda: canary.run(api, [cfg]), lambda s: not s.ok, "the apiserver never called the webhook")
    r = result(down, "sandbox.canary.test")
    assert r.status == canary.FAILED and r.configuration == "validating/canary-sandbox"
    assert r.message.startswith('Internal error occurred: failed calling webhook "sandbox.canary.test": '
                                f'failed to call webhook: Post "https://127.0.0.1:{port}/validate?timeout=5s": ')
    assert "connection refused" in r.message
    assert r.canary.startswith(f"dry-run CREATE ConfigMap {NS}/breakglass-canary-")
    assert down.to_json()["ok"] is False and down.to_json()["results"][0]["status"] == "failed"
    assert any("failed: sandbox.canary.test (validating/canary-sandbox)" in line and "connection refused" in line
               for line in down.lines())

    proc = subprocess.Popen([sys.executable, "-m", "breakglass.sandbox.backend", "--port", str(port),
                             "--cert", pki.webhook_cert, "--key", pki.webhook_key], cwd=ROOT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_listening(proc, port, 30) is None
        up = canary.run(api, [stored])  # the JSON a revert holds does as well as the model
        r = result(up, "sandbox.canary.test")
        assert up.ok and r.status == canary.PASSED and not r.denied and not r.notes, up.lines()
    finally:
        stop_group(proc)

    again = canary.run(api, [cfg])
    r = result(again, "sandbox.canary.test")
    assert not again.ok and r.status == canary.FAILED and 'failed calling webhook "sandbox.canary.test"' in r.message
    # a dry run: not one canary was stored
    assert kube.client.must("GET", f"/api/v1/namespaces/{NS}/configmaps").get("items") == []


@pytest.mark.parametrize("code", [403, None])  # controller-runtime's Denied answers 403; no code is 400
def test_a_webhook_that_denies_answers_so_its_call_works(cluster, certs, recorder, code):
    kube, api = cluster
    backend = recorder(deny=(code, "no canaries in this namespace"))
    stored = create(kube, "canary-deny", [hook("deny.canary.test", backend.port, certs[1])])
    s = until(lambda: canary.run(api, [stored]), lambda s: backend.canaries(), "the backend was never called")
    r = result(s, "deny.canary.test")
    assert s.ok and r.status == canary.PASSED and r.denied
    assert r.message == 'admission webhook "deny.canary.test" denied the request: no canaries in this namespace'
    assert any(line.startswith("  passed (denied by policy): deny.canary.test") and "no canaries" in line
               for line in s.lines())
    [review] = backend.canaries()[-1:]
    assert review["dryRun"] is True and review["operation"] == "CREATE" and review["kind"]["kind"] == "ConfigMap"


def test_side_effects_some_is_not_tried_and_nothing_is_sent(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    stored = create_in_etcd(kube, "canary-some", [
        hook("some.canary.test", backend.port, certs[1], sideEffects="Some"),
        hook("unknown.canary.test", backend.port, certs[1], sideEffects="Unknown")])
    until(lambda: kube.client.call("GET", f"{ADMISSION}{VWC}/canary-some")[0], lambda st: st == 200,
          "the apiserver does not serve the configuration")
    mark = kube.audit_mark()
    s = canary.run(api, [stored])
    for name, effects in (("some.canary.test", "Some"), ("unknown.canary.test", "Unknown")):
        r = result(s, name)
        assert r.status == canary.NOT_TRIED and r.reason.startswith(f"sideEffects {effects} does not allow dry-run")
        assert not r.canary
    assert s.ok and any("not tried: some.canary.test" in line for line in s.lines())
    assert writes(kube, mark) == [] and backend.reviews == []


def test_a_webhook_refusing_dry_run_leaves_the_canary_of_another_inconclusive(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    ok = create(kube, "canary-ok", [hook("ok.canary.test", backend.port, certs[1])])
    create_in_etcd(kube, "canary-side-effects", [hook("effects.canary.test", backend.port, certs[1],
                                                      sideEffects="Some")])
    s = until(lambda: canary.run(api, [ok]), lambda s: result(s, "ok.canary.test").status == canary.INCONCLUSIVE,
              "the apiserver never refused the dry run")
    r = result(s, "ok.canary.test")
    assert "webhook effects.canary.test also matches it and does not allow dry-run" in r.reason
    assert r.message == 'admission webhook "effects.canary.test" does not support dry run'
    assert s.ok and [x.webhook for x in s.results] == ["ok.canary.test"]  # a refusal is nobody's failure


def test_the_failure_is_the_webhook_the_apiserver_names_even_of_another_configuration(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    rearmed = create(kube, "canary-rearmed", [hook("rearmed.canary.test", backend.port, certs[1])])
    dead = free_port()
    create(kube, "canary-other", [hook("other.canary.test", dead, certs[1])])
    s = until(lambda: canary.run(api, [rearmed]), lambda s: not s.ok, "the other webhook was never called")
    mine, other = result(s, "rearmed.canary.test"), result(s, "other.canary.test")
    assert mine.status == canary.INCONCLUSIVE and "stopped at webhook other.canary.test" in mine.reason
    assert other.status == canary.FAILED and other.configuration == ""
    assert 'failed calling webhook "other.canary.test"' in other.message and f"127.0.0.1:{dead}" in other.message
    assert any("other.canary.test (not among the re-armed configurations)" in line for line in s.lines())


def test_no_namespace_matches_then_nothing_is_sent_but_a_namespace_canary_carries_the_labels(cluster, certs,
                                                                                            recorder):
    kube, api = cluster
    backend = recorder()
    nowhere = {"matchLabels": {"breakglass.test/no-such-label": "x"}}
    cms = create(kube, "canary-nowhere", [hook("nowhere.canary.test", backend.port, certs[1],
                                               namespaceSelector=nowhere)])
    mark = kube.audit_mark()
    s = canary.run(api, [cms])
    r = result(s, "nowhere.canary.test")
    assert r.status == canary.NOT_TRIED and not r.canary
    assert r.reason == ("CREATE ConfigMap: no namespace matches the namespaceSelector "
                        "{breakglass.test/no-such-label=x}")
    assert writes(kube, mark) == []

    # a rule on every resource: a Namespace canary is matched by its own labels, so it can carry them
    wide = create(kube, "canary-wide", [hook("wide.canary.test", backend.port, certs[1], namespaceSelector=nowhere,
                                             rules=[{"operations": ["CREATE"], "apiGroups": ["*"],
                                                     "apiVersions": ["*"], "resources": ["*"]}])])
    s = until(lambda: canary.run(api, [wide]), lambda s: backend.canaries(), "the backend was never called")
    assert result(s, "wide.canary.test").status == canary.PASSED
    review = backend.canaries()[-1]
    assert review["kind"]["kind"] == "Namespace" and review["dryRun"] is True
    assert review["object"]["metadata"]["labels"]["breakglass.test/no-such-label"] == "x"


def test_the_object_selector_labels_the_canary_and_the_webhook_is_really_called(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    selector = {"matchLabels": {"team": "canary"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"},
                                     {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                                     {"key": "env", "operator": "NotIn", "values": ["prod"]},
                                     {"key": "skip", "operator": "DoesNotExist"}]}
    stored = create(kube, "canary-objsel", [
        hook("objsel.canary.test", backend.port, certs[1], objectSelector=selector,
             matchConditions=[{"name": "always", "expression": "true"}]),
        hook("never.canary.test", backend.port, certs[1], objectSelector={
            "matchLabels": {"env": "prod"}, "matchExpressions": [{"key": "env", "operator": "NotIn",
                                                                  "values": ["prod"]}]})])
    s = until(lambda: canary.run(api, [stored]), lambda s: backend.canaries(), "the backend was never called")
    before = len(backend.canaries())
    s = canary.run(api, [model.from_json(stored, "api")])
    assert len(backend.canaries()) == before + 1  # exactly this canary, and only the webhook it was for
    r = result(s, "objsel.canary.test")
    assert r.status == canary.PASSED
    assert r.notes == ["matchConditions may have skipped the webhook (CEL is not evaluated here)"]
    review = backend.canaries()[-1]
    labels = review["object"]["metadata"]["labels"]
    assert labels == {"team": "canary", "tier": canary.EXISTS_VALUE, "env": "staging"}
    assert review["namespace"] == NS and review["name"] == r.canary.rsplit("/", 1)[1]
    never = result(s, "never.canary.test")
    assert never.status == canary.NOT_TRIED and never.reason.startswith("CREATE ConfigMap: no labels satisfy")


def test_a_namespaces_rule_gets_a_namespace_canary_that_does_not_exist_afterwards(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    stored = create(kube, "canary-namespaces", [hook(
        "ns.canary.test", backend.port, certs[1], namespaceSelector=None,
        rules=[{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"],
                "scope": "Cluster"}])], resource=MWC)
    s = until(lambda: canary.run(api, [stored]), lambda s: backend.canaries(), "the backend was never called")
    r = result(s, "ns.canary.test")
    assert r.status == canary.PASSED and r.configuration == "mutating/canary-namespaces"
    review = backend.canaries()[-1]
    name = review["name"]
    assert r.canary == f"dry-run CREATE Namespace {name}" and review["kind"]["kind"] == "Namespace"
    assert review["dryRun"] is True and name.startswith("breakglass-canary-")
    status, _ = kube.client.call("GET", f"/api/v1/namespaces/{name}")
    assert status == 404


def test_an_update_only_webhook_gets_an_existing_object_written_back_in_a_dry_run(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    kube.client.must("POST", f"/api/v1/namespaces/{NS}/configmaps",
                     {"metadata": {"name": "existing", "labels": {"keep": "me"}}, "data": {"a": "b"}})
    try:
        before = kube.client.must("GET", f"/api/v1/namespaces/{NS}/configmaps/existing")
        stored = create(kube, "canary-update", [hook(
            "update.canary.test", backend.port, certs[1], objectSelector={"matchLabels": {"watched": "yes"}},
            rules=[{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"]}])])
        s = until(lambda: canary.run(api, [stored]), lambda s: backend.canaries(), "the backend was never called")
        r = result(s, "update.canary.test")
        assert r.status == canary.PASSED and r.canary == f"dry-run UPDATE ConfigMap {NS}/existing"
        review = backend.canaries()[-1]
        assert review["operation"] == "UPDATE" and review["dryRun"] is True
        assert review["object"]["metadata"]["labels"] == {"keep": "me", "watched": "yes"}
        after = kube.client.must("GET", f"/api/v1/namespaces/{NS}/configmaps/existing")
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert after["metadata"]["labels"] == {"keep": "me"}
    finally:
        kube.client.must("DELETE", f"/api/v1/namespaces/{NS}/configmaps/existing", ok=(200, 404))


def test_a_namespace_the_selector_names_is_written_back_when_a_new_one_cannot_match(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder()
    before = kube.client.must("GET", f"/api/v1/namespaces/{NS}")
    # only the namespace named NS matches: a new Namespace cannot carry that name, an UPDATE of NS can
    stored = create(kube, "canary-ns-update", [hook(
        "nsupdate.canary.test", backend.port, certs[1], namespaceSelector=ONLY_NS,
        rules=[{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["namespaces"]}])])
    s = until(lambda: canary.run(api, [stored]), lambda s: backend.canaries(), "the backend was never called")
    r = result(s, "nsupdate.canary.test")
    assert r.status == canary.PASSED and r.canary == f"dry-run UPDATE Namespace {NS}"
    review = backend.canaries()[-1]
    assert (review["operation"], review["name"], review["dryRun"]) == ("UPDATE", NS, True)
    after = kube.client.must("GET", f"/api/v1/namespaces/{NS}")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert canary.ANNOTATION not in (after["metadata"].get("annotations") or {})


def test_a_backend_that_never_answers_fails_by_the_webhooks_own_timeout(cluster, certs, recorder):
    kube, api = cluster
    backend = recorder(hang=True)
    stored = create(kube, "canary-hang", [hook("hang.canary.test", backend.port, certs[1], timeoutSeconds=1)])
    s = until(lambda: canary.run(api, [stored]), lambda s: not s.ok, "the webhook's call never failed")
    r = result(s, "hang.canary.test")
    assert r.status == canary.FAILED and backend.canaries()
    assert r.message.startswith('Internal error occurred: failed calling webhook "hang.canary.test": failed to call '
                                f'webhook: Post "https://127.0.0.1:{backend.port}/validate?timeout=1s": ')
    assert "deadline exceeded" in r.message or "Timeout" in r.message


# --- choosing, without an apiserver -------------------------------------------------------------------------


class NoApi:
    """An api that must not be used: for webhooks nothing should be sent for."""

    timeout = 10.0

    def request(self, *args, **kwargs):
        raise AssertionError(f"sent {args}")


def _cfg(**over) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "c"}, "webhooks": [hook("w.test", 1, "", **over)]}


def test_rules_without_a_simple_kind_have_no_canary_and_fail_open_ones_are_not_tried():
    pods = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
    [r] = canary.run(NoApi(), [_cfg(rules=pods)]).results
    assert r.status == canary.NOT_TRIED and r.reason.startswith("no canary object for rules CREATE/UPDATE core:pods")
    deletes = [{"operations": ["DELETE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]
    [r] = canary.run(NoApi(), [_cfg(rules=deletes)]).results
    assert r.reason.startswith("no canary object for rules DELETE")
    namespaced = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"],
                   "scope": "Namespaced"}]
    assert canary.run(NoApi(), [_cfg(rules=namespaced)]).results[0].reason.startswith("no canary object")
    [r] = canary.run(NoApi(), [_cfg(failurePolicy="Ignore")]).results
    assert r.status == canary.NOT_TRIED and r.reason.startswith("failurePolicy Ignore")
    assert canary.run(NoApi(), [_cfg()], webhooks=["other"]).results == []


@pytest.mark.parametrize("sel,base,fixed,want", [
    (None, None, None, {}),
    ({"matchLabels": {"a": "1"}}, {"b": "2"}, None, {"a": "1", "b": "2"}),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y"]},
                           {"key": "a", "operator": "NotIn", "values": ["x"]}]}, None, None, {"a": "y"}),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}, {"a": "x"}, None, {"a": "x"}),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, {"a": "x"}, None, {}),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "x", "b": "y"}, None, {"b": "y"}),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "NotIn",
                                                                 "values": [canary.EXISTS_VALUE]}]},
     None, None, {"a": canary.EXISTS_VALUE + "-1"}),
    ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, None, None, None),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]},
                           {"key": "a", "operator": "In", "values": ["2"]}]}, None, None, None),
    ({"matchExpressions": [{"key": "n", "operator": "In", "values": ["kube-system"]}]}, None, {"n": "mine"}, None),
    ({"matchExpressions": [{"key": "n", "operator": "NotIn", "values": ["kyverno"]}]}, None, {"n": "mine"},
     {"n": "mine"}),
])
def test_labels_for_satisfies_a_selector_or_says_it_cannot(sel, base, fixed, want):
    assert canary.labels_for(sel, base, fixed) == want
