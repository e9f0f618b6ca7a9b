"""Run directories: the durable record of what a recovery did, enough to undo it anywhere.

One directory per run, ``runs/<UTC time>-<short id>/``:

- ``journal.jsonl``: append-only, one JSON object per step transition, each line written
  and fsynced before the program moves on. An append is all or nothing (a line a full disk cut
  short is truncated away, and the error says so: DiskFull, exit 9); a power cut can still leave
  a torn line, which the next append ends and every reader skips with a warning.
- ``backups/``: the original bytes of everything changed, mode 0600 in a 0700 directory,
  written, fsynced and read back against their sha256 before any change is made.
- ``report.md``: a human summary for the postmortem.

- ``lock``: held (``fcntl.flock``) by the process applying or reverting the run, with its pid in it, so a
  second process is refused instead of racing it.

The directory alone is enough to revert, on another machine too: nothing refers to paths
outside it. A copy named by path outside the state directory is first copied into it (after the same
ownership checks), so breakglass only ever works in, and trusts, directories under the state directory
that belong to the user and that nobody else can write.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import signal
from dataclasses import dataclass
from typing import Any, Iterator

from breakglass.core import textfile
from breakglass.core.errors import BadInput, BreakglassError, DiskFull, PreconditionFailed, is_disk_error

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


def _no_room(state: str, e: BaseException, doing: str = "") -> DiskFull:
    why = getattr(e, "reason", None) or (getattr(e, "strerror", None) or str(e)).lower()
    err = DiskFull(f"{doing}the state directory {state} cannot be written ({why}); nothing was changed; "
                   f"free space there (`df -h {state}`), or choose another with --state-dir")
    err.reason = why  # type: ignore[attr-defined]
    return err


def _mkdir_private(path: str) -> None:
    """A directory only we can read (it will hold backups of secrets). One that is a link, a file, or another
    user's is refused rather than adopted; a place that cannot hold it is bad input naming the path (a full or
    read-only disk: DiskFull, exit 9)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        if is_disk_error(e):
            raise _no_room(path, e) from None
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


class TamperedRun(BadInput):
    """The run directory asks for a change the remedy never makes (another file, key, object or field than the
    one it changed, or a backup that is not what it backed up): refused, nothing written. Exit 2."""


LOCK_NAME = "lock"
_held: dict[str, list] = {}  # run path -> [fd, depth]: this process holds the run's lock (re-entrant)


def _untrusted(path: str, st: os.stat_result, what: str) -> str | None:
    """Why a run's directory or file cannot be trusted, or None: it must be the user's own, and nobody else may
    write it (the journal decides what revert writes)."""
    if stat.S_ISLNK(st.st_mode):
        return f"{what} {path} is a symbolic link"
    if st.st_uid != os.geteuid():
        return f"{what} {path} belongs to uid {st.st_uid}, not to you"
    if st.st_mode & 0o022:
        return f"{what} {path} can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


_seen: dict[str, int] = {}


def _fault(transition: str) -> None:
    """Fault injection for the crash tests, off unless BREAKGLASS_FAULT_INJECT is set.

    ``BREAKGLASS_FAULT_INJECT=<transition>[@<n>][:int|:term|:hup]`` (comma-separated) makes the process
    SIGKILL itself (or get a SIGINT, as Ctrl-C, a SIGTERM or a SIGHUP) right after writing the n-th
    (default first) journal entry of that transition. ``backup-written`` is the moment a backup's temp file is
    whole and fsynced, before its rename (what a kill there leaves: ``backups/NAME.tmp``).
    """
    spec = os.environ.get("BREAKGLASS_FAULT_INJECT")
    if not spec:
        return
    _seen[transition] = _seen.get(transition, 0) + 1
    for item in spec.split(","):
        what, _, sig = item.partition(":")
        name, _, nth = what.partition("@")
        if name == transition and _seen[transition] == int(nth or 1):
            caught = {"int": signal.SIGINT, "term": signal.SIGTERM, "hup": signal.SIGHUP}.get(sig)
            if caught is None:
                os.kill(os.getpid(), signal.SIGKILL)
            # right here is the moment the test names. In the main thread the signal's Python handler is called
            # now, as the interpreter would call it (SIGINT's default raises KeyboardInterrupt): raise(3) only sets
            # a flag the interpreter checks later, and on a loaded CI machine the run finished first (exit 0). In
            # another thread, raise(3) is what reaches the main thread.
            import threading  # noqa: PLC0415

            handler = signal.getsignal(caught)
            if threading.current_thread() is threading.main_thread() and callable(handler):
                handler(caught, None)
            signal.raise_signal(caught)


_warned: set = set()


def _warn_torn(path: str, line: int, parsed: bool) -> None:
    """Say once per process that a journal line was skipped (every reader of a run replays its journal)."""
    if (path, line) in _warned:
        return
    _warned.add((path, line))
    import sys  # noqa: PLC0415

    from breakglass.core.safetext import printable  # noqa: PLC0415

    why = "not a journal entry" if parsed else "cut short or damaged (a power cut or a full disk as it was written)"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(printable(f"breakglass: warning: {path}: line {line} is {why}; skipped"), file=sys.stderr)


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
        now = _dt.datetime.now(_dt.timezone.utc)
        name = f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
        path = os.path.join(runs, name)
        run = cls(path)
        from breakglass.core.runstates import owner  # noqa: PLC0415

        try:
            _mkdir_private(state)
            _mkdir_private(runs)
            os.mkdir(path, 0o700)
            os.mkdir(os.path.join(path, "backups"), 0o700)
            _fsync_dir(runs)
            # pid and host: `runs` tells a run whose process was killed from one still at work
            run.append("run-started", kind=kind, schema=SCHEMA, **{**meta, **owner()})
        except (DiskFull, OSError) as e:
            if not isinstance(e, DiskFull) and not is_disk_error(e):
                raise
            import shutil  # noqa: PLC0415

            shutil.rmtree(path, ignore_errors=True)  # nothing was done: no run to list, close or revert
            raise _no_room(state, e, "no run started: ") from None
        return run

    @classmethod
    def open(cls, ref: str, state: str | None = None, exact: bool = False) -> Run:
        """A run by path, by name, or by unique name prefix under the state directory (``exact``: by its whole
        name only, e.g. the id a prompt showed). A run directory named by path outside the state directory is
        copied into it first (see ``_import``); one that is not the user's own, or that others can write, is
        refused."""
        runs = os.path.join(state_dir(state), "runs")
        if os.path.sep in ref or (not exact and os.path.isdir(ref) and not _RUN_NAME.match(ref)):
            if not (os.path.isdir(ref) and os.path.exists(os.path.join(ref, "journal.jsonl"))):
                raise BadInput(f"{ref}: not a run directory (no journal.jsonl)")
            if os.path.realpath(os.path.dirname(os.path.abspath(ref))) != os.path.realpath(runs):
                return cls._import(ref, state)
            run = cls(os.path.abspath(ref))
        else:
            matches = [n for n in _list_dir(runs) if (n == ref if exact else n.startswith(ref))]
            if len(matches) > 1:
                raise BadInput(f"run {ref!r} is ambiguous: {', '.join(sorted(matches))}")
            if not matches and os.path.isdir(ref) and os.path.exists(os.path.join(ref, "journal.jsonl")):
                return cls._import(ref, state)  # a run's own name, as a directory here: a copy
            if not matches:
                raise BadInput(f"no run {ref!r} in {runs}", hint="`breakglass runs` lists them")
            run = cls(os.path.join(runs, matches[0]))
        run.check_trusted()
        return run

    @classmethod
    def _import(cls, ref: str, state: str | None) -> Run:
        """A run directory copied from elsewhere (another machine, a backup): copied into this state directory's
        runs/ after the ownership checks, and worked on there, so what revert trusts always lives in a directory
        only the user can write."""
        import shutil  # noqa: PLC0415

        src = os.path.abspath(ref)
        name = os.path.basename(src.rstrip(os.path.sep))
        if not _RUN_NAME.match(name):
            raise BadInput(f"{ref}: not a run directory's name (they look like 20260101T000000Z-0a1b2c)")
        Run(src).check_trusted()
        base = state_dir(state)
        runs = os.path.join(base, "runs")
        _mkdir_private(base)
        _mkdir_private(runs)
        dest = os.path.join(runs, name)
        if os.path.lexists(dest) and _is_copy_of(src, dest):
            run = cls(dest)  # copied in already (by this same command, or an earlier one)
            run.check_trusted()
            return run
        if os.path.lexists(dest):
            raise BadInput(f"{ref}: run {name} is already in {runs}, perhaps with another journal",
                           hint=f"revert that one by its id (`breakglass revert {name}`), or choose another "
                                f"--state-dir")
        tmp = os.path.join(runs, f".{name}.importing-{secrets.token_hex(3)}")
        try:
            shutil.copytree(src, tmp, symlinks=True, ignore=shutil.ignore_patterns(LOCK_NAME))
            os.rename(tmp, dest)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BadInput(f"{ref}: cannot copy it into {runs}: {(e.strerror or str(e)).lower()}") from None
        _fsync_dir(runs)
        run = cls(dest)
        run.check_trusted()
        return run

    def check_trusted(self) -> None:
        """Refuse a run whose directory, journal or backups are not the user's own or can be written by others
        (another user could then choose what revert writes), or whose directory is a link."""
        try:
            why = _untrusted(self.path, os.lstat(self.path), "run directory")
            for path, what in ((self.journal_path, "journal"), (self.backups, "backups directory")):
                if why is None and os.path.lexists(path):
                    why = _untrusted(path, os.lstat(path), what)
            if why is None and os.path.isdir(self.backups) and not os.path.islink(self.backups):
                for n in sorted(os.listdir(self.backups)):
                    why = why or _untrusted(os.path.join(self.backups, n),
                                            os.lstat(os.path.join(self.backups, n)), "backup")
        except OSError as e:
            raise BadInput(f"run {self.path}: {(e.strerror or str(e)).lower()}") from None
        if why:
            raise BadInput(f"{why}; refusing to trust run {self.id} (its journal decides what revert writes)",
                           hint="copy the runs you trust into a state directory of your own (0700)")

    # -- the lock --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, doing: str):
        """Hold the run's lock (fcntl.flock on ``lock`` in the run directory) for the whole block. Another process
        that holds it makes this PreconditionFailed naming the run and its pid; this process may nest."""
        key = os.path.realpath(self.path)
        if key in _held:
            _held[key][1] += 1
        else:
            _held[key] = [self._take_lock(doing), 1]
        try:
            yield self
        finally:
            held = _held[key]
            held[1] -= 1
            if held[1] == 0:
                del _held[key]
                with contextlib.suppress(OSError):
                    os.ftruncate(held[0], 0)  # no stale pid for the next reader
                os.close(held[0])  # releases the flock

    def _take_lock(self, doing: str) -> int:
        path = os.path.join(self.path, LOCK_NAME)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if is_disk_error(e):
                raise self._disk_error(e, "create its lock file") from None
            raise BadInput(f"run {self.id}: cannot open its lock file {path}: {(e.strerror or str(e)).lower()}") \
                from None
        try:
            why = _untrusted(path, os.fstat(fd), "lock file")
            if why or not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BadInput(f"{why or f'lock file {path} is not a file'}; refusing to use run {self.id}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise BadInput(f"run {self.id}: cannot lock {path}: {(e.strerror or str(e)).lower()}") from None
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
                who = (f"process {holder[0]}" + (f" on {holder[1]}" if len(holder) > 1 else "")
                       + (f" ({holder[2]})" if len(holder) > 2 else "")) if holder else "another process"
                raise PreconditionFailed(
                    f"run {self.id} is in use by {who}; not {doing} it now",
                    hint=f"let that process finish (or stop it), then `breakglass runs` shows the run's state") \
                    from None
            # who holds it, for the next process's refusal: only a courtesy, so a full disk does not stop the run
            # (its journal entries are what must be written, and they say so when they cannot be)
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {os.uname().nodename} {doing}\n".encode(), 0)
                os.fsync(fd)
            except OSError as e:
                if not is_disk_error(e):
                    raise
            return fd
        except BaseException:
            os.close(fd)
            raise

    # -- the journal ---------------------------------------------------------------------------
    def append(self, transition: str, **fields: Any) -> dict:
        """Add one entry, all or nothing: the whole line is written and fsynced, or (a full disk, a quota, a failing
        disk cut it short) the file is truncated back to what it held and fsynced again, and DiskFull says so. A
        torn last line left by a power cut is first ended with a newline, so this entry never merges into it."""
        entry = {"ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
                 "event": transition, **fields}
        line = (json.dumps(entry, sort_keys=True, default=str) + "\n").encode()
        try:
            fd = os.open(self.journal_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if is_disk_error(e):
                raise self._disk_error(e, "write its journal") from None
            raise
        try:
            # one appender at a time (record_readiness appends outside the run's lock): "truncate back to what it
            # held" must not take another process's line with it
            with contextlib.suppress(OSError):  # a file system without flock: appends as before, unlocked
                fcntl.flock(fd, fcntl.LOCK_EX)
            start = os.fstat(fd).st_size
            try:
                if start and os.pread(fd, 1, start - 1) != b"\n":
                    line = b"\n" + line
                view = memoryview(line)
                while view:  # a short write (the disk filled midway) is retried: the next one says why it stopped
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                if is_disk_error(e):
                    raise self._disk_error(e, "write its journal") from None
                raise
        finally:
            os.close(fd)
        _fault(transition)
        return entry

    def _disk_error(self, e: OSError, doing: str) -> DiskFull:
        why = (e.strerror or str(e)).lower()
        err = DiskFull(f"run {self.id}: could not {doing} in {self.path} ({why}); nothing more was changed",
                       hint=f"free space there (`df -h {self.path}`), then `breakglass revert {self.id}`")
        err.reason = why  # type: ignore[attr-defined] - what the flows say in their own line
        err.where = self.path  # type: ignore[attr-defined]
        return err

    def events(self) -> Iterator[dict]:
        """The journal's entries in order. A line that is not a JSON object (torn by a power cut or a full disk
        before all-or-nothing appends, or damaged since) is skipped with one warning on stderr, wherever it is:
        the entries around it still say what was done, and revert asks each target itself before it writes."""
        try:
            with open(self.journal_path, "rb") as f:
                lines = f.read().split(b"\n")
        except OSError as e:
            raise BadInput(f"{self.journal_path}: {e.strerror}") from None
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                entry, parsed = json.loads(raw), True
            except (ValueError, RecursionError):
                entry, parsed = None, False
            if isinstance(entry, dict):
                yield entry
            else:
                _warn_torn(self.journal_path, i + 1, parsed)

    # -- backups -------------------------------------------------------------------------------
    def write_backup(self, name: str, data: bytes) -> str:
        """Write, fsync, read back and verify; returns the sha256. Never overwrites. A write that fails (a full
        disk) removes its temp file: it holds the original's bytes, secrets and all."""
        if "/" in name or name.startswith("."):
            raise ValueError(name)
        path = os.path.join(self.backups, name)
        tmp = path + ".tmp"
        try:
            fd = textfile.create_new(tmp)
        except OSError as e:
            if is_disk_error(e):
                raise self._disk_error(e, f"write backup {name}") from None
            raise
        try:
            try:
                textfile.write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            _fault("backup-written")  # the crash tests: killed with the temp file whole, before its rename
            if os.path.exists(path):
                os.unlink(tmp)
                raise JournalError(f"backup {path} exists already")
            os.rename(tmp, path)
            _fsync_dir(self.backups)
        except BaseException as e:  # a full disk, or Ctrl-C/SIGTERM midway: the temp holds the original's bytes
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, OSError) and is_disk_error(e):
                raise self._disk_error(e, f"write backup {name}") from None
            raise
        digest = sha256(data)
        if self.read_backup(name, digest) != data:
            raise JournalError(f"backup {path} did not read back intact")
        return digest

    def tidy_temps(self) -> list[str]:
        """Remove what a write of the run's own files (report.md and the rest) killed midway left: their temp
        files' locks tell a stale one from a live write, so no run lock is needed. The names removed."""
        return textfile.remove_stale_temps(self.path, any_file=True)

    def tidy_backups(self) -> list[str]:
        """Remove the ``NAME.tmp`` files a backup write killed midway left (they may hold a config's secrets);
        called with the run locked, so no writer of this run is at work. The names removed."""
        gone = self.tidy_temps()
        try:
            names = os.listdir(self.backups)
        except OSError:
            return gone
        for n in names:
            p = os.path.join(self.backups, n)
            if n.endswith(".tmp") and not os.path.islink(p) and os.path.isfile(p):
                os.unlink(p)
                gone.append(n)
        return gone

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
        textfile.write_private(os.path.join(self.path, name), text.encode("utf-8"))


def _is_copy_of(src: str, dest: str) -> bool:
    """Whether run directory ``dest`` is ``src`` copied in, perhaps with journal entries added since."""
    try:
        with open(os.path.join(src, "journal.jsonl"), "rb") as a, open(os.path.join(dest, "journal.jsonl"), "rb") as b:
            if not b.read().startswith(a.read()):
                return False
        for n in os.listdir(os.path.join(src, "backups")):
            with open(os.path.join(src, "backups", n), "rb") as a, open(os.path.join(dest, "backups", n), "rb") as b:
                if a.read() != b.read():
                    return False
    except OSError:
        return False
    return True


def _list_dir(path: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(path) if _RUN_NAME.match(n))
    except OSError:
        return []


def list_runs(state: str | None = None) -> list[Run]:
    runs = os.path.join(state_dir(state), "runs")
    return [Run(os.path.join(runs, n)) for n in _list_dir(runs)]
