"""The diagnosis pipeline: sources → scanner → records → events → correlator → findings.

One pass over each source, bounded memory; see ``correlate`` and ``findings`` for how
events become findings.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable

from breakglass.diagnose import findings as _findings
from breakglass.diagnose import remedies, signatures
from breakglass.diagnose.correlate import EVIDENCE_HEAD, EVIDENCE_TAIL, Correlator
from breakglass.diagnose.model import Diagnosis, ScanStats
from breakglass.logs import formats, sources
from breakglass.logs.scanner import Scanner


@dataclass
class Options:
    max_evidence: int = EVIDENCE_HEAD + EVIDENCE_TAIL
    year: int | None = None  # for klog headers, which carry no year
    engine: str = "auto"
    progress: Callable[[str, int], None] | None = None  # (source, bytes read so far), about every 64 MiB


def diagnose_sources(srcs: list[sources.LogSource], opts: Options | None = None,
                     warnings: list[str] | None = None) -> Diagnosis:
    """Run the whole diagnosis over already-resolved sources."""
    from breakglass.errors import BadInput  # noqa: PLC0415 - avoid a cycle at import

    opts = opts or Options()
    warnings = warnings if warnings is not None else []
    year = opts.year or _dt.datetime.now(_dt.timezone.utc).year
    scanner = Scanner(signatures.ANCHORS, opts.engine)
    gate = signatures.RECORD_GATE.search
    corr = Correlator(opts.max_evidence)
    total_bytes = total_lines = candidates = 0
    t0 = time.perf_counter()
    for src in srcs:
        counted = _Counting(sources.read_chunks(src), src.name, opts.progress)
        try:
            for text, line, end_line in _records(scanner.records(counted)):
                candidates += 1
                if not gate(text):
                    continue
                for rec in _parse(text, src.name, line, end_line, year):
                    evs = signatures.classify(rec)
                    if evs:
                        corr.feed(evs)
        except BadInput as e:
            if not src.lenient:
                raise
            warnings.append(f"skipped {e}")
        if counted.bytes == 0 and not src.lenient:
            warnings.append(f"{src.name} is empty")
        total_bytes += counted.bytes
        total_lines += scanner.lines
    found, verdict, notices = _findings.build_all(corr)
    stats = ScanStats(sources=[s.name for s in srcs], bytes=total_bytes, lines=total_lines,
                      candidates=candidates, matched=corr.matched, engine=scanner.engine,
                      seconds=round(time.perf_counter() - t0, 3))
    return Diagnosis(verdict=verdict, findings=found, remedies=remedies.options(found), stats=stats, notices=notices)


def _first_line(b: bytes) -> bytes:
    nl = b.find(b"\n")
    return b if nl < 0 else b[:nl]


def _last_lines(b: bytes) -> tuple[bytes, bytes | None]:
    """The last physical line of ``b`` and the one above it (None when there is none)."""
    nl = b.rfind(b"\n")
    if nl < 0:
        return b, None
    return b[nl + 1:], b[b.rfind(b"\n", 0, nl) + 1:nl]


def _records(raws) -> Iterable[tuple[bytes, int, int]]:
    """The scanner's candidates, with adjacent ones joined when the lower one continues the upper one.

    The scanner cuts a record around each hit and widens it only over lines after a long one; a paste wrapped
    at a short width (a YAML status message, a folded block) leaves a record's pieces in neighbouring
    candidates. ``formats.continues`` decides, on positive evidence only, as it does inside a candidate.
    """
    pending: tuple[bytes, int, int] | None = None
    for raw in raws:
        if pending is not None and raw.line == pending[2] + 1:
            last, above = _last_lines(pending[0])
            if formats.continues(last.decode("utf-8", "replace"), _first_line(raw.text).decode("utf-8", "replace"),
                                 above.decode("utf-8", "replace") if above is not None else None):
                pending = (pending[0] + b"\n" + raw.text, pending[1], raw.end_line)
                continue
        if pending is not None:
            yield pending
        pending = (raw.text, raw.line, raw.end_line)
    if pending is not None:
        yield pending


def _parse(text: bytes, source: str, line: int, end_line: int, year: int) -> list:
    """The records one candidate holds: its physical lines split where nothing shows they were wrapped."""
    s = text.decode("utf-8", "replace")
    if "\n" not in s:
        return [formats.parse_record(s, source, line, end_line, year)]
    lines = s.split("\n")
    out = []
    for a, b in formats.split_lines(s):
        part = "\n".join(lines[a:b + 1])
        if not part.strip():
            continue
        out.append(formats.parse_record(part, source, line + a, min(line + b, end_line), year))
    return out


class _Counting:
    """Pass chunks through, counting bytes on the way (the scanner counts lines)."""

    PROGRESS_EVERY = 64 << 20

    def __init__(self, chunks: Iterable[bytes], name: str = "", progress=None) -> None:
        self._chunks = chunks
        self._name = name
        self._progress = progress
        self.bytes = 0

    def __iter__(self):
        next_report = self.PROGRESS_EVERY
        for c in self._chunks:
            self.bytes += len(c)
            if self._progress and self.bytes >= next_report:
                self._progress(self._name, self.bytes)
                next_report += self.PROGRESS_EVERY
            yield c


def diagnose_paths(paths: list[str], opts: Options | None = None, stdin: BinaryIO | None = None,
                   extra_sources: list[sources.LogSource] = ()) -> tuple[Diagnosis, list[str]]:
    warnings: list[str] = []
    srcs = (sources.expand(paths, stdin=stdin) if paths else []) + list(extra_sources)
    diag = diagnose_sources(srcs, opts, warnings)
    return diag, warnings
