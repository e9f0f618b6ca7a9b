"""The diagnosis pipeline: sources → scanner → records → events → correlator → findings.

One pass over each source, bounded memory; see ``correlate`` and ``findings`` for how
events become findings.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
import time
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Iterator

from breakglass.diagnose import parallel, signatures
from breakglass.diagnose.model import EVIDENCE_HEAD, EVIDENCE_TAIL, Diagnosis, ScanStats
from breakglass.logs import formats, gutter, sources
from breakglass.logs.scanner import Scanner, cut_warning


@dataclass
class Options:
    max_evidence: int = EVIDENCE_HEAD + EVIDENCE_TAIL
    year: int | None = None  # for klog headers, which carry no year
    engine: str = "auto"
    progress: Callable[[str, int], None] | None = None  # (source, bytes read so far), about every 64 MiB
    # Called once before the first event is correlated; on a big file, while the forked workers scan. The fast
    # path imports its output's modules there, so those imports overlap the workers instead of the scan.
    meanwhile: Callable[[], None] | None = None


def diagnose_sources(srcs: list[sources.LogSource], opts: Options | None = None,
                     warnings: list[str] | None = None) -> Diagnosis:
    """Run the whole diagnosis over already-resolved sources."""
    from breakglass.core.errors import BadInput  # noqa: PLC0415 - avoid a cycle at import

    opts = opts or Options()
    warnings = warnings if warnings is not None else []
    year = opts.year or _dt.datetime.now(_dt.timezone.utc).year
    scanner = Scanner(signatures.ANCHORS, opts.engine)
    paste_scanner: Scanner | None = None  # built for the first paste (a second Hyperscan database, about 5 ms)
    gate = signatures.record_gate
    corr = None

    def start_correlating() -> None:
        """Load what only this process needs (the correlator and, after the scan, the findings): on a big file
        this runs while the workers scan, a few ms of imports taken off the critical path."""
        nonlocal corr
        if corr is None:
            from breakglass.diagnose import findings, remedies  # noqa: F401, PLC0415 - see above
            from breakglass.diagnose.correlate import Correlator  # noqa: PLC0415

            corr = Correlator(opts.max_evidence)
            if opts.meanwhile is not None:
                opts.meanwhile()

    total_bytes = total_lines = candidates = 0
    log_like = False
    foreign: list[str] = []  # sources whose first 64 KiB holds not one word of Kubernetes
    unread: set[str] = set()  # found in a directory, and not a log after all (binary, a key): skipped
    t0 = time.perf_counter()
    for src in srcs:
        counted = _Counting(None, src.name, opts.progress)
        scan = scanner  # or paste_scanner: chosen for the whole source before any part of it is scanned

        def scan_part(chunks: Iterable[bytes], name: str = src.name) -> Iterator[list | parallel.End]:
            n = 0
            for text, line, end_line in _records(scan.records(chunks)):
                n += 1
                if not gate(text):
                    continue
                for rec in _parse(text, name, line, end_line, year):
                    evs = signatures.classify(rec)
                    if evs:
                        yield evs
            yield parallel.End(n, scan.lines, scan.cuts, scan.cut_count)

        try:
            split = parallel.plan(src, LOG_SAMPLE)
            if split is not None:
                counted.head = split.head
                pasted = split.ranges[-1][1] <= PASTE_MAX
            else:
                start_correlating()
                counted.chunks = sources.read_chunks(src)
                chunks, pasted = _paste_or_log(counted)
            if pasted:
                paste_scanner = paste_scanner or Scanner(signatures.PASTE_ANCHORS, opts.engine)
                scan = paste_scanner
            if split is not None:
                items = parallel.run(split, scan_part, counted.progress_only, start_correlating)
            else:
                items = scan_part(chunks)
            for item in items:
                if isinstance(item, parallel.End):
                    candidates += item.candidates
                    lines = item.lines
                    if item.cut_count:
                        warnings.append(cut_warning(src.name, item.cuts, item.cut_count))
                else:
                    corr.feed(item)
            if split is not None:
                counted.bytes = split.ranges[-1][1]
        except BadInput as e:
            if not src.lenient:
                raise
            warnings.append(f"skipped {e}")
            lines = scanner.lines
            unread.add(src.name)
            continue
        if counted.bytes == 0 and not src.lenient:
            warnings.append(f"{src.name} is empty")
        total_bytes += counted.bytes
        total_lines += lines
        log_like = log_like or looks_like_log(counted.head)
        if counted.head and not kubernetes_words(counted.head):
            foreign.append(src.name)
    start_correlating()  # no sources at all
    from breakglass.diagnose import findings, remedies  # noqa: PLC0415 - loaded by start_correlating

    found, verdict, notices = findings.build_all(corr)
    for hook, apart in corr.apart_sources().items():
        warnings.append(f"webhook {hook!r} is served by another backend in {', '.join(apart)} than in the sources "
                        f"before: another cluster's or apiserver's log? Its lines there are a finding of their own")
    stats = ScanStats(sources=[s.name for s in srcs if s.name not in unread], bytes=total_bytes, lines=total_lines,
                      candidates=candidates, matched=corr.matched, engine=scanner.engine,
                      seconds=round(time.perf_counter() - t0, 3), log_like=log_like, foreign=foreign)
    return Diagnosis(verdict=verdict, findings=found, remedies=remedies.options(found), stats=stats, notices=notices)


PASTE_MAX = 1 << 20  # a source this small is a paste (a ticket's excerpt, a terminal's copy), not a log


def _paste_or_log(chunks: Iterable[bytes]) -> tuple[Iterable[bytes], bool]:
    """(the chunks, whether they are a paste): a paste is all of it in one chunk of at most PASTE_MAX bytes, and
    is given without the line numbers its tool may have put in front (logs.gutter); a log is given as it is."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return (), True
    second = next(it, None)
    if second is None and len(first) <= PASTE_MAX:
        return (gutter.strip(first),), True
    if second is None:
        return (first,), False
    return itertools.chain((first, second), it), False


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
    pending_cut = False  # the rest of a line cut at 4 MiB was not read: nothing is known to continue it
    for raw in raws:
        if pending is not None and raw.line == pending[2] + 1 and not pending_cut:
            last, above = _last_lines(pending[0])
            if formats.continues(last.decode("utf-8", "replace"), _first_line(raw.text).decode("utf-8", "replace"),
                                 above.decode("utf-8", "replace") if above is not None else None):
                pending = (pending[0] + b"\n" + raw.text, pending[1], raw.end_line)
                continue
        if pending is not None:
            yield pending
        pending, pending_cut = (raw.text, raw.line, raw.end_line), raw.cut
    if pending is not None:
        yield pending


def _parse(text: bytes, source: str, line: int, end_line: int, year: int) -> list:
    """The records one candidate holds: its physical lines split where nothing shows they were wrapped."""
    s = formats.plain_spaces(text.decode("utf-8", "replace"))
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


LOG_SAMPLE = 64 << 10
# What a line of some log looks like, in any format diagnose reads: klog (behind any prefix), JSON logging and
# audit events, an RFC 3339, Go or syslog timestamp (CRI, kubectl --timestamps, journald, a webhook pod's log).
_LOG_LIKE = re.compile(
    rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ "
    rb'|"(?:ts|time|timestamp|msg|message|log|auditID|level)"\s*:'
    rb"|\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d"
    rb"|(?m:^[^\n]{0,40}?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d )"
    rb"|Error from server")
# A line of the Kubernetes world, in any of its log formats: klog (its header, or only its `file.go:N]` caller when
# a paste cut the header), klog's JSON (a numeric "ts"), an audit event, logrus (k3s, RKE2, k0s: `level=info msg=`),
# zap/controller-runtime (operators, webhook backends), hclog (Vault's injector), Go's standard log, kubectl's
# output and errors, a /readyz?verbose body, and a webhook's failure in any words.
_QUOTE = rb"(?:\\*[\"']|\xe2\x80\x9c)"
K8S_LINE = re.compile(rb"\b[\w-]+\.go:\d+\]|\"ts\"\s*:\s*\d|\"auditID\"|audit\.k8s\.io/v1"
                      rb"|\blevel=\w+ msg=|\"logger\"\s*:|\t(?:INFO|ERROR|WARN|DEBUG)\t|controller-runtime"
                      rb"|(?m:^\d{4}-\d\d-\d\dT\S+\s+(?:INFO|ERROR|WARN|DEBUG)\s)"
                      rb"|\[(?:INFO|WARN|ERROR|DEBUG)\] +\w+:|(?m:^\S*\s*\d{4}/\d\d/\d\d \d\d:\d\d:\d\d )"
                      rb"|Error from server|(?m:^Events:)|(?m:^[ \t>]*(?:[$#%] *)?kubectl [a-z])"
                      rb"|(?:readyz|healthz|livez) check failed"
                      rb"|\[[+-]\](?:ping|log|etcd|informer-sync|poststarthook/)"
                      rb"|[Ff]ailed calling webhook(?:,|\s+" + _QUOTE + rb")|failing (?:closed|open) [\w.-]+:"
                      rb"|admission webhook\s+" + _QUOTE)
# The words of the Kubernetes world, in whatever a person pastes: an event table's row (`Warning  FailedCreate  2m
# (x5 over 9m)  replicaset-controller  Error creating: …`), a controller's error alone, a journal line of kubelet,
# k3s or RKE2, a Helm, Argo CD or Flux error, an operator's JSON log, a kernel's OOM line that names kube-apiserver.
# One of these is enough (etcd's own JSON log included: the control plane's storage); a dpkg log (which may name
# the kubelet package), a key or a binary has none. Input with none is not what diagnose reads (exit 2), input with
# some is read, and "nothing found" is said of what was read.
_K8S_WORDS = re.compile(
    rb"(?i:webhook|admission|apiserver|\bkubectl\b|\bkube-[a-z]|\bkubeadm\b|\bkubelet(?:\[\d+\]|\.go|_)"
    rb"|\b(?:k3s|rke2|k0s|kubenswrapper|hyperkube|microk8s)\b|\btalos|\bkubernetes\b|\bk8s\b|\.svc\b"
    rb"|\bnamespaces?\b|\bpods?\b|\bdeployments?(?:\.apps)?\b|\breplicasets?\b|\bdaemonsets?\b"
    rb"|\bstatefulsets?\b|\bconfigmaps?\b|\bcustomresourcedefinitions?\b|\bcrds?\b|\bhelm\b|\bargo\s?cd\b"
    rb"|\bkustomization\b|\bleader\s?election|\bleases?\b|\bcoordination\.k8s|\bservicecidr|\bcontainerd\b"
    rb"|\bcri-o\b|\boperator\b|\bcontroller-manager|-controller\b|\bistio|\blinkerd|\bkyverno|\bgatekeeper"
    rb"|\bcert-manager|\bcalico|\bcilium|\bflannel|\bcoredns|\betcd)"
    # zap's and logrus' JSON (operators, webhook servers, istiod): what the issue's "an operator printed" looks like
    rb'|"level"\s*:\s*"\w+"\s*,[^\n]{0,300}"(?:msg|message)"\s*:'
    rb"|Error creating:|\bis forbidden:|\bFailed[A-Z][a-z]+\b|(?m:\b(?:Warning|Normal)\s+[A-Z][A-Za-z]+\s+"
    rb"(?:<unknown>|\d+[smhd]))|\bKind=|\bapiVersion\b|Internal error occurred|\bx-k8s\.io")
_K8S_OBJECT = re.compile(rb"(?m)^(?:apiVersion|kind):\s*\S|^\s*\{\s*\"(?:apiVersion|kind)\"")


def looks_like_log(sample: bytes) -> bool:
    """Whether the first bytes of a source could be a log (of any kind, pasted too): not empty, not binary, not
    a YAML or JSON object file, not one long run of base64."""
    if not sample.strip():
        return False
    if _LOG_LIKE.search(sample):
        return True
    return is_text(sample)


def is_text(sample: bytes) -> bool:
    """Text a person could have pasted: not binary, not a YAML or JSON object file, not base64 or a hex dump. A
    one-line paste (`Error creating: …`, the tail of a message) has no timestamp, and is still read."""
    if b"\x00" in sample or sum(b < 9 or 13 < b < 32 for b in sample[:4096]) > len(sample[:4096]) // 20:
        return False
    if _K8S_OBJECT.search(sample[:4096]):
        return False
    lines = sample.splitlines()[:50]
    return not all(b" " not in ln.strip() and len(ln) > 60 for ln in lines if ln.strip())  # base64, hex dumps


def kubernetes_words(sample: bytes) -> bool:
    """Whether a source's first bytes hold a Kubernetes component's line or a word of the Kubernetes world."""
    return bool(K8S_LINE.search(sample) or _K8S_WORDS.search(sample))


def require_log(diag: Diagnosis) -> None:
    """"Nothing found" in what is not a log at all (an empty pipe from a failed talosctl, a binary file, YAML,
    base64, dpkg's log) would be a false all-clear: that is bad input, saying what was read and why nothing
    matched. Anything with a word of the Kubernetes world in it is read: a refused paste is a person's outage
    turned away."""
    from breakglass.core.errors import BadInput  # noqa: PLC0415

    s = diag.stats
    if diag.findings or diag.notices:
        return
    names = ", ".join(s.sources) or "no source"
    if s.log_like and s.sources and len(s.foreign) == len(s.sources):
        # text, but not a word of Kubernetes in it (dpkg's log, an unrelated service's): "nothing found" would
        # be a false all-clear; exit 2, like any input that is not what diagnose reads
        raise BadInput(f"{names}: {s.lines} line(s) read, not one word of Kubernetes in them (no component's log "
                       f"line, no kubectl, event, pod, webhook or apiserver): nothing to diagnose",
                       hint="kube-apiserver's log: `talosctl logs kube-apiserver`, /var/log/pods/kube-system_kube-"
                            "apiserver-*/, `journalctl -u k3s`")
    if s.log_like:
        return
    if s.bytes:
        raise BadInput(f"read {s.bytes} bytes from {names}, and none of it is a log: nothing to diagnose",
                       hint="webhook configurations go to `breakglass audit -f FILE`")
    raise BadInput(f"read nothing from {names}: no kube-apiserver log to diagnose",
                   hint="check the command that should have produced the log (talosctl, kubectl, ssh)")


class _Counting:
    """Pass chunks through, counting bytes on the way (the scanner counts lines)."""

    PROGRESS_EVERY = 64 << 20

    def __init__(self, chunks: Iterable[bytes] | None, name: str = "", progress=None) -> None:
        self.chunks = chunks
        self._name = name
        self._progress = progress
        self._next_report = self.PROGRESS_EVERY
        self.bytes = 0
        self.head = b""  # the first 64 KiB, to tell a log from something else

    def __iter__(self):
        for c in self.chunks:
            if not self.bytes:
                self.head = bytes(c[:LOG_SAMPLE])
            self.progress_only(len(c))
            yield c

    def progress_only(self, n: int) -> None:
        self.bytes += n
        if self._progress and self.bytes >= self._next_report:
            self._progress(self._name, self.bytes)
            self._next_report += self.PROGRESS_EVERY


def diagnose_paths(paths: list[str], opts: Options | None = None, stdin: BinaryIO | None = None,
                   extra_sources: list[sources.LogSource] = ()) -> tuple[Diagnosis, list[str]]:
    warnings: list[str] = []
    skipped: list = []
    srcs = (sources.expand(paths, stdin=stdin, skipped=skipped) if paths else []) + list(extra_sources)
    if skipped:
        named = ", ".join(f"{p} ({why})" for p, why in skipped[:4])
        warnings.append(f"skipped {len(skipped)} file(s) that are not logs: {named}"
                        + (f" and {len(skipped) - 4} more" if len(skipped) > 4 else ""))
    diag = diagnose_sources(srcs, opts, warnings)
    require_log(diag)
    if len(diag.stats.foreign) < len(diag.stats.sources):  # all of them: require_log said so
        warnings += [f"{name}: not one word of Kubernetes in it (not read as a log)"
                     for name in diag.stats.foreign]
    return diag, warnings
