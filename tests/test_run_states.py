"""Run states are one documented list, and every way out of a run ends in one of them."""

from __future__ import annotations

import json
import os
import re

import pytest

from breakglass.core import outcome, runstates

from breakglass.flows import recovery
from breakglass.core.errors import BadInput, Unreachable
from breakglass.core.journal import Run
from breakglass.ways import driver
from breakglass.ways.base import RESTORED, CONFLICT, RevertOutcome, Step
from tests.conftest import ROOT, run_cli


class Fake:
    """A remedy whose every move can be made to fail; it changes nothing real."""

    method = "fake"

    def __init__(self, fail_at: str | None = None, exc: BaseException | None = None, reverts=None):
        self.fail_at, self.exc, self.reverts = fail_at, exc, list(reverts or [])

    def _maybe(self, where):
        if self.fail_at == where:
            raise self.exc

    def describe_target(self):
        return {"fake": True}

    def backup(self, step, run):
        self._maybe("backup")
        return {"name": step.id}

    def apply(self, step, info):
        self._maybe("apply")
        return {}

    def verify(self, step):
        return "checked"

    def revert(self, step, backup, run, force, dry_run=False):
        what = self.reverts.pop(0) if self.reverts else RESTORED
        if isinstance(what, BaseException):
            raise what
        return RevertOutcome(step.id, what, "fake")


def _steps(n=2):
    return [Step(f"s{i}", f"t{i}", "put", f"change t{i}", "diff\n") for i in range(1, n + 1)]


def _readme_states() -> dict[str, str]:
    section = open(os.path.join(ROOT, "docs", "commands", "runs.md"), encoding="utf-8").read().split("\n## Reference")[0]
    return {m[1]: m[2] for m in re.finditer(r"^\| `([a-z-]+)` \| (?:final|transient) \| (.+) \|$", section, re.M)}


def test_the_manual_lists_exactly_the_run_states_the_code_defines():
    assert _readme_states() == runstates.RUN_STATES
    assert set(runstates.FINAL).isdisjoint(runstates.TRANSIENT)


@pytest.mark.parametrize("where,exc,state", [
    ("backup", BadInput("bad input found after the run was created"), "failed"),
    ("apply", Unreachable("gone mid-run"), "failed"),
    ("apply", RuntimeError("a bug"), "failed"),
    ("apply", KeyboardInterrupt(), "interrupted"),
])
def test_every_way_out_of_execute_ends_in_a_final_state(tmp_path, where, exc, state):
    with pytest.raises((BaseException,)) as info:
        recovery.execute(Fake(where, exc), _steps(), str(tmp_path), {})
    [summary] = recovery.list_runs(str(tmp_path))
    assert summary.status == state and summary.status in runstates.FINAL
    if isinstance(info.value, BadInput) or isinstance(info.value, Unreachable):
        told = info.value.outcome  # the error's outcome is the run's: what it changed, and the way back
        assert told.run == summary.run and (told.changed == [] if where == "backup" else told.next)


def test_a_snapshot_that_fails_with_a_bug_still_closes_the_run(tmp_path):
    remedy = Fake()
    remedy.method, remedy.etcd = "etcd", None  # save_snapshot on None: an AttributeError, as a bug would be
    with pytest.raises(AttributeError):
        recovery.execute(remedy, _steps(), str(tmp_path), {}, snapshot_path=str(tmp_path / "s.db"))
    [summary] = recovery.list_runs(str(tmp_path))
    assert summary.status == "failed"


def test_a_run_left_started_by_a_dead_process_says_so_and_revert_closes_it(tmp_path):
    run = Run.create(str(tmp_path), "recover", {"method": "etcd"})
    [summary] = recovery.list_runs(str(tmp_path))
    assert summary.status == "started" and summary.label == f"started (running, pid {os.getpid()})"
    lines = open(run.journal_path).read().splitlines()
    first = json.loads(lines[0])
    first["pid"] = 2 ** 22 + 12345  # above pid_max: no such process
    with open(run.journal_path, "w") as f:
        f.write(json.dumps(first) + "\n")
    [summary] = recovery.list_runs(str(tmp_path))
    assert summary.label == "started (process gone)" and summary.method == "etcd"
    told = outcome.of("RunList", [summary])
    assert f"breakglass revert {run.id}" in told.next
    p = run_cli("runs", "--state-dir", str(tmp_path))
    assert b"started (process gone)" in p.stdout
    res = recovery.revert_run(run.id, str(tmp_path), None)
    assert res.status == "closed"
    assert recovery.list_runs(str(tmp_path))[0].status == "closed"
    assert recovery.revert_run(run.id, str(tmp_path), None).status == "nothing-to-do"
    assert "Nothing was changed by this run." in open(os.path.join(run.path, "report.md")).read()


def test_revert_of_a_started_run_through_the_cli_closes_it(tmp_path):
    run = Run.create(str(tmp_path), "recover", {"method": "etcd"})
    first = json.loads(open(run.journal_path).read())
    first["pid"] = 2 ** 22 + 12345
    with open(run.journal_path, "w") as f:
        f.write(json.dumps(first) + "\n")
    p = run_cli("revert", run.id, "--yes", "-o", "json", "--state-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["result"]["status"] == "closed" and doc["outcome"]["changed"] == []
    assert recovery.list_runs(str(tmp_path))[0].status == "closed"


def test_a_revert_that_fails_midway_ends_revert_failed_not_reverting(tmp_path):
    res = recovery.execute(Fake(), _steps(), str(tmp_path), {})
    remedy = Fake(reverts=[RESTORED, Unreachable("etcd went away")])
    with pytest.raises(Unreachable):
        driver.revert(remedy, Run.open(res.run, str(tmp_path)))
    [summary] = recovery.list_runs(str(tmp_path))
    assert summary.status == "revert-failed" and summary.changed == 1
    assert outcome.of("RunList", [summary]).next == [f"breakglass revert {res.run}"]


def test_a_conflict_on_the_last_step_reverted_first_still_ends_revert_conflict(tmp_path):
    res = recovery.execute(Fake(), _steps(), str(tmp_path), {})
    with pytest.raises(Exception) as info:
        driver.revert(Fake(reverts=[CONFLICT, RESTORED]), Run.open(res.run, str(tmp_path)))
    assert info.value.outcome.not_verified and "--force" in info.value.outcome.next[0]
    assert recovery.list_runs(str(tmp_path))[0].status == "revert-conflict"


def test_report_md_and_the_cli_draw_the_same_outcome(tmp_path):
    res = recovery.execute(Fake(), _steps(), str(tmp_path), {})
    run = Run.open(res.run, str(tmp_path))
    report = open(os.path.join(run.path, "report.md")).read()
    told = outcome.of_run_state(driver.replay(run))
    assert "## Outcome" in report and f"`breakglass revert {res.run}`" in report
    assert all(c in report for c in told.changed) and told.next == [f"breakglass revert {res.run}"]
    from breakglass.present import render

    text = render.run_result(res)
    assert f"outcome: applied (run {res.run})" in text and f"breakglass revert {res.run}" in text


def test_an_etcd_backup_that_fails_midway_ends_failed(tmp_path, monkeypatch):
    from breakglass.flows import etcd_tools

    class Remedy(Fake):
        def __init__(self, *a, **k):
            super().__init__("backup", Unreachable("etcd went away"))

        def plan(self):
            return _steps()

    class Target:
        prefix = "/registry"

        def connect(self):
            return None

    monkeypatch.setattr(etcd_tools, "EtcdDelete", Remedy)
    with pytest.raises(Unreachable):
        etcd_tools.backup(Target(), ["x"], None, str(tmp_path))
    assert recovery.list_runs(str(tmp_path))[0].status == "failed"
