"""What the sandbox may trust before it starts a process: nothing another user can write.

The sandbox is often started by root, and its kubelet stand-in runs whatever its node configuration names. So
the sandbox directory, every ancestor of it, and every file read to start a process must be writable by no one
but us (or root): otherwise another local user could swap the directory, or a file in it, and have root run
their program. Each path is walked from ``/``, component by component, with ``lstat``:

- a symbolic link anywhere on the path is refused (its target can be changed under us);
- an ancestor directory must belong to root or to us, and be writable by no one else, unless it is sticky and
  root's or ours (``/tmp``: others can add entries there, never rename ours);
- the sandbox directory and the files in it must be ours and not writable by group or others;
- a binary must be root's or ours, not writable by group or others, and is pinned by its sha256 when ``up``
  runs: what is started later must still have those bytes.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

from breakglass.core.errors import BadInput

HINT = "use a directory only you can write, in a path only you and root can change (--dir)"


class Untrusted(BadInput):
    """A path another user could change under us: nothing is started from it."""


def _refuse(path: str, why: str) -> Untrusted:
    return Untrusted(f"{path}: {why}; another user could replace what the sandbox runs as you, so it is refused",
                     hint=HINT)


def _ancestor_ok(path: str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, f"is a symbolic link (to {os.readlink(path)}); give the real path")
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "is not a directory")
    if st.st_uid not in (0, os.geteuid()):
        raise _refuse(path, f"belongs to uid {st.st_uid}, not to you or root")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise _refuse(path, f"is writable by {_who(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):o})")


def _who(mode: int) -> str:
    return " and ".join(w for bit, w in ((0o020, "its group"), (0o002, "others")) if mode & bit)


def _final_ok(path: str, st: os.stat_result, kind: str, owners: tuple[int, ...]) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, "is a symbolic link")
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "is not a directory")
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "is not a regular file")
    if st.st_uid not in owners:
        raise _refuse(path, f"belongs to uid {st.st_uid}, not to you")
    if st.st_mode & 0o022:
        raise _refuse(path, f"is writable by {_who(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):o})")


def ancestors(path: str, missing_ok: bool = False) -> None:
    """Every directory above ``path`` is root's or ours, writable by no one else, and not a link. With
    ``missing_ok``, the walk stops at the first one that does not exist yet (``up`` makes them)."""
    parts = os.path.abspath(path).strip("/").split("/")[:-1]
    for here in ["/", *("/" + "/".join(parts[:i + 1]) for i in range(len(parts)))]:
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            if missing_ok:
                return
            raise BadInput(f"{here}: no such directory") from None
        except OSError as e:
            raise BadInput(f"{here}: {(e.strerror or str(e)).lower()}") from None
        _ancestor_ok(here, st)


def own_dir(path: str) -> os.stat_result:
    """``path`` is a directory of ours that only we can write, on a path only we and root can change; its
    stat (device and inode say later whether it is still the same directory)."""
    ancestors(path)
    try:
        st = os.lstat(path)
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    _final_ok(path, st, "dir", (os.geteuid(),))
    return st


def read_own_file(path: str, limit: int = 16 << 20) -> bytes:
    """The bytes of a file of ours (a node configuration in the sandbox) that no one else can have written:
    ancestors checked by path, the file itself by the descriptor actually read, never through a link."""
    ancestors(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        _final_ok(path, os.fstat(fd), "file", (os.geteuid(),))
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Pinned:
    """A binary checked once (``pin``) and again before every start (``verify``)."""

    path: str
    sha256: str

    def verify(self) -> str:
        """The path, still trusted and still the same bytes; Untrusted otherwise."""
        got = _checked_digest(self.path)
        if got != self.sha256:
            raise _refuse(self.path, f"changed since the sandbox started (sha256 {got[:12]}…, pinned "
                                     f"{self.sha256[:12]}…)")
        return self.path


def pin(binary: str, what: str = "") -> Pinned:
    """``binary`` resolved to its real path (so no link is followed later), trusted, and its sha256. ``what``
    names where it came from in a refusal (``--apiserver``)."""
    real = os.path.realpath(binary)
    if not os.path.exists(real):
        raise BadInput(f"{what + ' ' if what else ''}{binary}: no such file")
    return Pinned(real, _checked_digest(real))


def _checked_digest(path: str) -> str:
    ancestors(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    try:
        _final_ok(path, os.fstat(fd), "file", (0, os.geteuid()))
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)
