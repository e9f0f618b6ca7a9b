"""`recover static-manifests` on files (the real apiserver's side is in tests/test_static_manifests_real.py): only
the named webhooks change, a file changed under it is never overwritten, revert puts back the bytes or, with
--force, only breakglass' change, and a journal that names another file is refused."""

from __future__ import annotations

import json
import os

import yaml

from tests.conftest import run_cli

HOOK = "deny.guard.example.com"


def _config(name: str, hooks: list[tuple[str, str | None]]) -> dict:
    out = []
    for hook, policy in hooks:
        h = {"name": hook, "clientConfig": {"url": "https://127.0.0.1:1/validate"},
             "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
             "sideEffects": "None", "admissionReviewVersions": ["v1"]}
        if policy:
            h["failurePolicy"] = policy
        out.append(h)
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": out}


def _dir(tmp_path):
    d = tmp_path / "static"
    d.mkdir()
    (d / "a.yaml").write_text("# kept by revert\n" + yaml.safe_dump_all([
        _config("guard.static.k8s.io", [(HOOK, "Fail"), ("other.guard.example.com", "Fail")]),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]))
    (d / "b.json").write_text(json.dumps(_config("second.static.k8s.io", [("json.example.com", None)])))
    (d / "notes.txt").write_text("not loaded by the apiserver")
    return d


def _recover(d, state, *args):
    return run_cli("recover", "static-manifests", "--static-manifests", str(d), "--state-dir", str(state),
                   "--no-wait", "-o", "json", *args)


def _policies(path) -> dict:
    docs = list(yaml.safe_load_all(path.read_text()))
    return {h["name"]: h.get("failurePolicy") for doc in docs if doc.get("kind", "").endswith("Configuration")
            for h in doc["webhooks"]}


def test_only_the_named_webhook_changes_and_revert_puts_the_bytes_back(tmp_path):
    d = _dir(tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    p = _recover(d, tmp_path / "s", "--webhook", HOOK, "--yes")
    assert p.returncode == 8, p.stderr.decode()  # applied, and not verified: nothing was waited for
    res = json.loads(p.stdout)["result"]
    assert _policies(d / "a.yaml") == {HOOK: "Ignore", "other.guard.example.com": "Fail"}
    assert (d / "b.json").read_bytes() == before["b.json"]
    assert any(doc.get("kind") == "ConfigMap" for doc in yaml.safe_load_all((d / "a.yaml").read_text()))
    assert not [n for n in os.listdir(d) if n.startswith(".")]  # no temp file left in the directory it loads
    r = run_cli("revert", res["run"], "--state-dir", str(tmp_path / "s"), "--yes", "--re-arm", "-o", "json")
    assert [o["outcome"] for o in json.loads(r.stdout)["result"]["outcomes"]] == ["restored"], r.stdout
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before  # the comment too


def test_a_configuration_name_takes_all_its_webhooks_and_a_json_file_stays_json(tmp_path):
    d = _dir(tmp_path)
    p = _recover(d, tmp_path / "s", "-w", "second.static.k8s.io", "--yes")
    assert p.returncode == 8, p.stderr.decode()
    assert json.loads((d / "b.json").read_text())["webhooks"][0]["failurePolicy"] == "Ignore"
    assert _policies(d / "a.yaml") == {HOOK: "Fail", "other.guard.example.com": "Fail"}


def test_a_file_changed_since_is_a_conflict_and_force_takes_back_only_breakglass_change(tmp_path):
    d = _dir(tmp_path)
    state = tmp_path / "s"
    run = json.loads(_recover(d, state, "--webhook", HOOK, "--yes").stdout)["result"]["run"]
    text = (d / "a.yaml").read_text().replace("other.guard.example.com", "renamed.guard.example.com")
    (d / "a.yaml").write_text(text)
    r = run_cli("revert", run, "--state-dir", str(state), "--yes", "--re-arm")
    assert r.returncode == 4 and "a.yaml changed since the run; left as it is" in r.stderr.decode(), r.stderr
    assert (d / "a.yaml").read_text() == text
    r = run_cli("revert", run, "--state-dir", str(state), "--yes", "--force", "-o", "json")
    assert [o["outcome"] for o in json.loads(r.stdout)["result"]["outcomes"]] == ["restored"], r.stdout
    assert _policies(d / "a.yaml") == {HOOK: "Fail", "renamed.guard.example.com": "Fail"}


def test_a_journal_naming_another_file_is_refused(tmp_path):
    d = _dir(tmp_path)
    state = tmp_path / "s"
    run = json.loads(_recover(d, state, "--webhook", HOOK, "--yes").stdout)["result"]["run"]
    victim = tmp_path / "victim.yaml"
    victim.write_text("untouched\n")
    journal = state / "runs" / run / "journal.jsonl"
    journal.write_text(journal.read_text().replace(str(d / "a.yaml"), str(victim)))
    r = run_cli("revert", run, "--state-dir", str(state), "--yes", "--re-arm", "-o", "json")
    assert r.returncode != 0 and victim.read_text() == "untouched\n", r.stdout
    assert "Traceback" not in r.stderr.decode()


def test_unknown_names_missing_dirs_and_bad_files_are_one_line_and_change_nothing(tmp_path):
    d = _dir(tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    for args, says in ((("--webhook", "nope$(id)"), "no manifest-based webhook named nope$(id)"),
                       ((), "name the manifest-based webhook"),):
        p = _recover(d, tmp_path / "s", *args, "--yes")
        assert p.returncode == 2 and says in p.stderr.decode(), p.stderr.decode()
    p = _recover(d, tmp_path / "s", "--webhook", "deny.gaurd.example.com", "--yes")  # a typo
    assert p.returncode == 2 and f"did you mean {HOOK}?" in p.stderr.decode(), p.stderr.decode()
    p = run_cli("recover", "static-manifests", "--static-manifests", str(tmp_path / "missing"), "--webhook", HOOK)
    assert p.returncode == 2 and "no such directory" in p.stderr.decode()
    (d / "c.yaml").write_text("webhooks: [unclosed\n")
    p = _recover(d, tmp_path / "s", "--webhook", HOOK, "--yes")
    assert p.returncode == 2 and "c.yaml" in p.stderr.decode() and "Traceback" not in p.stderr.decode()
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.name != "c.yaml"} == before


def _kubeadm_node(tmp_path):
    """A node's files: the staticManifestsDir, the admission configuration naming it, the kube-apiserver manifest
    naming that."""
    d = _dir(tmp_path)
    admission = tmp_path / "admission.yaml"
    admission.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
            "staticManifestsDir": str(d)}}]}))
    manifest = tmp_path / "kube-apiserver.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-apiserver", "namespace": "kube-system"},
        "spec": {"containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.36.3",
                                 "command": ["kube-apiserver", f"--admission-control-config-file={admission}",
                                             "--feature-gates=ManifestBasedAdmissionControlConfig=true"]}]}},
        sort_keys=False))
    return d, manifest


def test_over_ssh_the_directory_is_read_from_the_apiservers_own_flags_and_the_node_keeps_a_copy(tmp_path, sshd):
    """Over a real OpenSSH server: the kube-apiserver manifest names the admission configuration, which names the
    staticManifestsDir; the node's copy of the old file goes outside it (the apiserver loads every file there)."""
    d, manifest = _kubeadm_node(tmp_path)
    before = (d / "a.yaml").read_bytes()
    backup = tmp_path / "node-backup"
    ssh = ["--ssh", "cp1", "--ssh-config", sshd.ssh_config, "--known-hosts", sshd.known_hosts,
           "--manifest-path", str(manifest), "--node-backup-dir", str(backup)]
    state = tmp_path / "s"
    p = run_cli("recover", "static-manifests", "--webhook", HOOK, "--yes", "--no-wait", "--state-dir", str(state),
                "-o", "json", *ssh)
    assert p.returncode == 8, p.stderr.decode()
    assert _policies(d / "a.yaml")[HOOK] == "Ignore"
    [copy] = os.listdir(backup)
    assert (backup / copy).read_bytes() == before and not [n for n in os.listdir(d) if n.startswith(".")]
    run = json.loads(p.stdout)["result"]["run"]
    r = run_cli("revert", run, "--state-dir", str(state), "--yes", "--re-arm", "--ssh-config", sshd.ssh_config,
                "--known-hosts", sshd.known_hosts)
    assert (d / "a.yaml").read_bytes() == before, (r.stdout.decode(), r.stderr.decode())


def test_the_wizard_offers_it_first_for_a_manifest_based_culprit_and_plans_it_over_ssh(tmp_path, sshd, monkeypatch):
    from breakglass.access.ssh import Node, SshOptions
    from breakglass.flows import planner, wizard, recovery
    from breakglass.ways import static_webhooks

    targets = [{"kind": "validating", "configuration": "guard.static.k8s.io", "webhook": HOOK}]
    probes = {n: planner.Probe(n, True, "ok") for n in ("apiserver", "ssh", "etcd")}
    opts = planner.options(probes, static=wizard._static(targets))
    assert [o.method for o in opts if o.available][0] == "static-manifests"
    assert {o.method: o.available for o in opts}["kubeapi"] is False
    assert "static-manifests" not in [o.method for o in planner.options(probes)]  # never for any other culprit
    d, manifest = _kubeadm_node(tmp_path)
    monkeypatch.setattr(static_webhooks, "KUBEADM_MANIFEST", str(manifest))
    plan = recovery.plan_static
    monkeypatch.setattr(recovery, "plan_static", lambda nodes, names, dirs, _m, **k: plan(nodes, names, dirs,
                                                                                         str(manifest), **k))
    access = planner.Access(ssh_nodes={"cp1": Node("cp1", SshOptions(config=sshd.ssh_config,
                                                                     known_hosts=sshd.known_hosts))})
    remedy, steps, word, _refs = wizard._plan(None, "static-manifests", "ssh", access, targets, [], wizard.Typed())
    assert word == HOOK and [s.target for s in steps] == [f"cp1:{d / 'a.yaml'}"]
    assert "+  failurePolicy: Ignore" in steps[0].diff


def test_the_report_names_what_was_given_and_nothing_that_was_not(tmp_path):
    """report.md's target lists what the run acted on; an option not given is left out, never `context: None`
    (issue 37 §9)."""
    d = _dir(tmp_path)
    state = tmp_path / "s"
    run = json.loads(_recover(d, state, "--webhook", HOOK, "--yes").stdout)["result"]["run"]
    run_cli("revert", run, "--state-dir", str(state), "--yes", "--re-arm")
    report = (state / "runs" / run / "report.md").read_text()
    target = report.split("## Target", 1)[1].split("##", 1)[0]
    assert f"- webhooks: {HOOK}" in target and f"- dirs: {d}" in target, target
    assert "None" not in target and "[]" not in target and "['" not in target, target
