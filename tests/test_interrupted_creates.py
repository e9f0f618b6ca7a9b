"""Ctrl-C and SIGTERM (whose handler raises KeyboardInterrupt) run as a system call returns, so an interrupt can
land in the instant a new file exists but its descriptor has not yet reached the code that would remove it. CI
caught a snapshot's PATH.part left so, with exit 130. Each file breakglass creates is tried here with the
interrupt delivered at exactly that instant (the real open, then the interrupt), and at the next step: nothing
of ours is left behind, and what was there before is untouched."""

from __future__ import annotations

import fcntl
import os

import pytest

from breakglass.access.etcd import Etcd, EtcdSettings
from breakglass.core import journal, textfile


@pytest.fixture
def interrupt_after_create(monkeypatch):
    """os.open that creates the file for real, then is interrupted before returning its descriptor (the
    descriptor is closed here only so the test does not leak it; the file stays, as it would)."""
    real = os.open
    created: list[str] = []

    def open_then_interrupt(path, flags, mode=0o777, *a, **k):
        fd = real(path, flags, mode, *a, **k)
        if flags & os.O_CREAT and flags & os.O_EXCL:
            os.close(fd)
            created.append(os.fspath(path))
            raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupt)
    return created


def test_the_atomic_write_leaves_no_temp_and_the_file_as_it_was(tmp_path, interrupt_after_create):
    target = tmp_path / "machineconfig.yaml"
    target.write_bytes(b"before\n")
    with pytest.raises(KeyboardInterrupt):
        textfile.write_atomic(str(target), b"after\n")
    assert interrupt_after_create, "the create was never reached"
    assert sorted(os.listdir(tmp_path)) == ["machineconfig.yaml"] and target.read_bytes() == b"before\n"


def test_an_interrupt_while_the_temp_is_being_locked_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "config.yaml"
    target.write_bytes(b"before\n")

    def interrupted(fd, op):
        raise KeyboardInterrupt

    monkeypatch.setattr(fcntl, "flock", interrupted)
    with pytest.raises(KeyboardInterrupt):
        textfile.write_atomic(str(target), b"after\n")
    assert sorted(os.listdir(tmp_path)) == ["config.yaml"] and target.read_bytes() == b"before\n"


def test_a_backup_leaves_no_temp_holding_the_originals_bytes(tmp_path, interrupt_after_create):
    run = journal.Run.create(str(tmp_path / "state"), "recover", {})
    with pytest.raises(KeyboardInterrupt):
        run.write_backup("s1.machineconfig.yaml", b"cluster:\n  secret: c2VjcmV0\n")
    assert interrupt_after_create and os.listdir(run.backups) == []


def test_a_backup_interrupted_while_written_leaves_no_temp(tmp_path, monkeypatch):
    run = journal.Run.create(str(tmp_path / "state"), "recover", {})

    def interrupted(fd, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run.write_backup("s1.machineconfig.yaml", b"cluster:\n  secret: c2VjcmV0\n")
    monkeypatch.undo()
    assert os.listdir(run.backups) == []


def test_a_snapshot_leaves_no_part_file(tmp_path, interrupt_after_create):
    etcd = Etcd(EtcdSettings(endpoints=("127.0.0.1:9",)), (b"/registry/validatingwebhookconfigurations/",))
    out = tmp_path / "snap.db"
    with pytest.raises(KeyboardInterrupt):
        etcd.save_snapshot(str(out))
    assert interrupt_after_create == [str(out) + ".part"] and os.listdir(tmp_path) == []


def test_a_create_that_fails_removes_nothing_it_did_not_make(tmp_path):
    planted = tmp_path / "snap.db.part"
    planted.write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        textfile.create_new(str(planted))
    assert planted.read_bytes() == b"someone else's"


def test_a_patch_file_interrupted_or_cut_short_is_not_left_looking_whole(tmp_path, monkeypatch):
    from breakglass.core.errors import BadInput

    out = tmp_path / "patch.yaml"
    real = os.write

    def interrupted(fd, data):
        real(fd, bytes(data[:5]))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        textfile.write_new(str(out), b"cluster:\n  apiServer: {}\n")
    assert not out.exists()

    def full(fd, data):
        real(fd, bytes(data[:5]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(BadInput, match="no space left on device; nothing was left there"):
        textfile.write_new(str(out), b"cluster:\n  apiServer: {}\n")
    monkeypatch.undo()
    assert not out.exists()
    textfile.write_new(str(out), b"whole\n")
    assert out.read_bytes() == b"whole\n" and (out.stat().st_mode & 0o777) == 0o600
    with pytest.raises(BadInput, match="exists; choose a new file"):
        textfile.write_new(str(out), b"again\n")


def test_a_snapshot_interrupted_after_it_took_its_name_takes_it_back(tmp_path, monkeypatch):
    """Exit 130 means no snapshot at PATH: an interrupt that lands between the link and the part's removal takes
    the whole file back too (an interrupted run that left one would be refused on retry as 'exists')."""
    etcd = Etcd(EtcdSettings(endpoints=("127.0.0.1:9",)), (b"/registry/validatingwebhookconfigurations/",))
    monkeypatch.setattr(Etcd, "snapshot", lambda self, out, progress=None: (out.write(b"x" * 64), (64, "ab"))[1])
    real_unlink = os.unlink
    calls = []

    def interrupted_unlink(path, *a, **k):
        calls.append(os.fspath(path))
        if len(calls) == 1:
            raise KeyboardInterrupt  # as the link returns and the part's removal starts
        return real_unlink(path, *a, **k)

    monkeypatch.setattr(os, "unlink", interrupted_unlink)
    out = tmp_path / "snap.db"
    with pytest.raises(KeyboardInterrupt):
        etcd.save_snapshot(str(out))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
