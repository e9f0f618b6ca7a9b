"""A node's files written by the remedies' one script (ways/nodefile.py): two breakglass writing the same file at
once (two `recover k3s --config-file`, say) never share a temp file, and the compare-and-swap holds across them;
a temp file left by a killed writer is removed by the next write to the same file. Run through the real shell."""

from __future__ import annotations

import os
import threading

import pytest

from breakglass.access.local import LocalNode
from breakglass.core.errors import PreconditionFailed
from breakglass.ways import nodefile


def _temps(d):
    return sorted(n for n in os.listdir(d) if ".breakglass" in n)


def test_two_writers_at_once_one_wins_the_other_is_told_it_changed(tmp_path):
    f = tmp_path / "config.yaml"
    f.write_bytes(b"token: s3cr3t\n")
    first = nodefile.sha(f.read_bytes())
    errors, done = [], []

    def write(data: bytes, pause: float):
        try:
            nodefile.write_remote(LocalNode(), str(f), first, data, pause=pause)
            done.append(data)
        except Exception as e:  # noqa: BLE001 - the test sorts out what each writer met
            errors.append(e)

    slow = threading.Thread(target=write, args=(b"token: s3cr3t\na: 1\n", 1.5))
    slow.start()
    deadline = 50
    while not _temps(tmp_path) and deadline:  # the slow writer holds its temp file (and the directory's lock)
        threading.Event().wait(0.05)
        deadline -= 1
    fast = threading.Thread(target=write, args=(b"token: s3cr3t\nb: 2\n", 0))
    fast.start()
    slow.join(30)
    fast.join(30)
    assert done == [b"token: s3cr3t\na: 1\n"]  # the first writer's bytes, whole
    assert len(errors) == 1 and isinstance(errors[0], PreconditionFailed), errors  # not "mv: cannot stat"
    assert f.read_bytes() == done[0]
    assert _temps(tmp_path) == []


def test_a_temp_file_a_killed_writer_left_is_removed_by_the_next_write(tmp_path):
    f = tmp_path / "kube-apiserver.yaml"
    f.write_bytes(b"old\n")
    for stale in (".kube-apiserver.yaml.breakglass.tmp", ".kube-apiserver.yaml.breakglass.Ab12Cd"):
        (tmp_path / stale).write_bytes(b"half of a config with its token")
    (tmp_path / ".kube-apiserver.yaml.breakglass.link").symlink_to(tmp_path / "elsewhere")  # not ours: left
    nodefile.write_remote(LocalNode(), str(f), nodefile.sha(b"old\n"), b"new\n")
    assert f.read_bytes() == b"new\n"
    assert _temps(tmp_path) == [".kube-apiserver.yaml.breakglass.link"]


@pytest.mark.parametrize("planted", ["file", "link"])
def test_a_planted_temp_name_is_never_written_through(tmp_path, planted):
    f = tmp_path / "m.yaml"
    f.write_bytes(b"old\n")
    decoy = tmp_path / "decoy"
    decoy.write_bytes(b"decoy\n")
    name = tmp_path / ".m.yaml.breakglass.tmp"
    if planted == "link":
        name.symlink_to(decoy)
    else:
        name.write_bytes(b"planted\n")
    nodefile.write_remote(LocalNode(), str(f), nodefile.sha(b"old\n"), b"new\n")
    assert f.read_bytes() == b"new\n" and decoy.read_bytes() == b"decoy\n"
