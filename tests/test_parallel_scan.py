"""A log diagnosed in parts on several cores gives exactly what one pass gives.

The parts are forced small (MIN_SIZE 0, eight parts) so that cuts land inside the real and pasted fixtures,
next to CRI partial lines, klog multi-line values and wrapped pastes; every fixture is also run as one file
made of all of them, cut in many places.
"""

from __future__ import annotations

import glob
import json
import os
import signal

import pytest

from breakglass.diagnose import engine, parallel
from breakglass.core.envelope import envelope
from breakglass.core.errors import BadInput
from breakglass.logs import forked, split
from tests import logbuild as lb

HERE = os.path.dirname(__file__)
FIXTURES = sorted(glob.glob(os.path.join(HERE, "fixtures", "real", "*", "*.log"))
                  + glob.glob(os.path.join(HERE, "fixtures", "pastes", "*.txt")))


def _diagnosis(paths: list[str]) -> dict:
    try:
        diag, warnings = engine.diagnose_paths(paths)
    except BadInput as e:  # a paste no Kubernetes component wrote (a decoy): the same refusal either way
        return {"refused": str(e)}
    doc = envelope("Diagnosis", diag, 0, warnings)["result"]
    doc["stats"].pop("seconds")
    return doc


def _both(monkeypatch, paths: list[str], parts: int = 8) -> tuple[dict, dict, list]:
    monkeypatch.setattr(parallel, "MIN_SIZE", 1 << 60)
    one = _diagnosis(paths)
    monkeypatch.setattr(parallel, "MIN_SIZE", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: parts)
    plans = [parallel.plan(s, engine.LOG_SAMPLE) for s in engine.sources.expand(paths)]
    return one, _diagnosis(paths), plans


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: os.path.relpath(p, HERE))
def test_each_fixture_in_parts_is_diagnosed_as_in_one_pass(monkeypatch, path):
    one, parts, _ = _both(monkeypatch, [path])
    assert parts == one


def test_all_fixtures_in_one_file_cut_in_many_places(monkeypatch, tmp_path):
    big = tmp_path / "all.log"
    with open(big, "wb") as out:
        for p in FIXTURES:
            data = open(p, "rb").read()
            out.write(data if data.endswith(b"\n") else data + b"\n")
    one, parts, plans = _both(monkeypatch, [str(big)], parts=8)
    assert plans[0] is not None and len(plans[0].ranges) >= 6, "the file was not cut"
    assert parts == one
    assert one["findings"], "the combined fixtures hold findings"


def test_line_numbers_of_later_parts_are_the_files(monkeypatch, tmp_path):
    noise = "".join(lb.klog(f"noise line {i} with some words in it to be long enough", "I") + "\n"
                    for i in range(3000))
    hit = lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "dial tcp 10.96.0.10:443: connect: connection refused"),
                  "E") + "\n"
    log = tmp_path / "k.log"
    log.write_text(noise + noise + hit + noise)
    _, parts, plans = _both(monkeypatch, [str(log)], parts=4)
    assert len(plans[0].ranges) == 4
    locations = [e["location"] for f in parts["findings"] for e in f["evidence"]]
    assert f"{log}:6001" in locations
    assert parts["stats"]["lines"] == 9001


def test_a_cut_never_separates_a_klog_multiline_value_or_a_cri_partial(tmp_path):
    value = "E0224 15:32:50.984784       1 dispatcher.go:217] \"failed\" err=<\n" + "\tline\n" * 50 + " > x=1\n"
    partial = "".join(lb.cri("x" * 100, tag="P") + "\n" for _ in range(50)) + lb.cri("end") + "\n"
    body = (value + partial) * 40
    log = tmp_path / "m.log"
    log.write_text(body)
    data = body.encode()
    fd, _ = split.open_regular(str(log))
    for cut in split.cuts(fd, len(data), 16):
        nxt = data[cut:data.index(b"\n", cut)]
        prev = data[data.rindex(b"\n", 0, cut - 1) + 1:cut - 1]
        assert not nxt.startswith((b"\t", b" >")), (cut, nxt)
        assert b" stderr P " not in prev, (cut, prev)


def test_no_safe_cut_means_one_pass(monkeypatch, tmp_path):
    log = tmp_path / "wrapped.log"
    log.write_text(lb.klog("x" * 70) + "\n" + "continued " * 10 + "\n")  # a long line, then its wrapped rest
    monkeypatch.setattr(parallel, "MIN_SIZE", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    assert parallel.plan(engine.sources.expand([str(log)])[0], engine.LOG_SAMPLE) is None


def test_a_killed_worker_is_replaced_by_this_process(monkeypatch, tmp_path):
    path = next(p for p in FIXTURES if p.endswith("connection-refused.log"))
    big = tmp_path / "big.log"
    big.write_bytes(open(path, "rb").read() * 20)
    one, _, _ = _both(monkeypatch, [str(big)], parts=3)
    real_child = forked._child

    def dying(i, fd, work):
        if i == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        real_child(i, fd, work)

    monkeypatch.setattr(forked, "_child", dying)
    assert _diagnosis([str(big)]) == one


def test_a_workers_error_is_raised_here(monkeypatch, tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes(open(FIXTURES[0], "rb").read() * 10)
    monkeypatch.setattr(parallel, "MIN_SIZE", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    real_readinto = split.RangeReader.readinto

    def failing(self, view):
        if self.pos > 0:
            raise BadInput(f"{self.fd}: went away")
        return real_readinto(self, view)

    monkeypatch.setattr(split.RangeReader, "readinto", failing)
    with pytest.raises(BadInput, match="went away"):
        engine.diagnose_paths([str(big)])


def test_children_do_not_outlive_the_scan(monkeypatch):
    pids = []
    with forked.Forked(3, lambda i, send: send(os.getpid())) as kids:
        for i in (1, 2):
            pids += list(kids.stream(i))
        kids.drain()
    assert len(pids) == 2 and os.getpid() not in pids
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_binary_and_gzip_files_are_refused_or_read_as_before(monkeypatch, tmp_path):
    import gzip

    monkeypatch.setattr(parallel, "MIN_SIZE", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    binary = tmp_path / "b.log"
    binary.write_bytes(b"\x00\x01\x02" * 10000)
    with pytest.raises(BadInput, match="binary data"):
        engine.diagnose_paths([str(binary)])
    gz = tmp_path / "g.log.gz"
    gz.write_bytes(gzip.compress(open(FIXTURES[0], "rb").read()))
    assert parallel.plan(engine.sources.expand([str(gz)])[0], engine.LOG_SAMPLE) is None
    assert json.dumps(_diagnosis([str(gz)]))


def test_a_log_rotated_during_the_scan_is_read_whole_and_alone(monkeypatch, tmp_path):
    log = tmp_path / "kube-apiserver.log"
    body = b"".join(open(p, "rb").read() for p in FIXTURES[:20])
    log.write_bytes(body)
    one, _, _ = _both(monkeypatch, [str(log)], parts=4)
    real_plan = parallel.plan

    def rotating(src, head):
        p = real_plan(src, head)
        os.rename(log, tmp_path / "kube-apiserver.log.1")  # logrotate: rename, then a new file in its place
        log.write_bytes(b"I0101 00:00:00.000000 1 x.go:1] a new file\n" * 50000)
        return p

    monkeypatch.setattr(parallel, "plan", rotating)
    fds = len(os.listdir("/proc/self/fd"))
    assert _diagnosis([str(log)]) == one
    assert len(os.listdir("/proc/self/fd")) == fds, "a descriptor was left open"
