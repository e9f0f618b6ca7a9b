"""Run directories: the durable record of what a recovery did, enough to undo it anywhere.

One directory per run, ``runs/<UTC time>-<short id>/``:

- ``journal.jsonl``: append-only, one JSON object per step transition, each line written
  and fsynced before the program moves on. A crash can at most leave a torn last line,
  which readers skip.
- ``backups/``: the original bytes of everything changed, mode 0600 in a 0700 directory,
  written, fsynced and read back against their sha256 before any change is made.
- ``report.md``: a human summary for the postmortem.

The directory alone is enough to revert, on another machine too: nothing refers to paths
outside it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import secrets
import stat
import signal
from dataclasses import dataclass
from typing import Any, Iterator

from breakglass.core.errors import BadInput, BreakglassError

SCHEMA = 1
_RUN_NAME = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")


def state_dir(explicit: str | None = None) -> str:
    """--state-dir, else $BREAKGLASS_STATE_DIR, else $XDG_STATE_HOME/breakglass, else ~/.local/state/breakglass."""
    if explicit:
        return explicit
    if os.environ.get("BREAKGLASS_STATE_DIR"):
        return os.environ["BREAKGLASS_STATE_DIR"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "breakglass")


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mkdir_private(path: str) -> None:
    """A directory only we can read (it will hold backups of secrets). One that is a link, a file, or another
    user's is refused rather than adopted; a place that cannot hold it is bad input naming the path."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise BadInput(f"state directory {path}: {(e.strerror or str(e)).lower()}",
                       hint="choose another with --state-dir or $BREAKGLASS_STATE_DIR") from None
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"state directory {path} is a {'link' if stat.S_ISLNK(st.st_mode) else 'file'}, not a "
                       f"directory; refusing to keep runs there")
    if st.st_uid != os.geteuid():
        raise BadInput(f"state directory {path} belongs to uid {st.st_uid}, not to you; refusing to keep runs "
                       f"(and backups of secrets) there")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class JournalError(BreakglassError):
    pass


_seen: dict[str, int] = {}


def _fault(transition: str) -> None:
    """Fault injection for the crash tests, off unless BREAKGLASS_FAULT_INJECT is set.

    ``BREAKGLASS_FAULT_INJECT=<transition>[@<n>][:int|:term|:hup]`` (comma-separated) makes the process
    SIGKILL itself (or get a SIGINT, as Ctrl-C, a SIGTERM or a SIGHUP) right after writing the n-th
    (default first) journal entry of that transition.
    """
    spec = os.environ.get("BREAKGLASS_FAULT_INJECT")
    if not spec:
        return
    _seen[transition] = _seen.get(transition, 0) + 1
    for item in spec.split(","):
        what, _, sig = item.partition(":")
        name, _, nth = what.partition("@")
        if name == transition and _seen[transition] == int(nth or 1):
            os.kill(os.getpid(), {"int": signal.SIGINT, "term": signal.SIGTERM, "hup": signal.SIGHUP}.get(
                sig, signal.SIGKILL))


@dataclass
class Run:
    path: str

    @property
    def id(self) -> str:
        return os.path.basename(self.path)

    @property
    def journal_path(self) -> str:
        return os.path.join(self.path, "journal.jsonl")

    @property
    def backups(self) -> str:
        return os.path.join(self.path, "backups")

    # -- creating and opening ------------------------------------------------------------------
    @classmethod
    def create(cls, state: str, kind: str, meta: dict[str, Any]) -> Run:
        runs = os.path.join(state, "runs")
        _mkdir_private(state)
        _mkdir_private(runs)
        now = _dt.datetime.now(_dt.timezone.utc)
        name = f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
        path = os.path.join(runs, name)
        os.mkdir(path, 0o700)
        os.mkdir(os.path.join(path, "backups"), 0o700)
        _fsync_dir(runs)
        run = cls(path)
        from breakglass.core.runstates import owner  # noqa: PLC0415

        # pid and host: `runs` tells a run whose process was killed from one still at work
        run.append("run-started", kind=kind, schema=SCHEMA, **{**meta, **owner()})
        return run

    @classmethod
    def open(cls, ref: str, state: str | None = None) -> Run:
        """A run by path, by name, or by unique name prefix under the state directory."""
        if os.path.isdir(ref) and os.path.exists(os.path.join(ref, "journal.jsonl")):
            return cls(os.path.abspath(ref))
        runs = os.path.join(state_dir(state), "runs")
        if os.path.sep in ref:
            raise BadInput(f"{ref}: not a run directory (no journal.jsonl)")
        matches = [n for n in _list_dir(runs) if n.startswith(ref)]
        if len(matches) == 1:
            return cls(os.path.join(runs, matches[0]))
        if not matches:
            raise BadInput(f"no run {ref!r} in {runs}", hint="`breakglass runs` lists them")
        raise BadInput(f"run {ref!r} is ambiguous: {', '.join(sorted(matches))}")

    # -- the journal ---------------------------------------------------------------------------
    def append(self, transition: str, **fields: Any) -> dict:
        entry = {"ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
                 "event": transition, **fields}
        line = (json.dumps(entry, sort_keys=True, default=str) + "\n").encode()
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fault(transition)
        return entry

    def events(self) -> Iterator[dict]:
        try:
            with open(self.journal_path, "rb") as f:
                lines = f.read().split(b"\n")
        except OSError as e:
            raise BadInput(f"{self.journal_path}: {e.strerror}") from None
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                if i >= len(lines) - 2:
                    continue  # a torn last line: the process died while writing it
                raise JournalError(f"{self.journal_path}: line {i + 1} is corrupt") from None
            if isinstance(entry, dict):
                yield entry

    # -- backups -------------------------------------------------------------------------------
    def write_backup(self, name: str, data: bytes) -> str:
        """Write, fsync, read back and verify; returns the sha256. Never overwrites."""
        if "/" in name or name.startswith("."):
            raise ValueError(name)
        path = os.path.join(self.backups, name)
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if os.path.exists(path):
            os.unlink(tmp)
            raise JournalError(f"backup {path} exists already")
        os.rename(tmp, path)
        _fsync_dir(self.backups)
        digest = sha256(data)
        if self.read_backup(name, digest) != data:
            raise JournalError(f"backup {path} did not read back intact")
        return digest

    def read_backup(self, name: str, digest: str | None = None) -> bytes:
        if not isinstance(name, str) or "/" in name or name.startswith(".") or not name:
            raise JournalError(f"backup name {name!r} in the journal is not one breakglass writes")
        path = os.path.join(self.backups, name)
        if os.path.islink(path):
            raise JournalError(f"backup {path} is a symbolic link; breakglass never writes one")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise JournalError(f"backup {path}: {e.strerror}") from None
        if digest is not None and sha256(data) != digest:
            raise JournalError(f"backup {path} is damaged (sha256 does not match the journal)")
        return data

    def write_file(self, name: str, text: str) -> None:
        from breakglass.core.textfile import write_private  # noqa: PLC0415

        write_private(os.path.join(self.path, name), text.encode("utf-8"))


def _list_dir(path: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(path) if _RUN_NAME.match(n))
    except OSError:
        return []


def list_runs(state: str | None = None) -> list[Run]:
    runs = os.path.join(state_dir(state), "runs")
    return [Run(os.path.join(runs, n)) for n in _list_dir(runs)]
