from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from breakglass.diagnose.engine import Options, diagnose_sources
from breakglass.logs.sources import LogSource


def _ctrl_c_reaches_the_children() -> None:
    """A shell starts a background job (`make test &`, a CI runner's detached step) with SIGINT ignored, and an
    ignored signal stays ignored across exec: every breakglass the tests start would then ignore the Ctrl-C the
    tests send it (a pty's ^C, the fault injection's SIGINT), and exit 0 where a person's Ctrl-C gives 130.
    With a handler here instead, exec resets it to the default in each child."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_ctrl_c_reaches_the_children()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def diagnose_text(text: str | bytes, engine: str = "auto", name: str = "t.log", year: int = 2026):
    data = text.encode() if isinstance(text, str) else text
    src = LogSource(name=name, opener=lambda: io.BytesIO(data))
    return diagnose_sources([src], Options(year=year, engine=engine))


def manual(page: str | None = None) -> str:
    """The manual's text: one page of docs/ (``commands/runs.md``), or the README and every page."""
    import glob  # noqa: PLC0415

    if page is not None:
        with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as f:
            return f.read()
    paths = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                                 recursive=True))
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            out.append(f.read())
    return "\n".join(out)


def run_cli(*args: str, stdin: bytes | None = None, env: dict | None = None, timeout: float = 120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "breakglass", *args], input=stdin, capture_output=True,
                          timeout=timeout, cwd=ROOT, env=e)


@pytest.fixture
def diag():
    return diagnose_text


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory):
    from tests import etcd_server as es
    srv = es.start(str(tmp_path_factory.mktemp("etcd")))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def etcd_tls(tmp_path_factory):
    from tests import etcd_server as es
    srv = es.start(str(tmp_path_factory.mktemp("etcd-tls")), tls=True)
    yield srv
    srv.stop()


@pytest.fixture
def etcd_clean(etcd_server):
    """The plain etcd, emptied before the test (tests share one server)."""
    from tests import etcd_server as es
    c = es.raw_client(etcd_server)
    c.delete_prefix(b"/")
    yield etcd_server
    c.close()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the OpenSSH fixture needs root (sshd privilege separation); CI runs as root")
    from tests import sshd_server
    srv = sshd_server.start(str(tmp_path_factory.mktemp("ssh")))
    yield srv
    srv.stop()


@pytest.hookimpl(trylast=True)  # after pytest groups items by their parametrized fixtures
def pytest_collection_modifyitems(config, items):
    """Tests that need a `later` build (go/versions) run last: `make test` builds those in the background meanwhile
    (scripts/gobuild.sh --later-in-background), so they wait for it as little as possible. The order is otherwise
    kept, so a module's parametrized fixture still sets up once per parameter."""
    late = [item for item in items if item.get_closest_marker("later_build")]
    if late:
        items[:] = [item for item in items if not item.get_closest_marker("later_build")] + late


def pytest_configure(config):
    """Under pytest-xdist: each worker's ports and terminal, and the tests that share a module's fixture on one
    worker (tests/xdist_workers.py)."""
    from tests import xdist_workers  # noqa: PLC0415

    xdist_workers.register(config)


def unfold_lines(lines: list[str]) -> list[str]:
    """Text lines as they were before breakglass folded them to the terminal (present.layout): a ``↪`` line goes
    back on its line (with the space it broke at, or none after a separator), a command's `` \\`` line on the
    next."""
    out: list[str] = []
    glue = False
    for ln in lines:
        cont = ln.lstrip().startswith("↪ ")
        if out and (glue or cont):
            rest = ln.lstrip()[2:] if cont else ln.lstrip()
            out[-1] += ("" if out[-1].endswith(("/", ",", "=", ":", "-")) and not glue else " ") + rest
        else:
            out.append(ln)
        glue = out[-1].endswith(" \\")
        if glue:
            out[-1] = out[-1][:-2]
    return out


# --- the timing report at the end of `make test` (issue 46 §5): where CI's 90 minutes go, in every CI log ----------
_SECONDS: dict[str, float] = {}  # test module -> seconds (setup, call and teardown)
# A module that starts real components (etcd, sshd, kube-apiserver, kine, k3s, Kyverno, Gatekeeper, konnectivity)
_REAL = ("real_control_plane", "real_engines", "real_apiserver_session", "etcd_server", "sshd_server", "etcd_clean",
         "def sshd", "build/kube-apiserver", "kine", "k3s_standin")


_STARTED = time.monotonic()


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _SECONDS[path] = _SECONDS.get(path, 0.0) + report.duration


def _starts_real_components(path: str) -> bool:
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    return any(word in text for word in _REAL)


def pytest_terminal_summary(terminalreporter):
    if not _SECONDS:
        return
    real = {p: s for p, s in _SECONDS.items() if _starts_real_components(p)}
    tests = sum(_SECONDS.values())
    builds = os.environ.get("BREAKGLASS_BUILD_SECONDS")
    w = terminalreporter.write_line
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT") or str(getattr(terminalreporter.config.option,
                                                                           "numprocesses", None) or 1)
    w(f"timing: wall {time.monotonic() - _STARTED:.0f} s for the tests on {workers} worker(s)")
    w(f"timing: {'builds ' + builds + ' s (before the tests), ' if builds else ''}tests {tests:.0f} s summed over "
      f"the workers: real "
      f"components {sum(real.values()):.0f} s in {len(real)} modules, the rest {tests - sum(real.values()):.0f} s "
      f"in {len(_SECONDS) - len(real)}")
    top = sorted(_SECONDS.items(), key=lambda kv: -kv[1])[:10]
    w("timing: slowest modules: " + ", ".join(f"{os.path.basename(p)} {s:.0f} s" for p, s in top))
