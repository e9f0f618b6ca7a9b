"""Every process a sandbox starts, found again by ``status``, ``down`` and the next ``up``.

Each start is recorded under ``procs/<name>.json`` (pid, the start time the kernel gives it in /proc, its
process group) before anything else happens; a record counts only while /proc shows that pid with that start
time and a command line inside this sandbox, so a recycled pid is never signalled. What one ``up`` starts shares
one process group (the first process's), so stopping the group also stops what the kubelet stand-in started and
could not record, and an interrupted ``up`` takes everything it started down with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from breakglass.core.textfile import write_private

RECORDS = "procs"
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Record:
    name: str
    pid: int
    start: int | None
    pgid: int | None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _mentions(pid: int, directory: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return (os.path.abspath(directory).rstrip("/") + "/").encode() in f.read()
    except OSError:
        return False


def is_ours(rec: Record, directory: str) -> bool:
    return rec.start is not None and start_time(rec.pid) == rec.start and _mentions(rec.pid, directory)


def record(directory: str, name: str, pid: int) -> Record:
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        pgid = None
    rec = Record(name, pid, start_time(pid), pgid)
    os.makedirs(os.path.join(directory, RECORDS), mode=0o700, exist_ok=True)
    write_private(os.path.join(directory, RECORDS, f"{name}.json"),
                  json.dumps({"pid": rec.pid, "start": rec.start, "pgid": rec.pgid}).encode())
    return rec


def records(directory: str) -> list[Record]:
    """Every record, live or not (a corrupt one is skipped: it can only name a process we cannot check)."""
    base = os.path.join(directory, RECORDS)
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for fname in names:
        if not fname.endswith(".json"):
            continue
        try:
            with open(os.path.join(base, fname), encoding="utf-8") as f:
                d = json.load(f)
            out.append(Record(fname[:-5], int(d["pid"]), None if d["start"] is None else int(d["start"]),
                              None if d.get("pgid") is None else int(d["pgid"])))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def live(directory: str) -> list[Record]:
    return [r for r in records(directory) if is_ours(r, directory)]


def find(directory: str, name: str) -> Record | None:
    return next((r for r in live(directory) if r.name == name), None)


@contextlib.contextmanager
def interrupts_deferred():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done (a start and its record; a teardown), then
    interrupt as they would have. Signals are not blocked, since a child inherits the mask through exec and
    would then ignore the SIGTERM meant to stop it."""
    pending: list[int] = []
    try:
        old = {s: signal.signal(s, lambda n, _f: pending.append(n)) for s in INTERRUPTS}
    except ValueError:  # not the main thread: nothing to defer to
        old = {}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for s in pending[:1]:
            os.kill(os.getpid(), s)  # the handler the caller had takes it now


def _group(directory: str, detached: bool) -> dict:
    """Join the sandbox's process group when it lives in our session (one ``up`` starts them all); else a new
    group, or with ``detached`` (a later ``backend start``) a new session, so it outlives the terminal it was
    typed in."""
    mine = os.getsid(0)
    for rec in live(directory):
        with contextlib.suppress(ProcessLookupError):
            if rec.pgid is not None and os.getpgid(rec.pid) == rec.pgid and os.getsid(rec.pid) == mine:
                return _join(rec.pgid)
    return {"start_new_session": True} if detached else _join(0)


def _join(pgid: int) -> dict:
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}  # 3.10 has no process_group yet


def python_module(module: str) -> list[str]:
    """The command line that runs one of breakglass' own modules."""
    return [sys.executable, "-m", module]


# The child waits on a pipe until its record is written, then execs the program: an ``up`` killed in between
# (SIGKILL cannot be deferred) leaves a child that reads end-of-file and exits, never a process nobody recorded.
_GATE = ["/bin/sh", "-c", 'read -r _ && exec "$@" </dev/null', "sh"]


def spawn(directory: str, name: str, argv: list[str], log_path: str, detached: bool = False) -> subprocess.Popen:
    """Start ``argv`` for the sandbox and record it before it runs. It runs in the sandbox directory (only we
    can write it), so ``python -m`` never imports a module from wherever the caller stood, and breakglass itself
    is found where this process found it."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    with interrupts_deferred():
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        gate_r, gate_w = os.pipe()
        try:
            try:
                proc = subprocess.Popen([*_GATE, *argv], stdout=fd, stderr=fd, stdin=gate_r, cwd=directory, env=env,
                                        **_group(directory, detached))
            except (PermissionError, subprocess.SubprocessError):  # the group ended in between: a new one
                proc = subprocess.Popen([*_GATE, *argv], stdout=fd, stderr=fd, stdin=gate_r, cwd=directory, env=env,
                                        **_join(0))
        except BaseException:
            os.close(gate_w)
            raise
        finally:
            os.close(fd)
            os.close(gate_r)
        try:
            record(directory, name, proc.pid)
            os.write(gate_w, b"go\n")
        finally:
            os.close(gate_w)
    return proc


def signal_one(rec: Record, directory: str, sig: int) -> None:
    if is_ours(rec, directory):
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, sig)


AGAIN = 2.0  # seconds after the first SIGTERM before a second one (see stop)


def stop(directory: str, names: tuple[str, ...] | None = None, seconds: float = 30, hard: bool = False) -> bool:
    """Stop the sandbox's live processes (all, or those ``names``): SIGTERM, a second SIGTERM to any still there
    after ``AGAIN`` seconds, then SIGKILL after ``seconds`` (``hard``: SIGKILL at once, as a node losing a pod).
    The second SIGTERM is the Go servers' convention for "now": konnectivity's agent takes the first as the start
    of a drain that waits for a server already gone, and `down` would wait out the whole grace period. Whole
    groups go too when every live member is ours: what the kubelet stand-in started is in its group. True if
    anything was running."""
    with interrupts_deferred():
        recs = [r for r in live(directory) if names is None or r.name in names]
        groups = _our_groups(directory, recs) if names is None else set()

        def send(sig: int) -> None:
            for r in recs:
                signal_one(r, directory, sig)
            for g in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(g, sig)

        def wait(until: float) -> bool:
            while time.monotonic() < until:
                if not any(is_ours(r, directory) for r in recs) and not _alive(groups):
                    return True
                time.sleep(0.05)
            return not any(is_ours(r, directory) for r in recs) and not _alive(groups)

        if not hard:
            start = time.monotonic()
            send(signal.SIGTERM)
            if wait(start + min(AGAIN, seconds)):
                return bool(recs)
            send(signal.SIGTERM)
            if wait(start + seconds):
                return bool(recs)
        send(signal.SIGKILL)
        wait(time.monotonic() + seconds)
        return bool(recs)


def _our_groups(directory: str, recs: list[Record]) -> set[int]:
    """Process groups that a live record of ours leads or still belongs to: no one else joins them."""
    out = set()
    for r in recs:
        with contextlib.suppress(ProcessLookupError):
            if r.pgid is not None and os.getpgid(r.pid) == r.pgid:
                out.add(r.pgid)
    return out


def _alive(groups: set[int]) -> bool:
    """Some process other than a zombie is still in one of ``groups``."""
    if not groups:
        return False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) in groups:
            return True
    return False
