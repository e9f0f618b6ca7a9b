"""The scanner finds the same records however the stream is chunked, with either engine."""

from __future__ import annotations

import random

import pytest

from breakglass.diagnose.signatures import ANCHORS, PATTERNS
from breakglass.logs import scanner as sc
from tests import logbuild as lb


def _log(n=400, seed=1):
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        r = rnd.random()
        if r < 0.05:
            lines.append(lb.klog(lb.fail_closed("a.b.c", "connection refused")))
        elif r < 0.07:
            line = lb.klog(lb.fail_open("x.y", "EOF"))
            lines += [lb.cri(line[:50], "P"), lb.cri(line[50:])]
        elif r < 0.09:
            lines.append(lb.hard_wrap(lb.klog(lb.fail_closed("w.r", "EOF")), 70))
        else:
            lines.append(f"I0224 15:32:50.{i:06d}       1 httplog.go:134] GET /api/v1/pods {i}")
    return ("\n".join(lines) + "\n").encode()


def _records(data, chunk, engine):
    s = sc.Scanner(ANCHORS, engine)
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    return [(r.line, r.end_line, r.text) for r in s.records(chunks)], s.lines


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 1 << 20])
@pytest.mark.parametrize("engine", ["python", "auto"])
def test_chunking_and_engine_do_not_change_records(chunk, engine):
    data = _log()
    want, lines = _records(data, 1 << 24, "python")
    got, got_lines = _records(data, chunk, engine)
    assert got == want
    assert got_lines == lines == data.count(b"\n")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 1 << 20])
def test_reading_into_the_buffer_gives_the_same_records(tmp_path, chunk):
    from breakglass.logs.split import RangeReader, open_regular

    data = _log(seed=3)
    path = tmp_path / "k.log"
    path.write_bytes(data)
    want, lines = _records(data, 1 << 24, "python")
    reads = []
    s = sc.Scanner(ANCHORS, "auto")
    fd, _ = open_regular(str(path))
    got = [(r.line, r.end_line, r.text) for r in s.records(RangeReader(fd, 0, len(data), chunk, reads.append))]
    assert got == want and s.lines == lines
    assert sum(reads) == len(data) and max(reads) <= chunk


def test_line_numbers_point_at_the_hit():
    data = b"a\nb\nW0224 15:32:50.000000 1 x.go:1] Failed calling webhook, failing open h: EOF\nI0224 15:32:50.000000 1 x.go:1] c\n"
    [(line, end, text)], _ = _records(data, 3, "python")
    assert (line, end) == (3, 3) and text.startswith(b"W0224")


def test_partial_and_wrapped_lines_are_joined():
    data = _log()
    recs, _ = _records(data, 4096, "python")
    partials = [t for _, _, t in recs if b" P " in t]
    assert partials and all(t.count(b"\n") == 1 for t in partials)
    wrapped = [t for _, _, t in recs if b"w.r" in t]
    assert wrapped and all(t.count(b"\n") >= 2 for t in wrapped)


def test_an_endless_line_stays_bounded():
    # the hit before the cut at FORCE_CUT (what lies after it is not read: tests/test_huge_lines.py)
    data = b"x" * (sc.FORCE_CUT - 5000) + b" failing open h: EOF webhook " + b"y" * (sc.FORCE_CUT * 2) + b"\n"
    recs, lines = _records(data, 1 << 20, "python")
    assert lines == 1
    assert recs and all(len(t) <= sc.MAX_RECORD for _, _, t in recs)


def test_every_signature_contains_an_anchor():
    """A signature whose text holds no anchor would never reach the classifier."""
    samples = {
        "fail-mode": lb.fail_closed("h", "EOF"), "call-failed": lb.call_error("h", "EOF"),
        "denied": 'admission webhook "h" denied the request: no', "rejected": 'rejected by webhook "h": x',
        "canceled": "Context canceled when calling webhook h", "panic": "Panic calling webhook, failing open h: x",
        "policy-denied": "ValidatingAdmissionPolicy 'p' denied request: x",
        "hook-fatal": 'PostStartHook "h" failed: x', "readyz-item": "[-]poststarthook/h failed: reason withheld",
        "readyz-log": "poststarthook/h check failed: readyz",
        "not-ready": 'ipaddresses.networking.k8s.io "1.2.3.4" is forbidden: not yet ready to handle request',
        "leader": "failed to renew lease kube-system/kube-scheduler: x",
        "boot-0": "Creating default ServiceCIDR with CIDRs: [10.0.0.0/12]",
        "boot-1": "error initializing the default ServiceCIDR: x",
        "boot-2": "Setting default ServiceCIDR condition Ready to True",
        "boot-3": "unable to create required kubernetes system namespace kube-system: x",
        "boot-4": "unable to create PriorityClass system-node-critical: x",
        "boot-5": "all system priority classes are created successfully or already exist.",
        "boot-6": "unable to reconcile clusterrole.rbac.authorization.k8s.io/admin: x",
        "boot-7": "unable to initialize clusterroles: x",
        "boot-8": "unable to initialize APF bootstrap configuration: x",
        "boot-9": "unable to sync kubernetes service: x",
        "boot-10": "unable to perform initial IP and Port allocation check",
        "boot-11": "unable to initialize client CA configmap: x",
        "boot-12": "failed to ensure lease exists, will retry in 7s",
        "unhealthy": "static Pod hash for component kube-apiserver on Node cp1 did not change after 5m0s",
        "started": "Version: v1.37.2",
    }
    assert set(samples) == set(PATTERNS)
    from breakglass.diagnose.signatures import record_gate
    for name, text in samples.items():
        assert PATTERNS[name].search(text), name
        assert any(a in text.encode() for a in ANCHORS), name
        assert record_gate(text.encode()), name
