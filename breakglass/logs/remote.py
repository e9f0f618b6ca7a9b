"""Log sources on remote nodes, streamed from a command's standard output (never copied first)."""

from __future__ import annotations

import subprocess

from breakglass.errors import Unreachable
from breakglass.logs.sources import LogSource


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
