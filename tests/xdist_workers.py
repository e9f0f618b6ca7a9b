"""How `make test` runs the suite on pytest-xdist workers side by side (registered by tests/conftest.py).

Each worker sees what a test run alone sees: its own slice of loopback ports, and the controller's terminal
environment (GNU readline, imported by pytest's debugging plugin, exports COLUMNS=80 and LINES=24 in a worker, and
breakglass folds its text to $COLUMNS: a line the tests expect whole would come out folded).

Each test is a unit of its own and goes to whichever worker is free, except the tests that share a module- or
class-scoped fixture (a real apiserver, Kyverno, a built image): those form one unit, sent whole to one worker, so
the fixture starts once. A module-scoped fixture split over four workers would start four times, and a module
whose tests build on each other's state (Gatekeeper killed in one test, its leaks counted in the next) would
break.

xdist's own `--dist loadgroup` reads an `xdist_group` mark by appending it to the test's node id, which pytest 9.2
no longer lets a plugin change (pytest-dev/pytest-xdist#1386): the marks are silently ignored. So the workers,
which collect the tests, write each test's unit to a file, and the controller's scheduler (xdist's LoadScope
scheduling with our units) reads it before it hands anything out.
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest

SHARED_SCOPES = ("module", "class", "package")
_KEY = "breakglass_units_dir"
_TERMINAL = ("COLUMNS", "LINES")


def unit_of(item) -> str:
    """The unit ``item`` is scheduled in: its own node id, or its module's when it shares a fixture there. The
    tests that wait for a `later` build form a unit of their own, so they still run last (tests/conftest.py)."""
    info = getattr(item, "_fixtureinfo", None)
    shared = info is not None and any(d.scope in SHARED_SCOPES for defs in info.name2fixturedefs.values()
                                      for d in defs)
    late = " (later)" if item.get_closest_marker("later_build") else ""
    return (item.nodeid.split("::", 1)[0] if shared else item.nodeid) + late


class Controller:
    """In the process that starts the workers: a directory they write their units to, and the scheduler."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="breakglass-xdist-")

    @pytest.hookimpl
    def pytest_configure_node(self, node) -> None:
        node.workerinput[_KEY] = self.dir
        node.workerinput["breakglass_terminal"] = {k: os.environ.get(k) for k in _TERMINAL}

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") not in ("load", "loadgroup"):  # `pytest -n 4` alone is "load"
            return None
        from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - only under xdist

        units_dir = self.dir

        class UnitScheduling(LoadScopeScheduling):
            units: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self.units is None:  # every worker has written its file before it reports its collection
                    self.units = {}
                    for name in sorted(n for n in os.listdir(units_dir) if not n.startswith(".")):
                        with open(os.path.join(units_dir, name), encoding="utf-8") as f:
                            self.units.update(json.load(f))
                return self.units.get(nodeid, nodeid)

            def schedule(self) -> None:
                first = self.collection is None
                super().schedule()
                if first and self.workqueue:
                    _biggest_groups_first(self.workqueue)

        return UnitScheduling(config, log)

    @pytest.hookimpl
    def pytest_unconfigure(self, config) -> None:
        import shutil  # noqa: PLC0415

        shutil.rmtree(self.dir, ignore_errors=True)


def _biggest_groups_first(workqueue) -> None:
    """What is left after each worker's first unit, reordered: the module groups (a real component each, minutes of
    work) by size, then the single tests in their order, then what waits for a `later` build. A big group drawn
    last would leave the other workers idle at the end while one works through it."""
    units = list(workqueue.items())
    workqueue.clear()
    later = [u for u in units if u[0].endswith(" (later)")]
    groups = sorted((u for u in units if "::" not in u[0] and u not in later), key=lambda u: -len(u[1]))
    singles = [u for u in units if "::" in u[0] and u not in later]
    for scope, nodeids in groups + singles + later:
        workqueue[scope] = nodeids


class Worker:
    """In each worker: the units of what it collected, written before xdist reports the collection."""

    def __init__(self, directory: str, terminal: dict) -> None:
        self.dir = directory
        for k, v in terminal.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _a_port_range()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session) -> None:
        units = {item.nodeid: unit_of(item) for item in session.items}
        units = {k: v for k, v in units.items() if k != v}
        name = os.environ.get("PYTEST_XDIST_WORKER", "gw")
        tmp = os.path.join(self.dir, f".{name}.json")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(units, f)
        os.replace(tmp, os.path.join(self.dir, f"{name}.json"))


def register(config) -> None:
    """Under xdist only: the controller's scheduler, or a worker's report of its units."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        if config.getvalue("numprocesses"):
            config.pluginmanager.register(Controller(), "breakglass-xdist-controller")
    elif _KEY in workerinput:
        config.pluginmanager.register(Worker(workerinput[_KEY], workerinput.get("breakglass_terminal", {})),
                                      "breakglass-xdist-worker")


def _a_port_range() -> None:
    """Each worker takes its own slice of 10000-32767 (below the kernel's ephemeral range, so a client socket never
    lands in it) for every port the tests and the sandboxes they start choose (breakglass.sandbox.free_port,
    inherited by the processes through the environment). Two workers then never hand out the same port, and a
    probe of "our" port cannot be answered by the other worker's server."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    width = (32767 - 10000) // count
    low = 10000 + int(worker[2:]) * width
    os.environ["BREAKGLASS_PORT_RANGE"] = f"{low}-{low + width - 1}"
