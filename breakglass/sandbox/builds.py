"""What go/versions lists: the real components built from their Go modules for the tests and the sandbox, one
line per build (`component version [later]`), and where each build lands. One reader for the sandbox, the
tests and the scripts (scripts/gobuild.sh reads the same lines in bash)."""

from __future__ import annotations

import os
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Build(NamedTuple):
    component: str
    version: str
    later: bool  # built in the background by `make test`, its tests run last (scripts/gobuild.sh)

    @property
    def binary(self) -> str:
        return os.path.join(ROOT, "build", self.component, f"v{self.version}", self.component)


def listed() -> list[Build]:
    """Every line of go/versions, in its order; [] where the file is absent (an installed breakglass)."""
    out = []
    try:
        with open(os.path.join(ROOT, "go", "versions"), encoding="utf-8") as f:
            for line in f:
                parts = line.split("#", 1)[0].split()
                if len(parts) in (2, 3):
                    out.append(Build(parts[0], parts[1], parts[2:] == ["later"]))
    except OSError:
        pass
    return out


def versions(component: str) -> list[str]:
    """The versions of ``component`` go/versions lists, in its order."""
    return [b.version for b in listed() if b.component == component]
