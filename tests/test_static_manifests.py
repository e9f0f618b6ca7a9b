"""Manifest-based admission (KEP-5793, alpha in 1.36): webhook configurations kube-apiserver loads from files in its
admission configuration's staticManifestsDir (k8s.io/apiserver v0.36 pkg/admission/plugin/webhook/manifest). They
are neither in etcd nor served by the API, their names end with `.static.k8s.io`, they take only `url:` clients,
and they alone are called for webhook configuration writes. audit reads them (`--static-manifests DIR`) and puts the
fix in the file; diagnose never offers the API or etcd for one."""

from __future__ import annotations

import json

import yaml

from breakglass.diagnose import remedies
from breakglass.diagnose.model import Finding
from tests.conftest import run_cli


def _config(name: str = "guard.static.k8s.io", client: dict | None = None, resources=("*",)) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": "admission-guard.example.com",
                          "clientConfig": client or {"url": "https://127.0.0.1:9443/validate"},
                          "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                                     "resources": list(resources)}],
                          "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}


def _audit(tmp_path, *docs: dict, name: str = "guard.yaml") -> tuple[int, list[dict]]:
    d = tmp_path / "manifests"
    d.mkdir(exist_ok=True)
    (d / name).write_text(yaml.safe_dump_all(docs))
    (d / "README.txt").write_text("not a manifest: the apiserver reads .yaml, .yml and .json only")
    p = run_cli("audit", "--static-manifests", str(d), "-o", "json", "--fail-on", "critical")
    assert p.returncode in (0, 3), p.stderr
    return p.returncode, json.loads(p.stdout)["result"]["findings"]


def test_audit_reads_the_directory_and_puts_the_fix_in_the_file_not_kubectl(tmp_path):
    code, findings = _audit(tmp_path, _config())
    rules = {f["rule"]: f for f in findings}
    assert code == 3 and rules["bootstrap-intercept"]["severity"] == "critical"
    assert "static-webhook" in rules and "not in etcd" in rules["static-webhook"]["title"]
    fix = rules["bootstrap-intercept"]["fix"]
    assert fix["lasting"]["form"] == "static-manifest" and "kubectl" not in fix["command"]
    assert str(tmp_path / "manifests" / "guard.yaml") in fix["command"]
    # failing closed on every resource, it is called for webhook configurations too: the API ways out are blocked
    assert rules["static-intercepts-admission-config"]["severity"] == "high"


def test_what_the_apiserver_refuses_in_the_directory_is_critical(tmp_path):
    _, findings = _audit(tmp_path, _config(name="guard"), _config(
        name="svc.static.k8s.io", client={"service": {"namespace": "sec", "name": "svc"}}, resources=("pods",)))
    invalid = [f for f in findings if f["rule"] == "static-manifest-invalid"]
    assert {f["severity"] for f in invalid} == {"critical"} and len(invalid) == 2, invalid
    assert any(".static.k8s.io" in f["title"] for f in invalid) and any("needs a url" in f["title"] for f in invalid)
    # a webhook only on pods does not see webhook configurations
    assert not [f for f in findings if f["rule"] == "static-intercepts-admission-config" and
                f["configuration"].endswith("svc.static.k8s.io")]


def test_a_directory_that_is_not_one_is_one_line(tmp_path):
    for arg in (str(tmp_path / "none"), str(tmp_path)):
        p = run_cli("audit", "--static-manifests", arg)
        assert p.returncode == 2 and b"--static-manifests" in p.stderr and b"Traceback" not in p.stderr, p.stderr


def test_diagnose_offers_neither_the_api_nor_etcd_for_a_manifest_based_culprit():
    f = Finding(id="F1", family="webhook-call-failed", severity="critical", title="t", explanation="e",
                evidence=[], advice="", count=1, first_seen=None, last_seen=None, sources=[], webhook="admission-guard.example.com", configuration="guard.static.k8s.io",
                mode="closed", bootstrap_deadlock=True)
    opts = {o.method: o for o in remedies.options([f])}
    assert opts["kubeapi"].applicable == "no" and opts["etcd"].applicable == "no"
    assert "staticManifestsDir" in opts["kubeapi"].summary
    assert opts["kubeadm"].applicable == "yes" and opts["talos"].applicable == "yes"  # the flag turns it off too
    f.configuration = "kyverno-resource-validating-webhook-cfg"
    assert {o.method: o for o in remedies.options([f])}["kubeapi"].applicable != "no"


def test_audit_finds_a_nodes_static_manifests_over_ssh_from_its_apiservers_own_flags(tmp_path, sshd):
    """Over the real OpenSSH server: the kubeadm manifest names --admission-control-config-file, whose
    ValidatingAdmissionWebhook plugin's WebhookAdmission (in a file, by a relative path) names staticManifestsDir."""
    node = tmp_path / "node"
    (node / "static").mkdir(parents=True)
    (node / "static" / "guard.yaml").write_text(yaml.safe_dump(_config()))
    (node / "static" / "notes.txt").write_text("not read")
    (node / "webhook-admission.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": "", "staticManifestsDir": str(node / "static")}))
    (node / "admission.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "PodSecurity", "configuration": {}},
                    {"name": "ValidatingAdmissionWebhook", "path": "webhook-admission.yaml"}]}))
    manifest = node / "kube-apiserver.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-apiserver", "namespace": "kube-system"},
        "spec": {"containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.36.3",
                                 "command": ["kube-apiserver", "--advertise-address=10.0.0.2",
                                             f"--admission-control-config-file={node / 'admission.yaml'}",
                                             "--feature-gates=ManifestBasedAdmissionControlConfig=true"]}]}},
        default_flow_style=False))
    ssh = ["--ssh-config", sshd.ssh_config, "--known-hosts", sshd.known_hosts]
    p = run_cli("audit", "--static-manifests-via-ssh", "cp1", "--apiserver-manifest", str(manifest), *ssh,
                "-o", "json", "--fail-on", "critical")
    assert p.returncode == 3, p.stderr
    findings = json.loads(p.stdout)["result"]["findings"]
    static = [f for f in findings if f["rule"] == "static-webhook"]
    assert static and static[0]["configuration"].endswith("guard.static.k8s.io"), findings
    fix = next(f["fix"] for f in findings if f["rule"] == "bootstrap-intercept")
    assert f"cp1:{node / 'static' / 'guard.yaml'}" in fix["command"] and "kubectl" not in fix["command"]
    # a node whose apiserver names no staticManifestsDir: said, not an error
    manifest.write_text(manifest.read_text().replace(f"--admission-control-config-file={node / 'admission.yaml'}",
                                                     "--enable-admission-plugins=NodeRestriction"))
    p = run_cli("audit", "--static-manifests-via-ssh", "cp1", "--apiserver-manifest", str(manifest), *ssh)
    assert p.returncode == 0 and b"names no staticManifestsDir" in p.stdout + p.stderr, (p.stdout, p.stderr)


def _talos_node(tmp_path, era_config: str, version: str, with_dir: bool = True):
    """A Talos control-plane node (the talosctl stand-in, its config generated by that Talos version's own
    machinery) whose apiserver loads static webhooks: admissionControl names staticManifestsDir, a path inside the
    apiserver's container, which extraVolumes mounts from the host, where machine.files would put the files."""
    from tests.test_talos import FakeTalos

    t = FakeTalos(tmp_path)
    t.node("cp1", era_config, version)
    docs = t.docs("cp1")
    api = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "KubeAPIServerConfig"), None)
    if api is None:
        api = next(d for d in docs if isinstance(d, dict) and d.get("version") == "v1alpha1")["cluster"]["apiServer"]
    if with_dir:
        api["admissionControl"] = [{"name": "PodSecurity", "configuration": {"apiVersion": "pod-security.admission."
                                                                          "config.k8s.io/v1", "kind":
                                                                          "PodSecurityConfiguration"}},
                                   {"name": "ValidatingAdmissionWebhook", "configuration": {
                                       "apiVersion": "apiserver.config.k8s.io/v1",
                                       "kind": "WebhookAdmissionConfiguration",
                                       "staticManifestsDir": "/etc/kubernetes/static-webhooks/validating"}}]
        api["extraVolumes"] = [{"hostPath": "/var/lib/breakglass-test/webhooks",
                                "mountPath": "/etc/kubernetes/static-webhooks", "readonly": True}]
    (t.dir / "nodes" / "cp1.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    host = t.dir / "nodes" / "cp1.fs" / "var" / "lib" / "breakglass-test" / "webhooks" / "validating"
    (host / "older").mkdir(parents=True)
    (host / "guard.yaml").write_text(yaml.safe_dump(_config()))
    (host / "README.txt").write_text("not read")
    (host / "older" / "old.yaml").write_text(yaml.safe_dump(_config(name="old.static.k8s.io")))  # not read: a subdir
    return t


def test_audit_finds_a_talos_nodes_static_manifests_through_talosctl(tmp_path):
    t = _talos_node(tmp_path, "v1.10-single.yaml", "1.10")
    p = t.cli("audit", "--static-manifests-via-talos", "cp1", "-o", "json", "--fail-on", "critical")
    assert p.returncode == 3, p.stderr
    findings = json.loads(p.stdout)["result"]["findings"]
    configs = {f["configuration"] for f in findings if f["rule"] == "static-webhook"}
    assert configs and all(c.endswith("guard.static.k8s.io") for c in configs), findings  # not the subdir's
    fix = next(f["fix"] for f in findings if f["rule"] == "bootstrap-intercept")
    assert "cp1:/var/lib/breakglass-test/webhooks/validating/guard.yaml" in fix["command"], fix
    assert "kubectl" not in fix["command"]


def test_a_talos_node_without_static_manifests_is_said_not_an_error(tmp_path):
    t = _talos_node(tmp_path, "v1.10-single.yaml", "1.10", with_dir=False)
    p = t.cli("audit", "--static-manifests-via-talos", "cp1")
    assert p.returncode == 0 and b"names no staticManifestsDir" in p.stdout + p.stderr, (p.stdout, p.stderr)
    p = t.cli("audit", "--static-manifests-via-talos", "cp9")  # no such node: unreachable, one line
    assert p.returncode == 5 and len(p.stderr.splitlines()) == 1, p.stderr


def test_on_talos_1_14_the_plugin_documents_are_read_and_an_unmounted_directory_is_said(tmp_path):
    """Talos 1.14 moved admission plugins to KubeAdmissionControlConfig documents and its KubeAPIServerConfig takes
    no extraVolumes (only the host's CA roots are mounted): a staticManifestsDir elsewhere is one the apiserver
    cannot read either: a critical finding (that config keeps the control plane down), and audit's exit says so."""
    t = _talos_node(tmp_path, "v1.14-document.yaml", "1.14", with_dir=False)
    docs = t.docs("cp1")
    docs.append({"apiVersion": "v1alpha1", "kind": "KubeAdmissionControlConfig", "name": "ValidatingAdmissionWebhook",
                 "configuration": {"apiVersion": "apiserver.config.k8s.io/v1",
                                   "kind": "WebhookAdmissionConfiguration",
                                   "staticManifestsDir": "/etc/kubernetes/static-webhooks/validating"}})
    (t.dir / "nodes" / "cp1.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    p = t.cli("audit", "--static-manifests-via-talos", "cp1")
    said = b" ".join((p.stdout + p.stderr).split())
    assert p.returncode == 3 and b"CRITICAL static-dir-unmounted" in said and b"refuses to start" in said, said
    rep = json.loads(t.cli("audit", "--static-manifests-via-talos", "cp1", "-o", "json").stdout)["result"]
    assert [(f["rule"], f["severity"]) for f in rep["findings"]] == [("static-dir-unmounted", "critical")], rep
    docs[-1]["configuration"]["staticManifestsDir"] = "/etc/ssl/certs/webhooks"
    (t.dir / "nodes" / "cp1.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    host = t.dir / "nodes" / "cp1.fs" / "etc" / "ssl" / "certs" / "webhooks"
    host.mkdir(parents=True)
    (host / "guard.yaml").write_text(yaml.safe_dump(_config()))
    p = t.cli("audit", "--static-manifests-via-talos", "cp1", "-o", "json")
    assert p.returncode == 3, p.stderr
    assert any(f["rule"] == "static-webhook" for f in json.loads(p.stdout)["result"]["findings"])
