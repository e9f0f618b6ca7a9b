"""Issue 27 §5: a k3s/RKE2 config holds the cluster token, the agent token and the datastore's password, a Talos
machine config the bootstrap token, the cluster secret and the CA keys. None of them may reach stdout (text or
-o json, dry run or not), the run's journal or its report: plans are shown as diffs of kube-apiserver-arg lines
(Talos: of the admission keys) only, and the journal holds those lines and the sha256 of the backups."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from breakglass.core.journal import JournalError
from breakglass.k3s import config as k3s
from tests.conftest import ROOT, run_cli

VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"
K3S_SECRETS = ("K10c0ffee::server:0123456789abcdef", "agent-s3cret-7f3a", "pa55w0rd-9d1e")
K3S_CONFIG = (f"token: {K3S_SECRETS[0]}\n"
              f"agent-token: {K3S_SECRETS[1]}\n"
              f"datastore-endpoint: postgres://k3s:{K3S_SECRETS[2]}@db.internal:5432/k3s\n"
              f"kube-apiserver-arg:\n"
              f"  - enable-admission-plugins=NodeRestriction,{VWH}\n"
              f"  - event-ttl=2h\n")
# the secrets of tests/talos/v1.10-single.yaml
TALOS_SECRETS = ("abcdef.0123456789abcdef", "c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1wcmludGVk",
                 "LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0=", "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t")


def _run_files(state) -> list[str]:
    """Every file of every run under the state directory but the backups (which hold the config, 0600)."""
    out = []
    for root, dirs, files in os.walk(state):
        dirs[:] = [d for d in dirs if d != "backups"]
        out += [os.path.join(root, f) for f in files]
    return out


def _leaks(secrets, *texts: bytes) -> list[str]:
    return [s for s in secrets for t in texts if s.encode() in t]


def _journal_leaks(secrets, state) -> list[str]:
    return [f"{s} in {p}" for p in _run_files(state) for s in secrets if s.encode() in open(p, "rb").read()]


def test_k3s_recover_and_revert_print_and_journal_no_secret(tmp_path):
    cfg = tmp_path / "repo" / "config.yaml"
    cfg.parent.mkdir()
    cfg.write_text(K3S_CONFIG)
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    args = ["recover", "--method", "k3s", "--config-file", str(cfg)]
    for extra in (["--dry-run", "-o", "json"], ["--dry-run"]):
        p = run_cli(*args, *extra, env=env)
        assert p.returncode == 0, p.stderr
        assert _leaks(K3S_SECRETS, p.stdout, p.stderr) == []
        assert b"enable-admission-plugins=NodeRestriction" in p.stdout  # the admission line is shown
    p = run_cli(*args, "--yes", "-o", "json", env=env)
    assert p.returncode == 8, p.stderr  # edited, not applied
    assert _leaks(K3S_SECRETS, p.stdout, p.stderr) == []
    [step] = json.loads(p.stdout)["result"]["steps"]
    assert "-  - enable-admission-plugins=NodeRestriction,ValidatingAdmissionWebhook\n" in step["diff"]
    assert "+  - enable-admission-plugins=NodeRestriction\n" in step["diff"]
    assert _journal_leaks(K3S_SECRETS, tmp_path / "state") == []
    assert f"enable-admission-plugins=NodeRestriction\n" in cfg.read_text()

    # the file changed since, its own line too: the conflict's diff shows kube-apiserver-arg lines only
    changed = cfg.read_text().replace(K3S_SECRETS[0], "K10rotated-token-4242").replace(
        "enable-admission-plugins=NodeRestriction\n", "enable-admission-plugins=PodNodeSelector\n")
    cfg.write_text(changed)
    for extra in (["-o", "json"], []):
        p = run_cli("revert", "--yes", *extra, env=env)
        assert p.returncode == 4, p.stderr
        assert _leaks(K3S_SECRETS + ("K10rotated-token-4242",), p.stdout, p.stderr) == []
    assert b"+  - enable-admission-plugins=PodNodeSelector" in p.stdout
    assert _journal_leaks(K3S_SECRETS + ("K10rotated-token-4242",), tmp_path / "state") == []
    assert cfg.read_text() == changed

    # put back as written: revert restores the original bytes from the backup
    cfg.write_text(changed.replace("K10rotated-token-4242", K3S_SECRETS[0]).replace(
        "enable-admission-plugins=PodNodeSelector\n", "enable-admission-plugins=NodeRestriction\n"))
    # issue 33: no apiserver to read the cluster's webhooks through: the blind re-arm is refused (exit 4), and
    # --re-arm reverts, not verified (exit 8); neither says a secret
    p = run_cli("revert", "--yes", env=env)
    assert p.returncode == 4 and b"unseen" in p.stderr, p.stderr
    assert _leaks(K3S_SECRETS, p.stdout, p.stderr) == []
    p = run_cli("revert", "--yes", "--re-arm", env=env)
    assert p.returncode == 8, p.stderr
    assert _leaks(K3S_SECRETS, p.stdout, p.stderr) == []
    assert cfg.read_text() == K3S_CONFIG


def test_the_k3s_plan_keeps_no_text_of_the_file_and_its_diff_masks_other_lines():
    text = "{token: " + K3S_SECRETS[0] + f", kube-apiserver-arg: [event-ttl=2h, enable-admission-plugins={VWH}]}}\n"
    ch = k3s.plan(k3s.distro("k3s"), [k3s.ConfigFile("/c/config.yaml", text)], "/c/config.yaml.d", [], [VWH, MWH])
    diff = k3s.shown_diff("/c/config.yaml", text, ch.edits[0].after)
    assert K3S_SECRETS[0] not in diff and k3s.HIDDEN_LINE in diff  # a line with the token on it is not shown
    block = K3S_CONFIG + "# datastore: " + K3S_SECRETS[2] + "\n"
    ch = k3s.plan(k3s.distro("k3s"), [k3s.ConfigFile("/c/config.yaml", block)], "/c/config.yaml.d", [], [VWH])
    diff = k3s.shown_diff("/c/config.yaml", "", block)
    assert _leaks(K3S_SECRETS, diff.encode()) == [] and "event-ttl" not in diff
    assert "+  - enable-admission-plugins=NodeRestriction,ValidatingAdmissionWebhook\n" in diff
    assert "+  - <not shown>\n" in diff and "+# <not shown>\n" in diff


def test_a_journal_asking_revert_to_rewrite_other_items_or_a_foreign_dropin_is_refused(tmp_path):
    from breakglass.ways.base import Step
    from breakglass.ways.k3s_flags import K3sFlags

    remedy = K3sFlags("k3s", {}, str(tmp_path / "config.yaml"), plugins=[VWH], local=True)
    good = {"kind": "edit", "path": str(tmp_path / "config.yaml"), "before_sha": "a", "after_sha": "b",
            "items": [[f"enable-admission-plugins={VWH}", "enable-admission-plugins="]], "at": [0]}
    dropin = {"kind": "dropin", "path": str(tmp_path / "config.yaml.d" / "99-breakglass.yaml"), "before_sha": "",
              "after_sha": "c", "after": k3s.dropin_text([VWH], "k3s")}
    from breakglass.ways.k3s_flags import _journaled

    assert _journaled(Step("s1", "t", "edit", "", "", {"host": "h", "files": [good, dropin]}), remedy)
    for bad in ({**good, "items": [["token=x", "token=y"]]},
                {**good, "items": []},
                {**dropin, "after": k3s.dropin_text([VWH], "k3s") + "token: stolen\n"},
                {**dropin, "after": "# Written by breakglass\nkube-apiserver-arg: [anonymous-auth=true]\n"}):
        with pytest.raises(JournalError):
            _journaled(Step("s1", "t", "edit", "", "", {"host": "h", "files": [bad]}), remedy)


def test_talos_recover_and_revert_print_and_journal_no_secret(tmp_path):
    cfg = tmp_path / "cp.yaml"
    shutil.copy(os.path.join(ROOT, "tests", "talos", "v1.10-single.yaml"), cfg)
    original = cfg.read_bytes()
    assert _leaks(TALOS_SECRETS, original) == list(TALOS_SECRETS)  # the fixture holds them
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    args = ["recover", "--method", "talos", "--config-file", str(cfg)]
    for extra in (["--dry-run", "-o", "json"], ["--dry-run"], ["--yes", "-o", "json"]):
        p = run_cli(*args, *extra, env=env)
        assert p.returncode == (8 if "--yes" in extra else 0), p.stderr  # --yes: edited, not applied
        assert _leaks(TALOS_SECRETS, p.stdout, p.stderr) == []
    assert _journal_leaks(TALOS_SECRETS, tmp_path / "state") == []
    # changed since (its secret rotated, our key changed): the dry run's and the conflict's diffs hold no secret
    cfg.write_text(cfg.read_text().replace(TALOS_SECRETS[1], "cm90YXRlZC1jbHVzdGVyLXNlY3JldA==")
                   .replace(f"{VWH},{MWH}", VWH))
    for extra in (["--dry-run", "-o", "json"], ["--yes", "-o", "json"], ["--yes", "--force"]):
        p = run_cli("revert", *extra, env=env)
        assert _leaks(TALOS_SECRETS + ("cm90YXRlZC1jbHVzdGVyLXNlY3JldA==",), p.stdout, p.stderr) == [], extra
    assert _journal_leaks(TALOS_SECRETS + ("cm90YXRlZC1jbHVzdGVyLXNlY3JldA==",), tmp_path / "state") == []
