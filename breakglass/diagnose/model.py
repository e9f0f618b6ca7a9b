"""Result objects of a diagnosis. Plain data: the CLI renders them as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

from breakglass.bootstrap import BlockedObject
from breakglass.diagnose.causes import Cause
from breakglass.logs.record import LogRecord

CRITICAL, ERROR, WARNING, INFO = "critical", "error", "warning", "info"
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2, CRITICAL: 3}


@dataclass(slots=True)
class Event:
    """What one log record says, in the terms of the diagnosis."""

    kind: str
    record: LogRecord
    webhook: str | None = None
    mode: str | None = None  # closed | open | None when the line does not say
    echo: bool = False  # a second line about a call already logged (HandleError, client echoes)
    url: str | None = None
    service: str | None = None  # namespace/name
    cause: Cause | None = None
    webhook_type: str | None = None
    hook: str | None = None
    obj: BlockedObject | None = None
    policy: str | None = None
    binding: str | None = None
    detail: str | None = None  # denial message, hook error, lease name, …
    target: str | None = None  # what a denied request was writing, when the line says (`pods "x"`, `"ns.yaml"`)


@dataclass
class Evidence:
    location: str
    text: str
    role: str = "failure"  # failure | context
    time: str | None = None


@dataclass
class Finding:
    id: str
    family: str
    severity: str
    title: str
    explanation: str
    advice: str
    count: int
    first_seen: str | None
    last_seen: str | None
    evidence: list[Evidence]
    sources: list[str]
    webhook: str | None = None
    webhook_type: str | None = None
    configuration: str | None = None
    configuration_source: str | None = None  # "log" or "convention: <vendor>"
    operator_note: str | None = None
    service: str | None = None
    url: str | None = None
    mode: str | None = None
    cause_class: str | None = None
    cause: str | None = None
    blocked: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    link: str | None = None  # how blocked objects were tied to the webhook: direct | time | probable
    bootstrap_deadlock: bool = False
    policy: str | None = None
    binding: str | None = None


@dataclass
class RemedyOption:
    method: str  # kubeapi | talos | kubeadm | etcd | none
    order: int
    applicable: str  # yes | maybe | no
    summary: str
    tradeoff: str
    plugins: list[str] = field(default_factory=list)
    targets: list[dict] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)  # what to type by hand


@dataclass
class Verdict:
    state: str  # deadlocked | degraded | leaking | clear
    headline: str
    explanation: str
    needs_action: bool


@dataclass
class ScanStats:
    sources: list[str]
    bytes: int
    lines: int
    candidates: int
    matched: int
    engine: str
    seconds: float
    log_like: bool = True  # some source's first 64 KiB looks like a log (not empty, binary, YAML or base64)


@dataclass
class Diagnosis:
    verdict: Verdict
    findings: list[Finding]
    remedies: list[RemedyOption]
    stats: ScanStats
    # Informational: webhooks that answered and refused by their own policy (which webhook denied what). Kept
    # apart from the findings, which are what needs action; the verdict's explanation names them.
    notices: list[Finding] = field(default_factory=list)
