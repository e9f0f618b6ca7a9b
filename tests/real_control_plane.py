"""Helpers for the end-to-end tests on a real kube-apiserver: which versions are built, a sandbox per test,
readiness polling, and raw etcd reads for exact before/after comparisons."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from breakglass.sandbox import builds
from tests.conftest import ROOT, run_cli


def built(component: str) -> list[tuple[str, str]]:
    """(version, binary path) for every line of go/versions naming ``component``, built or not."""
    return [(b.version, b.binary) for b in builds.listed() if b.component == component]


APISERVERS = built("kube-apiserver")


def minor(version: str) -> int:
    return int(version.split(".")[1])


LATER = [b for b in builds.listed() if b.later]
# The mark of a test that needs a `later` build: make test builds those in the background while the other tests
# run, and conftest runs the marked ones last, so they wait for it as little as possible.
later_build = pytest.mark.later_build
BACKGROUND_WAIT_S = 3600.0  # the three newest apiservers take about 15 min alone; at nice 19 beside tests, more


def later(version: str) -> bool:
    """Is ``version`` (or a minor, "1.37") of kube-apiserver a `later` build?"""
    return any(b.component == "kube-apiserver" and (b.version == version or b.version.startswith(version + "."))
               for b in LATER)


def versions_params(versions) -> list:
    """pytest params of kube-apiserver versions (full or minor), the later builds' marked."""
    return [pytest.param(v, marks=later_build) if later(v) else v for v in versions]


def _background_build() -> int | None:
    """The pid of a running background build (scripts/gobuild.sh --later-in-background), if there is one."""
    try:
        with open(os.path.join(ROOT, "build", "later.pid"), encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:  # alive, and still ours (a stale file's pid may be reused)
            if b"gobuild" not in f.read():
                return None
    except (OSError, ValueError):
        return None
    return pid


def builds_settled() -> None:
    """Wait until no background build runs: for a test that counts what is built (the wizard lists every built
    kube-apiserver), which must count what the process it drives will see. Such a test is marked later_build."""
    deadline = time.monotonic() + BACKGROUND_WAIT_S
    while _background_build() and time.monotonic() < deadline:
        time.sleep(2)


def require(binary: str) -> None:
    """Skip with the reason when a real component is not built, except under CI, which must run these. While the
    background build runs, wait for it: the binary appears whole (renamed into place) or the build ends."""
    deadline = time.monotonic() + BACKGROUND_WAIT_S
    while not os.access(binary, os.X_OK) and _background_build() and time.monotonic() < deadline:
        time.sleep(2)
    if os.access(binary, os.X_OK):
        return
    why = f"{os.path.relpath(binary, ROOT)} is not built (make go-components; needs a Go toolchain)"
    log = os.path.join(ROOT, "build", "later.log")
    if os.path.exists(log):
        with open(log, "rb") as f:
            tail = f.read()[-600:].decode("utf-8", "replace").strip()
        why += f"; the background build's log (build/later.log) ends: {tail}"
    if os.environ.get("CI") == "true":
        pytest.fail(why + ": CI must run the real-apiserver tests")
    pytest.skip(why)


def wait_for(predicate, seconds: float = 60) -> None:
    """Poll ``predicate`` every 0.25 s until it holds; fail the test when ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.25)


def binary_for(version_prefix: str) -> tuple[str, str]:
    """The newest built version whose number starts with ``version_prefix`` ("1.34", "1.32")."""
    matches = [(v, b) for v, b in APISERVERS if v.startswith(version_prefix + ".")]
    if not matches:
        pytest.fail(f"go/versions has no kube-apiserver {version_prefix}.x")
    ver, binary = matches[-1]
    require(binary)
    return ver, binary


class Sandbox:
    """One sandbox with a real apiserver, driven through the CLI as a user would."""

    def __init__(self, tmp_path, binary: str, scenario: str = "deadlock", *extra: str) -> None:
        self.dir = str(tmp_path / "sandbox")
        self.state = str(tmp_path / "state")
        p = run_cli("sandbox", "up", "--dir", self.dir, "--apiserver", binary, "--scenario", scenario, "-o", "json",
                    *extra, env=self.env, timeout=600)
        assert p.returncode == 0, p.stderr.decode()
        self.info = json.loads(p.stdout)["result"]
        self.api = self.info["apiserver"]
        self.endpoint = self.info["endpoint"]

    @property
    def env(self) -> dict:
        return {"BREAKGLASS_STATE_DIR": self.state, "KUBECONFIG": "", "ETCDCTL_ENDPOINTS": ""}

    def cli(self, *args: str, timeout: float = 300):
        return run_cli(*args, env=self.env, timeout=timeout)

    def status(self) -> dict:
        p = self.cli("sandbox", "status", "--dir", self.dir, "-o", "json")
        assert p.returncode == 0, p.stderr.decode()
        return json.loads(p.stdout)["result"]["apiserver"]

    def wait(self, ready: bool, seconds: float = 120, failing: str | None = None) -> dict:
        """Poll until /readyz is 200 (ready) or names ``failing`` among its failed checks."""
        deadline = time.monotonic() + seconds
        st = {}
        while time.monotonic() < deadline:
            st = self.status()
            if ready and st["ready"]:
                return st
            if not ready and not st["ready"] and st["status"] and (failing is None or failing in st["failing"]):
                return st
            time.sleep(0.5)
        raise AssertionError(f"apiserver not {'ready' if ready else 'failing ' + str(failing)} after {seconds}s: "
                             f"{st}")

    def client(self):
        from breakglass.sandbox import pki
        from breakglass.sandbox.apiserver import Client

        return Client(self.api["url"], pki.load(os.path.join(self.dir, "pki")))

    def kubelet(self) -> dict:
        with open(os.path.join(self.dir, "kubelet.json"), encoding="utf-8") as f:
            return json.load(f)

    def log(self) -> str:
        with open(self.api["log"], encoding="utf-8", errors="replace") as f:
            return f.read()

    def etcd(self):
        import pyetcd

        host, port = self.endpoint.split("://")[1].split(":")
        return pyetcd.client(host, int(port), timeout=10)

    def etcd_value(self, key: str) -> bytes | None:
        c = self.etcd()
        try:
            value, _ = c.get(key)
            return value
        finally:
            c.close()

    def down(self) -> None:
        p = self.cli("sandbox", "down", "--dir", self.dir)
        assert p.returncode == 0, p.stderr.decode()


@pytest.fixture
def real_sandbox(tmp_path):
    made = []

    def make(binary: str, scenario: str = "deadlock") -> Sandbox:
        sb = Sandbox(tmp_path / str(len(made)), binary, scenario)
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.down()


def stop_group(proc: subprocess.Popen | None) -> None:
    """Stop a real component started in its own process group (it may have children), and reap it: SIGTERM,
    30 s to exit, then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def engine_sandbox(tmp_path, engine: str, scenario: str, *extra: str) -> "Sandbox":
    """`sandbox up --engine ENGINE` on the newest 1.34 build, skipped (failed under CI) where the engine is not
    built."""
    from breakglass.sandbox import engines

    _, binary = binary_for("1.34")
    require(engines.binary(engine) or os.path.join(engines.ROOT, "build", engine, "missing"))
    return Sandbox(tmp_path, binary, scenario, "--engine", engine, *extra)

