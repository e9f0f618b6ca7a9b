"""Reading configurations from files, from a real etcd (plain and TLS), and from a real kube-apiserver."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from breakglass.access.etcd import Etcd, EtcdSettings
from breakglass.core.errors import BadInput
from breakglass.webhooks import codec, sources
from tests import etcd_server as es
from tests.conftest import ROOT, run_cli
from tests.real_apiserver_session import kube, real_apiserver  # noqa: F401 - the fixtures
from tests.test_codec import KYVERNO

EX = os.path.join(ROOT, "examples", "webhooks")


# -- files ---------------------------------------------------------------------------------------

def test_list_and_multi_document_files():
    inv = sources.load_files([os.path.join(EX, "cert-manager-safe.yaml"), os.path.join(EX, "istio-safe.yaml")])
    assert sorted((c.kind, c.name) for c in inv.configs) == [
        ("mutating", "cert-manager-webhook"), ("mutating", "istio-sidecar-injector"),
        ("validating", "cert-manager-webhook"), ("validating", "istio-validator-istio-system")]


@pytest.mark.parametrize("content,match", [
    ("webhooks: [\n  - name: x\n  bad: : :", "invalid YAML"),
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", r"no admission configurations \(found Deployment\)"),
    ("- just\n- a list\n", "expected a Kubernetes object"),
    ("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {}\n", "without metadata.name"),
    ("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: a}\nwebhooks: 7\n",
     "webhooks is not a list"),
    ("", "no admission configurations"),
])
def test_bad_files_are_one_line_bad_input(tmp_path, content, match):
    p = tmp_path / "w.yaml"
    p.write_text(content)
    with pytest.raises(BadInput, match=match):
        sources.load_files([str(p)])
    proc = run_cli("audit", "-f", str(p))
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_binary_and_missing_files(tmp_path):
    b = tmp_path / "b"
    b.write_bytes(os.urandom(1000) + b"\x00")
    with pytest.raises(BadInput, match="binary data"):
        sources.load_files([str(b)])
    with pytest.raises(BadInput, match="no such file"):
        sources.load_files([str(tmp_path / "nope.yaml")])


def test_stdin():
    data = open(os.path.join(EX, "kyverno-risky.yaml"), "rb").read()
    p = run_cli("webhooks", "-f", "-", "-o", "json", stdin=data)
    assert p.returncode == 0
    rows = json.loads(p.stdout)["result"]["rows"]
    assert {r["webhook"] for r in rows} == {"validate.kyverno.svc-fail", "validate.kyverno.svc-ignore"}
    assert "ServiceCIDR" in rows[0]["bootstrap"] or "ServiceCIDR" in rows[1]["bootstrap"]


# -- etcd ---------------------------------------------------------------------------------------

def _seed(srv, objs, extra=()):
    c = es.raw_client(srv)
    items = [(sources.etcd_key({"ValidatingWebhookConfiguration": "validating",
                                "MutatingWebhookConfiguration": "mutating",
                                "ValidatingAdmissionPolicy": "vap",
                                "ValidatingAdmissionPolicyBinding": "vapbinding"}[o["kind"]], o["metadata"]["name"]),
              codec.encode_value(o)) for o in objs]
    es.put_many(c, items + list(extra))
    c.close()


def _examples():
    out = []
    for name in sorted(os.listdir(EX)):
        if name.endswith(".yaml") and "risky" in name:
            for doc in yaml.safe_load_all(open(os.path.join(EX, name))):
                out.append(doc)
    return out


def test_etcd_keys_have_no_api_group():
    assert sources.etcd_key("validating", "kyverno") == b"/registry/validatingwebhookconfigurations/kyverno"
    assert b"admissionregistration" not in sources.etcd_key("mutating", "x")


def test_audit_reads_what_the_encoder_wrote_to_a_real_etcd(etcd_clean):
    _seed(etcd_clean, _examples())
    p = run_cli("audit", "--etcd-endpoints", etcd_clean.endpoint, "-o", "json")
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    configs = {f["configuration"] for f in doc["result"]["findings"]}
    assert "ValidatingWebhookConfiguration/kyverno-resource-validating-webhook-cfg" in configs
    assert "ValidatingAdmissionPolicy/require-owner" in configs
    # the same result as from the files
    from_files = run_cli("audit", *sum((["-f", os.path.join(EX, n)] for n in sorted(os.listdir(EX))
                                        if "risky" in n), []), "-o", "json")
    strip = lambda d: sorted((f["rule"], f["configuration"], f["webhook"] or "") for f in d["result"]["findings"])  # noqa: E731
    assert strip(doc) == strip(json.loads(from_files.stdout))


def test_etcd_env_variables(etcd_clean):
    _seed(etcd_clean, [KYVERNO])
    p = run_cli("webhooks", "--source", "etcd", "-o", "json", env={"ETCDCTL_ENDPOINTS": etcd_clean.endpoint})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"]["rows"][0]["webhook"] == "validate.kyverno.svc-fail"


def test_listing_ranges_only_the_admission_prefixes(etcd_clean):
    unrelated = [(f"/registry/pods/ns-{i % 50}/pod-{i}".encode(), b"k8s\x00" + os.urandom(64)) for i in range(100_000)]
    unrelated += [(b"/registry/validatingwebhookconfigurationsX/decoy", b"{}"),
                  (b"/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/wrong", b"{}")]
    _seed(etcd_clean, [KYVERNO], unrelated)
    etcd = Etcd(EtcdSettings.resolve(etcd_clean.endpoint, env={}),
                tuple(sources.etcd_prefixes().values()))
    inv = sources.load_etcd(etcd)
    assert [c.name for c in inv.configs] == ["kyverno-resource-validating-webhook-cfg"] and not inv.warnings
    allowed = tuple(sources.etcd_prefixes().values())
    assert etcd.ranges and all(start.startswith(allowed) for start, _ in etcd.ranges)
    assert len(etcd.ranges) == len(allowed)  # one page per prefix: nothing else was read
    with pytest.raises(ValueError):
        list(etcd.range_prefix(b"/registry/"))
    etcd.close()


def test_pages_through_many_configurations(etcd_clean):
    objs = []
    for i in range(1203):
        o = json.loads(json.dumps(KYVERNO))
        o["metadata"]["name"] = f"cfg-{i:05d}"
        objs.append(o)
    _seed(etcd_clean, objs)
    etcd = Etcd(EtcdSettings.resolve(etcd_clean.endpoint, env={}), tuple(sources.etcd_prefixes().values()))
    inv = sources.load_etcd(etcd)
    assert len(inv.configs) == 1203 and inv.configs[-1].name == "cfg-01202"


def test_encrypted_and_corrupt_values_are_reported_not_guessed(etcd_clean):
    _seed(etcd_clean, [KYVERNO], [
        (b"/registry/mutatingwebhookconfigurations/secret-one", b"k8s:enc:kms:v2:vault:\x0a\x03abc"),
        (b"/registry/mutatingwebhookconfigurations/broken", codec.encode_value(KYVERNO)[:-30]),
    ])
    etcd = Etcd(EtcdSettings.resolve(etcd_clean.endpoint, env={}), tuple(sources.etcd_prefixes().values()))
    inv = sources.load_etcd(etcd)
    assert len(inv.configs) == 1
    assert inv.opaque == ["/registry/mutatingwebhookconfigurations/secret-one (encrypted: kms:v2:vault)"]
    assert any("broken" in w and "truncated" in w for w in inv.warnings)


def test_tls_etcd(etcd_tls):
    _seed(etcd_tls, [KYVERNO])
    p = run_cli("webhooks", "--etcd-endpoints", etcd_tls.endpoint, "--etcd-cacert", etcd_tls.cacert,
                "--etcd-cert", etcd_tls.cert, "--etcd-key", etcd_tls.key, "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"]["rows"][0]["configuration"] == "kyverno-resource-validating-webhook-cfg"


@pytest.mark.parametrize("case", ["wrong-ca", "wrong-client", "no-client-cert", "plaintext"])
def test_tls_failures_are_exit_5(etcd_tls, case):
    pki = etcd_tls.pki
    args = {"wrong-ca": [pki["other-ca"], pki["client_cert"], pki["client_key"]],
            "wrong-client": [pki["ca"], pki["other-client_cert"], pki["other-client_key"]],
            "no-client-cert": [pki["ca"], None, None],
            "plaintext": [None, None, None]}[case]
    ep = etcd_tls.endpoint if case != "plaintext" else etcd_tls.endpoint.replace("https", "http")
    cli = ["webhooks", "--etcd-endpoints", ep, "--timeout", "3"]
    for flag, v in zip(("--etcd-cacert", "--etcd-cert", "--etcd-key"), args):
        if v:
            cli += [flag, v]
    p = run_cli(*cli, env={"ETCDCTL_CACERT": "", "ETCDCTL_CERT": "", "ETCDCTL_KEY": ""})
    assert p.returncode == 5, (p.stdout, p.stderr)
    err = p.stderr.decode()
    assert "Traceback" not in err and err.startswith("breakglass: error: etcd at ")


def test_refused_endpoint_is_exit_5():
    p = run_cli("webhooks", "--etcd-endpoints", f"127.0.0.1:{es.free_port()}", "--timeout", "2")
    assert p.returncode == 5 and b"etcd at 127.0.0.1" in p.stderr


@pytest.mark.parametrize("args,match", [
    (["--etcd-endpoints", "http://[bad"], "not an etcd endpoint"),
    (["--etcd-endpoints", "127.0.0.1:2379", "--etcd-cert", "/nonexistent.crt", "--etcd-key", "/x.key"], "no such file"),
    (["--etcd-endpoints", "127.0.0.1:2379", "--etcd-cert", __file__], "go together"),
    (["--etcd-endpoints", "127.0.0.1:2379", "--etcd-prefix", "x"], "not an etcd prefix"),
])
def test_bad_etcd_settings_are_exit_2(args, match):
    p = run_cli("webhooks", *args)
    assert p.returncode == 2 and match in p.stderr.decode()


# -- the live API: a real kube-apiserver (tests/real_apiserver_session.py) ------------------------------

def test_api_listing_through_kubeconfig(kube, tmp_path):
    created = {k: v for k, v in KYVERNO.items()}
    created["metadata"] = {k: v for k, v in KYVERNO["metadata"].items()
                           if k not in ("uid", "generation", "creationTimestamp", "managedFields")}
    kube.client.must("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", created)
    kc = kube.kubeconfig(str(tmp_path / "kubeconfig"))  # a ServiceAccount's bearer token
    p = run_cli("audit", "--kubeconfig", kc, "-o", "json")
    assert p.returncode == 3, p.stderr
    assert kube.token().encode() not in p.stdout + p.stderr
    [finding] = [f for f in json.loads(p.stdout)["result"]["findings"] if f["rule"] == "bootstrap-intercept"]
    assert finding["configuration"] == "ValidatingWebhookConfiguration/" + KYVERNO["metadata"]["name"]
    p = run_cli("audit", "--kubeconfig", kc, "--context", "nope")
    assert p.returncode == 5 and b"kubeconfig" in p.stderr  # wrong context: unreachable as asked
    kube.kubeconfig(kc, {"token": "wrong"})
    p = run_cli("audit", "--kubeconfig", kc)
    assert p.returncode == 5 and b"401" in p.stderr


def test_several_endpoints_fail_over_to_a_live_one(etcd_clean):
    _seed(etcd_clean, [KYVERNO])
    dead = f"127.0.0.1:{es.free_port()}"
    for eps in (f"{dead},{etcd_clean.endpoint}", f"{etcd_clean.endpoint},{dead}"):
        p = run_cli("webhooks", "--etcd-endpoints", eps, "--timeout", "2", "-o", "json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["result"]["rows"][0]["webhook"] == "validate.kyverno.svc-fail"
