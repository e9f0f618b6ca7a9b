"""Issue 27 §9: the temp file of an atomic write (core/textfile.py) holds the new content of the file, secrets and
all. A process killed with SIGKILL while writing (no handler runs) leaves it beside the file: the next write to
the same file, or revert, removes it; a live write's temp file (flock held) is never touched. Each test kills a
real child process mid-write, at the moment it reports it is there (no timing)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from breakglass.core import textfile
from tests.conftest import ROOT

SECRET = b"cluster:\n  secret: c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1wcmludGVk\n"

# Run in the child: os.fsync of the temp file of `target` reports "in" on stdout and waits for its end there,
# so the temp file holds the whole new content and the write is between its fsync and its rename.
_STOP_AT_FSYNC = r"""
import os, signal, sys
target = os.path.abspath(sys.argv[1])
real = os.fsync
def stop(fd):
    where = os.readlink(f"/proc/self/fd/{fd}")
    if os.path.dirname(where) == os.path.dirname(target) and \
            os.path.basename(where).startswith("." + os.path.basename(target) + "."):
        os.write(1, b"in\n")
        while True:
            signal.pause()
    real(fd)
os.fsync = stop
"""


def _child(code: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _STOP_AT_FSYNC + code, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    for line in iter(p.stdout.readline, b""):  # what it prints before the write comes first
        if line == b"in\n":
            return p
    p.wait()
    pytest.fail(f"the child ended before it reached the write: {p.stderr.read()!r}")


def _kill9(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL


def _temps(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def test_a_write_killed_midway_leaves_its_temp_file_and_the_next_write_removes_it(tmp_path):
    target = tmp_path / "controlplane.yaml"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o640)
    p = _child("from breakglass.core import textfile\n"
               "textfile.write_atomic(target, " + repr(SECRET) + ", like=os.stat(target))\n", str(target))
    [tmp] = _temps(tmp_path)
    # named for its target, so it can be found again
    assert re.fullmatch(r"\.controlplane\.yaml\.breakglass-[0-9a-f]{12}\.tmp", tmp), tmp
    assert (tmp_path / tmp).read_bytes() == SECRET and os.stat(tmp_path / tmp).st_mode & 0o077 == 0

    # while the writer lives, its temp file is its own: another write to the same file leaves it alone
    textfile.write_atomic(str(target), b"meanwhile\n", like=os.stat(target))
    assert _temps(tmp_path) == [tmp]
    _kill9(p)
    assert _temps(tmp_path) == [tmp]  # SIGKILL: nothing of the writer ran

    textfile.write_atomic(str(target), b"next\n", like=os.stat(target))
    assert os.listdir(tmp_path) == ["controlplane.yaml"] and target.read_bytes() == b"next\n"
    assert os.stat(target).st_mode & 0o777 == 0o640


def test_only_stale_temp_files_of_that_target_are_removed(tmp_path):
    target = tmp_path / "cp.yaml"
    target.write_text("old\n")
    p = _child("from breakglass.core import textfile\n"
               "textfile.write_atomic(target, " + repr(SECRET) + ")\n", str(target))
    _kill9(p)
    [stale] = _temps(tmp_path)
    others = {
        ".other.yaml.breakglass-0123456789ab.tmp": "another file's",
        ".cp.yaml.0123456789ab.tmp": "not named as breakglass names its own",
        ".cp.yaml.breakglass.tmp": "the old predictable name",
    }
    for name, text in others.items():
        (tmp_path / name).write_text(text)
    decoy = tmp_path / "decoy"
    decoy.write_text("keep\n")
    link = tmp_path / ".cp.yaml.breakglass-aaaaaaaaaaaa.tmp"
    link.symlink_to(decoy)  # planted under our pattern: a link is never opened nor removed
    assert textfile.remove_stale_temps(str(target)) == [stale]
    assert sorted(os.listdir(tmp_path)) == sorted([*others, "cp.yaml", "decoy", link.name])
    assert decoy.read_text() == "keep\n" and target.read_text() == "old\n"
    assert textfile.remove_stale_temps(str(target)) == []


def test_revert_removes_what_a_recover_killed_mid_write_left_beside_a_talos_config(tmp_path):
    """`breakglass recover --method talos --config-file` killed with SIGKILL while it writes the config: the temp
    file (the config with its secrets) stays; `breakglass revert` removes it, and says so."""
    import shutil

    cfg = tmp_path / "repo" / "cp.yaml"
    cfg.parent.mkdir()
    shutil.copy(os.path.join(ROOT, "tests", "talos", "v1.10-single.yaml"), cfg)
    original = cfg.read_bytes()
    state = str(tmp_path / "state")
    p = _child("import runpy\nsys.argv = ['breakglass', 'recover', '--method', 'talos', '--config-file', target, "
               "'--yes']\nrunpy.run_module('breakglass', run_name='__main__')\n", str(cfg),
               env={"BREAKGLASS_STATE_DIR": state})
    _kill9(p)
    [tmp] = _temps(cfg.parent)
    assert b"secret: c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1wcmludGVk" in (cfg.parent / tmp).read_bytes()
    assert cfg.read_bytes() == original  # killed before the rename

    r = subprocess.run([sys.executable, "-m", "breakglass", "revert", "--yes"], capture_output=True, cwd=ROOT,
                       env={**os.environ, "BREAKGLASS_STATE_DIR": state}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert os.listdir(cfg.parent) == ["cp.yaml"] and cfg.read_bytes() == original
    assert tmp.encode() in r.stdout and b"left beside it by an interrupted write" in r.stdout
