"""Diagnose one big local log on every usable core, with the same findings as one pass.

Measured on a 256 MiB apiserver log (bench/realscan.py), a single pass spends its time in three C loops
that hold the GIL or cannot be split further (Hyperscan's pass over 25 anchors, counting newlines for line
numbers, reading) and in per-candidate Python (parsing, classifying). Each part of the file, cut where no
record crosses (``logs.split``), is scanned, parsed and classified in its own process; the events then reach
the one correlator in file order, with line numbers moved by the lines of the parts before, so the findings,
their evidence and their order are those of a single pass.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from breakglass.logs import forked, sources, split

MIN_SIZE = 32 << 20  # below this a fork costs more than it saves (measured: a 1 MB log gains nothing)
MAX_PARTS = 8
BATCH = 256  # event lists per message from a child


@dataclass
class Plan:
    path: str
    ranges: list[tuple[int, int]]
    head: bytes


def plan(src: sources.LogSource, head_size: int) -> Plan | None:
    """How to split ``src``, or None to read it in one pass (not a local plain file, small, one core...)."""
    if src.path is None or MIN_SIZE <= 0:
        return None
    cpus = min(forked.usable_cpus(), MAX_PARTS)
    if cpus < 2 or not forked.can_fork():
        return None
    try:
        st = os.stat(src.path)
        if not stat.S_ISREG(st.st_mode) or st.st_size < MIN_SIZE:
            return None
        with open(src.path, "rb") as f:
            head = f.read(head_size)
    except OSError as e:
        raise sources.os_error(src.name, e) from None
    if sources.is_gzip(head):
        return None
    sources.check_text(head, src.name)  # the same refusal as one pass
    points = split.cuts(src.path, st.st_size, cpus)
    if not points:
        return None
    edges = [0, *points, st.st_size]
    return Plan(src.path, list(zip(edges, edges[1:])), head)


@dataclass
class PartResult:
    candidates: int
    lines: int
    bytes: int


def run(p: Plan, scan_part: Callable[[Iterable[bytes], Callable[[list], None]], tuple[int, int]],
        feed: Callable[[list], None], chunk: int, on_chunk: Callable[[int], None]) -> PartResult:
    """Scan every part; ``scan_part(chunks, emit)`` returns (candidates, lines) and calls ``emit`` with each
    record's events; ``feed`` gets them all in file order; ``on_chunk(n)`` is told of about n bytes read
    for each chunk of part 0 (the parts run at about one speed, so part 0's share stands for the whole).
    """

    def work(i: int, send) -> None:  # in child i
        start, end = p.ranges[i]
        batch: list[list] = []

        def emit(evs: list) -> None:
            batch.append(evs)
            if len(batch) >= BATCH:
                send(("events", batch[:]))
                batch.clear()

        cands, lines = scan_part(split.read_range(p.path, start, end, chunk), emit)
        if batch:
            send(("events", batch))
        send(("end", cands, lines))

    total = PartResult(0, 0, 0)
    with forked.Forked(len(p.ranges), work) as kids:
        def part0() -> Iterator[bytes]:
            whole, first = p.ranges[-1][1], p.ranges[0][1]
            for c in split.read_range(p.path, *p.ranges[0], chunk):
                on_chunk(len(c) * whole // first)
                kids.drain()  # keep the children writing while this process works
                yield c

        cands, lines = scan_part(part0(), feed)
        total = PartResult(cands, lines, p.ranges[0][1] - p.ranges[0][0])
        for i in range(1, len(p.ranges)):
            offset = total.lines
            fed = 0
            try:
                for msg in kids.stream(i):
                    if msg[0] == "events":
                        for evs in msg[1]:
                            _shift(evs, offset)
                            feed(evs)
                        fed += len(msg[1])
                    else:
                        total.candidates += msg[1]
                        total.lines += msg[2]
            except forked.ChildFailed:
                # killed from outside (out of memory?): scan its part here, past what it already sent
                seen = [0]

                def rest(evs: list) -> None:
                    seen[0] += 1
                    if seen[0] > fed:
                        _shift(evs, offset)
                        feed(evs)

                c, n = scan_part(split.read_range(p.path, *p.ranges[i], chunk), rest)
                total.candidates += c
                total.lines += n
            total.bytes += p.ranges[i][1] - p.ranges[i][0]
    return total


def _shift(evs: list, offset: int) -> None:
    """Line numbers of a part's records, counted from its start, to the file's (each record once)."""
    if not offset:
        return
    done: set[int] = set()
    for ev in evs:
        rec = ev.record
        if id(rec) not in done:
            done.add(id(rec))
            rec.line += offset
            rec.end_line += offset
