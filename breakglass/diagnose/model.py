"""Result objects of a diagnosis. Plain data: the CLI renders them as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

from breakglass.heal.bootstrap import BlockedObject
from breakglass.diagnose.causes import Cause
from breakglass.logs.record import LogRecord

CRITICAL, ERROR, WARNING, INFO = "critical", "error", "warning", "info"

# The deadlock families (issue 21): which way a webhook outage keeps itself from healing. Each has its own verdict
# text and its own ways out, least invasive first (findings.FAMILY_TEXT, remedies, planner.order_for).
BOOTSTRAP = "bootstrap"  # the apiserver cannot finish starting: a webhook blocks what it writes at start
SELF_DEPENDENCY = "self-dependency"  # a webhook blocks its own backend's pods, or what they need (CNI, DNS)
NODE_LEASE = "node-lease"  # node Leases / Nodes / leader Leases cannot be written: nodes NotReady, controllers stop
CONVERSION = "conversion"  # a CRD's conversion webhook is down: reads and writes of that resource fail
DEADLOCK_FAMILIES = (BOOTSTRAP, SELF_DEPENDENCY, NODE_LEASE, CONVERSION)
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2, CRITICAL: 3}
EVIDENCE_HEAD, EVIDENCE_TAIL = 3, 2  # evidence a finding keeps: its first lines and its last


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
    # The request a webhook failed or denied, when the line shows it: (namespace, resource or owner kind, name).
    # From controller and event lines, kubelet lease/node lines, audit events and apiserver traces.
    request: tuple | None = None


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
    # Which deadlock family this finding shows (model.DEADLOCK_FAMILIES), None when it is not one of them
    # (an outage that heals when the webhook's backend comes back, a leak, a notice).
    deadlock: str | None = None
    requests: list[str] = field(default_factory=list)  # the failing requests the lines show: "pods in kyverno"
    # self-dependency: the namespace whose pods must get past the webhook for the cluster to heal (its backend's,
    # or kube-system's when the blocked pods are the apiserver's egress tunnel or the CNI)
    exclude_namespace: str | None = None
    crds: list[str] = field(default_factory=list)  # conversion: the kinds whose conversion webhook fails
    # The deadlock's cycle, step by step (the blocked write, who needs it, why the webhook needs that, the backend's
    # state), and how far it is shown: PROVEN_LOG (the apiserver's own lines show it), LIKELY (inferred from names
    # in the log), PROVEN (checked against the webhook's configuration and its backend), REFUTED (checked: no cycle).
    cycle: list[str] = field(default_factory=list)
    proof: str | None = None
    prove: str | None = None  # the one command that would prove a likely cycle


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
    family: str | None = None  # set when the option is specific to one deadlock family (conversion: the CRD)


PROVEN_LOG, LIKELY, PROVEN, REFUTED = "log", "likely", "proven", "refuted"
# Verdict states. DEADLOCKED: a cycle shown (by the apiserver's own lines, or checked against the cluster's
# configuration); DEADLOCK_LIKELY: a cycle the log's names point to, not checked (Verdict.prove says how).
DEADLOCKED, DEADLOCK_LIKELY, DEGRADED, LEAKING, CLEAR = "deadlocked", "deadlock-likely", "degraded", "leaking", "clear"
# STUCK: the apiserver cannot finish starting, and no line ties it to an admission webhook (a slow etcd, a hook's
# own error): said as what is stuck and what the lines point at, never as a webhook's deadlock
STUCK = "stuck"


@dataclass
class Verdict:
    state: str  # deadlocked | deadlock-likely | stuck | degraded | leaking | clear
    headline: str
    explanation: str
    needs_action: bool
    family: str | None = None  # the deadlock family of the finding that leads the verdict, if any
    chain: list[str] = field(default_factory=list)  # the lead finding's cycle, step by step
    proof: str | None = None  # the lead finding's proof (log | likely | proven | refuted)
    prove: str | None = None  # deadlock-likely: the one command that would prove (or refute) it


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
    foreign: list = field(default_factory=list)  # sources with no Kubernetes component's line in their first 64 KiB


@dataclass
class Diagnosis:
    verdict: Verdict
    findings: list[Finding]
    remedies: list[RemedyOption]
    stats: ScanStats
    # Informational: webhooks that answered and refused by their own policy (which webhook denied what). Kept
    # apart from the findings, which are what needs action; the verdict's explanation names them.
    notices: list[Finding] = field(default_factory=list)
