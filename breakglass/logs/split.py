"""Where one log file may be cut into parts that are scanned apart and give the same records as one scan.

A cut is safe at the start of a line that nothing would join to the line above it: not the rest of a CRI
partial line, not a line of a klog multi-line value, not the continuation of a wrapped paste (the scanner's
test) and not a line ``formats.continues`` would join to a neighbouring candidate (the engine's test). Records
then never cross a cut, so each part can be scanned, parsed and classified on its own core.
"""

from __future__ import annotations

import os
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


def cuts(path: str, size: int, parts: int) -> list[int]:
    """Offsets 0 < c1 < c2 < ... < size where ``path`` can be cut into about equal parts; fewer when no safe
    cut lies within ``SEARCH`` bytes after an ideal one (a log of very long lines)."""
    out: list[int] = []
    back = 64 << 10  # read a little before the ideal offset, for the lines above a cut
    with open(path, "rb") as f:
        for k in range(1, parts):
            ideal = size * k // parts
            base = max(0, ideal - back)
            f.seek(base)
            window = f.read(ideal - base + SEARCH)
            nl = window.find(b"\n", ideal - base)
            while 0 <= nl < len(window) - 1:
                if _safe_at(window, nl):
                    cut = base + nl + 1
                    if 0 < cut < size and (not out or cut > out[-1]):
                        out.append(cut)
                    break
                nl = window.find(b"\n", nl + 1)
    return out


def read_range(path: str, start: int, end: int, chunk: int) -> Iterator[bytes]:
    """Chunks of ``path`` from ``start`` to ``end`` (a part of the file), read with pread."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        pos = start
        while pos < end:
            data = os.pread(fd, min(chunk, end - pos), pos)
            if not data:
                break  # the file shrank under us: scan what there is
            pos += len(data)
            yield data
    finally:
        os.close(fd)


def line_cuts(path: str, size: int, parts: int) -> list[int]:
    """Like ``cuts`` for a log whose every line stands alone (JSON lines: audit events): any line start."""
    out: list[int] = []
    with open(path, "rb") as f:
        for k in range(1, parts):
            ideal = size * k // parts
            f.seek(ideal)
            window = f.read(SEARCH)
            nl = window.find(b"\n")
            if nl >= 0 and ideal + nl + 1 < size and (not out or ideal + nl + 1 > out[-1]):
                out.append(ideal + nl + 1)
    return out


class RangeReader:
    """Bytes ``start`` to ``end`` of a file, read into the caller's buffer (``scanner.Reader``) with preadv.
    ``on_read(n)`` is called after each read (progress, draining the workers' pipes)."""

    def __init__(self, path: str, start: int, end: int, chunk: int, on_read=None) -> None:
        self.path, self.pos, self.end, self.chunk = path, start, end, chunk
        self._on_read = on_read

    def readinto(self, view: memoryview) -> int:
        want = min(len(view), self.end - self.pos)
        if want <= 0:
            return 0
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            got = 0
            while got < want:  # preadv may return less than asked (a signal): a short read means the end only at 0
                n = os.preadv(fd, [view[got:want]], self.pos + got)
                if n == 0:
                    break  # the file shrank under us: scan what there is
                got += n
        finally:
            os.close(fd)
        self.pos += got
        if self._on_read is not None:
            self._on_read(got)
        return got
