"""A real policy engine (breakglass.sandbox.engines) under test: one process on a test's real apiserver, started,
SIGKILLed (an outage), waited on without timing anything, and breakglass run against the same cluster. Its log
and the apiserver's stay in the test's directory and are named in every failure."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from breakglass.sandbox import engines, free_port
from tests.conftest import run_cli


def wait_for(what: str, test, seconds: float = 180, proc: subprocess.Popen | None = None, logs: str = "",
             name: str = "the engine"):
    """Poll ``test`` until it returns something true (returned); fail naming ``what`` if ``proc`` exits first or
    the deadline passes (a deadline for a hung engine, never an assertion about speed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{name} exited ({proc.returncode}) while waiting for {what} {logs}")
        time.sleep(0.3)
    pytest.fail(f"never in {seconds:g} s: {what} {logs}")


def kill(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


class EngineUnderTest:
    """Subclasses set ``engine`` (an engines.Engine) and ``name``."""

    name = "the engine"

    def __init__(self, directory: str, api) -> None:
        self.dir, self.api, self.client = directory, api, api.client
        self.kubeconfig = api.layout.kubeconfig
        self.proc: subprocess.Popen | None = None

    def logs(self) -> str:
        return f"(logs: {self.engine.log}, {self.api.layout.log})"

    def start(self) -> None:
        self.proc = self.engine.start()

    def kill(self) -> None:
        kill(self.proc)
        self.proc = None

    def until(self, what: str, test, seconds: float = 180):
        return wait_for(what, test, seconds, self.proc, self.logs(), self.name)

    def cli(self, *args: str, timeout: float = 300):
        env = {"BREAKGLASS_STATE_DIR": os.path.join(self.dir, "state"), "KUBECONFIG": self.kubeconfig}
        return run_cli(*args, env=env, timeout=timeout)


class Gatekeeper(EngineUnderTest):
    name = "Gatekeeper"

    def __init__(self, directory: str, api) -> None:
        super().__init__(directory, api)
        self.port = free_port()
        self.cert_dir = os.path.join(directory, "gatekeeper-certs")
        os.makedirs(self.cert_dir, exist_ok=True)
        shutil.copy(api.pki.webhook_cert, os.path.join(self.cert_dir, "tls.crt"))
        shutil.copy(api.pki.webhook_key, os.path.join(self.cert_dir, "tls.key"))
        shutil.copy(api.pki.ca, os.path.join(self.cert_dir, "ca.crt"))
        with open(api.pki.ca, "rb") as f:
            self.bundle = base64.b64encode(f.read()).decode()
        self.engine = engines.gatekeeper(directory, self.kubeconfig, self.port, self.cert_dir)
        self.probes: set = set()  # ConfigMaps that got in while it was starting (failing open)

    def install_and_start(self, version: str) -> None:
        """Its own install, the process, and the seed's ConstraintTemplate and constraint accepted."""
        engines.apply(self.client, engines.gatekeeper_install(version, f"https://127.0.0.1:{self.port}", self.bundle))
        self.start()
        self.until("the ConstraintTemplate accepted", lambda: self.client.call(
            "POST", "/apis/templates.gatekeeper.sh/v1/constrainttemplates", engines.GATEKEEPER_TEMPLATE)[0]
            in (200, 201, 409))
        self.until("the constraint CRD made and the constraint accepted", lambda: self.client.call(
            "POST", "/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels", engines.GATEKEEPER_CONSTRAINT)[0]
            in (200, 201, 409))

    def configmap(self, name: str, labels: dict | None = None) -> tuple[int, dict]:
        return self.client.call("POST", "/api/v1/namespaces/default/configmaps",
                                {"metadata": {"name": name, "labels": labels or {}}})


def denying(gk) -> set:
    """Wait for Gatekeeper to deny again; the probes that got in meanwhile (it failed open while starting: they
    are leaks too, and deleted at once), by name."""
    admitted = set()

    def denied() -> bool:
        status, doc = gk.configmap(f"probe-{time.monotonic_ns()}")
        if status == 201:
            admitted.add(doc["metadata"]["name"])
            gk.client.call("DELETE", f"/api/v1/namespaces/default/configmaps/{doc['metadata']['name']}")
        return status == 403

    gk.until("Gatekeeper denying again", denied)
    return admitted


class Traffic(threading.Thread):
    """ConfigMaps violating the seed's constraint (no owner label), one after another, each name's answer kept:
    what a user keeps sending while the tunnel breaks."""

    def __init__(self, client) -> None:
        super().__init__(daemon=True)
        self.client, self.answers, self.stop = client, {}, threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            name = f"traffic-{i:05d}"
            status, _ = self.client.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}})
            self.answers[name] = status
            i += 1

    def count(self, status: int) -> int:
        return sum(1 for s in list(self.answers.values()) if s == status)

    def finish(self) -> set:
        """Stop sending; the names that got in (201)."""
        self.stop.set()
        self.join(60)
        return {n for n, s in self.answers.items() if s == 201}
