"""Whole lines that hold any of a few literals, from a stream of chunks, in constant memory.

The rest of the log is only searched (one SIMD pass with Hyperscan, see ``scanner.Finder``),
never split into lines or copied: for logs where one line is one record (audit events), this
is all the reading there is.
"""

from __future__ import annotations

from typing import Iterable, Iterator

MAX_LINE = 64 << 20  # an audit event is kilobytes; a longer "line" is dropped so memory stays bounded


def lines_with(chunks: Iterable[bytes], finder) -> Iterator[bytes]:
    """Lines holding any of the finder's literals, across chunk boundaries, without the newline."""
    tap = LineTap(finder)
    for chunk in chunks:
        yield from tap.feed(chunk)
    yield from tap.close()


def placed_lines_with(chunks: Iterable[bytes], finder, base: int = 0) -> Iterator[tuple[int, bytes]]:
    """``lines_with``, each line with the offset it starts at (``base`` being the first chunk's): a reader on
    another core can then name a line by where it is instead of sending its bytes."""
    tap = LineTap(finder, base)
    for chunk in chunks:
        yield from tap.feed(chunk, placed=True)
    yield from tap.close(placed=True)


class LineTap:
    """``lines_with`` one chunk at a time, for a stream that something else reads too."""

    def __init__(self, finder, base: int = 0) -> None:
        self._finder = finder
        self._rest = b""
        self._pos = base  # where the next chunk starts in the stream

    def feed(self, chunk: bytes, placed: bool = False) -> Iterator:
        find = self._finder.find
        at = self._pos
        self._pos += len(chunk)
        first = chunk.find(b"\n")
        if first < 0:
            self._rest = self._rest + chunk if len(self._rest) + len(chunk) <= MAX_LINE else b""
            return
        if self._rest:  # the line that straddles two chunks: the only bytes ever copied
            head = self._rest + chunk[:first]
            yield from _cut(head, find(head, 0, len(head)), len(head), at - len(self._rest), placed)
        else:
            yield from _cut(chunk, find(chunk, 0, first), first, at, placed)
        end = chunk.rfind(b"\n")
        if end > first:
            yield from _cut(chunk, find(chunk, first + 1, end), end, at, placed)
        self._rest = chunk[end + 1:]

    def close(self, placed: bool = False) -> Iterator:
        rest, self._rest = self._rest, b""
        if rest:
            yield from _cut(rest, self._finder.find(rest, 0, len(rest)), len(rest), self._pos - len(rest), placed)


def _cut(data: bytes, hits: list[int], end: int, at: int = 0, placed: bool = False) -> Iterator:
    last = -1
    for h in hits:
        if h <= last:
            continue  # another literal on a line already cut
        s = data.rfind(b"\n", 0, h) + 1
        e = data.find(b"\n", h, end)
        last = end if e < 0 else e
        yield (at + s, data[s:last]) if placed else data[s:last]
