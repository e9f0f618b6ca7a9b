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
from dataclasses import dataclass, field
from typing import Callable, Iterator

from breakglass.logs import forked, sources, split
from breakglass.logs.scanner import MAX_CUTS_KEPT

MIN_SIZE = 32 << 20  # below this a fork costs more than it saves (measured: a 1 MB log gains nothing)
MAX_PARTS = 8
# This process's part is shorter than the workers': it also feeds the correlator as it goes, loads what follows
# the scan (Options.meanwhile) and then takes in the workers' events. Swept on the 256 MiB log: 0.86 was fastest.
FIRST_SHARE = 0.86
# Smaller than one pass's reads: each chunk is read, searched by Hyperscan and counted for newlines while it is
# still in this core's cache; with both cores streaming, 512 KiB took 7% less time than 4 MiB (bench/realscan.py).
CHUNK = 512 << 10


@dataclass
class Plan:
    fd: int  # the one descriptor every part reads through (see split.open_regular); run() closes it
    ranges: list[tuple[int, int]]
    head: bytes


def plan(src: sources.LogSource, head_size: int) -> Plan | None:
    """How to split ``src``, or None to read it in one pass (not a local plain file, small, one core...)."""
    if src.path is None or MIN_SIZE <= 0:
        return None
    cpus = forked.parts_here(MAX_PARTS)
    try:
        opened = split.open_regular(src.path) if cpus else None
    except OSError as e:
        raise sources.os_error(src.name, e) from None
    if opened is None:
        return None
    fd, size = opened
    keep = False
    try:
        if size < MIN_SIZE:
            return None
        head = os.pread(fd, head_size, 0)
        if sources.is_gzip(head):
            return None
        sources.check_text(head, src.name)  # the same refusal as one pass
        points = split.cuts(fd, size, cpus, FIRST_SHARE)
        if not points:
            return None
        edges = [0, *points, size]
        keep = True
        return Plan(fd, list(zip(edges, edges[1:])), head)
    except OSError as e:
        raise sources.os_error(src.name, e) from None
    finally:
        if not keep:
            os.close(fd)


@dataclass
class End:
    """The last item of a part: its candidates and lines, and the lines cut at scanner.FORCE_CUT."""

    candidates: int
    lines: int
    cuts: list = field(default_factory=list)  # scanner.Cut, the first MAX_CUTS_KEPT
    cut_count: int = 0


def run(p: Plan, scan_part: Callable[[split.RangeReader], Iterator[list | End]], on_chunk: Callable[[int], None],
        meanwhile: Callable[[], None] | None = None) -> Iterator[list | End]:
    """Every part's items, in file order: ``scan_part(chunks)`` yields each record's events and then an
    ``End``; here the events of later parts have their line numbers moved to the file's, and one ``End``
    sums them all. ``on_chunk(n)`` is told of about n bytes read for each chunk of part 0 (the parts run
    at about one speed, so part 0's share stands for the whole). ``meanwhile()`` runs in this process while the
    workers start (``forked.ordered``)."""
    whole, first = p.ranges[-1][1], p.ranges[0][1]

    def produce(i: int, tick: Callable[[], None]) -> Iterator[list | End]:
        def read(n: int) -> None:
            if i == 0:
                on_chunk(n * whole // first)
            tick()

        return scan_part(split.RangeReader(p.fd, *p.ranges[i], CHUNK, read))

    total = End(0, 0)
    try:
        for item in forked.ordered(len(p.ranges), produce, meanwhile):
            if isinstance(item, End):
                total.candidates += item.candidates
                for cut in item.cuts[:MAX_CUTS_KEPT - len(total.cuts)]:
                    cut.line += total.lines
                    total.cuts.append(cut)
                total.cut_count += item.cut_count
                total.lines += item.lines
            else:
                _shift(item, total.lines)
                yield item
    finally:
        os.close(p.fd)
    yield total


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
