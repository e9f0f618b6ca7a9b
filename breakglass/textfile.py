"""Text files the engineer hands us (plans, manifests, machine configs): read them or say in one
line why not, so a wrong path or a binary file is bad input, never a traceback. And the one way
breakglass writes a private file of its own."""

from __future__ import annotations

import os

from breakglass.errors import BadInput


def decode(data: bytes, path: str, what: str) -> str:
    if b"\x00" in data[:8192]:
        raise BadInput(f"{path}: binary data, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start}), not {what}") from None


# Plans, manifests and machine configs are kilobytes; this only stops a wrong path (a disk image,
# /dev/zero) from being read into memory whole.
LIMIT = 64 << 20


def read(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(LIMIT + 1)
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    if len(data) > LIMIT:
        raise BadInput(f"{path}: larger than {LIMIT >> 20} MiB, not {what}")
    return decode(data, path, what)


def write_atomic(path: str, data: bytes, like: os.stat_result | None = None, mode: int = 0o600) -> None:
    """The one way breakglass writes a file. A temp file with a random name is created beside ``path`` with
    O_EXCL|O_NOFOLLOW and mode 0600 (a link or file planted there makes this fail, it is never followed or
    reused), written, fsynced, given ``like``'s mode and owner (the file it replaces) or ``mode``, renamed over
    ``path`` (which replaces a link there rather than writing through it), and the directory is fsynced. On any
    failure the temp file is removed, so no copy of a secret is left behind."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        if like is not None:
            if os.geteuid() == 0:
                os.fchown(fd, like.st_uid, like.st_gid)
            os.fchmod(fd, like.st_mode & 0o7777)
        elif mode != 0o600:
            os.fchmod(fd, mode)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_private(path: str, data: bytes) -> None:
    """A file of breakglass' own (state, keys, reports): mode 0600, atomically, never through a link."""
    write_atomic(path, data)
