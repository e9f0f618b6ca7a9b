"""The states a run can be in: one list, documented here and in the README (a test checks they agree).

A run's state is what its journal's last transitions say (``driver.replay``). Every path out of a process that
ends normally, error and Ctrl-C included, leaves a run in a FINAL state; a TRANSIENT state is seen only while a
process is at work, or after one was killed (kill -9, a power cut). ``label`` tells those two apart by the pid
and host the journal recorded, so `breakglass runs` never shows a dead run as if it were still going.
"""

from __future__ import annotations

import os

from breakglass.core.errors import ExitCode

# state -> what it means (the README's table is checked against this)
FINAL: dict[str, str] = {
    "applied": "every change made and verified",
    "applied-unverified": "every change made, but not all could be verified in time (exit 8)",
    "edited-not-applied": "a file here was edited (a machine config or config.yaml managed as code) and no node has it "
                          "yet: apply it, then check /readyz (exit 8)",
    "backed-up": "`etcd backup`: the keys are backed up, nothing was changed",
    "failed": "stopped by an error; the journal, report.md and the error's hint say what, if anything, changed",
    "interrupted": "stopped by Ctrl-C, SIGTERM or SIGHUP; the journal says how far it got",
    "reverted": "every change undone",
    "revert-conflict": "a target changed since the run and was left alone (revert --force overwrites it)",
    "revert-failed": "a revert stopped by an error; revert again once the target is reachable",
    "closed": "nothing was changed, and revert closed the run",
}
TRANSIENT: dict[str, str] = {
    "started": "the run directory exists, nothing is planned yet",
    "planned": "the steps are journaled, none begun",
    "applying": "a step is being backed up, applied or verified",
    "reverting": "a revert is under way",
}
RUN_STATES: dict[str, str] = {**FINAL, **TRANSIENT}

# a file way (a Talos machine-config file, a k3s/RKE2 config.yaml edited here): the change is only in the file
EDITED = "edited-not-applied"
# the final states whose command ends with exit 8 (ExitCode.NOT_VERIFIED): made, but not confirmed in effect
NOT_VERIFIED = ("applied-unverified", EDITED)


def exit_code(status: str) -> int:
    """The exit code of a recover that ended in ``status``: 8 (not verified) for a change made but not confirmed in
    effect, or one that is only in a file here; else 0."""
    return int(ExitCode.NOT_VERIFIED) if status in NOT_VERIFIED else int(ExitCode.OK)


def owner() -> dict:
    """What a transition records so a later reader can tell a live process from a dead one."""
    return {"pid": os.getpid(), "host": os.uname().nodename}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    except (OverflowError, OSError):
        return False
    return True


def label(status: str, pid=None, host=None) -> str:
    """The state as `runs` shows it: a transient state says whether its process is still there."""
    if status not in TRANSIENT:
        return status
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return f"{status} (no process recorded)"
    if host and host != os.uname().nodename:
        return f"{status} (process {pid} on {host})"
    return f"{status} (running, pid {pid})" if _alive(pid) else f"{status} (process gone)"
