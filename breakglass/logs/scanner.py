"""Find the few interesting lines in a huge log, fast and in constant memory.

An apiserver log is almost all noise. Rather than parse every line, the scanner looks
for *anchor* literals (words every signature needs, such as ``ebhook``) over whole
chunks at once, then cuts out only the lines around each hit. With Hyperscan installed
(it is, on Linux x86_64 and aarch64) all anchors are found in one SIMD pass, faster than
``grep``; without it, ``bytes.find`` runs once per anchor. Both give the same records.

Around each hit the record is widened to whole logical lines: CRI partial lines
(``P``) are joined with what follows, so are the lines of a klog multi-line value
(``err=<``, tab-indented lines, `` >``), and lines pasted into tickets that were wrapped
are joined back (a long line followed by one that does not start a record).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence

from breakglass.logs.finder import Finder  # noqa: F401 - part of this module's interface
from breakglass.logs.formats import WRAP_MIN
from breakglass.logs.newlines import count as _newlines

CONTEXT_LINES = 8  # how far a record may reach across wrapped or partial lines
MAX_RECORD = 64 << 10  # bytes kept around a hit on absurdly long lines
FORCE_CUT = 4 << 20  # a "line" longer than this is cut so memory stays bounded

_RECORD_START = re.compile(
    rb"[\s>|]*(?:[IWEF]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\{|"
    rb"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|[\w.\-\[\]:]+: (?:\d{4}-\d\d-\d\dT|[IWEF]\d{4} )|\[pod/|"
    rb"Error from server|Error creating|[Ee]rror: |Warning: |MESSAGE=|__)")
_CRI_PARTIAL = re.compile(rb"(?:\S+: )?\d{4}-\d\d-\d\dT\S+ (?:stdout|stderr) P(?: |$)")
# klog's text format writes a value that holds newlines as `key=<`, then each of its lines after a tab (an empty
# one as a lone tab), then ` >` and the rest of the record's key=value pairs.
_KLOG_VALUE_LINE = re.compile(rb"\t| >")


@dataclass(slots=True)
class RawRecord:
    line: int
    end_line: int
    text: bytes


class Reader(Protocol):
    """A source that reads into a buffer it is given (``logs.split.RangeReader``): the scanner's buffer,
    so no chunk is allocated or copied (a fresh 4 MiB ``bytes`` per chunk costs page faults and a copy)."""

    chunk: int

    def readinto(self, view: memoryview) -> int: ...


def _filler(chunks: Iterable[bytes] | Reader) -> Callable[[bytearray, int], int]:
    """``fill(buf, live)``: put the next bytes at buf[live:], buf ending where they end; 0 at the end."""
    if hasattr(chunks, "readinto"):
        reader = chunks

        def fill_from_reader(buf: bytearray, live: int) -> int:
            want = reader.chunk
            if len(buf) < live + want:
                buf.extend(bytes(live + want - len(buf)))  # grows only when more lines were kept than before
            with memoryview(buf) as whole, whole[live:live + want] as view:  # released before any resize
                n = reader.readinto(view)
            del buf[live + n:]  # a short read is the last one (or a file that shrank): nothing past it
            return n

        return fill_from_reader
    it = iter(chunks)

    def fill_from_chunks(buf: bytearray, live: int) -> int:
        nxt = next(it, None)
        if nxt is None:
            del buf[live:]
            return 0
        buf[live:] = nxt  # in place: the same size as the last chunk, so no new allocation
        return len(nxt) or 1  # an empty chunk is not the end

    return fill_from_chunks


def _line_bounds(buf: bytes, pos: int, limit: int) -> tuple[int, int]:
    s = buf.rfind(b"\n", 0, pos) + 1
    e = buf.find(b"\n", pos, limit)
    return s, (limit if e == -1 else e)


def _is_wrapped_pair(buf: bytes, ps: int, pe: int, cur: bytes) -> bool:
    """Does ``cur`` continue the line buf[ps:pe] (CRI partial, or a wrapped paste)?"""
    head = buf[ps:min(pe, ps + 512)]
    if _CRI_PARTIAL.match(head):
        return True
    if _KLOG_VALUE_LINE.match(cur) and (head[:1] == b"\t" or buf[max(ps, pe - 3):pe].rstrip(b"\r").endswith(b"=<")):
        return True  # inside a klog multi-line value, blank lines included
    if not cur.strip() or not head.strip():
        return False
    return pe - ps - (1 if buf[pe - 1:pe] == b"\r" else 0) >= WRAP_MIN and not _RECORD_START.match(cur)


class Scanner:
    def __init__(self, anchors: Sequence[bytes], engine: str = "auto") -> None:
        self._finder = Finder(anchors, engine)
        self.lines = 0  # lines in the last stream scanned, known once it is exhausted

    @property
    def engine(self) -> str:
        return self._finder.engine

    def records(self, chunks: Iterable[bytes] | Reader) -> Iterator[RawRecord]:
        """Yield candidate records from a stream of byte chunks (or a ``Reader``, read straight into the
        buffer), in order.

        The lines kept from one chunk and the next chunk are put together in one buffer, reused without
        resizing: a new ``bytes`` for each (``carry + chunk``), or a bytearray that is resized, gets fresh
        memory each time, and its page faults cost as much as Hyperscan's pass (profiled over 256 MiB)."""
        self.lines = 0
        buf = bytearray()  # the lines kept from the last chunk, then the next chunk
        live = 0  # buf[live:] is stale: what the next chunk overwrites
        scan_from = 0  # hits before this offset of ``buf`` were already handled
        base_line = 1  # line number of buf[0]
        done_until = 0  # a record already emitted reaches up to here
        self._last_end = 0
        fill = _filler(chunks)
        eof = False
        while not eof:
            eof = not fill(buf, live)
            if not buf:
                self.lines = base_line - 1
                break
            cut = len(buf) if eof else self._safe_cut(buf)
            if cut is None:  # not enough complete lines yet; read more
                live = len(buf)
                continue
            yield from self._emit(buf, scan_from, cut, base_line, done_until)
            if eof:
                self.lines = base_line - 1 + _newlines(buf) + (0 if buf.endswith(b"\n") else 1)
                break
            keep = self._keep_from(buf, cut)
            done_until = max(0, self._last_end - keep)
            # _emit already counted newlines up to its last record; count only the rest (one pass overall)
            counted_pos, counted_line = self._counted
            if counted_pos <= keep:
                base_line = counted_line + _newlines(buf, counted_pos, keep)
            else:
                base_line += _newlines(buf, 0, keep)
            live = len(buf) - keep
            buf[:live] = buf[keep:]  # the kept lines to the front, without resizing (del would reallocate)
            scan_from = cut - keep

    @staticmethod
    def _safe_cut(buf: bytes) -> int | None:
        """An offset such that every hit before it has its whole context inside ``buf``."""
        pos = len(buf)
        for _ in range(CONTEXT_LINES + 1):
            p = buf.rfind(b"\n", 0, pos)
            if p < 0:
                return len(buf) - MAX_RECORD if len(buf) > FORCE_CUT else None
            pos = p
        return pos + 1

    @staticmethod
    def _keep_from(buf: bytes, cut: int) -> int:
        """Where the next buffer starts: enough lines before ``cut`` to widen backwards,
        but never more than FORCE_CUT bytes, so one endless line cannot grow memory."""
        floor = max(0, cut - FORCE_CUT)
        pos = cut
        for _ in range(CONTEXT_LINES):
            if pos <= floor:
                return floor
            p = buf.rfind(b"\n", floor, pos - 1)
            if p < 0:
                return floor
            pos = p + 1
        return pos

    def _emit(self, buf: bytes, start: int, end: int, base_line: int, done_until: int) -> Iterator[RawRecord]:
        self._last_end = done_until
        self._counted = (0, base_line)
        hits = self._finder.find(buf, start, end)
        if not hits:
            return
        limit = len(buf)
        last_end = done_until
        count_pos, count_line = 0, base_line
        for h in hits:
            if h < last_end:
                continue
            s, e = _line_bounds(buf, h, limit)
            # widen backwards over wrapped or partial lines
            for _ in range(CONTEXT_LINES):
                if s == 0:
                    break
                ps = buf.rfind(b"\n", 0, s - 1) + 1
                if ps < last_end or not _is_wrapped_pair(buf, ps, s - 1, buf[s:min(e, s + 512)]):
                    break
                s = ps
            # and forwards
            last_start = buf.rfind(b"\n", s, e) + 1 or s
            for _ in range(CONTEXT_LINES):
                if e >= limit:
                    break
                ns, ne = _line_bounds(buf, e + 1, limit)
                if not _is_wrapped_pair(buf, last_start, e, buf[ns:min(ne, ns + 512)]):
                    break
                last_start, e = ns, ne
            if e - s > MAX_RECORD:  # keep the neighbourhood of the hit on a huge line
                s2 = max(s, h - MAX_RECORD // 2)
                e = min(e, s2 + MAX_RECORD)
                first_line_start = s
                s = s2
            else:
                first_line_start = s
            count_line += _newlines(buf, count_pos, first_line_start)
            count_pos = first_line_start
            self._counted = (count_pos, count_line)
            end_line = count_line + _newlines(buf, first_line_start, e)
            last_end = self._last_end = e
            yield RawRecord(count_line, end_line, bytes(buf[s:e]))
