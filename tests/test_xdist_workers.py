"""`make test` runs on pytest-xdist workers (tests/xdist_workers.py): the promises it relies on, checked on a small
suite of its own, run the same way. xdist's own grouping once stopped working without a word (its marks ignored
under pytest 9.2): this is what would say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

CONFTEST = """
def pytest_configure(config):
    from tests import xdist_workers
    xdist_workers.register(config)
"""

SHARED = """
import json, os, pytest

@pytest.fixture(scope="module")
def server():
    return {"pid": os.getpid(), "state": []}

@pytest.mark.parametrize("i", range(6))
def test_shared(server, i):
    server["state"].append(i)
    assert server["state"] == list(range(i + 1))  # the tests before it ran here, in order
    with open(os.path.join(os.environ["OUT"], f"shared-{i}.json"), "w") as f:
        json.dump({"worker": os.environ["PYTEST_XDIST_WORKER"], "pid": server["pid"]}, f)
"""

SINGLE = """
import json, os, pytest, time

@pytest.mark.parametrize("i", range(8))
def test_single(i):
    time.sleep(0.3)
    with open(os.path.join(os.environ["OUT"], f"single-{i}.json"), "w") as f:
        json.dump({"worker": os.environ["PYTEST_XDIST_WORKER"], "ports": os.environ.get("BREAKGLASS_PORT_RANGE"),
                   "columns": os.environ.get("COLUMNS"), "lines": os.environ.get("LINES")}, f)
"""


def test_a_modules_shared_fixture_runs_on_one_worker_and_each_worker_has_its_own_ports(tmp_path):
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_shared.py").write_text(textwrap.dedent(SHARED))
    (suite / "test_single.py").write_text(textwrap.dedent(SINGLE))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "BREAKGLASS_PORT_RANGE")
           and not k.startswith("PYTEST_")}
    env.update(OUT=str(out), PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "3", "-p", "no:cacheprovider", "--rootdir",
                        str(suite), str(suite)], capture_output=True, text=True, env=env, cwd=str(suite),
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    shared = [json.loads((out / f"shared-{i}.json").read_text()) for i in range(6)]
    assert len({(s["worker"], s["pid"]) for s in shared}) == 1, shared  # one unit: one worker, one fixture
    single = [json.loads((out / f"single-{i}.json").read_text()) for i in range(8)]
    workers = {s["worker"] for s in single}
    assert len(workers) >= 2, single  # the rest is spread
    ranges = {}
    for s in single:
        low, high = (int(x) for x in s["ports"].split("-"))
        assert 10000 <= low < high <= 32767, s  # below the kernel's ephemeral range
        ranges.setdefault(s["worker"], set()).add((low, high))
    assert all(len(r) == 1 for r in ranges.values()), ranges
    spans = sorted(next(iter(r)) for r in ranges.values())
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), spans  # disjoint
    # the controller had no COLUMNS: nor has a worker (readline would export 80 there)
    assert all(s["columns"] is None and s["lines"] is None for s in single), single
