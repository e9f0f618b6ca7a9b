"""Which requests got in while a webhook was failing open, from kube-apiserver audit logs.

kube-apiserver marks every webhook call that failed and was ignored (failurePolicy Ignore) with an
audit annotation ``failed-open.validating.webhook.admission.k8s.io/round_0_index_N`` or
``failed-open.mutation.webhook.admission.k8s.io/round_R_index_N`` whose value is the webhook's name
(reference §2). Only ResponseComplete events say how the request ended; an event is counted once
per auditID.

The forms a request can take (audit.k8s.io Events, GKE's Cloud Logging entries, either inside a log
shipper's record) are ``events``'s business; this module finds the lines worth reading, as JSON lines,
EventList batches or a JSON array (``gcloud logging read --format=json``).

Streaming: a line is parsed only when it holds ``failed-open.`` or a delete (for "deleted later"),
so the cost is a byte search over the log plus JSON for the few lines that matter. Memory grows with
the leaks found, not with the log.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import Iterator

from breakglass.core.errors import BadInput
from breakglass.core.safetext import printable
from breakglass.leaks.events import View, parse_line, ref_name, view
from breakglass.leaks.model import Leak, LeakReport, Rechecks, TimeRange, admitted_write, finish, parse_time
from breakglass.logs import forked, split
from breakglass.logs import sources as logsources
from breakglass.logs.jsonarray import TOO_DEEP, TOO_LONG, MAX_DEPTH, json_array
from breakglass.logs.lines import MAX_CUTS_KEPT, CutLine, LineTap, lines_with, placed_lines_with
from breakglass.logs.finder import Finder
from breakglass.logs.newlines import count as _newlines
from breakglass.logs.record import MAX_LINE

_KEY = re.compile(r"^failed-open\.(validating|mutation)\.webhook\.admission\.k8s\.io/round_\d+_index_\d+$")
_NEEDLE = b"failed-open."
_DELETE = b'"verb":"delete'  # audit.k8s.io Events
_GKE_DELETE = b'.delete"'  # Cloud Logging entries: "methodName": "io.k8s.core.v1.pods.delete"
PARALLEL_MIN = 32 << 20  # a smaller log is read in one pass: a fork would cost more than it saves
PARTS_MAX = 8
FIRST_SHARE = 0.85  # this process's part: it also takes in the workers' requests and builds the report


def _views(src, finders, rechecks: Rechecks, rep: LeakReport, notes: list[str]) -> Iterator[View]:
    """The requests worth a look in one source: JSON lines found by byte search, or the elements of a
    JSON array (`gcloud logging read --format=json`), which are all parsed."""
    reader = logsources.read_chunks(src)
    first = next(reader, b"")
    chunks = itertools.chain([first], reader)
    if first.lstrip()[:1] == b"[":
        too_long: list[int] = []  # elements over MAX_LINE, by number (1 = the first)
        for n, obj in enumerate(json_array(chunks, src.name), 1):
            if obj is TOO_DEEP:
                rep.lines_too_deep += 1
                continue
            if obj is TOO_LONG:  # skipped unread, as a line over MAX_LINE is: named in a warning
                too_long.append(n)
                continue
            v = view(obj)
            if v is not None:
                yield v
        if too_long:
            where = ", ".join(map(str, too_long[:5])) + (f" and {len(too_long) - 5} more" if len(too_long) > 5 else "")
            notes.append(f"{src.name}: {len(too_long)} element(s) of the JSON array longer than {MAX_LINE >> 20} MiB "
                         f"were skipped unread (element {where}): no audit event is that long, and a request in one "
                         "is not in this report")
        return
    # Cloud Logging names a delete in methodName, not verb: one more literal, searched only where needed
    finder = finders[1] if b'"protoPayload"' in first else finders[0]
    # The audit webhook backend posts EventLists, and some sinks store each batch as one line: a delete
    # there may be any item, so those lines skip the one-name shortcut below.
    batches = b'"EventList"' in first
    planned = _plan(src, first, batches)
    if planned is not None:
        reader.close()  # read again, in parts
        yield from _views_in_parts(src, *planned, finder, rechecks, rep, notes)
        return
    tap = LineTap(finder, watch=_NEEDLE)
    for line in lines_with(chunks, finder, tap):
        if _NEEDLE not in line and (not rechecks or (ref_name(line) not in rechecks.names and not batches)):
            continue  # a delete matters only for an object that leaked in before it
        yield from _counted(_parsed(line, batches), _NEEDLE in line, rep)
    _note_cuts(src, tap.cuts, tap.cut_count, rep, notes)


def _note_cuts(src, cuts: list[CutLine], count: int, rep: LeakReport, notes: list[str]) -> None:
    """Lines over MAX_LINE that held a literal were skipped unread: each that mentions failed-open is counted
    with the lines that were not audit events, and all are named (line number, or offset) in one warning."""
    if not count:
        return
    rep.lines_skipped += sum(c.watched for c in cuts)
    lines = _line_numbers(src, [c.at for c in cuts[:5]])
    where = ", ".join(f"{'line ' + str(n) if n else 'at byte ' + str(c.at)} ({c.length / (1 << 20):.1f} MiB"
                      f"{', mentions failed-open' if c.watched else ''})" for c, n in zip(cuts, lines))
    more = f" and {count - 5} more" if count > 5 else ""
    notes.append(f"{src.name}: {count} line(s) longer than {MAX_LINE >> 20} MiB were skipped unread, "
                         f"{where}{more}: no audit event is that long, and a request in one is not in this report")



def _line_numbers(src, offsets: list[int]) -> list[int | None]:
    """The line number at each offset of a plain local file (newlines before it, counted now: only for the few
    lines cut), else None (stdin, gzip: said as a byte offset)."""
    if src.path is None or not offsets:
        return [None] * len(offsets)
    try:
        fd = os.open(src.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return [None] * len(offsets)
    try:
        if logsources.is_gzip(os.pread(fd, 2, 0)):
            return [None] * len(offsets)
        out, pos, lines = [], 0, 1
        for at in sorted(offsets):
            for chunk in split.read_range(fd, pos, at, logsources.CHUNK):
                lines += _newlines(chunk)
            pos = at
            out.append(lines)
        by = dict(zip(sorted(offsets), out))
        return [by[a] for a in offsets]
    except OSError:
        return [None] * len(offsets)
    finally:
        os.close(fd)


def _parsed(line: bytes, batches: bool):
    """The requests one line holds (a list of Views), or TOO_DEEP."""
    obj = parse_line(line)
    if obj is TOO_DEEP:
        return obj
    items = obj.get("items") if batches and isinstance(obj, dict) and obj.get("kind") == "EventList" else None
    return [v for v in map(view, items if isinstance(items, list) else [obj]) if v is not None]


def _counted(parsed, needle: bool, rep: LeakReport) -> list[View]:
    if parsed is TOO_DEEP:  # an attacker's request nested past MAX_DEPTH: skipped and counted, the scan goes on
        rep.lines_too_deep += 1
        rep.lines_skipped += needle
        return []
    if not parsed:
        rep.lines_skipped += needle
    return parsed


def _plan(src, first: bytes, batches: bool) -> tuple[int, list[tuple[int, int]]] | None:
    """(fd, parts) of a big local JSON-lines file to read on several cores (see ``logs.forked``), or None.
    The caller closes the fd."""
    if batches or src.path is None:
        return None
    cpus = forked.parts_here(PARTS_MAX)
    try:
        opened = split.open_regular(src.path) if cpus else None
    except OSError:
        return None  # read it in one pass, which reports the error as it always has
    if opened is None:
        return None
    fd, size = opened
    try:
        if size >= PARALLEL_MIN and not logsources.is_gzip(os.pread(fd, 2, 0)):  # ``first`` is already inflated
            edges = [0, *split.line_cuts(fd, size, cpus, FIRST_SHARE), size]
            if len(edges) > 2:
                fd, opened = -1, (fd, list(zip(edges, edges[1:])))
                return opened
    except OSError:
        pass
    finally:
        if fd >= 0:
            os.close(fd)
    return None


def _views_in_parts(src, fd: int, parts: list[tuple[int, int]], finder, rechecks: Rechecks,
                    rep: LeakReport, notes: list[str]) -> Iterator[View]:
    """What the one-pass loop above yields, with the byte search and JSON of every part on its own core.
    A child cannot know which objects leaked in the parts before its own, so it sends each delete line
    with its object's name, and the decision is taken here, in file order."""

    def produce(i: int, tick):
        def chunks():
            for c in split.read_range(fd, *parts[i], chunk=logsources.CHUNK):
                tick()
                yield c

        tap = LineTap(finder, parts[i][0], watch=_NEEDLE)
        for at, line in placed_lines_with(chunks(), finder, parts[i][0], tap):
            if _NEEDLE in line:
                yield True, _parsed(line, False)
            else:  # where it is, not its bytes: most deletes are of objects that never leaked
                yield False, (ref_name(line), at, len(line))
        if tap.cut_count:
            yield None, (tap.cuts, tap.cut_count)

    cuts: list[CutLine] = []
    count = 0
    try:
        for needle, got in forked.ordered(len(parts), produce):
            if needle:
                yield from _counted(got, True, rep)
            elif needle is None:  # a part's lines over MAX_LINE, offsets already the file's
                cuts += got[0][:MAX_CUTS_KEPT - len(cuts)]
                count += got[1]
            elif rechecks and got[0] in rechecks.names:
                yield from _counted(_parsed(os.pread(fd, got[2], got[1]), False), False, rep)
    finally:
        os.close(fd)
    _note_cuts(src, cuts, count, rep, notes)

def scan(paths: list[str], since: str | None = None, until: str | None = None,
         webhooks: list[str] | None = None, window_gap: float = 60.0, stdin=None,
         engine: str = "auto", sources=None) -> LeakReport:
    span = TimeRange(since, until)
    bounded = span.since is not None or span.until is not None
    wanted = set(webhooks or [])
    rep = LeakReport(basis="audit-log")
    seen: set[str] = set()
    rechecks = Rechecks()
    notes: list[str] = []  # lines cut at MAX_LINE, one line per source
    finders = (Finder((_NEEDLE, _DELETE), engine), Finder((_NEEDLE, _DELETE, _GKE_DELETE), engine))
    srcs = sources if sources is not None else logsources.expand(paths, stdin)  # remote ones come ready
    rep.sources = [s.name for s in srcs]
    for src in srcs:
        for v in _views(src, finders, rechecks, rep, notes):
            if not v.complete:
                continue
            in_span = True
            if bounded:  # without --since/--until every time is in: no need to parse it
                try:
                    at = parse_time(v.time) if v.time else None
                except BadInput:
                    at = None
                in_span = at in span
            if not in_span and (v.verb.startswith("delete") or not v.annotations):
                continue
            if v.verb.startswith("delete") and rechecks and (v.code is None or 200 <= v.code < 300):
                if v.verb == "delete":
                    rechecks.deleted(v.resource, v.namespace, v.name)
                continue
            failed = {}
            for k, val in v.annotations.items():
                m = _KEY.match(str(k))
                if m:
                    failed.setdefault(str(val), set()).add(m[1])
            if wanted:
                failed = {w: k for w, k in failed.items() if w in wanted}
            if not failed:
                continue
            if v.audit_id and v.audit_id in seen:
                continue
            seen.add(v.audit_id)
            if not in_span:  # a leak all the same, outside the window asked for: counted, so "none" is honest
                rep.outside_window += 1
                continue
            kinds = set().union(*failed.values())
            leak = Leak(v.time, v.user, v.verb, v.resource, v.namespace, v.name, sorted(failed),
                        "both" if len(kinds) > 1 else ("mutating" if "mutation" in kinds else "validating"),
                        v.code, v.audit_id, src.name)
            rep.leaks.append(leak)
            if admitted_write(leak) and not rechecks.add(leak):
                rep.unnamed_writes += 1
    import sys  # noqa: PLC0415

    if rep.lines_too_deep:
        print(f"warning: {rep.lines_too_deep} line(s) of JSON nested deeper than {MAX_DEPTH} levels were skipped "
              "(an audited request can be shaped so); every other line was read", file=sys.stderr)
    for note in notes:
        print(f"warning: {printable(note)}", file=sys.stderr)  # it names a file: a directory's names are anyone's
    return finish(rep, rechecks, window_gap)


