"""What every remedy provides, and the data a step carries through the journal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

from breakglass.core.journal import Run


@dataclass
class Step:
    id: str
    target: str  # what is changed, e.g. an etcd key
    action: str  # delete | put | patch …
    summary: str  # one line for people
    diff: str  # the exact change
    data: dict = field(default_factory=dict)  # what the remedy needs to apply and revert it

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Step:
        return cls(**{k: d[k] for k in ("id", "target", "action", "summary", "diff", "data")})


# Outcomes of reverting one step.
class Unverified(str):
    """What ``verify`` returns when the change is applied but could not be confirmed (kubelet did not restart the
    apiserver within the wait): the run is "applied, not verified", never reported as verified."""


class Edited(str):
    """What ``verify`` returns when the change is in a file here (a Talos machine-config file, a k3s/RKE2
    config.yaml managed as code) and reads back as written, but no node has it: the step is "edited", the run
    "edited-not-applied" (exit 8). ``files``: what was written here; ``commands``: what applies it to the nodes;
    ``checks``: what then shows it in effect (/readyz). The outcome's next is every step's commands, then the
    checks, then the revert."""

    files: list
    commands: list
    checks: list

    def __new__(cls, detail: str, files=(), commands=(), checks=()):
        made = super().__new__(cls, detail)
        made.files, made.commands, made.checks = list(files), list(commands), list(checks)
        return made


RESTORED = "restored"
ALREADY = "already-restored"
NOT_APPLIED = "not-applied"  # the change never happened (crash before apply): nothing to undo
CONFLICT = "conflict"  # the target changed since; left alone unless --force


@dataclass
class RevertOutcome:
    step: str
    outcome: str
    detail: str = ""
    diff: str = ""
    uid: str = ""  # the object the revert wrote, when it is not the backed-up one (re-created: a new uid)


class Remedy(Protocol):
    method: str

    def plan(self) -> list[Step]: ...

    def backup(self, step: Step, run: Run) -> dict: ...

    def apply(self, step: Step, backup: dict) -> dict | None: ...

    def verify(self, step: Step) -> str: ...

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome: ...

    def describe_target(self) -> dict: ...
