"""Issue 34 §1: a journal that survives a full disk. On a real small file system (a 300 KB tmpfs, or a loop-mounted
ext4 image where tmpfs cannot be mounted) as the state directory, the disk fills at every moment of a recover and
of a revert in turn. Each time the command ends with one line naming the run, what it touched and the way back
(exit 9, never "unexpected OSError"), `breakglass runs` still lists the state directory, and once space is freed
`revert --force` puts every file back byte for byte. A journal line torn by a power cut, at the end or in the middle,
poisons nothing either."""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from breakglass.core import journal
from breakglass.core.errors import DiskFull, ExitCode
from breakglass.core.journal import Run
from tests.conftest import ROOT

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["v1.10-single.yaml", "v1.11-generated-4space.yaml", "v1.12-multidoc-overlap.yaml", "v1.13-lists.yaml"]
PAGE = 4096


class SmallDisk:
    def __init__(self, path: str) -> None:
        self.path = path
        self.filler = os.path.join(path, "filler")

    def fill(self, leave: int = 0) -> None:
        """Take every free byte but ``leave``."""
        st = os.statvfs(self.path)
        want = max(st.f_bavail * st.f_frsize - leave, 0)
        with open(self.filler, "ab") as f:
            try:
                f.write(b"\0" * want)
            except OSError as e:
                assert e.errno == errno.ENOSPC

    def free(self) -> None:
        if os.path.exists(self.filler):
            os.unlink(self.filler)

    def clear(self) -> None:
        self.free()
        for n in os.listdir(self.path):
            p = os.path.join(self.path, n)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)


def _mount(target: str, tmp_path) -> bool:
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k,mode=0700", "tmpfs", target], capture_output=True)
    if r.returncode == 0:
        return True
    image = str(tmp_path / "disk.img")  # where tmpfs is refused: a small ext4 image, no reserved blocks
    with open(image, "wb") as f:
        f.truncate(2 << 20)
    ok = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", image], capture_output=True).returncode == 0
    return ok and subprocess.run(["mount", "-o", "loop", image, target], capture_output=True).returncode == 0


@pytest.fixture
def disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root; CI runs as root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if not _mount(str(mnt), tmp_path):
        pytest.skip("neither a tmpfs nor a loop-mounted ext4 image can be mounted here")
    os.chmod(mnt, 0o700)
    try:
        yield SmallDisk(str(mnt))
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _env(disk: SmallDisk, home) -> dict:
    # no apiserver anywhere: a revert of these runs reads nothing from a cluster (--force re-arms unseen)
    return {**os.environ, "PYTHONPATH": ROOT, "BREAKGLASS_STATE_DIR": os.path.join(disk.path, "state"),
            "KUBECONFIG": "", "HOME": str(home)}


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    # stdout and stderr are pipes: the messages never need the full disk
    return subprocess.run([sys.executable, "-m", "breakglass", *args], cwd=ROOT, env=env, capture_output=True,
                          timeout=120)


def _configs(where: str) -> dict[str, bytes]:
    os.makedirs(where, exist_ok=True)
    out = {}
    for n in CONFIGS:
        shutil.copy(os.path.join(HERE, "talos", n), os.path.join(where, n))
        out[os.path.join(where, n)] = open(os.path.join(HERE, "talos", n), "rb").read()
    return out


def _recover(env: dict, files, *extra: str) -> subprocess.CompletedProcess:
    args = ["recover", "talos"]
    for f in files:
        args += ["--config-file", f]
    return _cli(env, *args, "--yes", *extra)


def _one_line_error(p: subprocess.CompletedProcess) -> str:
    err = p.stderr.decode()
    lines = [ln for ln in err.splitlines() if not ln.startswith("breakglass: warning:")]
    assert len(lines) == 1 and lines[0].startswith("breakglass: error: "), err
    assert "unexpected" not in err and "please report" not in err and "Traceback" not in err, err
    return lines[0]


def _no_temps(*roots: str) -> None:
    for root in roots:
        for d, _, names in os.walk(root):
            left = [n for n in names if ".breakglass" in n or (d.endswith("backups") and n.endswith(".tmp"))]
            assert not left, (d, left)


def _back_to_original(env, originals: dict, disk: SmallDisk) -> None:
    listed = _cli(env, "runs")
    assert listed.returncode == 0, listed.stderr
    r = _cli(env, "revert", "--yes", "--force")
    assert r.returncode in (0, 8), r.stderr  # 8: the flag re-armed, with no apiserver here to verify it
    for path, data in originals.items():
        assert open(path, "rb").read() == data, path
    _no_temps(disk.path, *{os.path.dirname(p) for p in originals})


@pytest.mark.parametrize("files_on_the_disk", [False, True], ids=["state-dir-fills", "config-files-disk-fills"])
def test_a_disk_that_fills_at_any_moment_of_a_recover_loses_nothing(disk, tmp_path, files_on_the_disk):
    """The red team's case, at every moment: the state directory's disk (and, second, the disk of the files being
    edited too) fills before the run starts, while it plans, backs up, applies, verifies, or writes its report.

    Cost: 16 fill levels (0 to 15 free pages), each three fresh CLI processes (recover, runs, revert --force): 48
    interpreter starts, each page of slack stopping the recover at another moment."""
    seen = set()
    for pages in range(0, 16):
        disk.clear()
        where = os.path.join(disk.path, "files") if files_on_the_disk else str(tmp_path / f"files{pages}")
        originals = _configs(where)
        env = _env(disk, tmp_path)
        disk.fill(leave=pages * PAGE)
        p = _recover(env, originals, "-o", "json")
        disk.free()
        assert p.returncode in (int(ExitCode.NOT_VERIFIED), int(ExitCode.DISK_FULL)), (pages, p.stderr)
        if p.returncode == int(ExitCode.DISK_FULL):
            line = _one_line_error(p)
            assert json.loads(p.stdout)["error"]["type"] == "disk-full"
            runs = glob.glob(os.path.join(disk.path, "state", "runs", "*"))
            if "no run started" in line:
                assert runs == [] and "nothing was changed" in line, line
                seen.add("no run")
            else:
                [run] = runs
                assert f"run {os.path.basename(run)} stopped: no space left on device" in line, line
                assert "df -h" in line, line
                if "nothing was changed" in line:
                    seen.add("nothing changed")
                else:
                    # what it touched, each by name, and the way back
                    assert f"`breakglass revert {os.path.basename(run)}` puts it back" in line, line
                    touched = line.split("touched so far: ")[1].split(";")[0].split(", ")
                    changed = [f for f, data in originals.items() if open(f, "rb").read() != data]
                    assert set(changed) <= set(touched), (line, changed)
                    seen.add("changed")
        else:
            seen.add("done")
        _back_to_original(env, originals, disk)
    assert seen >= {"nothing changed", "changed", "done"}, seen  # the sweep did reach every moment


def test_a_disk_that_fills_during_a_revert_then_a_revert_after_freeing_space_restores_every_file(disk, tmp_path):
    seen = set()
    for slack in (0, 200, 500, 900, 1300, 1800, 3000):
        disk.clear()
        originals = _configs(str(tmp_path / f"files{slack}"))
        env = _env(disk, tmp_path)
        assert _recover(env, originals).returncode == int(ExitCode.NOT_VERIFIED)  # edited, not applied
        [path] = glob.glob(os.path.join(disk.path, "state", "runs", "*", "journal.jsonl"))
        # the disk fills ``slack`` bytes into the revert's own entries: blank lines (readers skip them) take the
        # rest of the journal's last page, and the filler every free page
        size = os.path.getsize(path)
        with open(path, "ab") as f:
            f.write(b"\n" * ((PAGE - size % PAGE - slack) % PAGE))
        disk.fill()
        p = _cli(env, "revert", "--yes", "--force")
        disk.free()
        assert p.returncode in (0, 8, int(ExitCode.DISK_FULL)), p.stderr
        if p.returncode == int(ExitCode.DISK_FULL):
            line = _one_line_error(p)
            run = os.path.basename(os.path.dirname(path))
            assert f"revert of run {run} stopped: no space left on device" in line, line
            assert f"`breakglass revert {run}` again" in line, line
            seen.add("stopped")
        else:
            seen.add("done")
        _back_to_original(env, originals, disk)
    assert seen == {"stopped", "done"}, seen


def _journal(state: str) -> str:
    [path] = glob.glob(os.path.join(state, "runs", "*", "journal.jsonl"))
    return path


@pytest.mark.parametrize("cut", ["last", "middle"])
def test_a_torn_journal_line_does_not_poison_runs_or_revert(tmp_path, cut):
    """A power cut leaves a torn last line; before appends were all-or-nothing, a full disk left one in the middle
    (the `verified` line cut, `failed` appended onto it): `runs` then failed for the whole state directory and
    `revert` with `journal.jsonl: line 7 is corrupt`, even with --force."""
    originals = _configs(str(tmp_path / "files"))
    env = {**os.environ, "PYTHONPATH": ROOT, "BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": "",
           "HOME": str(tmp_path)}
    assert _recover(env, originals).returncode == int(ExitCode.NOT_VERIFIED)
    path = _journal(str(tmp_path / "state"))
    lines = open(path, "rb").read().splitlines(True)
    if cut == "last":  # truncated mid-line, as a power cut leaves it
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    else:  # an `edited` line cut short, and the next entry written right onto it
        i = next(i for i, ln in enumerate(lines) if b'"event": "edited"' in ln)
        lines[i] = lines[i][: len(lines[i]) // 2]
    with open(path, "wb") as f:
        f.write(b"".join(lines))
    for args in (["runs"], ["runs", "-o", "json"]):
        p = _cli(env, *args)
        assert p.returncode == 0, p.stderr
        assert b"is corrupt" not in p.stderr and b"warning:" in p.stderr and b"skipped" in p.stderr
    r = _cli(env, "revert", "--yes", "--force")
    assert r.returncode in (0, 8), r.stderr
    for f, data in originals.items():
        assert open(f, "rb").read() == data
    assert b'"event": "run-reverted"' in open(path, "rb").read()
    p = _cli(env, "runs", "-o", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["result"][0]["status"] == "reverted", p.stdout


# -- the journal itself -----------------------------------------------------------------------------------------

def _run(tmp_path) -> Run:
    return Run.create(str(tmp_path), "recover", {"method": "talos"})


def test_an_append_cut_short_is_truncated_back_and_says_disk_full(tmp_path, monkeypatch):
    run = _run(tmp_path)
    before = open(run.journal_path, "rb").read()
    real = os.write
    calls = []

    def short_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[: len(data) // 2]))  # half the line lands, as on a filling disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(DiskFull) as info:
        run.append("planned", method="talos", steps=[])
    monkeypatch.setattr(os, "write", real)
    assert len(calls) == 2  # the short write was retried, and the retry said why
    assert open(run.journal_path, "rb").read() == before  # nothing of the entry is left
    assert run.id in str(info.value) and "no space left on device" in str(info.value)
    run.append("planned", method="talos", steps=[])  # space again: the journal goes on, whole
    assert [e["event"] for e in run.events()] == ["run-started", "planned"]


def test_an_fsync_that_fails_truncates_the_entry_back(tmp_path, monkeypatch):
    run = _run(tmp_path)
    before = open(run.journal_path, "rb").read()
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    with pytest.raises(DiskFull):
        run.append("planned", method="talos", steps=[])
    monkeypatch.setattr(os, "fsync", real)
    assert open(run.journal_path, "rb").read() == before


def test_an_entry_after_a_torn_line_is_never_merged_into_it(tmp_path, capfd):
    run = _run(tmp_path)
    with open(run.journal_path, "ab") as f:
        f.write(b'{"event": "verif')  # a power cut in the middle of a line
    run.append("failed", step=None, error="x", kind="failure")
    assert [e["event"] for e in run.events()] == ["run-started", "failed"]
    err = capfd.readouterr().err
    assert "line 2 is cut short" in err and err.count("warning:") == 1


def test_a_write_backup_on_a_full_disk_leaves_no_temp_file(tmp_path, monkeypatch):
    run = _run(tmp_path)
    real = os.write

    def full(fd, data):
        real(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(DiskFull):
        run.write_backup("s1.machineconfig.yaml", b"cluster:\n  secret: c2VjcmV0\n" * 100)
    monkeypatch.setattr(os, "write", real)
    assert os.listdir(run.backups) == []


def test_runs_and_the_wizards_open_runs_check_read_any_journal(tmp_path):
    from breakglass.flows import recovery

    good = _run(tmp_path)
    good.append("planned", method="talos", target={}, steps=[])
    odd = [b'{"event": "planned", "steps": 5}\n', b'{"event": "planned", "steps": [{"id": "s1"}]}\n',
           b'[1, 2]\n{"event": "planned", "steps": [7]}\n', b"\xff\xfe not json at all\n", b"{" * 100000 + b"\n"]
    for i, text in enumerate(odd):
        path = os.path.join(str(tmp_path), "runs", f"20260101T00000{i}Z-00000{i}")
        os.makedirs(os.path.join(path, "backups"), mode=0o700)
        with open(os.path.join(path, "journal.jsonl"), "wb") as f:
            f.write(text)
    listed = recovery.list_runs(str(tmp_path))
    assert len(listed) == len(odd) + 1 and any(s.run == good.id and s.status == "planned" for s in listed)
    assert recovery.open_runs(str(tmp_path)) == []  # the wizard's first question: no run to finish, no crash
    p = subprocess.run([sys.executable, "-m", "breakglass", "runs", "--state-dir", str(tmp_path)], cwd=ROOT,
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and good.id.encode() in p.stdout, p.stderr
    assert journal.list_runs(str(tmp_path))  # listed by name, whatever they hold


def test_a_full_disk_on_the_node_is_disk_full_not_unreachable(disk, tmp_path):
    """The node-side write (ways/nodefile.py; --manifest runs it here): a node whose disk is full said "write
    failed", exit 5, as if the node could not be reached."""
    disk.clear()
    manifest = os.path.join(disk.path, "manifests", "kube-apiserver.yaml")
    os.makedirs(os.path.dirname(manifest))
    shutil.copy(os.path.join(HERE, "kubeadm", "kube-apiserver.yaml"), manifest)
    original = open(manifest, "rb").read()
    env = {**os.environ, "PYTHONPATH": ROOT, "BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": "",
           "HOME": str(tmp_path)}
    disk.fill()
    p = _cli(env, "recover", "kubeadm", "--manifest", manifest, "--yes", "--no-wait", "--verify-timeout", "0")
    disk.free()
    assert p.returncode == int(ExitCode.DISK_FULL), p.stderr
    line = _one_line_error(p)
    assert f"no space left on device writing localhost:{manifest}" in line, line
    assert f"`df -h {os.path.dirname(manifest)}` there" in line and "breakglass revert" in line, line
    assert open(manifest, "rb").read() == original
    _no_temps(disk.path)
    r = _cli(env, "revert", "--yes", "--force")
    assert r.returncode in (0, 8), r.stderr
    assert open(manifest, "rb").read() == original
    _no_temps(disk.path, str(tmp_path / "state"))
