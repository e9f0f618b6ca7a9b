"""A kubelet stand-in: it runs the real kube-apiserver with the arguments its node configuration implies,
and restarts it when that configuration changes. It stands in for the two things that cannot run here:
kubelet with a kubeadm static-pod manifest, and Talos' machined with a machine config.

What it does, and what the real ones do:

- kubeadm (``--manifest``): the container's ``command`` plus ``args``, run by the binary that stands for the
  container's ``image`` (``--images``: tag to binary), so an image bump upgrades the apiserver. A manifest that
  does not parse is a pod that no longer exists, so the apiserver is stopped, as kubelet does with a broken
  static-pod file.
- Talos (``--talos-config``): the base flags Talos' controller would pass (written by the sandbox) with the
  machine config's ``extraArgs`` on top (``cluster.apiServer.extraArgs``, or the 1.14+ ``KubeAPIServerConfig``
  document). When the Talos machinery binary is given (``--talos-machinery``), the config is validated by
  Talos' own code first and an invalid one is not applied, as ``talosctl apply`` would refuse it.
- A process that exits is restarted with a back-off (1 s doubling to 10 s; kubelet's is 10 s to 5 min,
  shortened so rehearsals do not wait).

Run as ``python -m breakglass.sandbox.kubelet``; the sandbox starts it in its own session and stops the whole
process group. ``kubelet.json`` beside the log says what runs: pid, argv, restarts, the last exit and error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import yaml

from breakglass.core.textfile import write_private


def argv_from_manifest(text: str) -> tuple[str, list[str]]:
    """(image, arguments) of the static pod's first container."""
    pod = yaml.safe_load(text)
    container = pod["spec"]["containers"][0]
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not argv:
        raise ValueError("the container has no command")
    return str(container.get("image") or ""), argv[1:]


def image_tag(image: str) -> str:
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""


def apiserver_from_talos(text: str) -> tuple[str, dict[str, str]]:
    """(image, extraArgs) of kube-apiserver in a machine config: the 1.14+ KubeAPIServerConfig document, else
    ``cluster.apiServer``."""
    spec: dict = {}
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "KubeAPIServerConfig":
            spec = doc
            break
        if isinstance(doc.get("cluster"), dict):
            spec = doc["cluster"].get("apiServer") or {}
    extra = spec.get("extraArgs") or {}
    # Talos 1.13+ accepts a list per key: the apiserver gets one comma-joined value.
    return str(spec.get("image") or ""), {str(k): ",".join(map(str, v)) if isinstance(v, list) else str(v)
                                          for k, v in extra.items()}


def argv_from_talos(text: str, base: list[str]) -> tuple[str, list[str]]:
    image, extra = apiserver_from_talos(text)
    args = dict(a[2:].split("=", 1) for a in base)
    args.update(extra)
    return image, [f"--{k}={v}" for k, v in sorted(args.items())]


class Kubelet:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.o = opts
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] | None = None
        self.seen: str | None = None
        self.restarts = 0
        self.last_exit: int | None = None
        self.error: str | None = None
        self.backoff = 1.0
        self.next_start = 0.0

    def desired(self) -> list[str] | None:
        """The argv the node configuration implies now, or None when it implies no apiserver."""
        source = self.o.manifest or self.o.talos_config
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            self.error = f"{source}: {e.strerror}"
            return None
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self.seen:
            return self.argv
        self.seen = digest
        try:
            if self.o.manifest:
                image, args = argv_from_manifest(text)
            else:
                self._talos_validate(source)
                with open(self.o.talos_base, encoding="utf-8") as f:
                    image, args = argv_from_talos(text, json.load(f))
            binary = self._pull(image)
        except (ValueError, KeyError, IndexError, TypeError, yaml.YAMLError) as e:
            self.error = f"{source}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            return self.argv if self.o.talos_config else None  # Talos keeps running; kubelet drops the pod
        self.error = None
        return [binary, *args]

    def _pull(self, image: str) -> str:
        """The binary that stands for ``image``: the sandbox's images.json maps tags (v1.34.4) to kube-apiserver
        binaries, so editing the manifest's image upgrades the apiserver as `kubeadm upgrade` does. An image
        with no binary is kubelet's ErrImagePull: no apiserver runs."""
        if not self.o.images:
            return self.o.binary
        with open(self.o.images, encoding="utf-8") as f:
            images = json.load(f)
        tag = image_tag(image)
        if tag not in images:
            raise ValueError(f"ErrImagePull: no kube-apiserver binary for image {image!r} (have: {', '.join(images)})")
        return images[tag]

    def _talos_validate(self, source: str) -> None:
        if not self.o.talos_machinery:
            return
        p = subprocess.run([self.o.talos_machinery, "validate", "--config", source, "--mode", "container"],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise ValueError("Talos rejected the config: " + (p.stderr.strip() or p.stdout.strip()))

    def stop_child(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def start_child(self, argv: list[str]) -> None:
        with open(self.o.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)

    def step(self) -> None:
        want = self.desired()
        if want != self.argv:
            self.stop_child()
            self.argv, self.backoff, self.next_start = want, 1.0, 0.0
        if self.proc and self.proc.poll() is not None:
            self.last_exit = self.proc.returncode
            self.proc = None
            self.restarts += 1
            self.next_start = time.monotonic() + self.backoff
            self.backoff = min(self.backoff * 2, 10.0)
        if self.argv and self.proc is None and time.monotonic() >= self.next_start:
            self.start_child(self.argv)
        self.write_state()

    def write_state(self) -> None:
        state = {"pid": self.proc.pid if self.proc else None, "argv": self.argv, "restarts": self.restarts,
                 "last_exit": self.last_exit, "error": self.error,
                 "source": self.o.manifest or self.o.talos_config}
        data = json.dumps(state, indent=2).encode()
        if data != getattr(self, "_written", None):
            write_private(self.o.state, data)
            self._written = data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="breakglass.sandbox.kubelet", description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--manifest")
    src.add_argument("--talos-config")
    ap.add_argument("--talos-base", help="JSON list of the base flags Talos would pass")
    ap.add_argument("--talos-machinery", help="the real Talos machinery binary, to validate as Talos does")
    ap.add_argument("--binary", required=True)
    ap.add_argument("--images", help="JSON map of image tags to kube-apiserver binaries")
    ap.add_argument("--log", required=True)
    ap.add_argument("--state", required=True)
    opts = ap.parse_args(argv)
    k = Kubelet(opts)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    while not stopping:
        k.step()
        time.sleep(0.25)
    k.stop_child()
    return 0


if __name__ == "__main__":
    sys.exit(main())
