"""Whole lines that hold any of a few literals, from a stream of chunks, in constant memory.

The rest of the log is only searched (one SIMD pass with Hyperscan, see ``scanner.Finder``),
never split into lines or copied: for logs where one line is one record (audit events), this
is all the reading there is.

A line longer than ``MAX_LINE`` (``record.MAX_LINE``, 4 MiB) is not yielded: no audit event is that long, and
JSON cut short cannot be read. At most its first MAX_LINE bytes are held; the rest is only searched for its end
and for the literals. Each such line that holds a literal is kept in ``LineTap.cuts`` (where it starts, its
length, whether it holds ``watch``), for the report to say what was skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from breakglass.logs.record import MAX_LINE

MAX_CUTS_KEPT = 100  # cut lines remembered; past that only counted


@dataclass(slots=True)
class CutLine:
    """A line over MAX_LINE that held a literal: skipped unread."""

    at: int  # offset of its first byte in the stream (``base`` included)
    length: int  # bytes, without its newline
    watched: bool  # holds the tap's ``watch`` literal


def lines_with(chunks: Iterable[bytes], finder, tap: LineTap | None = None) -> Iterator[bytes]:
    """Lines holding any of the finder's literals, across chunk boundaries, without the newline. ``tap``: a
    LineTap of the same finder to read with, whose ``cuts`` the caller reads afterwards."""
    tap = tap or LineTap(finder)
    for chunk in chunks:
        yield from tap.feed(chunk)
    yield from tap.close()


def placed_lines_with(chunks: Iterable[bytes], finder, base: int = 0, tap: LineTap | None = None
                      ) -> Iterator[tuple[int, bytes]]:
    """``lines_with``, each line with the offset it starts at (``base`` being the first chunk's): a reader on
    another core can then name a line by where it is instead of sending its bytes."""
    tap = tap or LineTap(finder, base)
    for chunk in chunks:
        yield from tap.feed(chunk, placed=True)
    yield from tap.close(placed=True)


class LineTap:
    """``lines_with`` one chunk at a time, for a stream that something else reads too."""

    def __init__(self, finder, base: int = 0, watch: bytes = b"") -> None:
        self._finder = finder
        self._rest = bytearray()  # the start of the line that goes on in the next chunk, at most MAX_LINE bytes
        self._pos = base  # where the next chunk starts in the stream
        self._watch = watch
        self._skip: CutLine | None = None  # a line over MAX_LINE whose end is still ahead
        self._skip_hit = False
        self._tail = b""  # the last bytes skipped, for a literal cut in two by a chunk boundary
        self.cuts: list[CutLine] = []
        self.cut_count = 0

    def feed(self, chunk: bytes, placed: bool = False) -> Iterator:
        limit = MAX_LINE  # the module's, read now: a test lowers it
        find = self._finder.find
        at = self._pos
        self._pos += len(chunk)
        first = chunk.find(b"\n")
        if self._skip is not None:  # the rest of a line over MAX_LINE: only its end and literals are looked for
            self._skipped(chunk, len(chunk) if first < 0 else first)
            if first < 0:
                return
            self._end_skip()
        elif first < 0:
            if len(self._rest) + len(chunk) <= limit:
                self._rest += chunk
            else:
                self._start_skip(at - len(self._rest), chunk, len(chunk), limit)
            return
        elif self._rest:  # the line that straddles two chunks: the only bytes ever copied
            if len(self._rest) + first <= limit:
                self._rest += memoryview(chunk)[:first]
                head = bytes(self._rest)
                yield from self._cut(head, find(head, 0, len(head)), len(head), at - len(self._rest) + first,
                                     placed, limit)
            else:
                self._start_skip(at - len(self._rest), chunk, first, limit)
                self._end_skip()
        else:
            yield from self._cut(chunk, find(chunk, 0, first), first, at, placed, limit)
        self._rest.clear()
        end = chunk.rfind(b"\n")
        if end > first:
            yield from self._cut(chunk, find(chunk, first + 1, end), end, at, placed, limit)
        if len(chunk) - end - 1 <= limit:
            self._rest += memoryview(chunk)[end + 1:]
        else:  # a chunk longer than MAX_LINE ends in a line longer than that
            self._start_skip(at + end + 1, chunk[end + 1:], len(chunk) - end - 1, limit)

    def close(self, placed: bool = False) -> Iterator:
        if self._skip is not None:
            self._end_skip()
        rest = bytes(self._rest)
        self._rest.clear()
        if rest:
            yield from self._cut(rest, self._finder.find(rest, 0, len(rest)), len(rest), self._pos - len(rest), placed,
                                 len(rest))

    def _start_skip(self, at: int, chunk: bytes, end: int, limit: int) -> None:
        """The line held in ``_rest``, going on in chunk[:end], is over ``limit``: drop it, keep looking."""
        rest = self._rest
        self._skip = CutLine(at, len(rest), self._watch != b"" and self._watch in rest)
        self._skip_hit = bool(rest) and self._finder.holds(rest, 0, len(rest))
        self._tail = bytes(rest[-64:])
        rest.clear()
        self._skipped(chunk, end)

    def _skipped(self, chunk: bytes, end: int) -> None:
        """chunk[:end] belongs to the line being skipped."""
        cut = self._skip
        cut.length += end
        # a literal may begin in the last bytes skipped: they are searched again with the first ones of this chunk
        seam = self._tail + chunk[:min(end, 64)]
        if not self._skip_hit:
            self._skip_hit = self._finder.holds(seam, 0, len(seam)) or self._finder.holds(chunk, 0, end)
        if self._watch and not cut.watched:
            cut.watched = self._watch in seam or chunk.find(self._watch, 0, end) >= 0
        self._tail = chunk[max(0, end - 64):end]

    def _end_skip(self) -> None:
        cut, self._skip, self._tail = self._skip, None, b""
        if self._skip_hit:
            self._record(cut)

    def _record(self, cut: CutLine) -> None:
        self.cut_count += 1
        if len(self.cuts) < MAX_CUTS_KEPT:
            self.cuts.append(cut)

    def _cut(self, data: bytes, hits: list[int], end: int, at: int = 0, placed: bool = False,
             limit: int | None = None) -> Iterator:
        last = -1
        for h in hits:
            if h <= last:
                continue  # another literal on a line already cut
            s = data.rfind(b"\n", 0, h) + 1
            e = data.find(b"\n", h, end)
            last = end if e < 0 else e
            if limit is not None and last - s > limit:  # a line over MAX_LINE inside one chunk: not read either
                self._record(CutLine(at + s, last - s, self._watch != b"" and data.find(self._watch, s, last) >= 0))
                continue
            yield (at + s, data[s:last]) if placed else data[s:last]
