"""A stand-in for the part of kubelet breakglass depends on: when the static pod manifest changes,
the kube-apiserver process is restarted with the manifest's command line. The "apiserver" is a
sleeping process whose argv[0] is kube-apiserver, so /proc shows what a real one would."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading

import yaml


class Kubelet:
    def __init__(self, manifest: str) -> None:
        self.manifest = manifest
        self.proc: subprocess.Popen | None = None
        self.seen = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "Kubelet":
        self._sync()
        self.thread.start()
        return self

    def _sync(self) -> None:
        try:
            data = open(self.manifest, "rb").read()
        except OSError:
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest == self.seen:
            return
        self.seen = digest
        try:
            pod = yaml.safe_load(data)
            cmd = pod["spec"]["containers"][0]["command"]
        except Exception:  # noqa: BLE001 - a broken manifest: kubelet keeps the old pod
            return
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        script = 'exec -a kube-apiserver "$0" -c "import time; time.sleep(600)" "$@"'
        self.proc = subprocess.Popen(["bash", "-c", script, sys.executable, *cmd[1:]])

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self._sync()

    def stop(self) -> None:
        self._stop.set()
        if self.proc:
            self.proc.kill()
            self.proc.wait()
