"""One huge line (issue 27 §10): cut at the 4 MiB a record may hold, memory bounded, work that does not grow with
the line, and the cut said in the report, by line number. No timings: operations are counted instead."""

from __future__ import annotations

import cProfile
import json
import pstats
import tracemalloc

import pytest

from breakglass.diagnose import engine, parallel
from breakglass.diagnose.signatures import ANCHORS
from breakglass.leaks import apiserver, audit
from breakglass.logs import finder, forked, jsonarray
from breakglass.logs import scanner as sc
from tests import logbuild as lb
from tests.conftest import run_cli
from tests.test_leaks import event, fo

WORDS = b"failed calling webhook "
FAIL = lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "connection refused"))


def _write(path, parts) -> str:
    """``parts``: bytes, or (bytes, n) for ``bytes`` repeated to n bytes (written a MiB at a time)."""
    with open(path, "wb") as f:
        for p in parts:
            if isinstance(p, tuple):
                unit, n = p
                block = unit * max(1, (1 << 20) // len(unit))
                while n > 0:
                    f.write(block[:n])
                    n -= len(block)
            else:
                f.write(p)
    return str(path)


def _huge(path, mib: int, unit: bytes = WORDS) -> str:
    """FAIL on line 1, one line of ``mib`` MiB of ``unit`` on line 2, FAIL again on line 3."""
    return _write(path, [FAIL.encode() + b"\n", (unit, mib << 20), b"\n", FAIL.encode() + b"\n"])


@pytest.fixture
def one_pass(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_SIZE", 1 << 60)


class _Work:
    """What a scan does, counted: bytes the anchor search looks at, hits it reports, records classified and the
    characters of their messages (every regex of the signatures runs over those)."""

    def __init__(self, monkeypatch) -> None:
        self.searched = self.hits = self.classified = self.chars = 0
        find, holds, classify = finder.Finder.find, getattr(finder.Finder, "holds", None), engine.signatures.classify

        def counted_find(f, buf, start, end, *most):
            self.searched += end - start
            got = find(f, buf, start, end, *most)
            self.hits += len(got or ())
            return got

        def counted_holds(f, buf, start, end):
            self.searched += end - start
            return holds(f, buf, start, end)

        def counted_classify(rec):
            self.classified += 1
            self.chars += len(rec.message)
            return classify(rec)

        monkeypatch.setattr(finder.Finder, "find", counted_find)
        if holds is not None:
            monkeypatch.setattr(finder.Finder, "holds", counted_holds)
        monkeypatch.setattr(engine.signatures, "classify", counted_classify)

    def totals(self) -> tuple[int, int, int, int]:
        return self.searched, self.hits, self.classified, self.chars


@pytest.mark.parametrize("scanner", ["auto", "python"])
def test_the_work_on_a_huge_line_does_not_grow_with_it(tmp_path, monkeypatch, one_pass, scanner):
    """16 MiB and 64 MiB: the same work, that of the line's first 4 MiB (before: four times as many records
    classified, each line's windows overlapping by half, and every byte of it searched)."""
    seen = []
    for mib in (16, 64):
        work = _Work(monkeypatch)
        diag, warnings = engine.diagnose_paths([_huge(tmp_path / f"{mib}.log", mib)],
                                               engine.Options(engine=scanner))
        assert diag.stats.lines == 3 and sum(f.count for f in diag.findings) == 2
        seen.append(work.totals())
        searched, _hits, classified, chars = work.totals()
        assert searched <= 2 * sc.FORCE_CUT, f"{searched} bytes searched in a {mib} MiB line"
        assert chars <= 2 * sc.FORCE_CUT
        assert classified <= sc.FORCE_CUT // sc.MAX_RECORD + 3
    assert seen[0] == seen[1]


def test_diagnose_cuts_a_huge_line_in_bounded_memory_and_says_where(tmp_path, one_pass):
    path = _huge(tmp_path / "h.log", 64)
    tracemalloc.start()
    try:
        diag, warnings = engine.diagnose_paths([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert [w for w in warnings if "line 2 (64 MiB)" in w and "cut" in w and "not read" in w], warnings
    assert sorted(int(e.location.rsplit(":", 1)[1].split("-")[0]) for f in diag.findings for e in f.evidence) == [1, 3]


def test_a_line_of_exactly_four_mib_is_read_whole_and_chunking_does_not_change_a_cut(tmp_path):
    hit = b" failing open h: EOF webhook "
    data = (b"I0224 15:32:50.000000 1 a.go:1] short\n" * 3 + hit + b"x" * (sc.FORCE_CUT - len(hit)) + b"\n"
            + b"y" * 100 + hit + b"z" * sc.FORCE_CUT + hit + b"\n" + FAIL.encode() + b"\n")
    want = None
    for engine_name in ("python", "auto"):
        for chunk in (4096, 1 << 20, 3 << 20, 16 << 20, len(data)):
            s = sc.Scanner(ANCHORS, engine_name)
            recs = [(r.line, r.end_line, r.text[:40], getattr(r, "cut", None)) for r in
                    s.records(data[i:i + chunk] for i in range(0, len(data), chunk))]
            got = (recs, [(c.line, c.length) for c in getattr(s, "cuts", [])], s.lines)
            want = want or got
            assert got == want, (engine_name, chunk)
    recs, cuts, lines = want
    assert lines == 6
    assert cuts == [(5, 100 + 2 * len(hit) + sc.FORCE_CUT)]  # line 4, exactly FORCE_CUT long, is not cut
    assert [r[0] for r in recs if r[3]] == [5] and recs[-1][0] == 6  # the cut line's hit before the cut, line 6


def test_a_cut_is_named_by_its_line_in_the_file_when_scanned_in_parts(tmp_path, monkeypatch):
    noise = b"".join(b"I0224 15:32:50.%06d       1 httplog.go:134] GET /api/v1/pods\n" % i for i in range(40000))
    path = _write(tmp_path / "p.log", [noise, (WORDS, 5 << 20), b"\n", noise, FAIL.encode() + b"\n"])
    line = 40001
    monkeypatch.setattr(parallel, "MIN_SIZE", 1 << 60)
    _, one = engine.diagnose_paths([path])
    monkeypatch.setattr(parallel, "MIN_SIZE", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    calls = []
    run = parallel.run
    monkeypatch.setattr(parallel, "run", lambda p, *a: calls.append(len(p.ranges)) or run(p, *a))
    diag, parts = engine.diagnose_paths([path])
    assert calls and calls[0] > 1  # really in parts
    assert one == parts and [w for w in parts if f"line {line} (5 MiB)" in w], parts
    assert diag.findings and diag.stats.lines == 2 * 40000 + 2


def test_the_cli_says_a_line_was_cut(tmp_path):
    path = _huge(tmp_path / "c.log", 5)
    out = json.loads(run_cli("diagnose", path, "-o", "json").stdout)
    assert any("line 2 (5 MiB)" in w for w in out["warnings"]), out["warnings"]
    assert out["exitCode"] == 3


def _audit_log(path, mib: int) -> str:
    """A leak (a1), a 64 MiB event that also says failed-open (its bytes are mostly one request object), a1's
    neighbour a3."""
    big = event("a2", ann=fo())
    head, tail = big[:-1], big[-1:]
    return _write(path, [event("a1", ann=fo()).encode() + b"\n", head.encode() + b', "requestObject": {"data": "',
                         (b"A", mib << 20), b'"}' + tail.encode() + b"\n", event("a3", name="p3", ann=fo()).encode()
                         + b"\n"])


def test_leaks_audit_log_skips_a_huge_line_in_bounded_memory_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(audit, "PARALLEL_MIN", 1 << 60)
    path = _audit_log(tmp_path / "a.log", 64)
    tracemalloc.start()
    try:
        rep = audit.scan([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert sorted(x.audit_id for x in rep.leaks) == ["a1", "a3"] and rep.lines_skipped == 1
    err = capsys.readouterr().err
    assert "line 2 (64.0 MiB, mentions failed-open)" in err, err


def test_leaks_audit_log_in_parts_names_the_same_line(tmp_path, capsys, monkeypatch):
    path = _audit_log(tmp_path / "a.log", 5)
    monkeypatch.setattr(audit, "PARALLEL_MIN", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    rep = audit.scan([path])
    assert sorted(x.audit_id for x in rep.leaks) == ["a1", "a3"] and rep.lines_skipped == 1
    assert "line 2 (5.0 MiB, mentions failed-open)" in capsys.readouterr().err


def test_leaks_apiserver_log_cuts_a_huge_line_in_bounded_memory_and_says_so(tmp_path, capsys):
    warn = lb.klog(lb.fail_open("validation.gatekeeper.sh", "EOF"), "W", "dispatcher.go:205").encode()
    path = _write(tmp_path / "k.log", [warn + b"\n", (WORDS, 64 << 20), b"\n", warn + b"\n"])
    tracemalloc.start()
    try:
        rep = apiserver.scan([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert len(rep.leaks) == 2
    assert "line 2 (64 MiB)" in capsys.readouterr().err


def _regex_calls(fn) -> int:
    """Calls of a compiled pattern's search, match, sub or finditer while ``fn`` runs."""
    prof = cProfile.Profile()
    prof.runcall(fn)
    stats = pstats.Stats(prof).stats
    return sum(v[1] for (_file, _line, name), v in stats.items()
               if name.startswith("<method '") and "re.Pattern" in name)


def test_a_json_line_nested_100000_deep_stays_cheap(tmp_path, one_pass):
    """Before, telling it was too deep removed one level of brackets per regex pass, 257 passes over the line."""
    deep = b'{"msg":"failed calling webhook","a":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001
    with pytest.raises(jsonarray.TooDeep):
        jsonarray.loads(deep)
    assert _regex_calls(lambda: jsonarray.too_deep(deep)) <= 2
    assert _regex_calls(lambda: jsonarray.too_deep(deep.decode())) <= 2
    shallow_but_long = b"[" + b"[]," * 100_000 + b"[]]"
    assert not jsonarray.too_deep(shallow_but_long) and jsonarray.loads(shallow_but_long)
    assert not jsonarray.too_deep(b"[" * 300)  # broken, not deep: its decoder says what it is
    # as an audit event: skipped and counted, the scan goes on
    line = event("d1", ann=fo())[:-1] + ', "requestObject": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}"
    path = _write(tmp_path / "d.log", [line.encode() + b"\n", event("a1", ann=fo()).encode() + b"\n"])
    rep = None

    def scan():
        nonlocal rep
        rep = audit.scan([path])

    assert _regex_calls(scan) < 50
    assert [x.audit_id for x in rep.leaks] == ["a1"] and rep.lines_too_deep == 1


@pytest.mark.parametrize("line", [
    lb.fail_closed("a.b", "EOF"), 'admission webhook "h" denied the request: no', 'rejected by webhook "h": x',
    "Panic calling webhook, failing open h: x", 'PostStartHook "h" failed: x', "Context canceled when calling webhook h",
    "failed to renew lease kube-system/kube-scheduler: x", "ValidatingAdmissionPolicy 'p' denied request: x",
    "unable to create PriorityClass system-node-critical: x", "[-]poststarthook/h failed: reason withheld"])
def test_a_long_message_is_classified_as_word_by_word(monkeypatch, line):
    """Past 16 KiB (a huge line's 64 KiB windows) the signatures' words are found in one Hyperscan pass, not one
    ``in`` per word: the same events either way, wherever in the message the line is."""
    from breakglass.diagnose import signatures
    from breakglass.logs import formats

    for at in (0, 9000, 20000):
        rec = formats.parse_record("x " * at + line + " y" * 10000, "x", 1, 1, 2026)
        assert len(rec.message) >= signatures._Present.BIG
        one_pass = [(e.kind, e.webhook, e.hook, e.detail) for e in signatures.classify(rec)]
        monkeypatch.setattr(signatures._Present, "BIG", 1 << 40)
        by_word = [(e.kind, e.webhook, e.hook, e.detail) for e in signatures.classify(rec)]
        monkeypatch.undo()
        assert one_pass == by_word and one_pass, line


def test_leaks_audit_log_skips_a_huge_element_of_a_json_array_in_bounded_memory(tmp_path, capsys):
    """gcloud's `--format=json`: an element over 4 MiB is skipped as a line is, its end found without holding it
    (before: held up to 64 MiB, decoded again at every chunk, then the whole scan refused)."""
    a1, a3 = (json.dumps(json.loads(event(aid, name=aid, ann=fo()))) for aid in ("a1", "a3"))
    path = _write(tmp_path / "g.json", [b"[" + a1.encode() + b', {"kind": "Event", "x": "\\"]', (b"A", 64 << 20),
                                         b'", "y": [1, {"z": "]}"}]}, ' + a3.encode() + b"]\n"])
    tracemalloc.start()
    try:
        rep = audit.scan([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert sorted(x.audit_id for x in rep.leaks) == ["a1", "a3"]
    assert "element 2" in capsys.readouterr().err


@pytest.mark.parametrize("chunk", [4096, 1 << 20, 3 << 20, None])
def test_a_huge_json_array_element_is_skipped_whatever_the_reads(chunk):
    """The elements of a JSON array over 4 MiB are skipped, and the others read, the same whatever the reads.

    Cost: at 4096 the 30 MB array comes in about 7,300 reads, and json_array decodes an unfinished element again
    from its start at each, until it passes MAX_ELEMENT (4 MiB): about 1,000 tries for each of the 4 huge
    elements, the costliest the list of 3 million integers. Small reads are what cut every element many times."""
    big = "A" * (5 << 20)
    items = [{"a": 1}, {"x": big, "y": [1, {"z": '\\"]'}]}, "s" + big, 12345, [big, {"q": big}], {"b": 2}, 1.5e10,
             [1] * 3_000_000, True, {"c": '"{['}]
    text = json.dumps(items).encode()
    chunk = chunk or len(text)
    got = list(jsonarray.json_array((text[i:i + chunk] for i in range(0, len(text), chunk)), "t"))
    skipped = getattr(jsonarray, "TOO_LONG", "skipped")
    want = [x if len(json.dumps(x)) <= 4 << 20 else skipped for x in items]
    assert want.count(skipped) == 4 and got == want
