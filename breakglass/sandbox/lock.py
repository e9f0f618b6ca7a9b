"""One ``up``, ``down`` or ``backend`` at a time on a sandbox directory.

The lock is an exclusive ``flock`` on the sandbox directory itself: a lock file inside would go with the
``rmtree`` of ``down`` and a fresh ``up``, and one beside it would be litter in someone else's directory. A
waiter that gets the lock checks that the path still names the directory it locked (``down`` removes it), and
locks the one there now if not.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Callable, Iterator

from breakglass.core.errors import BadInput


def _open(directory: str, create: bool) -> int | None:
    try:
        if create:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise BadInput(f"{directory}: no such directory") from None
        return None
    except OSError as e:
        raise BadInput(f"{directory}: {(e.strerror or str(e)).lower()}") from None


@contextlib.contextmanager
def held(directory: str, create: bool, say: Callable[[str], None] = lambda _m: None) -> Iterator[bool]:
    """Hold the directory's lock (making the directory first with ``create``); yields False when there is no
    directory to lock (and ``create`` is off)."""
    while True:
        fd = _open(directory, create)
        if fd is None:
            yield False
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another `breakglass sandbox` command on {directory} to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now = os.lstat(directory)
        except FileNotFoundError:
            now = None
        locked = os.fstat(fd)
        if now is not None and (now.st_dev, now.st_ino) == (locked.st_dev, locked.st_ino):
            break
        os.close(fd)  # removed or replaced while we waited: lock what is there now
    try:
        yield True
    finally:
        os.close(fd)
