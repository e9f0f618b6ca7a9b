"""The apiserver's call to a webhook, made from here (breakglass/access/admission_call.py), against backends on
loopback: the real one (breakglass/sandbox/backend.py) answers and is ready; backends that take the connection
and then fail the call are not, and the reading says at which stage and why, in an SRE's words. A url: webhook's
reading (webhooks/readiness.py) is that call: ready only if answered, down otherwise."""

from __future__ import annotations

import json

import pytest

from breakglass.access import admission_call
from breakglass.webhooks import model, readiness
from tests import webhook_backends as wb


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("admission-call"))
    ca, other = wb.Ca(), wb.Ca("a CA outside the caBundle")
    return {"dir": d, "ca": ca,
            "good": ca.issue(d, "good", dns=("localhost", "hooks.policy.svc"), ips=("127.0.0.1",)),
            "foreign": other.issue(d, "foreign", ips=("127.0.0.1",)),
            "misnamed": ca.issue(d, "misnamed", dns=("other.example",))}


@pytest.fixture(scope="module")
def real(pki):
    b = wb.RealBackend(*pki["good"], f"{pki['dir']}/backend.log")
    yield b
    b.stop()


def _url(port: int, path: str = "/validate") -> str:
    return f"https://127.0.0.1:{port}{path}"


def _hook(url: str, ca_bundle: str | None, timeout: int = 1, versions=("v1",)) -> model.Webhook:
    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": "probe-test"},
           "webhooks": [{"name": "probe.example.com", "clientConfig": {"url": url, **({"caBundle": ca_bundle}
                                                                                    if ca_bundle else {})},
                         "timeoutSeconds": timeout, "admissionReviewVersions": list(versions),
                         "sideEffects": "None", "failurePolicy": "Fail"}]}
    return model.from_json(obj, "test").webhooks[0]


def test_the_real_backend_answers_and_is_ready(pki, real):
    r = admission_call.call(_url(real.port), pki["ca"].bundle, timeout=5)
    assert (r.ok, r.stage, r.reached, r.allowed) == (True, "review", True, True), r
    reading = readiness.of_url(readiness.Spec.of(_hook(_url(real.port), pki["ca"].bundle, 5)))
    assert reading.state == "ready" and reading.ready is True and reading.endpoints == 1
    assert reading.detail == (f"backend url {_url(real.port)}: called {_url(real.port)}: AdmissionReview v1 answered, "
                              f"allowed the probe; TLS verified against the webhook's caBundle as 127.0.0.1 (checked "
                              f"from this machine)")
    # PEM bytes do as well as the base64 text of clientConfig.caBundle
    assert admission_call.call(_url(real.port), pki["ca"].pem, timeout=5).ok


LIARS = wb.LIARS


def _lying(kind: str, pki):
    return wb.liar(kind, pki["good"], pki["foreign"], pki["misnamed"])


@pytest.mark.parametrize("kind", sorted(LIARS))
def test_a_backend_that_takes_the_connection_and_fails_the_call_is_not_ready(kind, pki):
    stage, words = LIARS[kind]
    s = _lying(kind, pki)
    try:
        r = admission_call.call(_url(s.port), pki["ca"].bundle, timeout=1)
        reading = readiness.of_url(readiness.Spec.of(_hook(_url(s.port), pki["ca"].bundle)))
    finally:
        s.stop()
    assert (r.ok, r.stage, r.reached) == (False, stage, True), r
    assert words in r.detail, r.detail
    assert reading.state == "down" and reading.ready is False and words in reading.detail, reading
    assert "checked from this machine" in reading.detail
    assert reading.check.startswith("curl -sS") or "base64 -d" in reading.check


def test_refused_unreachable_and_plain_http_are_down_for_a_url(pki):
    port = wb.closed_port()
    r = admission_call.call(_url(port), pki["ca"].bundle, timeout=1)
    assert (r.ok, r.stage, r.reached) == (False, "connect", False) and "connection refused" in r.detail
    assert readiness.of_url(readiness.Spec.of(_hook(_url(port), pki["ca"].bundle))).state == "down"
    # a multicast address: the kernel refuses to connect (nothing is sent), as to a network this node cannot reach
    r = admission_call.call("https://239.255.0.1:9443/x", pki["ca"].bundle, timeout=1)
    assert (r.ok, r.stage) == (False, "connect") and "network is unreachable" in r.detail
    r = admission_call.call(f"http://127.0.0.1:{port}/x", None, timeout=1)
    assert not r.ok and "not https" in r.detail and "refuses" in r.detail


def test_the_system_roots_are_used_without_a_caBundle_and_a_broken_caBundle_verifies_nothing(pki, real):
    r = admission_call.call(_url(real.port), None, timeout=5)
    assert r.stage == "tls" and "not a CA this system trusts; the webhook has no caBundle" in r.detail
    r = admission_call.call(_url(real.port), "UEVN", timeout=5)  # base64 of "PEM": no certificate in it
    assert (r.ok, r.stage) == (False, "tls") and "caBundle holds no PEM certificate" in r.detail
    r = admission_call.call(_url(real.port), "%%% not base64", timeout=5)
    assert not r.ok and "not base64" in r.detail


def test_a_service_endpoint_is_checked_under_the_service_name(pki, real):
    """Dialled at the endpoint's address, verified as SERVICE.NAMESPACE.svc: the certificate's IP SAN does not
    stand in for the name."""
    r = admission_call.call("https://hooks.policy.svc:443/validate", pki["ca"].bundle, address=("127.0.0.1", real.port),
                            timeout=5)
    assert r.ok and "as hooks.policy.svc" in r.detail, r
    r = admission_call.call("https://other.policy.svc:443/validate", pki["ca"].bundle,
                            address=("127.0.0.1", real.port), timeout=5)
    assert not r.ok and "not other.policy.svc" in r.detail and "hooks.policy.svc" in r.detail


def test_what_is_sent_is_a_harmless_review_without_credentials(pki):
    s = wb.HttpsBackend(*pki["good"], lambda r: (200, wb.review_answer(r, allowed=False)))
    try:
        r = admission_call.call(_url(s.port, "/validate/fail"), pki["ca"].bundle, timeout=7)
    finally:
        s.stop()
    assert r.ok and r.allowed is False and "denied the probe" in r.detail  # a denial is an answer: ready
    [seen] = s.seen
    assert seen["path"] == "/validate/fail?timeout=7s"  # client-go adds the webhook's timeout
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["content-type"] == "application/json" and "authorization" not in headers
    review = seen["review"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    req = review["request"]
    assert req["dryRun"] is True and req["operation"] == "CREATE" and req["kind"]["kind"] == "ConfigMap"
    assert req["namespace"] == "default" and req["name"] == "breakglass-readiness-probe" and len(req["uid"]) == 36


def test_the_review_version_is_the_first_the_apiserver_knows_in_the_webhooks_order(pki):
    s = wb.HttpsBackend(*pki["good"], lambda r: (200, wb.review_answer(r)))
    try:
        assert admission_call.call(_url(s.port), pki["ca"].bundle, review_versions=("v2", "v1beta1", "v1"),
                                   timeout=5).ok
        none = admission_call.call(_url(s.port), pki["ca"].bundle, review_versions=("v2",), timeout=5)
    finally:
        s.stop()
    assert [x["review"]["apiVersion"] for x in s.seen] == ["admission.k8s.io/v1beta1"]  # nothing sent for "v2"
    assert not none.ok and "admissionReviewVersions: v2" in none.detail


def test_an_answer_is_read_up_to_one_mebibyte(pki):
    huge = json.dumps({"pad": "x" * (admission_call.MAX_ANSWER + 10)}).encode()
    s = wb.HttpsBackend(*pki["good"], lambda r: (200, huge))
    try:
        r = admission_call.call(_url(s.port), pki["ca"].bundle, timeout=10)
    finally:
        s.stop()
    assert (r.ok, r.stage) == (False, "review") and "larger than 1 MiB" in r.detail
