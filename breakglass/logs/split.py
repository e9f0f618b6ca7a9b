"""Where one log file may be cut into parts that are scanned apart and give the same records as one scan.

A cut is safe at the start of a line that nothing would join to the line above it: not the rest of a CRI
partial line, not a line of a klog multi-line value, not the continuation of a wrapped paste (the scanner's
test) and not a line ``formats.continues`` would join to a neighbouring candidate (the engine's test). Records
then never cross a cut, so each part can be scanned, parsed and classified on its own core.
"""

from __future__ import annotations

import os
import stat
from typing import Iterator


SEARCH = 1 << 20  # how far past the ideal offset to look for a safe cut before giving up on that part


def _safe_at(buf: bytes, nl: int) -> bool:
    """Is the line after buf[nl] (a newline) safe to start a part with? ``buf`` holds the lines around it."""
    from breakglass.logs import formats  # noqa: PLC0415 - not at import: the leak scan uses this module too
    from breakglass.logs.scanner import _is_wrapped_pair  # noqa: PLC0415

    cur_end = buf.find(b"\n", nl + 1)
    if cur_end < 0:
        return False
    ps = buf.rfind(b"\n", 0, nl) + 1
    if ps == 0:
        return False  # the line above may begin before this window: look further on
    cur = buf[nl + 1:cur_end]
    if _is_wrapped_pair(buf, ps, nl, cur[:512]):
        return False
    before_start = buf.rfind(b"\n", 0, ps - 1) + 1 if ps > 1 else 0
    before = buf[before_start:ps - 1] if ps > 1 else None

    def text(b: bytes) -> str:
        return b.decode("utf-8", "replace")

    return not formats.continues(text(buf[ps:nl]), text(cur), text(before) if before is not None else None)


def _ideal(size: int, parts: int, k: int, first: float) -> int:
    """Where cut ``k`` would ideally be when the first part is ``first`` times as long as each other part."""
    return int(size * (first + k - 1) / (first + parts - 1))


def cuts(fd: int, size: int, parts: int, first: float = 1.0) -> list[int]:
    """Offsets 0 < c1 < c2 < ... < size where the file open as ``fd`` can be cut into parts of about equal size
    (the first ``first`` times as long as the others); fewer when no safe cut lies within ``SEARCH`` bytes after
    an ideal one (a log of very long lines)."""
    out: list[int] = []
    back = 64 << 10  # read a little before the ideal offset, for the lines above a cut
    for k in range(1, parts):
        ideal = _ideal(size, parts, k, first)
        base = max(0, ideal - back)
        window = os.pread(fd, ideal - base + SEARCH, base)
        nl = window.find(b"\n", ideal - base)
        while 0 <= nl < len(window) - 1:
            if _safe_at(window, nl):
                cut = base + nl + 1
                if 0 < cut < size and (not out or cut > out[-1]):
                    out.append(cut)
                break
            nl = window.find(b"\n", nl + 1)
    return out


def line_cuts(fd: int, size: int, parts: int, first: float = 1.0) -> list[int]:
    """Like ``cuts`` for a log whose every line stands alone (JSON lines: audit events): any line start."""
    out: list[int] = []
    for k in range(1, parts):
        ideal = _ideal(size, parts, k, first)
        nl = os.pread(fd, SEARCH, ideal).find(b"\n")
        if nl >= 0 and ideal + nl + 1 < size and (not out or ideal + nl + 1 > out[-1]):
            out.append(ideal + nl + 1)
    return out


def open_regular(path: str) -> tuple[int, int] | None:
    """(fd, size) of a regular file, read by every part through this one descriptor (a forked worker shares
    it), so a log rotated (renamed, a new file put in its place) during the scan is still read whole, never
    mixed with its successor. None for anything else (a FIFO, /proc, a device): one pass reads those."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st.st_size


def read_range(fd: int, start: int, end: int, chunk: int) -> Iterator[bytes]:
    """Chunks of the file open as ``fd`` from ``start`` to ``end`` (one part), read with pread."""
    pos = start
    while pos < end:
        data = os.pread(fd, min(chunk, end - pos), pos)
        if not data:
            break  # the file shrank under us: scan what there is
        pos += len(data)
        yield data


class RangeReader:
    """Bytes ``start`` to ``end`` of the file open as ``fd``, read into the caller's buffer (``scanner.Reader``)
    with preadv. ``on_read(n)`` is called after each read (progress, draining the workers' pipes)."""

    def __init__(self, fd: int, start: int, end: int, chunk: int, on_read=None) -> None:
        self.fd, self.pos, self.end, self.chunk = fd, start, end, chunk
        self._on_read = on_read

    def readinto(self, view: memoryview) -> int:
        want = min(len(view), self.end - self.pos)
        got = 0
        while got < want:  # preadv may return less than asked (a signal): only 0 is the end
            n = os.preadv(self.fd, [view[got:want]], self.pos + got)
            if n == 0:
                break  # the file shrank under us: scan what there is
            got += n
        self.pos += got
        if self._on_read is not None and got:
            self._on_read(got)
        return got
