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


class LineTap:
    """``lines_with`` one chunk at a time, for a stream that something else reads too."""

    def __init__(self, finder) -> None:
        self._finder = finder
        self._rest = b""

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        find = self._finder.find
        first = chunk.find(b"\n")
        if first < 0:
            self._rest = self._rest + chunk if len(self._rest) + len(chunk) <= MAX_LINE else b""
            return
        if self._rest:  # the line that straddles two chunks: the only bytes ever copied
            head = self._rest + chunk[:first]
            yield from _cut(head, find(head, 0, len(head)), len(head))
        else:
            yield from _cut(chunk, find(chunk, 0, first), first)
        end = chunk.rfind(b"\n")
        if end > first:
            yield from _cut(chunk, find(chunk, first + 1, end), end)
        self._rest = chunk[end + 1:]

    def close(self) -> Iterator[bytes]:
        rest, self._rest = self._rest, b""
        if rest:
            yield from _cut(rest, self._finder.find(rest, 0, len(rest)), len(rest))


def _cut(data: bytes, hits: list[int], end: int) -> Iterator[bytes]:
    last = -1
    for h in hits:
        if h <= last:
            continue  # another literal on a line already cut
        s = data.rfind(b"\n", 0, h) + 1
        e = data.find(b"\n", h, end)
        last = end if e < 0 else e
        yield data[s:last]
