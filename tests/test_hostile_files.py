"""Hostile places (issue 17, findings 1, 2, 7 and 8): files written where others can plant links, runs copied
and edited, state directories that are not ours, a disk that fills after the change. Each test is the attack."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from breakglass.core import textfile
from tests.conftest import ROOT, run_cli
from tests.test_etcd_remedy import live  # noqa: F401 - the fixture (issue 33: a real backend, a /readyz)

GENERATED = os.path.join(ROOT, "tests", "talos", "generated", "v1.14.1", "controlplane.yaml")


def _cfg(tmp_path, mode=0o640):
    d = tmp_path / "repo"
    d.mkdir()
    path = d / "cp.yaml"
    shutil.copy(GENERATED, path)
    os.chmod(path, mode)
    return d, path


def _cli(tmp_path, *args, cwd=None):
    import subprocess
    import sys

    env = {**os.environ, "BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "breakglass", *args], capture_output=True, cwd=cwd or ROOT,
                          env={**env, "PYTHONPATH": ROOT}, timeout=120)


def test_the_config_file_is_written_through_no_planted_link_and_keeps_its_mode(tmp_path):
    d, path = _cfg(tmp_path)
    decoy = tmp_path / "attacker-owned"
    decoy.write_text("mine\n")
    (d / ".cp.yaml.breakglass.tmp").symlink_to(decoy)  # the old, predictable temp name
    p = _cli(tmp_path, "recover", "--method", "talos", "--config-file", str(path), "--yes")
    assert p.returncode == 8, p.stderr  # issue 33: edited, not applied (exit 8)
    assert decoy.read_text() == "mine\n"  # nothing written through the link
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640 and not os.path.islink(path)
    leftovers = [n for n in os.listdir(d) if n.startswith(".") and n != ".cp.yaml.breakglass.tmp"]
    assert leftovers == []


def test_a_failed_write_leaves_no_copy_of_the_secrets(tmp_path, monkeypatch):
    target = tmp_path / "cp.yaml"
    target.write_text("old\n")
    real_fsync = os.fsync

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        textfile.write_atomic(str(target), b"secret: ca-key\n", like=os.stat(target))
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert os.listdir(tmp_path) == ["cp.yaml"] and target.read_text() == "old\n"


def test_the_temp_file_is_never_readable_by_others_and_a_link_at_the_target_is_replaced_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("untouched\n")
    link = tmp_path / "report.md"
    link.symlink_to(elsewhere)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(stat.S_IMODE(os.stat(src).st_mode))
        return real_replace(src, dst)

    os.replace = spy
    try:
        textfile.write_private(str(link), b"report\n")
    finally:
        os.replace = real_replace
    assert seen == [0o600] and elsewhere.read_text() == "untouched\n"
    assert not os.path.islink(link) and link.read_text() == "report\n"


def test_a_relative_config_file_is_journaled_absolute_and_reverts_from_anywhere(tmp_path):
    d, path = _cfg(tmp_path)
    before = path.read_bytes()
    p = _cli(tmp_path, "recover", "--method", "talos", "--config-file", "cp.yaml", "--yes", cwd=str(d))
    assert p.returncode == 8, p.stderr  # issue 33: edited, not applied (exit 8)
    assert path.read_bytes() != before
    # issue 33: a flag way's revert with nothing to read the cluster's webhooks through is refused without
    # --re-arm, and with it re-arms unseen: exit 8 (backends not checked)
    p = _cli(tmp_path, "revert", "--yes", "--re-arm", cwd=str(tmp_path))  # another directory
    assert p.returncode == 8, p.stderr
    assert path.read_bytes() == before


def _run_dir(tmp_path) -> str:
    runs = tmp_path / "state" / "runs"
    [name] = os.listdir(runs)
    return str(runs / name)


def test_an_edited_journal_cannot_make_revert_write_other_keys(tmp_path):
    d, path = _cfg(tmp_path)
    # issue 33: a file way ends edited-not-applied, exit 8
    assert _cli(tmp_path, "recover", "--method", "talos", "--config-file", str(path), "--yes").returncode == 8
    run = _run_dir(tmp_path)
    journal = os.path.join(run, "journal.jsonl")
    lines = open(journal).read().splitlines()
    edited = []
    for line in lines:
        e = json.loads(line)
        for st in e.get("steps") or []:
            st["data"]["before"] = {"authorization-mode": "AlwaysAllow", "anonymous-auth": "true"}
        edited.append(json.dumps(e))
    open(journal, "w").write("\n".join(edited) + "\n")
    after_recover = path.read_bytes()
    p = _cli(tmp_path, "revert", "--yes", "--force")
    assert p.returncode != 0 and b"never makes" in p.stderr, p.stderr
    assert path.read_bytes() == after_recover
    assert b"AlwaysAllow" not in path.read_bytes()


def test_a_planted_report_tmp_link_is_not_written_through(tmp_path):
    d, path = _cfg(tmp_path)
    # issue 33: a file way ends edited-not-applied, exit 8
    assert _cli(tmp_path, "recover", "--method", "talos", "--config-file", str(path), "--yes").returncode == 8
    run = _run_dir(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    os.symlink(victim, os.path.join(run, "report.md.tmp"))
    assert _cli(tmp_path, "revert", "--yes", "--re-arm").returncode == 8  # issue 33: re-armed unseen
    assert victim.read_text() == "keep\n"
    assert not os.path.islink(os.path.join(run, "report.md"))


def test_a_backup_name_that_leaves_the_backups_directory_is_refused(tmp_path):
    from breakglass.core.journal import JournalError, Run

    run = Run.create(str(tmp_path / "state"), "recover", {})
    (tmp_path / "outside").write_text("secret")
    for name in ("../../../outside", "a/b", ".hidden", ""):
        with pytest.raises(JournalError):
            run.read_backup(name)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory another user owns")
def test_a_state_directory_owned_by_another_user_is_refused_not_adopted(tmp_path):
    state = tmp_path / "theirs"
    state.mkdir(mode=0o755)
    os.chown(state, 65534, 65534)
    p = run_cli("recover", "--method", "etcd", "-w", "x", "--etcd-endpoints", "http://127.0.0.1:1", "--yes",
                env={"BREAKGLASS_STATE_DIR": str(state)})
    assert p.returncode in (2, 5)
    from breakglass.core.errors import BadInput
    from breakglass.core.journal import Run

    with pytest.raises(BadInput, match="belongs to uid 65534"):
        Run.create(str(state), "recover", {})
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o755 and os.stat(state).st_uid == 65534  # not chmodded


def test_a_state_directory_in_an_impossible_place_is_bad_input_naming_it():
    from breakglass.core.errors import BadInput
    from breakglass.core.journal import Run

    for place in ("/proc/breakglass-state", "/dev/null", "/sys/kernel/breakglass"):
        with pytest.raises(BadInput, match=f"state directory {place}"):
            Run.create(place, "recover", {})


def test_a_full_disk_after_the_change_still_names_the_run_and_the_way_back(tmp_path, monkeypatch, etcd_clean):
    from breakglass.flows import recovery
    from breakglass.access.etcd import EtcdSettings
    from breakglass.core.journal import Run
    from breakglass.webhooks import codec, sources
    from tests import etcd_server as es
    from tests.test_codec import KYVERNO

    c = es.raw_client(etcd_clean)
    c.put(sources.etcd_key("validating", KYVERNO["metadata"]["name"]), codec.encode_value(KYVERNO))
    c.close()
    target = recovery.EtcdTarget(EtcdSettings(endpoints=(etcd_clean.endpoint,)))
    remedy, steps = recovery.plan_etcd(target, [KYVERNO["metadata"]["name"]])
    real = Run.write_file

    def full(self, name, text):
        if name == "report.md":
            raise OSError(28, "No space left on device")
        return real(self, name, text)

    monkeypatch.setattr(Run, "write_file", full)
    res = recovery.execute(remedy, steps, str(tmp_path / "state"), {})
    assert res.status == "applied" and "no space left on device" in res.error and f"revert {res.run}" in res.error


@pytest.mark.parametrize("sig", ["term", "hup"])
def test_sigterm_and_sighup_during_apply_are_an_interrupt_not_a_torn_run(etcd_clean, tmp_path, sig, live):
    from breakglass.core import journal
    from breakglass.webhooks import codec, sources
    from tests import etcd_server as es
    from tests.test_etcd_remedy import KYVERNO  # its caBundle trusts the live backend

    from tests import backend_seed

    c = es.raw_client(etcd_clean)
    key = sources.etcd_key("validating", KYVERNO["metadata"]["name"])
    c.put(key, codec.encode_value(KYVERNO))
    # the webhook's backend is back by the time of the revert: issue 33, a real one that answers the call (an
    # endpoint nothing listens on is "not called from here", a revert that exits 8)
    es.put_many(c, backend_seed.healthy(port=live["port"]))
    value = c.get(key)[0]
    c.close()
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "BREAKGLASS_FAULT_INJECT": f"applied:{sig}"}
    p = run_cli("recover", "--method", "etcd", "-w", KYVERNO["metadata"]["name"], "--etcd-endpoints",
                etcd_clean.endpoint, "--yes", env=env)
    assert p.returncode == 130 and b"breakglass revert" in p.stderr and b"Traceback" not in p.stderr, p.stderr
    [run] = journal.list_runs(str(tmp_path / "state"))
    assert [e["event"] for e in run.events()][-1] == "interrupted"
    r = run_cli("revert", "--yes", "--etcd-endpoints", etcd_clean.endpoint,
                env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 0, r.stderr
    c = es.raw_client(etcd_clean)
    assert c.get(key)[0] == value
    c.close()


def test_an_interrupted_snapshot_never_sits_at_its_name(etcd_clean, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests import etcd_server as es

    c = es.raw_client(etcd_clean)
    es.put_many(c, ((f"/registry/pods/p{i}".encode(), os.urandom(2048)) for i in range(20000)))
    c.close()
    out = tmp_path / "snap.db"
    proc = subprocess.Popen([sys.executable, "-m", "breakglass", "etcd", "snapshot", str(out), "--etcd-endpoints",
                             etcd_clean.endpoint], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not os.path.exists(str(out) + ".part") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    assert not os.path.exists(str(out) + ".part")  # interrupted or not, the part file never stays
    if proc.returncode == 0:
        # on a loaded machine this process may not run again until the snapshot is done: then it is whole
        assert out.stat().st_size > 20000 * 2048
        out.unlink()
    else:
        assert proc.returncode == 130, proc.stderr.read()
        assert not out.exists()  # exit 130 means no snapshot at PATH, never a truncated or unannounced one
    # a retry is not refused, and ends with a whole snapshot
    p = run_cli("etcd", "snapshot", str(out), "--etcd-endpoints", etcd_clean.endpoint)
    assert p.returncode == 0, p.stderr
    assert out.exists() and not os.path.exists(str(out) + ".part")


def test_a_snapshot_into_a_missing_directory_is_bad_input(etcd_clean, tmp_path):
    p = run_cli("etcd", "snapshot", str(tmp_path / "no" / "such" / "snap.db"), "--etcd-endpoints", etcd_clean.endpoint)
    assert p.returncode == 2 and b"no such file or directory" in p.stderr and b"unexpected" not in p.stderr, p.stderr


def test_a_snapshot_that_cannot_be_taken_leaves_no_orphan_run(etcd_clean, tmp_path):
    from breakglass.flows import recovery
    from breakglass.webhooks import codec, sources
    from tests import etcd_server as es
    from tests.test_codec import KYVERNO

    c = es.raw_client(etcd_clean)
    c.put(sources.etcd_key("validating", KYVERNO["metadata"]["name"]), codec.encode_value(KYVERNO))
    c.close()
    state = str(tmp_path / "state")
    p = run_cli("recover", "--method", "etcd", "-w", KYVERNO["metadata"]["name"], "--etcd-endpoints",
                etcd_clean.endpoint, "--snapshot", str(tmp_path / "no" / "dir" / "s.db"), "--yes",
                env={"BREAKGLASS_STATE_DIR": state})
    assert p.returncode == 2 and b"unexpected" not in p.stderr and b"nothing was changed" in p.stderr, p.stderr
    [summary] = recovery.list_runs(state)
    assert summary.status == "failed"  # closed, not "started" forever
    assert recovery.open_runs(state) == []


def test_reverting_twice_is_harmless_and_says_so(tmp_path):
    d, path = _cfg(tmp_path)
    before = path.read_bytes()
    # issue 33: a file way ends edited-not-applied, exit 8
    assert _cli(tmp_path, "recover", "--method", "talos", "--config-file", str(path), "--yes").returncode == 8
    assert _cli(tmp_path, "revert", "--yes", "--re-arm").returncode == 8  # issue 33: re-armed unseen
    again = _cli(tmp_path, "revert", "--yes")
    assert again.returncode == 0 and b"nothing left to revert" in again.stdout, again.stderr
    assert path.read_bytes() == before


def test_a_real_revert_never_says_dry_run(tmp_path):
    d, path = _cfg(tmp_path)
    # issue 33: a file way ends edited-not-applied, exit 8
    assert _cli(tmp_path, "recover", "--method", "talos", "--config-file", str(path), "--yes").returncode == 8
    p = _cli(tmp_path, "revert", "--yes", "--re-arm")
    # issue 33: re-armed unseen (nothing to read the cluster's webhooks through): exit 8, was 0
    assert p.returncode == 8 and b"dry run" not in p.stdout and b"plan (nothing changed yet)" in p.stdout
    lines = p.stdout.decode().strip().splitlines()
    result = max(i for i, x in enumerate(lines) if x.startswith("revert of run "))
    assert result > lines.index(next(x for x in lines if x.startswith("plan (nothing changed yet)")))
    block = lines[max(i for i, x in enumerate(lines) if x.startswith("outcome: ")):]
    assert block[0].startswith("outcome: reverted") and block[1].startswith("  read:")  # the outcome, last


def test_a_reverted_runs_report_says_so_and_offers_no_undo(tmp_path):
    d, path = _cfg(tmp_path)
    # issue 33: a file way ends edited-not-applied, exit 8
    assert _cli(tmp_path, "recover", "--method", "talos", "--config-file", str(path), "--yes").returncode == 8
    assert _cli(tmp_path, "revert", "--yes", "--re-arm").returncode == 8  # issue 33: re-armed unseen
    report = open(os.path.join(_run_dir(tmp_path), "report.md")).read()
    assert "To undo" not in report and "Reverted: nothing of this run is left" in report
    assert "- revert: restored" in report and "reverting" not in report.split("## Timeline")[0]
