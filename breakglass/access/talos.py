"""Talos access through the ``talosctl`` binary (re-implementing its gRPC, mTLS and COSI
plumbing would only add ways to be wrong; shared reference §3.2).

Global flags are passed through as talosctl takes them: ``--talosconfig`` (else
``TALOSCONFIG``, else talosctl's own defaults), ``--context``, ``-e/--endpoints``. One node per
call (``-n NODE``): machine config is per node. Output parsing accepts both shapes of
``talosctl get mc -o yaml``: ``spec`` as a block string (1.12+) or as a mapping (older).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from breakglass.core.errors import BadInput, Unreachable


@dataclass
class Talos:
    talosctl: str = "talosctl"
    talosconfig: str | None = None
    context: str | None = None
    endpoints: list[str] = field(default_factory=list)
    timeout: float = 60.0

    def binary(self) -> str:
        path = shutil.which(self.talosctl) if os.sep not in self.talosctl else self.talosctl
        if not path or not os.access(path, os.X_OK):
            raise BadInput(f"talosctl not found ({self.talosctl!r}); install it or pass --talosctl PATH")
        return path

    def _base(self, node: str) -> list[str]:
        cmd = [self.binary()]
        if self.talosconfig:
            cmd += ["--talosconfig", self.talosconfig]
        if self.context:
            cmd += ["--context", self.context]
        if self.endpoints:
            cmd += ["-e", ",".join(self.endpoints)]
        return cmd + ["-n", node]

    def run(self, node: str, args: list[str], stdin: bytes | None = None) -> str:
        cmd = self._base(node) + args
        try:
            p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise Unreachable(f"talosctl {args[0]} on {node}: no answer in {self.timeout:g}s") from None
        except OSError as e:
            raise BadInput(f"cannot run talosctl: {e.strerror}") from None
        if p.returncode != 0:
            err = _first_error(p.stderr.decode("utf-8", "replace") or p.stdout.decode("utf-8", "replace"))
            raise Unreachable(f"talosctl {args[0]} on {node} failed: {err}")
        return p.stdout.decode("utf-8", "replace")

    def machine_config(self, node: str) -> str:
        """The node's active machine config as YAML text (all its documents)."""
        return parse_get_mc(self.run(node, ["get", "machineconfig", "v1alpha1", "-o", "yaml"]), node)

    def patch(self, node: str, patch_yaml: str, dry_run: bool = False, try_for: str | None = None) -> str:
        """Apply a strategic-merge patch without a reboot. ``try_for`` (a Go duration): in --mode=try, so the
        node puts its previous config back by itself at the deadline. Any apply in another mode, a dry run
        included, cancels a pending try's rollback on the node (machined's ApplyConfiguration does that first),
        so every dry run is made in try mode: checking a plan never disarms someone's dead man's switch. (Try
        mode validates as no-reboot does: CanApplyImmediate.)"""
        with tempfile.NamedTemporaryFile("w", prefix="breakglass-patch-", suffix=".yaml", delete=False) as f:
            f.write(patch_yaml)
            path = f.name
        try:
            mode = (["--mode=try", "--timeout", try_for or "1m"] if try_for or dry_run else ["--mode=no-reboot"])
            args = ["patch", "machineconfig", *mode, "--patch", f"@{path}"]
            if dry_run:
                args.append("--dry-run")
            return self.run(node, args)
        finally:
            os.unlink(path)

    def apiserver_container(self, node: str) -> str:
        """The kube-apiserver container id, preferring a running one (`talosctl containers -k`)."""
        out = self.run(node, ["containers", "-k"])
        best = None
        for line in out.splitlines():
            m = re.search(r"(kube-system/kube-apiserver-[^\s:]+:kube-apiserver(?::[0-9a-f]+)?)\s+\S+\s+\d+\s+(\S+)", line)
            if m:
                if m[2] == "CONTAINER_RUNNING":
                    return m[1]
                best = best or m[1]
        if best is None:
            raise Unreachable(f"no kube-apiserver container on {node} (is it a control-plane node?)")
        return best

    def files(self, node: str, root: str) -> list[str]:
        """Regular files at or under ``root`` on a node (`talosctl ls --type f --recurse`), full paths."""
        try:
            out = self.run(node, ["ls", root, "--type", "f", "--recurse"])
        except Unreachable as e:
            if "NotFound" in str(e) or "no such file" in str(e):  # the node answered: the path is wrong
                raise BadInput(f"{node}:{root}: no such file or directory") from None
            raise
        paths = []
        for line in out.splitlines():
            parts = line.split()
            if not parts or parts[-1] == "NAME":
                continue
            name = parts[-1]  # apid prefixes the node when it proxies; the name is the last column
            paths.append(root if name == "." else root.rstrip("/") + "/" + name)
        return paths

    def read_command(self, node: str, path: str) -> list[str]:
        return self._base(node) + ["read", path]

    def logs_command(self, node: str, container: str, tail: int | None = None) -> list[str]:
        cmd = self._base(node) + ["logs", "-k", container]
        if tail:
            cmd += ["--tail", str(tail)]
        return cmd


def _first_error(text: str) -> str:
    """The reason in talosctl's stderr. talosctl prints progress ("patched ... at the node X") before it returns
    the node's refusal as a gRPC error, so the gRPC line wins, then any other line that is not progress."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        m = re.search(r"rpc error: code = \w+ desc = (.*)", line)
        if m:
            desc = m.group(1)
            if re.fullmatch(r"\d+ errors? occurred:", desc):  # hashicorp multierror: the reasons follow as "* ..."
                desc = "; ".join(ln.lstrip("* ") for ln in lines[i + 1:] if ln.startswith("*")) or desc
            return desc[:300]
    for line in lines:
        if not line.startswith(("Usage", "Flags", "patched ", "Applied configuration", "Dry run")):
            return re.sub(r"^(error|Error):\s*", "", line)[:300]
    return "no error message"


def parse_get_mc(text: str, node: str) -> str:
    """The machine config inside `talosctl get mc v1alpha1 -o yaml` output, as YAML text."""
    import yaml  # noqa: PLC0415

    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as e:
        raise Unreachable(f"talosctl get mc on {node}: output is not YAML ({str(e).splitlines()[0]})") from None
    for d in docs:
        if not isinstance(d, dict) or "spec" not in d:
            continue
        meta = d.get("metadata") or {}
        if meta.get("id") not in (None, "v1alpha1"):
            continue
        spec = d["spec"]
        if isinstance(spec, str):
            return spec
        if isinstance(spec, dict):
            return yaml.safe_dump(spec, sort_keys=False)
    raise Unreachable(f"talosctl get mc on {node}: no machine config in the output")
