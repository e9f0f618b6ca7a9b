"""The node breakglass runs on, with the same interface as an SSH node (for --manifest)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from breakglass.access.ssh import Result
from breakglass.core.errors import BadInput


@dataclass
class LocalNode:
    host: str = "localhost"

    def run(self, command: str, stdin: bytes | None = None, sudo: bool = True, timeout: float | None = None) -> Result:
        try:
            p = subprocess.run(["sh", "-c", command], input=stdin, capture_output=True, timeout=timeout or 300)
        except OSError as e:
            raise BadInput(f"cannot run sh: {e.strerror}") from None
        return Result(p.returncode, p.stdout, p.stderr)

    def close(self) -> None:
        pass
