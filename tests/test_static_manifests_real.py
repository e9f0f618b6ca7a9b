"""Manifest-based admission (KEP-5793) on a real kube-apiserver 1.36: a webhook configuration loaded from the
admission configuration's staticManifestsDir, with the ManifestBasedAdmissionControlConfig feature gate on.

What the real apiserver shows, and what breakglass must say about it: the webhook is called and fails closed, it is
not served by the API nor stored in etcd (so neither way out can remove it), diagnose names it and offers neither,
audit reads the directory, the admission-plugin flag turns it off with the rest of its plugin (k8s.io/apiserver
v0.36: the static configurations are one more source of the same Webhook.Dispatch), and an edit of the file is
picked up without a restart."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
import yaml

from tests.conftest import run_cli
from tests.real_control_plane import binary_for, later_build, wait_for

NAME = "guard.static.k8s.io"
HOOK = "deny.guard.example.com"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

pytestmark = later_build


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def _static(port: int) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": [{"name": HOOK, "clientConfig": {"url": f"https://127.0.0.1:{port}/validate"},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["configmaps"]}],
                          "namespaceSelector": {"matchLabels": {"team": "a"}},
                          "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "timeoutSeconds": 5}]}


@pytest.fixture(scope="module")
def static(tmp_path_factory):
    from breakglass.sandbox import apiserver as launcher
    from tests.real_apiserver_session import RealApiserver

    _, binary = binary_for("1.36")
    root = tmp_path_factory.mktemp("static-1.36")
    manifests = root / "admission" / "static"
    manifests.mkdir(parents=True)
    (manifests / "guard.yaml").write_text(yaml.safe_dump(_static(_dead_port())))
    config = root / "admission" / "admission.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": "", "staticManifestsDir": str(manifests)}}]}))
    extra = ["--feature-gates=ManifestBasedAdmissionControlConfig=true", f"--admission-control-config-file={config}"]
    (root / "apiserver").mkdir()
    mp = pytest.MonkeyPatch()
    flags = launcher.flags
    mp.setattr(launcher, "flags", lambda *a, **k: flags(*a, **k) + extra)
    try:
        server = RealApiserver(str(root / "apiserver"), binary).start()
    finally:
        mp.undo()
    server.manifests = manifests
    server.client.must("POST", "/api/v1/namespaces", {"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    yield server
    server.stop()


def _configmap(server, name: str) -> tuple[int, dict]:
    return server.client.call("POST", "/api/v1/namespaces/team-a/configmaps", {"metadata": {"name": name}})


def test_the_static_webhook_is_called_but_neither_served_nor_in_etcd(static):
    status, out = _configmap(static, "refused")
    assert status == 500 and HOOK in out.get("message", ""), (status, out)
    names = [o["metadata"]["name"] for o in static.client.must("GET", VWC)["items"]]
    assert NAME not in names, names
    status, _ = static.client.call("GET", f"{VWC}/{NAME}")
    assert status == 404
    p = run_cli("etcd", "list", "--etcd-endpoints", static.etcd_endpoint, "-o", "json")
    assert p.returncode == 0, p.stderr.decode()
    assert NAME.encode() not in p.stdout and b"validatingwebhookconfigurations" not in p.stdout, p.stdout


def test_diagnose_names_it_and_offers_neither_the_api_nor_etcd(static, tmp_path):
    _configmap(static, "refused-again")
    with open(static.layout.log, "rb") as f:
        log = f.read()
    assert HOOK.encode() in log
    path = tmp_path / "kube-apiserver.log"
    path.write_bytes(log)
    # the configuration as the node holds it: what --webhooks reads for a saved one
    saved = tmp_path / "static.yaml"
    saved.write_text((static.manifests / "guard.yaml").read_text())
    p = run_cli("diagnose", str(path), "--webhooks", str(saved), "-o", "json")
    result = json.loads(p.stdout)["result"]
    f = next(f for f in result["findings"] if f.get("webhook") == HOOK)
    assert f["configuration"] == NAME and f["mode"] == "closed", f
    ways = {r["method"]: r for r in result["remedies"]}
    assert ways["kubeapi"]["applicable"] == "no" and ways["etcd"]["applicable"] == "no", ways
    assert ways["kubeadm"]["applicable"] != "no"
    assert ways["static-manifests"]["applicable"] != "no" and HOOK in ways["static-manifests"]["summary"], ways


def test_audit_reads_the_directory_the_apiserver_loads(static):
    p = run_cli("audit", "--static-manifests", str(static.manifests), "-o", "json")
    findings = json.loads(p.stdout)["result"]["findings"]
    assert any(f["rule"] == "static-webhook" and f["configuration"].endswith(NAME) for f in findings), findings


def test_an_edit_of_the_file_is_picked_up_without_a_restart(static):
    """The apiserver reloads the directory: the way out for a static webhook is its file, on every node."""
    path = static.manifests / "guard.yaml"
    before = path.read_text()
    doc = yaml.safe_load(before)
    doc["webhooks"][0]["failurePolicy"] = "Ignore"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc))
    os.replace(tmp, path)  # as breakglass writes files: whole, by rename
    try:
        wait_for(lambda: _configmap(static, f"admitted-{time.monotonic_ns()}")[0] == 201, 90)
    finally:
        tmp.write_text(before)
        os.replace(tmp, path)
    wait_for(lambda: _configmap(static, f"refused-{time.monotonic_ns()}")[0] == 500, 90)


def test_the_admission_plugin_flag_turns_the_static_webhook_off(static):
    """--disable-admission-plugins=ValidatingAdmissionWebhook: the static configurations are one more source of
    the same plugin, so the flag that is the bootstrap deadlock's way out turns them off too."""
    argv = list(static.argv)
    static.argv = [*argv, "--disable-admission-plugins=ValidatingAdmissionWebhook"]
    try:
        static.restart()
        status, out = _configmap(static, "with-the-flag")
        assert status == 201, out
    finally:
        static.argv = argv
        static.restart()
    status, _ = _configmap(static, "flag-removed")
    assert status == 500


def test_recover_static_manifests_sets_ignore_and_revert_puts_the_file_back(static, tmp_path):
    """The way out for a manifest-based webhook: its file on the node, backed up and journaled; the real apiserver
    obeys the edit without a restart, and revert puts the bytes back and the webhook refuses again."""
    path = static.manifests / "guard.yaml"
    before = path.read_bytes()
    os.chmod(path, 0o640)
    state = str(tmp_path / "state")
    assert _configmap(static, f"refused-{time.monotonic_ns()}")[0] == 500
    dry = run_cli("recover", "static-manifests", "--static-manifests", str(static.manifests), "--webhook", HOOK,
                  "--dry-run", "--state-dir", state)
    assert dry.returncode == 0, dry.stderr.decode()
    assert b"-  failurePolicy: Fail" in dry.stdout and b"+  failurePolicy: Ignore" in dry.stdout, dry.stdout
    assert path.read_bytes() == before
    p = run_cli("recover", "static-manifests", "--static-manifests", str(static.manifests), "--webhook", HOOK,
                "--yes", "--apiserver", static.url, "--wait-timeout", "60", "--state-dir", state, "-o", "json")
    assert p.returncode == 0, (p.stdout.decode(), p.stderr.decode())
    out = json.loads(p.stdout)
    run_id = out["result"]["run"]
    assert yaml.safe_load(path.read_text())["webhooks"][0]["failurePolicy"] == "Ignore"
    assert os.stat(path).st_mode & 0o777 == 0o640  # the file's mode kept
    wait_for(lambda: _configmap(static, f"admitted-{time.monotonic_ns()}")[0] == 201, 90)
    backups = os.listdir(os.path.join(state, "runs", run_id, "backups"))
    assert any(b.endswith("guard.yaml") for b in backups), backups
    # the guard reads what the revert re-arms from the run's backup of the file: a webhook whose URL answers nothing
    r = run_cli("revert", run_id, "--state-dir", state, "--yes", "-o", "json")
    assert r.returncode == 4 and path.read_bytes() != before, (r.stdout.decode(), r.stderr.decode())
    assert HOOK in r.stdout.decode() + r.stderr.decode()
    r = run_cli("revert", run_id, "--state-dir", state, "--yes", "--re-arm", "-o", "json")
    # restored, and said not to be an all-clear: the re-armed webhook's backend cannot answer (exit 8)
    assert r.returncode == 8, (r.stdout.decode(), r.stderr.decode())
    res = json.loads(r.stdout)["result"]
    assert [o["outcome"] for o in res["outcomes"]] == ["restored"], res
    assert path.read_bytes() == before
    wait_for(lambda: _configmap(static, f"refused-{time.monotonic_ns()}")[0] == 500, 90)


def test_recover_static_manifests_refuses_a_name_not_in_the_directory_and_changes_nothing(static, tmp_path):
    path = static.manifests / "guard.yaml"
    before = path.read_bytes()
    p = run_cli("recover", "static-manifests", "--static-manifests", str(static.manifests), "--webhook",
                "validate.kyverno.svc-fail", "--yes", "--state-dir", str(tmp_path / "s"))
    assert p.returncode == 2, p.stderr.decode()
    err = p.stderr.decode()
    assert "no manifest-based webhook named validate.kyverno.svc-fail" in err and HOOK in err, err
    assert "Traceback" not in err and path.read_bytes() == before
