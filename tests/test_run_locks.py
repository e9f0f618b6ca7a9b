"""A run is locked across processes while it is applied or reverted (issue 27 §3): a revert started while a slow
recover is still at work is refused, naming the run and the recover's pid, instead of saying "reverted" and
letting the recover delete the rest."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from breakglass.core.errors import PreconditionFailed
from breakglass.core.journal import Run
from tests.conftest import ROOT, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "kubeadm", "kube-apiserver.yaml")


def _events(run_dir: str) -> list[str]:
    try:
        with open(os.path.join(run_dir, "journal.jsonl")) as f:
            return [json.loads(line)["event"] for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def _wait_for_applying(proc, state) -> str:
    """The run directory once the recover has journaled `applying` (it then sleeps before the rename)."""
    runs = state / "runs"
    while proc.poll() is None:
        for n in os.listdir(runs) if runs.is_dir() else []:
            if "applying" in _events(str(runs / n)):
                return str(runs / n)
        time.sleep(0.1)  # polling, not a timed assertion
    raise AssertionError(f"recover ended before applying: {proc.stderr.read()!r}")


@pytest.fixture
def slow_recover(tmp_path):
    """A kubeadm recover of a local manifest that pauses between its checks and the rename (the node-side
    script's test pause), in its own session so the test can stop it and its shell together."""
    path = tmp_path / "kube-apiserver.yaml"
    shutil.copy(MANIFEST, path)
    state = tmp_path / "state"
    env = {**os.environ, "BREAKGLASS_STATE_DIR": str(state), "BREAKGLASS_TEST_PAUSE": "300"}
    proc = subprocess.Popen([sys.executable, "-m", "breakglass", "recover", "--method", "kubeadm", "--manifest",
                             str(path), "--yes", "--no-wait", "--verify-timeout", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        yield proc, path, state
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_a_revert_during_a_slow_recover_is_refused_naming_the_run_and_its_pid(slow_recover):
    proc, path, state = slow_recover
    run_dir = _wait_for_applying(proc, state)
    run_id = os.path.basename(run_dir)
    p = run_cli("revert", "--yes", env={"BREAKGLASS_STATE_DIR": str(state)})
    assert p.returncode == 4, (p.stdout, p.stderr)
    err = p.stderr.decode()
    assert run_id in err and f"process {proc.pid}" in err and "Traceback" not in err
    assert b"reverted" not in p.stdout
    assert "reverting" not in _events(run_dir)  # refused before anything was journaled
    # the recover goes on unharmed; once it is gone (killed here, mid-write) its lock is gone with it
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    p = run_cli("revert", "--yes", env={"BREAKGLASS_STATE_DIR": str(state)})
    assert p.returncode == 0, p.stderr
    assert path.read_bytes() == open(MANIFEST, "rb").read()


def test_the_lock_is_held_by_one_process_at_a_time_and_nests_within_one(tmp_path):
    run = Run.create(str(tmp_path / "state"), "recover", {})
    child = (f"import sys; from breakglass.core.journal import Run; r = Run({run.path!r})\n"
             "with r.locked('recovering'):\n    print('held', flush=True); sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", child], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"held\n"
        with pytest.raises(PreconditionFailed, match=rf"run {run.id} is in use by process {proc.pid} .*\(recovering\)"):
            with Run.open(run.id, str(tmp_path / "state")).locked("reverting"):
                pass
    finally:
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
    with run.locked("reverting"):  # free again; and this process may take it again inside (apply within recover)
        with Run(run.path).locked("reverting"):
            pass
    with open(os.path.join(run.path, "lock")) as f:
        assert f.read() == ""  # released: no stale pid left for the next reader


def test_driver_revert_takes_the_lock(tmp_path):
    """driver.revert refuses a run another process is applying (the part of revert_run the CLI goes through)."""
    from breakglass.ways import driver

    run = Run.create(str(tmp_path / "state"), "recover", {})
    run.append("planned", method="fake", target={}, steps=[{"id": "s1", "target": "t", "action": "delete",
                                                           "summary": "x", "diff": "", "data": {}}])
    run.append("backed-up", step="s1", backup={"x": 1})
    child = (f"import sys; from breakglass.core.journal import Run; r = Run({run.path!r})\n"
             "with r.locked('recovering'):\n    print('held', flush=True); sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", child], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    class Never:
        method = "fake"

        def revert(self, *a, **k):
            raise AssertionError("reverted while another process held the run")

    try:
        assert proc.stdout.readline() == b"held\n"
        with pytest.raises(PreconditionFailed, match=str(proc.pid)):
            driver.revert(Never(), run)
    finally:
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
    assert "reverting" not in _events(run.path)
