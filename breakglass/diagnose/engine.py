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
            for raw in scanner.records(counted):
                candidates += 1
                if not gate(raw.text):
                    continue
                rec = formats.parse_record(raw.text.decode("utf-8", "replace"), src.name, raw.line,
                                           raw.end_line, year)
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
    found, verdict = _findings.build(corr)
    stats = ScanStats(sources=[s.name for s in srcs], bytes=total_bytes, lines=total_lines,
                      candidates=candidates, matched=corr.matched, engine=scanner.engine,
                      seconds=round(time.perf_counter() - t0, 3))
    return Diagnosis(verdict=verdict, findings=found, remedies=remedies.options(found), stats=stats)


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
