"""Run the parts of one big scan on several cores: part 0 in this process, the others in forked children.

Why fork and not threads or multiprocessing: the scan's heavy steps (counting newlines, parsing and
classifying candidates) hold the GIL, so threads would not overlap them; ``multiprocessing`` costs an import
and, with its spawn start method, a fresh interpreter per worker, a large share of a scan that takes a
quarter of a second. A forked child already has every module and the compiled anchor database.

Each child streams what it finds back as pickled batches, in order, over a pipe. While this process works on
part 0 it keeps the pipes drained into memory (``drain``), up to ``SPOOL_MAX`` bytes, so children are not
stopped by a full pipe; past that they wait, and the scan degrades to one core, never to unbounded memory.
A child's exception is sent back and raised here, in the place the same scan on one core would raise it.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import pickle
import signal
import struct
import sys
import threading
from typing import Any, Callable, Iterable, Iterator

SPOOL_MAX = 64 << 20  # bytes of children's batches held here before they are consumed
_HEAD = struct.Struct("<Q")
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named only from Python 3.10 on some builds


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Forking is safe only while this process runs one thread (a child of a threaded process may inherit
    a lock some other thread held), and only where fork exists."""
    return hasattr(os, "fork") and threading.active_count() == 1


def parts_here(most: int) -> int:
    """How many parts a scan may run in at once here: the usable cores (at most ``most``), 0 when it cannot fork
    (one core, no fork, or a process with threads)."""
    cpus = min(usable_cpus(), most)
    return cpus if cpus >= 2 and can_fork() else 0


class ChildFailed(RuntimeError):
    """A child died without saying why (killed, out of memory): the caller scans that part itself."""


class Forked:
    """``work(i, send)`` for every part ``i`` >= 1 runs in a child; ``stream(i)`` yields what it sent."""

    def __init__(self, parts: int, work: Callable[[int, Callable[[Any], None]], None]) -> None:
        self._children: dict[int, tuple[int, int]] = {}  # part -> (pid, read fd)
        self._spool: dict[int, list[bytes]] = {}
        self._partial: dict[int, bytearray] = {}
        self._eof: set[int] = set()
        self._held = 0
        sys.stdout.flush()  # a child must not write this process's buffered output a second time
        sys.stderr.flush()
        try:
            for i in range(1, parts):
                r, w = os.pipe()
                try:
                    fcntl.fcntl(w, _F_SETPIPE_SZ, 1 << 20)
                except OSError:
                    pass  # the default 64 KiB pipe works, only with less overlap
                pid = os.fork()
                if pid == 0:  # pragma: no cover - runs in the child; its results are checked in the parent
                    os.close(r)
                    _child(i, w, work)
                os.close(w)
                os.set_blocking(r, False)
                self._children[i] = (pid, r)
                self._spool[i], self._partial[i] = [], bytearray()
        except BaseException:
            self.close()
            raise

    def drain(self) -> None:
        """Move whatever the children have written into memory, without waiting."""
        for i, (_pid, fd) in self._children.items():
            while i not in self._eof and self._held < SPOOL_MAX:
                try:
                    data = os.read(fd, 1 << 20)
                except BlockingIOError:
                    break
                if not data:
                    self._eof.add(i)
                    break
                self._spool[i].append(data)
                self._held += len(data)

    def stream(self, i: int) -> Iterator[Any]:
        """Every object child ``i`` sent, in order; raises what it raised."""
        pid, fd = self._children[i]
        os.set_blocking(fd, True)
        buf = self._partial[i]
        done = False
        while not done:
            if self._spool[i]:
                data = self._spool[i].pop(0)
                self._held -= len(data)
            elif i in self._eof:
                data = b""
            else:
                data = os.read(fd, 1 << 20)
            if not data:
                break
            buf += data
            pos = 0
            while len(buf) - pos >= _HEAD.size:
                (n,) = _HEAD.unpack_from(buf, pos)
                if len(buf) - pos - _HEAD.size < n:
                    break
                tag, obj = pickle.loads(bytes(buf[pos + _HEAD.size:pos + _HEAD.size + n]))
                pos += _HEAD.size + n
                if tag == "error":
                    raise obj
                if tag == "done":
                    done = True
                    break
                yield obj
            del buf[:pos]
        if not done:
            raise ChildFailed(f"scan worker {i} (pid {pid}) ended without its results")

    def close(self) -> None:
        """Stop and reap every child (after an error or Ctrl-C here, they must not outlive the scan)."""
        for _i, (pid, fd) in list(self._children.items()):
            try:
                os.close(fd)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._children.clear()

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _child(i: int, fd: int, work: Callable[[int, Callable[[Any], None]], None]) -> None:  # pragma: no cover
    """The child's whole life: run its part, send each batch, then a last frame; never return."""
    code = 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us

    def send(obj: Any, tag: str = "batch") -> None:
        try:
            data = pickle.dumps((tag, obj), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - an exception that cannot be pickled still says what it was
            data = pickle.dumps(("error", ChildFailed(f"scan worker {i}: {type(obj).__name__}: {e}")))
        view = memoryview(_HEAD.pack(len(data)) + data)
        while view:
            view = view[os.write(fd, view):]

    try:
        work(i, send)
        send(None, "done")
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent, which decides
        try:
            send(e, "error")
        except BaseException:  # noqa: BLE001
            code = 1
    finally:
        os._exit(code)  # no atexit handlers, no flushing of buffers inherited from the parent


BATCH = 256  # items per message from a child: fewer, larger pickles


def ordered(parts: int, produce: Callable[[int, Callable[[], None]], Iterable[Any]],
            meanwhile: Callable[[], None] | None = None) -> Iterator[Any]:
    """Every item of ``produce(0, tick)``, then of ``produce(1, tick)``, ... in order, each part ``i`` >= 1
    produced in a child at the same time as part 0 here. ``tick`` is to be called now and then (every chunk
    read) by part 0, so the children's output keeps being drained; it does nothing in a child.
    ``meanwhile()`` runs here once the children have started, before part 0: work only this process needs
    (imports for what follows the scan) then overlaps the children's instead of delaying their start.
    A child killed from outside is made up for here: its part is produced again, past the items it sent."""

    def work(i: int, send) -> None:
        batch: list = []
        for item in produce(i, _nothing):
            batch.append(item)
            if len(batch) >= BATCH:
                send(batch[:])
                batch.clear()
        if batch:
            send(batch)

    with Forked(parts, work) as kids:
        if meanwhile is not None:
            meanwhile()
        yield from produce(0, kids.drain)
        for i in range(1, parts):
            sent = 0
            try:
                for batch in kids.stream(i):
                    yield from batch
                    sent += len(batch)
            except ChildFailed:
                yield from itertools.islice(produce(i, _nothing), sent, None)


def _nothing() -> None:
    pass
