"""The kubeadm remedy: add --disable-admission-plugins to kube-apiserver's static pod manifest.

On each control-plane node (over SSH, or locally with --manifest): read the manifest, apply the
shared flag rules to its command line, back it up outside the manifests directory (on the node
and in the run directory), and write it atomically: a dot-prefixed temp file in the same
directory (kubelet ignores dot files and runs every other file there, backups included),
length and sha256 checked, fsync, rename, mode and owner kept, all in one remote script that
first compares the current file with the one that was read. Then wait for a kube-apiserver
process running with the new flag. Revert writes the previous bytes back the same way, only if
the manifest is still the one breakglass wrote.

The edit is line-based so the rest of the manifest stays byte for byte as it was; kubeadm
writes flags sorted, and the new flag goes where the sort puts it.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex

from breakglass.core import textfile
from breakglass.access.ssh import remote_path
from breakglass.core.errors import BadInput, PreconditionFailed
from breakglass.core.journal import Run
from breakglass.text import admission_flags as flags
from breakglass.ways import nodefile
from breakglass.ways.nodefile import sha
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED, RevertOutcome, Step

DEFAULT_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
NODE_BACKUP_DIR = "/etc/kubernetes/breakglass-backup"
_FLAG_LINE = re.compile(r"^(?P<indent>\s*)-\s+(?P<q>['\"]?)--(?P<key>[a-z0-9-]+)(?:=(?P<value>.*?))?(?P=q)\s*$")


def _command_flags(text: str, source: str) -> tuple[list[str], dict[str, int]]:
    """The manifest's lines, and for each flag of the kube-apiserver command the line it is on."""
    import yaml  # noqa: PLC0415

    try:
        pod = textfile.load_yaml(text, source, "a static pod manifest")
    except yaml.YAMLError as e:
        raise BadInput(f"{source}: invalid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    containers = ((pod or {}).get("spec") or {}).get("containers") if isinstance(pod, dict) else None
    if not isinstance(containers, list):
        raise BadInput(f"{source}: not a static pod manifest (no spec.containers)")
    api = next((c for c in containers if isinstance(c, dict) and (c.get("name") == "kube-apiserver" or str(
        (c.get("command") or [""])[0]).endswith("kube-apiserver"))), None)
    if api is None or not isinstance(api.get("command"), list):
        raise BadInput(f"{source}: no kube-apiserver container with a command in this manifest")
    lines = text.split("\n")
    where: dict[str, int] = {}
    for i, line in enumerate(lines):
        m = _FLAG_LINE.match(line)
        if m:
            where[m["key"]] = i
    wanted = {str(a).split("=", 1)[0][2:] for a in api["command"][1:] if str(a).startswith("--")}
    if not wanted or not wanted <= set(where):
        raise BadInput(f"{source}: the kube-apiserver command is not written one `- --flag=value` per line; "
                       f"edit it by hand")
    return lines, where


def _value(lines: list[str], where: dict[str, int], key: str) -> str | None:
    if key not in where:
        return None
    return _FLAG_LINE.match(lines[where[key]])["value"] or ""


def edit(text: str, plugins: list[str], source: str) -> tuple[str, flags.FlagChange]:
    """The new manifest text and the flag change."""
    lines, where = _command_flags(text, source)
    current = {k: _value(lines, where, k) for k in (flags.DISABLE, flags.ENABLE)}
    ch = flags.disable({k: v for k, v in current.items() if v is not None}, plugins)
    if not ch.changed:
        return text, ch
    indent = _FLAG_LINE.match(lines[min(where.values())])["indent"]
    new: list[str | None] = list(lines)
    inserts = []
    by_line = sorted(where.items(), key=lambda kv: kv[1])
    for key in (flags.DISABLE, flags.ENABLE):
        value = ch.after.get(key)
        if value == ch.before.get(key):
            continue
        if value is None:
            new[where[key]] = None
        elif key in where:
            new[where[key]] = f"{indent}- --{key}={value}"
        else:  # where kubeadm's sorted order puts it
            pos = next((i for k, i in by_line if k > key), by_line[-1][1] + 1)
            inserts.append((pos, f"{indent}- --{key}={value}"))
    for pos, line in sorted(inserts, reverse=True):
        new.insert(pos, line)
    new = [line for line in new if line is not None]
    return "\n".join(new), ch


def write_remote(node, path: str, expected_sha: str, data: bytes, pause: float = 0.0) -> None:
    nodefile.write_remote(node, path, expected_sha, data, pause)


def read_remote(node, path: str) -> bytes:
    return nodefile.read_remote(node, path, "no such manifest (not a kubeadm control-plane node?)")


def process_with_flag(flag: str) -> str:
    """A node-side command printing a kube-apiserver process's command line that carries ``flag``, if any."""
    return ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | "
            "grep -E '(^|/)kube-apiserver ' | grep -F -- " + shlex.quote(flag + " ") + " | head -1")


class KubeadmFlags(nodefile.Nodes):
    method = "kubeadm"

    def __init__(self, nodes: dict, manifest: str = DEFAULT_MANIFEST, plugins: list[str] = (),
                 verify_timeout: float = 180.0, local: bool = False, backup_dir: str = NODE_BACKUP_DIR) -> None:
        self.nodes = nodes  # host -> Node (SSH) or LocalNode
        # Paths on the node (also when they come from a run's journal): absolute, never an option.
        self.manifest = remote_path(manifest, "manifest path")
        self.backup_dir = backup_dir if local else remote_path(backup_dir, "node backup directory")
        self.plugins = list(plugins)
        self.verify_timeout = verify_timeout
        self.on_wait = None  # called with one line while verify waits for kubelet (a spinner on a terminal)
        self.local = local
        self.skipped: list[str] = []

    def describe_target(self) -> dict:
        return {"hosts": list(self.nodes), "manifest": self.manifest, "plugins": self.plugins, "local": self.local,
                "backup_dir": self.backup_dir}

    def plan(self) -> list[Step]:
        plugins = flags.check_plugins(self.plugins)
        steps = []
        for host, node in self.nodes.items():
            where = f"{host}:{self.manifest}"
            raw = read_remote(node, self.manifest)
            text = textfile.decode(raw, where, "a static pod manifest")
            new, ch = edit(text, plugins, where)
            if not ch.changed:
                self.skipped.append(host)
                continue
            diff = "".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                where, f"{where} (new)"))
            steps.append(Step(
                id=f"s{len(steps) + 1}", target=where, action="edit",
                summary=f"disable {','.join(plugins)} in {where}", diff=diff,
                data={"host": host, "path": self.manifest, "before_sha": sha(raw), "after_sha": sha(new.encode()),
                      "after": new, "disable": ch.after.get(flags.DISABLE)}))
        return steps

    def backup(self, step: Step, run: Run) -> dict:
        node = self._node(step.data["host"])
        text = read_remote(node, step.data["path"])
        if sha(text) != step.data["before_sha"]:
            raise PreconditionFailed(f"{step.target} changed since it was read; nothing was written")
        info = {"manifest": f"{step.id}.kube-apiserver.yaml",
                "manifest_sha256": run.write_backup(f"{step.id}.kube-apiserver.yaml", text)}
        remote = f"{self.backup_dir}/{run.id}-{step.id}-{os.path.basename(step.data['path'])}"
        if os.path.dirname(os.path.abspath(remote)) == os.path.dirname(os.path.abspath(step.data["path"])):
            raise BadInput("the node backup directory must not be the manifests directory (kubelet runs every file there)")
        if not self.local:
            nodefile.copy_to_node(node, self.backup_dir, os.path.basename(remote), text)
            info["node_copy"] = remote
        return info

    def apply(self, step: Step, backup: dict) -> None:
        pause = float(os.environ.get("BREAKGLASS_TEST_PAUSE", "0") or 0)
        write_remote(self._node(step.data["host"]), step.data["path"], step.data["before_sha"],
                     step.data["after"].encode(), pause)

    def verify(self, step: Step) -> str:
        node = self._node(step.data["host"])
        if sha(read_remote(node, step.data["path"])) != step.data["after_sha"]:
            raise PreconditionFailed(f"{step.target} does not read back as written")
        if self.verify_timeout <= 0:
            return "manifest written; process check skipped"
        flag = f"--{flags.DISABLE}={step.data['disable']}"
        host = step.data["host"]
        return nodefile.wait_until(
            node, process_with_flag(flag), self.verify_timeout, self.on_wait,
            f"waiting for kubelet to restart kube-apiserver with {flag} on {host}",
            f"no kube-apiserver process with {flag} within {self.verify_timeout:g}s; check `crictl ps --name "
            f"kube-apiserver` and `journalctl -u kubelet` on {host}",
            f"kube-apiserver runs with {flag}")

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        node = self._node(step.data["host"])
        original = run.read_backup(backup["manifest"], backup["manifest_sha256"])
        current = read_remote(node, step.data["path"])
        if sha(current) == sha(original):
            return RevertOutcome(step.id, ALREADY, f"{step.target} already holds the earlier manifest")
        diff = "".join(difflib.unified_diff(step.data["after"].splitlines(True),
                                            current.decode("utf-8", "replace").splitlines(True),
                                            "written by breakglass", f"{step.target} now"))
        if sha(current) != step.data["after_sha"] and not force:
            return RevertOutcome(step.id, CONFLICT, f"{step.target} changed since the run; left as it is", diff)
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would restore {step.target} ({len(original)} bytes)", diff)
        write_remote(node, step.data["path"], sha(current), original)
        return RevertOutcome(step.id, RESTORED, f"{step.target} restored")
