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

A line longer than ``FORCE_CUT`` (4 MiB, a hostile or broken writer: no apiserver record is that long) is cut
there: its first 4 MiB are searched like any line, the rest only for the newline that ends it, so memory holds
at most 4 MiB of it and its cost is that of ``memchr``. Each cut is kept in ``Scanner.cuts`` (its line number
and length), for the report to say what was not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence

from breakglass.logs.finder import Finder  # noqa: F401 - part of this module's interface
from breakglass.logs.formats import WRAP_MIN, continues
from breakglass.logs.newlines import count as _newlines
from breakglass.logs.record import MAX_LINE

CONTEXT_LINES = 8  # how far a record may reach across wrapped or partial lines
MAX_RECORD = 64 << 10  # bytes kept around a hit on absurdly long lines
FORCE_CUT = MAX_LINE  # a "line" longer than this is cut so memory stays bounded: the rest of it is not read
MAX_CUTS_KEPT = 100  # cut lines remembered by number; past that only counted
# More hits than this in one search (a line that repeats an anchor) and the region is searched again in SLICEs,
# each starting past the last record: Hyperscan's callback, once per hit, cost more than the rest of such a scan.
DENSE = 8192
SLICE = 8 << 10

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
    cut: bool = False  # on a line cut at FORCE_CUT: what followed the cut was not read


@dataclass(slots=True)
class Cut:
    """A line longer than FORCE_CUT: only its first FORCE_CUT bytes were read."""

    line: int
    length: int  # bytes of the whole line, without its newline


class Reader(Protocol):
    """A source that reads into a buffer it is given (``logs.split.RangeReader``): the scanner's buffer,
    so no chunk is allocated or copied (a fresh 4 MiB ``bytes`` per chunk costs page faults and a copy)."""

    chunk: int

    def readinto(self, view: memoryview) -> int: ...


def _filler(chunks: Iterable[bytes] | Reader) -> Callable[[bytearray, int], int]:
    """``fill(buf, live)``: put the next bytes, at most FORCE_CUT of them, at buf[live:], buf ending where they
    end; 0 at the end."""
    if hasattr(chunks, "readinto"):
        reader = chunks

        def fill_from_reader(buf: bytearray, live: int) -> int:
            want = min(reader.chunk, FORCE_CUT)
            if len(buf) < live + want:
                buf.extend(bytes(live + want - len(buf)))  # grows only when more lines were kept than before
            with memoryview(buf) as whole, whole[live:live + want] as view:  # released before any resize
                n = reader.readinto(view)
            del buf[live + n:]  # a short read is the last one (or a file that shrank): nothing past it
            return n

        return fill_from_reader
    it = iter(chunks)
    rest = memoryview(b"")  # what is left of a chunk longer than FORCE_CUT

    def fill_from_chunks(buf: bytearray, live: int) -> int:
        nonlocal rest
        if not rest:
            nxt = next(it, None)
            if nxt is None:
                del buf[live:]
                return 0
            if len(nxt) <= FORCE_CUT:
                buf[live:] = nxt  # in place: the same size as the last chunk, so no new allocation
                return len(nxt) or 1  # an empty chunk is not the end
            rest = memoryview(nxt)
        piece, rest = rest[:FORCE_CUT], rest[FORCE_CUT:]
        buf[live:] = piece
        return len(piece)

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
    if not cur.strip() or not head.strip() or _RECORD_START.match(cur):
        return False
    if pe - ps - (1 if buf[pe - 1:pe] == b"\r" else 0) >= WRAP_MIN:
        return True
    # A short line can end where a paste was cut too (`…Error creati` / `ng: Internal error occurred: ` / `failed
    # calling webhook …`, a terminal's wrap of a ticket's wrap): the same evidence the engine joins candidates on
    # (formats.continues). A log's own lines each start a record, so this is reached only in pastes.
    return continues(buf[ps:pe].decode("utf-8", "replace"), cur.decode("utf-8", "replace"))


class Scanner:
    def __init__(self, anchors: Sequence[bytes], engine: str = "auto") -> None:
        self._finder = Finder(anchors, engine)
        self._overlap = max((len(a) for a in anchors), default=1) - 1  # an anchor's bytes before its last one
        self._skip_to = 0
        self.lines = 0  # lines in the last stream scanned, known once it is exhausted
        self.cuts: list[Cut] = []  # the first MAX_CUTS_KEPT lines of the last stream cut at FORCE_CUT
        self.cut_count = 0  # all of them

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
        self.cuts, self.cut_count = [], 0
        buf = bytearray()  # the lines kept from the last chunk, then the next chunk
        live = 0  # buf[live:] is stale: what the next chunk overwrites
        scan_from = 0  # hits before this offset of ``buf`` were already handled
        base_line = 1  # line number of buf[0]
        done_until = 0  # a record already emitted reaches up to here
        open_line = 0  # where the last line of ``buf``, not ended yet, starts (it is always wholly in ``buf``)
        skipping: Cut | None = None  # a line cut at FORCE_CUT whose newline is still ahead
        self._last_end = 0
        fill = _filler(chunks)
        eof = False
        read = True  # False right after a cut: what is left of the read is looked at first
        while True:
            if read and not eof:
                eof = not fill(buf, live)
            read = True
            if skipping is not None:  # the rest of a cut line: only its end is looked for, nothing is kept
                nl = buf.find(b"\n")
                if nl < 0:
                    skipping.length += len(buf)
                    live = 0
                    if eof:
                        self._cut(skipping)
                        self.lines = skipping.line
                        return
                    continue
                skipping.length += nl
                self._cut(skipping)
                base_line, skipping = skipping.line + 1, None
                del buf[:nl + 1]  # nothing before the next line is kept: no record joins a cut line
                scan_from = done_until = open_line = 0
                live = 0  # look for the newest line's start in all that is left
            if not buf:
                if not eof:  # a cut line ended exactly where the last read did
                    continue
                self.lines = base_line - 1
                return
            # Each read is at most FORCE_CUT bytes (see _filler), so only the line that was open before it can be
            # longer than that: it ends at the first newline read, if any.
            first_nl = buf.find(b"\n", live)
            if (len(buf) if first_nl < 0 else first_nl) - open_line <= FORCE_CUT:
                if first_nl >= 0:
                    open_line = buf.rfind(b"\n", first_nl) + 1
            else:
                cut_at = open_line + FORCE_CUT
                yield from self._emit(buf, scan_from, cut_at, base_line, done_until, cut_at, open_line)
                counted_pos, counted_line = self._counted
                skipping = Cut(counted_line + _newlines(buf, counted_pos, open_line), FORCE_CUT)
                del buf[:cut_at]  # what follows the cut is searched for the line's end, next
                live, read = len(buf), False
                continue
            cut = len(buf) if eof else self._safe_cut(buf)
            if cut is None:  # not enough complete lines yet; read more
                live = len(buf)
                continue
            yield from self._emit(buf, scan_from, cut, base_line, done_until)
            if eof:
                self.lines = base_line - 1 + _newlines(buf) + (0 if buf.endswith(b"\n") else 1)
                return
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
            open_line -= keep

    def _cut(self, cut: Cut) -> None:
        self.cut_count += 1
        if len(self.cuts) < MAX_CUTS_KEPT:
            self.cuts.append(cut)

    @staticmethod
    def _safe_cut(buf: bytes) -> int | None:
        """An offset such that every hit before it has its whole context inside ``buf``: CONTEXT_LINES lines
        after it, or FORCE_CUT bytes (a record is never widened further), so a few long lines do not make the
        buffer hold CONTEXT_LINES times FORCE_CUT."""
        pos = end = len(buf)
        for _ in range(CONTEXT_LINES + 1):
            p = buf.rfind(b"\n", 0, pos)
            if p < 0:
                return None
            pos = p
            if end - pos > FORCE_CUT:
                break
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

    def _hits(self, buf: bytes, start: int, end: int) -> Iterator[int]:
        """The hits in buf[start:end] in order; where there are more than DENSE, those not inside the records
        already emitted (``_skip_to``, which ``_emit`` moves as it goes), found a SLICE at a time. A slice starts an
        anchor's length before the last one ended or the last record did, so a hit across either is found."""
        hits = self._finder.find(buf, start, end, DENSE)
        if hits is not None:
            yield from hits
            return
        pos = start
        while pos < end:
            stop = min(end, pos + SLICE)
            yield from self._finder.find(buf, pos, stop)
            if stop == end:
                return
            pos = max(stop, self._skip_to) - self._overlap

    def _emit(self, buf: bytes, start: int, end: int, base_line: int, done_until: int,
              limit: int | None = None, cut_from: int | None = None) -> Iterator[RawRecord]:
        """The records of hits in buf[start:end], each widened within buf[:limit] (all of it by default; up to
        the cut on a cut line, whose records, those reaching ``cut_from``, are marked cut)."""
        self._last_end = self._skip_to = done_until
        self._counted = (0, base_line)
        limit = len(buf) if limit is None else limit
        last_end = done_until
        count_pos, count_line = 0, base_line
        # The physical line of the last hit and the record it widened to: the next hits on that line (a line that
        # repeats an anchor) reuse them instead of searching back and forth over the line again for each.
        line_s = line_e = wide_e = -1
        for h in self._hits(buf, start, end):
            if h < last_end:
                continue
            if line_s <= h < line_e:  # same line as the last record: it cannot widen backwards past that one
                s, e, one_line = line_s, wide_e, True
            else:
                s, e = _line_bounds(buf, h, limit)
                line_s, line_e = s, e
                # widen backwards over wrapped or partial lines
                for _ in range(CONTEXT_LINES):
                    if s == 0 or s <= last_end:  # the line above is part of a record already emitted
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
                wide_e, one_line = e, s == line_s
            first_line_start = s
            if e - s > MAX_RECORD:  # keep the neighbourhood of the hit on a huge line
                # not before the last record's end: on a line that repeats an anchor, windows centred on each next
                # hit would overlap by half, and each is parsed and classified
                s = max(s, h - MAX_RECORD // 2, last_end)
                e = min(e, s + MAX_RECORD)
            count_line += _newlines(buf, count_pos, first_line_start)
            count_pos = first_line_start
            self._counted = (count_pos, count_line)
            # a record within one physical line holds no newline: not counted again over the line
            end_line = count_line if one_line and e <= line_e else count_line + _newlines(buf, first_line_start, e)
            last_end = self._last_end = self._skip_to = e
            yield RawRecord(count_line, end_line, bytes(buf[s:e]), cut_from is not None and e >= cut_from)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f}".rstrip("0").rstrip(".") + " MiB"


def cut_warning(name: str, cuts: list[Cut], count: int) -> str:
    """One line saying what a source's cut lines left unread, by line number: nothing after a line's first
    FORCE_CUT bytes was searched, so a signature there is in no finding."""
    where = ", ".join(f"{c.line} ({_mib(c.length)})" for c in cuts[:5])
    more = f" and {count - 5} more" if count > 5 else ""
    if count == 1:
        return (f"{name}: line {where} is longer than the {_mib(FORCE_CUT)} a record may hold: it was cut there "
                "and the rest of it was not read")
    return (f"{name}: {count} lines are longer than the {_mib(FORCE_CUT)} a record may hold, lines {where}{more}: "
            "each was cut there and the rest of it was not read")
