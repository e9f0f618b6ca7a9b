"""A webhook's backend health read from etcd (the apiserver down) and from the API, and the codec's Service and
EndpointSlice checked against Kubernetes' own round-trip fixtures (k8s.io/api/testdata: every field set, the
protobuf bytes and the JSON the apiserver writes for them)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

from breakglass.access.etcd import Etcd, EtcdSettings
from breakglass.webhooks import backend, codec
from tests.real_apiserver_session import SCRATCH_NS, kube, real_apiserver  # noqa: F401

KINDS = ("core.v1.Service", "core.v1.Endpoints", "discovery.k8s.io.v1.EndpointSlice",
         "admissionregistration.k8s.io.v1.ValidatingWebhookConfiguration",
         "admissionregistration.k8s.io.v1.MutatingWebhookConfiguration",
         "admissionregistration.k8s.io.v1.ValidatingAdmissionPolicy",
         "admissionregistration.k8s.io.v1.ValidatingAdmissionPolicyBinding")


def _modcache() -> str:
    go = shutil.which("go")
    if go:
        out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
        if out:
            return out
    return os.path.expanduser("~/go/pkg/mod")


def _fixture_dirs() -> list[str]:
    """k8s.io/api's testdata of every version the Go builds downloaded (make test builds kube-apiserver)."""
    return sorted(glob.glob(os.path.join(_modcache(), "k8s.io", "api@v*", "testdata", "*")))


def test_kubernetes_own_fixtures_decode_exactly_and_encode_back_byte_for_byte():
    dirs = _fixture_dirs()
    if not dirs:
        if os.environ.get("CI") == "true":
            pytest.fail("k8s.io/api is not in the Go module cache: `make test` builds kube-apiserver first")
        pytest.skip("k8s.io/api is not in the Go module cache (built by `make kube-apiserver`)")
    checked = 0
    for d in dirs:
        for kind in KINDS:
            pb = os.path.join(d, kind + ".pb")
            if not os.path.exists(pb):
                continue
            data = open(pb, "rb").read()
            want = json.load(open(os.path.join(d, kind + ".json")))
            got = codec.decode_value(data).obj
            assert got == want, f"{d}/{kind}"
            assert codec.encode_value(got) == data, f"{d}/{kind}: re-encoded bytes differ"
            checked += 1
    assert checked >= len(KINDS) * 2, checked  # every kind, at least two versions (HEAD and an older release)


def _slice(name: str, service: str, endpoints: list[dict], family: str = "IPv4") -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": SCRATCH_NS,
                         "labels": {backend.SERVICE_NAME_LABEL: service}},
            "addressType": family, "endpoints": endpoints,
            "ports": [{"name": "https", "protocol": "TCP", "port": 9443}]}


def _ep(ip: str, pod: str, ready: bool | None = True, terminating: bool = False) -> dict:
    cond = {} if ready is None else {"ready": ready}
    if terminating:
        cond["terminating"] = True
    return {"addresses": [ip], "conditions": cond,
            "targetRef": {"kind": "Pod", "namespace": SCRATCH_NS, "name": pod}}


SLICES = [
    _slice("hooks-v4", "kyverno-svc", [_ep("10.0.0.1", "a"), _ep("10.0.0.2", "b", ready=None),
                                       _ep("10.0.0.3", "c", ready=False), _ep("10.0.0.4", "d", terminating=True)]),
    _slice("hooks-v6", "kyverno-svc", [_ep("fd00::1", "a"), _ep("fd00::3", "c", ready=False)], "IPv6"),
    _slice("other", "other-svc", [_ep("10.0.0.9", "z")]),
]
SERVICE = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "kyverno-svc", "namespace": SCRATCH_NS},
           "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443, "protocol": "TCP"}],
                    "selector": {"app": "kyverno"}, "type": "ClusterIP"}}


def test_counting_rules():
    # a and b ready (b: unset means unknown, read as ready); c not ready in both families; d terminating
    assert backend.count(SLICES, "kyverno-svc") == (2, 2, 2)
    assert backend.count(SLICES, "missing") == (0, 0, 0)


def test_from_etcd_while_nothing_else_runs(etcd_clean):
    svc_prefix, eps_prefix, slice_prefix = backend.etcd_prefixes(SCRATCH_NS)
    from tests import etcd_server as es

    raw = es.raw_client(etcd_clean)
    raw.put(svc_prefix + b"kyverno-svc", codec.encode_value(SERVICE))
    for s in SLICES:
        raw.put(slice_prefix + s["metadata"]["name"].encode(), codec.encode_value(s))
    raw.put(slice_prefix + b"sealed", b"k8s:enc:aescbc:v1:key1:\x00\x01")
    raw.put(svc_prefix + b"old-style", codec.encode_value({**SERVICE, "metadata": {"name": "old-style",
                                                                                 "namespace": SCRATCH_NS}}))
    raw.put(eps_prefix + b"old-style", codec.encode_value({
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "old-style", "namespace": SCRATCH_NS},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}],
                     "ports": [{"port": 9443}]}]}))
    raw.close()
    etcd = Etcd(EtcdSettings(endpoints=(etcd_clean.endpoint,)), backend.etcd_prefixes(SCRATCH_NS))
    try:
        got = backend.from_etcd(etcd, SCRATCH_NS, "kyverno-svc")
        missing = backend.from_etcd(etcd, SCRATCH_NS, "nothing-here")
        old = backend.from_etcd(etcd, SCRATCH_NS, "old-style")
    finally:
        etcd.close()
    assert (got.found, got.ready, got.not_ready, got.slices) == (True, 2, 2, 2)
    assert got.healthy and "encrypted" in got.line() and "2 ready endpoint(s)" in got.line()
    assert not missing.found and not missing.healthy and "no such Service" in missing.line()
    assert (old.found, old.ready, old.not_ready, old.slices) == (True, 1, 2, 0)  # no slice: its Endpoints


@pytest.mark.parametrize("bad", ["", "a/b", "..", "."])
def test_a_namespace_that_would_widen_the_range_is_refused(bad):
    from breakglass.core.errors import BadInput

    with pytest.raises(BadInput):
        backend.etcd_prefixes(bad)


def test_etcd_and_the_real_apiserver_agree(kube):
    """Objects created through the real apiserver (its validation, its defaults, its protobuf in etcd): the count
    from etcd is the API's count."""
    from breakglass.access import kubeapi

    admin = kube.client
    admin.must("POST", f"/api/v1/namespaces/{SCRATCH_NS}/services",
               {k: v for k, v in SERVICE.items() if k not in ("apiVersion", "kind")})
    try:
        for s in SLICES:
            admin.must("POST", f"/apis/discovery.k8s.io/v1/namespaces/{SCRATCH_NS}/endpointslices",
                       {k: v for k, v in s.items() if k not in ("apiVersion", "kind")})
        api = kubeapi.connect(kube.kubeconfig(os.path.join(kube.dir, "backend.kubeconfig")), None, 10.0)
        through_api = backend.from_api(api, SCRATCH_NS, "kyverno-svc")
        etcd = Etcd(EtcdSettings(endpoints=(kube.etcd_endpoint,)), backend.etcd_prefixes(SCRATCH_NS))
        try:
            from_etcd = backend.from_etcd(etcd, SCRATCH_NS, "kyverno-svc")
        finally:
            etcd.close()
        assert (through_api.found, through_api.ready, through_api.not_ready, through_api.slices) == (True, 2, 2, 2)
        assert (from_etcd.found, from_etcd.ready, from_etcd.not_ready, from_etcd.slices) == \
            (through_api.found, through_api.ready, through_api.not_ready, through_api.slices)
        assert not from_etcd.problems
    finally:
        for s in SLICES:
            admin.must("DELETE", f"/apis/discovery.k8s.io/v1/namespaces/{SCRATCH_NS}/endpointslices/"
                                 f"{s['metadata']['name']}", ok=(200, 202, 404))
        admin.must("DELETE", f"/api/v1/namespaces/{SCRATCH_NS}/services/kyverno-svc", ok=(200, 202, 404))
