"""Log sources on remote nodes, streamed from a command's standard output (never copied first)."""

from __future__ import annotations

import shlex
import subprocess

from breakglass.access.ssh import quoted_path, remote_path
from breakglass.core.errors import BadInput, Unreachable
from breakglass.logs.sources import LogSource, _pod_log_key


class ProcessStream:
    """A command's stdout as a readable binary stream; a failed command is Unreachable on close."""

    def __init__(self, cmd: list[str], what: str) -> None:
        self.what = what
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            raise Unreachable(f"{what}: cannot run {cmd[0]}: {e.strerror}") from None

    def read(self, n: int = -1) -> bytes:
        return self.proc.stdout.read(n)

    def close(self) -> None:
        self.proc.stdout.close()
        err = self.proc.stderr.read().decode("utf-8", "replace")
        self.proc.stderr.close()
        if self.proc.wait() != 0:
            first = next((line for line in err.splitlines() if line.strip()), "no error message")
            raise Unreachable(f"{self.what}: {first[:300]}")


def talos_sources(talos, nodes: list[str]) -> list[LogSource]:
    """kube-apiserver logs of each node, from `talosctl logs -k` of its running container."""
    out = []
    for node in nodes:
        container = talos.apiserver_container(node)
        cmd = talos.logs_command(node, container)
        out.append(LogSource(name=f"talos:{node}", opener=lambda c=cmd, n=node: ProcessStream(c, f"talosctl logs on {n}")))
    return out


def ssh_sources(node, pods_dir: str = "/var/log/pods") -> list[LogSource]:
    """kube-apiserver's CRI logs on a node: pod directories newest first (the UID changes with
    every manifest edit), each one's files in kubelet rotation order, gzipped ones included."""
    base = shlex.quote(remote_path(pods_dir, "--pods-dir").rstrip("/") or "/")
    r = node.run(f"ls -1dt -- {base}/kube-system_kube-apiserver-* 2>/dev/null; true")
    dirs = [d for d in r.out.decode("utf-8", "replace").split("\n") if d.strip()]
    if not dirs:
        raise BadInput(f"{node.host}: no kube-apiserver pod logs under {pods_dir}")
    return [_ssh_source(node, f, True) for d in dirs if d.startswith("/")
            for f in _ssh_find(node, d, " -name '*.log*'", "")]


def talos_files(talos, nodes: list[str], roots: list[str]) -> list[LogSource]:
    """Files at or under these paths on each node (audit logs at /var/log/audit/kube/ on Talos), in
    rotation order, each streamed with `talosctl read` when it is read."""
    out = []
    for node in nodes:
        for root in roots:
            files = sorted(talos.files(node, root), key=_pod_log_key)
            if not files:
                raise BadInput(f"{node}:{root}: no files there")
            out += [LogSource(name=f"{node}:{f}", lenient=len(files) > 1,
                              opener=lambda c=talos.read_command(node, f), w=f"talosctl read {f} on {node}":
                              ProcessStream(c, w)) for f in files]
    return out


def ssh_files(node, roots: list[str]) -> list[LogSource]:
    """Files at or under these paths on a node (audit logs are root's: read with sudo), in rotation order."""
    out = []
    for root in roots:
        remote_path(root, "log path")
    for root in roots:
        files = _ssh_find(node, root, "", " 2>/dev/null; true")
        if not files:
            raise BadInput(f"{node.host}:{root}: no such file, or an empty directory")
        out += [_ssh_source(node, f, len(files) > 1) for f in files]
    return out


def _ssh_find(node, root: str, expr: str, tail: str) -> list[str]:
    """Regular files at or under ``root`` (absolute) on the node, in rotation order (oldest rotated file first).
    Names end with NUL, so a file name with a newline in it is one name."""
    r = node.run(f"find -- {quoted_path(root, 'log path')} -type f{expr} -print0{tail}")
    return sorted((f for f in r.out.decode("utf-8", "replace").split("\0") if f.strip() and f.startswith("/")),
                  key=_pod_log_key)


def _ssh_source(node, path: str, lenient: bool) -> LogSource:
    """One remote file, streamed with `cat` when it is read, never copied first."""
    command = f"cat -- {quoted_path(path, 'log file')}"
    return LogSource(name=f"{node.host}:{path}", lenient=lenient, opener=lambda: node.stream(command))


def journal_source(node, unit: str, root: str = "/") -> LogSource:
    """One systemd unit's journal on the node, streamed from `journalctl -u UNIT`. k3s runs kube-apiserver inside
    its own process, so the apiserver's klog lines are in k3s' journal, behind journald's `host k3s[PID]: `
    prefix; short-iso-precise gives each line its year, which klog headers lack. A node root other than / reads
    the journal files under it (`journalctl -D ROOT/var/log/journal`)."""
    where = "" if root == "/" else f" -D {quoted_path(root + '/var/log/journal', 'journal directory')}"
    command = f"journalctl{where} -u {shlex.quote(unit)} --no-pager -o short-iso-precise"
    return LogSource(name=f"{node.host}:journalctl -u {unit}", opener=lambda: node.stream(command))


def distro_sources(node, found, pods_dir: str | None = None) -> list[LogSource]:
    """kube-apiserver's logs where the node's distribution (``breakglass.access.distro.Distro``) keeps them: k3s' journal;
    RKE2's static pod logs (kube-system_kube-apiserver-*) and rke2-server's journal; kubelet's pod logs otherwise.
    ``pods_dir`` given: the pod logs there, whatever the distribution."""
    from breakglass.access.distro import on, rancher  # noqa: PLC0415

    if pods_dir:
        return ssh_sources(node, pods_dir)
    pods = on(found.root, "/var/log/pods")
    if found.name == "k3s":
        return [journal_source(node, rancher("k3s")["service"], found.root)]
    if found.name == "rke2":
        return ssh_sources(node, pods) + [journal_source(node, rancher("rke2")["service"], found.root)]
    return ssh_sources(node, pods)
