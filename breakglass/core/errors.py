"""One exception family and the one table that maps it to exit codes.

Every failure a user can cause or meet (bad input, an unreachable target, a lost
compare-and-swap) is a ``BreakglassError`` subclass; the CLI turns it into a
one-line message and the exit code named here. Anything else is a bug.
"""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    BAD_INPUT = 2
    FOUND = 3
    PRECONDITION = 4
    UNREACHABLE = 5
    UNSUPPORTED = 6
    DECLINED = 7
    NOT_VERIFIED = 8
    DISK_FULL = 9
    INTERRUPTED = 130


# Documented once; the README table is checked against this by a test.
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success; for diagnose and audit: nothing found",
    ExitCode.FAILURE: "unexpected failure (a bug: still no traceback without --verbose)",
    ExitCode.BAD_INPUT: "bad usage or bad input (unreadable file, invalid YAML, unknown name, a log no Kubernetes "
                        "component wrote)",
    ExitCode.FOUND: "diagnose or audit found a problem that needs action",
    ExitCode.PRECONDITION: "precondition failed: the target changed since it was read",
    ExitCode.UNREACHABLE: "cannot reach or authenticate to a target (etcd, SSH, Talos API, apiserver)",
    ExitCode.UNSUPPORTED: "a capability this installation cannot load here (the offline bundle without native "
                          "code for this platform)",
    ExitCode.DECLINED: "declined: you answered no (or nothing) where breakglass asked to go on; nothing was changed",
    ExitCode.NOT_VERIFIED: "applied, not verified: the change is made and journaled, but its effect could not be "
                           "confirmed in time (the message says what to check); or edited, not applied: a file "
                           "here (--config-file) holds the change and no node has it yet (next: how to apply it)",
    ExitCode.DISK_FULL: "a disk it writes to is full, over quota, read-only or failing: it stopped before changing "
                        "anything more; the message names the run, what it changed, and how to free space and "
                        "revert",
    ExitCode.INTERRUPTED: "interrupted; the journal says what was done",
}


class BreakglassError(Exception):
    """Base of every error a user may see. ``str(err)`` is the one-line message."""

    exit_code: ExitCode = ExitCode.FAILURE
    kind: str = "failure"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class BadInput(BreakglassError):
    exit_code = ExitCode.BAD_INPUT
    kind = "bad-input"


class PreconditionFailed(BreakglassError):
    exit_code = ExitCode.PRECONDITION
    kind = "precondition-failed"


class AlreadyDone(BreakglassError):
    """What was asked is already the case (an open run made the change; every run is reverted): the command
    stops, says so, and succeeds (exit 0), so a script that retries does not fail."""

    exit_code = ExitCode.OK
    kind = "already-done"


class Declined(BreakglassError):
    """The engineer said no, or gave up at a question: not an interrupt, and nothing was changed."""

    exit_code = ExitCode.DECLINED
    kind = "declined"


class Unreachable(BreakglassError):
    exit_code = ExitCode.UNREACHABLE
    kind = "unreachable"


class Unsupported(BreakglassError):
    exit_code = ExitCode.UNSUPPORTED
    kind = "unsupported"


class NotVerified(BreakglassError):
    """The change is in place (made now or by an earlier run), but what it is for is not confirmed: the
    apiserver's /readyz is not 200, or nothing could ask it."""

    exit_code = ExitCode.NOT_VERIFIED
    kind = "not-verified"


# The OSErrors that say the disk itself cannot take a write (full, over quota, read-only, failing), whoever wrote:
# a journal, a backup, a report or a file being edited. Anything else stays what it is.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def is_disk_error(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in DISK_ERRNOS


class DiskFull(BreakglassError):
    """A disk breakglass writes to (the state directory's: its journal, a backup, a report; or a file it edits) is
    full, over quota, read-only or failing. Every journal entry is all-or-nothing and every backup is written
    before its change, so what was done is on record: the command stops there, naming the run, what it changed
    and the way back (free space, then revert). Exit 9."""

    exit_code = ExitCode.DISK_FULL
    kind = "disk-full"


class Interrupted(BreakglassError):
    exit_code = ExitCode.INTERRUPTED
    kind = "interrupted"
