"""A kubelet stand-in: it runs the real kube-apiserver with the arguments its node configuration implies,
and restarts it when that configuration changes. It stands in for the two things that cannot run here:
kubelet with a kubeadm static-pod manifest, and Talos' machined with a machine config.

What it does, and what the real ones do:

- kubeadm (``--manifest``): the container's ``command`` plus ``args``, run by the binary that stands for the
  container's ``image`` (``--image TAG PATH SHA256``, given by ``up``), so an image bump upgrades the apiserver.
  The binary is the one ``up`` pinned: nothing read from a file in the sandbox names what is executed, and it
  is checked against its sha256 before every start. A manifest that
  does not parse is a pod that no longer exists, so the apiserver is stopped, as kubelet does with a broken
  static-pod file.
- Talos (``--talos-config``): the base flags Talos' controller would pass (written by the sandbox) with the
  machine config's ``extraArgs`` on top (``cluster.apiServer.extraArgs``, or the 1.14+ ``KubeAPIServerConfig``
  document). When the Talos machinery binary is given (``--talos-machinery``), the config is validated by
  Talos' own code first and an invalid one is not applied, as ``talosctl apply`` would refuse it.
- A process that exits is restarted with a back-off (1 s doubling to 10 s; kubelet's is 10 s to 5 min,
  shortened so rehearsals do not wait).

On every read the sandbox directory (``--dir``) must still be the one it started in, and it and the file read
must be writable by no one but us (breakglass.sandbox.trust): a directory that is no longer trusted stops the
apiserver and this stand-in; a configuration file that is not is not applied.

Run as ``python -m breakglass.sandbox.kubelet``; the sandbox starts it in its process group and records it
and each apiserver it starts (breakglass.sandbox.procs). ``kubelet.json`` beside the log says what runs: pid,
argv, restarts, the last exit and error.
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

from breakglass.core.errors import BadInput
from breakglass.core.textfile import write_private
from breakglass.sandbox import procs, trust


class DirectoryUntrusted(Exception):
    """The sandbox directory changed hands or was swapped: nothing more is started from it."""


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
        self.images = {tag: trust.Pinned(path, sha) for tag, path, sha in opts.image}
        self.pinned = {p.path: p for p in self.images.values()}
        self.machinery = trust.Pinned(*opts.talos_machinery) if opts.talos_machinery else None
        st = trust.own_dir(opts.dir)
        self.dir_id = (st.st_dev, st.st_ino)

    def check_dir(self) -> None:
        """The sandbox directory is still the one we started in, and still only ours to write."""
        try:
            st = trust.own_dir(self.o.dir)
        except BadInput as e:
            raise DirectoryUntrusted(str(e)) from None
        if (st.st_dev, st.st_ino) != self.dir_id:
            raise DirectoryUntrusted(f"{self.o.dir} is no longer the directory the sandbox started in")

    def desired(self) -> list[str] | None:
        """The argv the node configuration implies now, or None when it implies no apiserver."""
        source = self.o.manifest or self.o.talos_config
        try:
            text = trust.read_own_file(source).decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            self.seen = None
            self.error = f"{source}: {getattr(e, 'strerror', None) or e}"
            return None
        except BadInput as e:  # another user could have written it: not applied, as an invalid one is not
            self.seen = None
            self.error = str(e)
            return self.argv if self.o.talos_config else None
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self.seen:
            return self.argv
        self.seen = digest
        try:
            if self.o.manifest:
                image, args = argv_from_manifest(text)
            else:
                self._talos_validate(source)
                image, args = argv_from_talos(text, json.loads(trust.read_own_file(self.o.talos_base)))
            binary = self._pull(image)
        except BadInput as e:
            self.seen = None
            self.error = str(e)
            return self.argv if self.o.talos_config else None
        except (ValueError, KeyError, IndexError, TypeError, yaml.YAMLError) as e:
            self.error = f"{source}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            return self.argv if self.o.talos_config else None  # Talos keeps running; kubelet drops the pod
        self.error = None
        self.image = image
        return [binary, *args]

    def _pull(self, image: str) -> str:
        """The binary that stands for ``image``: ``up`` gave the stand-in the image tags (v1.34.4) it may "pull"
        and the kube-apiserver binary of each, pinned, so editing the manifest's image upgrades the apiserver as
        `kubeadm upgrade` does. An image with no binary is kubelet's ErrImagePull: no apiserver runs."""
        tag = image_tag(image)
        if tag not in self.images:
            raise ValueError(f"ErrImagePull: no kube-apiserver binary for image {image!r} (have: "
                             f"{', '.join(self.images)})")
        return self.images[tag].path

    def _talos_validate(self, source: str) -> None:
        if not self.machinery:
            return
        p = subprocess.run([self.machinery.verify(), "validate", "--config", source, "--mode", "container"],
                           capture_output=True, text=True, timeout=60, cwd=self.o.dir)
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
        """Start the apiserver from its pinned binary (refused if it changed), logging beside it, recorded."""
        try:
            self.pinned[argv[0]].verify()
        except BadInput as e:
            self.error = str(e)
            self.next_start = time.monotonic() + self.backoff
            self.backoff = min(self.backoff * 2, 10.0)
            return
        fd = os.open(self.o.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            self.proc = subprocess.Popen(argv, stdout=fd, stderr=fd, stdin=subprocess.DEVNULL, cwd=self.o.dir)
        finally:
            os.close(fd)
        procs.record(self.o.dir, "apiserver", self.proc.pid)

    def step(self) -> None:
        self.check_dir()
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
                 "last_exit": self.last_exit, "error": self.error, "image": getattr(self, "image", None),
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
    ap.add_argument("--dir", required=True, help="the sandbox directory, checked on every read")
    ap.add_argument("--talos-base", help="JSON list of the base flags Talos would pass")
    ap.add_argument("--talos-machinery", nargs=2, metavar=("PATH", "SHA256"),
                    help="the real Talos machinery binary, to validate as Talos does")
    ap.add_argument("--image", nargs=3, action="append", required=True, metavar=("TAG", "PATH", "SHA256"),
                    help="an image tag and the kube-apiserver binary standing for it")
    ap.add_argument("--log", required=True)
    ap.add_argument("--state", required=True)
    opts = ap.parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    k = None
    try:
        k = Kubelet(opts)
        while not stopping:
            k.step()
            time.sleep(0.25)
    except (DirectoryUntrusted, BadInput) as e:
        print(f"kubelet stand-in: stopping, nothing more is started: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        if k is not None:
            k.stop_child()
    return 0


if __name__ == "__main__":
    sys.exit(main())
