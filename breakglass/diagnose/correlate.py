"""Correlate events as they stream past, keeping bounded state.

Findings are keyed by webhook and cause (or by hook, policy, component), so a log with
ten million failures yields the same few accumulators, each with a count, first/last seen
and a handful of evidence lines. Bootstrap objects are tied to webhooks three ways,
strongest first: the same line names both (``direct``); the webhook failed within a
moment of the apiserver trying to write the object (``time``); or a hook is stuck and a
single fail-closed webhook is the only suspect (``probable``, decided in ``findings``).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from breakglass.heal.bootstrap import BlockedObject
from breakglass.diagnose import causes, signatures
from breakglass.diagnose.model import EVIDENCE_HEAD, EVIDENCE_TAIL, Event
from breakglass.logs.record import LogRecord

WINDOW_S = 2.0  # a webhook failure this close to a bootstrap write is taken as blocking it
WINDOW_LINES = 4  # the same, for lines with no timestamp (ticket pastes)
# Looking back through the recent writes or calls of a source stops at the first one further behind than the
# window and this: they are kept in file order, and a log's time runs forwards give or take the order in which
# goroutines got to the log (milliseconds). Without it every bootstrap line looked at all 256 recent calls.
JITTER_S = 5.0


class _Acc:
    """Everything kept about one finding while the log streams past."""

    __slots__ = ("key", "kind", "count", "echo_count", "first", "last", "head", "tail", "context", "webhook",
                 "mode", "types", "urls", "services", "cause", "blocked", "hooks", "sources", "policy",
                 "binding", "details", "hook", "obj", "blind", "success", "targets", "unknown_kind", "requests",
                 "crds", "starved", "superseded", "stopped")

    def __init__(self, key: tuple, kind: str, n_evidence: int) -> None:
        self.key, self.kind = key, kind
        self.count = self.echo_count = 0
        self.first: LogRecord | None = None
        self.last: LogRecord | None = None
        self.head: list[LogRecord] = []
        self.tail: deque[LogRecord] = deque(maxlen=max(0, n_evidence - EVIDENCE_HEAD) or 1)
        self.context: list[tuple[LogRecord, str]] = []
        self.webhook = self.mode = self.policy = self.binding = self.hook = None
        self.types: set[str] = set()
        self.urls: dict[str, int] = {}
        self.services: dict[str, int] = {}
        self.cause: causes.Cause | None = None
        self.blocked: dict[BlockedObject, str] = {}
        self.hooks: set[str] = set()
        self.sources: set[str] = set()
        self.details: dict[str, int] = {}
        self.obj: BlockedObject | None = None
        self.blind = False
        self.superseded = False  # readiness failures of an earlier start of the apiserver (a later one began)
        self.stopped = False  # not-ready: the hook's controller shut down after its writes were refused
        self.starved = False  # a lease renewal timed out on the client's side while the apiserver took the call
        self.success = False
        self.targets: dict[str, int] = {}  # what denied requests were writing
        self.unknown_kind = False  # a denial shows the webhook does not know a bootstrap kind
        self.requests: dict[tuple, int] = {}  # (namespace, kind, name) of the failing requests the lines show
        self.crds: dict[str, str | None] = {}  # conversion: "group/version, Kind=K" -> the CRD's name when shown

    def add(self, ev: Event, n_head: int) -> None:
        rec = ev.record
        if ev.echo:
            self.echo_count += 1
        else:
            self.count += 1
        if self.first is None:
            self.first = rec
        self.last = rec
        if len(self.head) < n_head:
            self.head.append(rec)
        else:
            self.tail.append(rec)
        self.sources.add(rec.source)
        if ev.url and len(self.urls) < 8:
            self.urls[ev.url] = self.urls.get(ev.url, 0) + 1
        if ev.service and len(self.services) < 8:
            self.services[ev.service] = self.services.get(ev.service, 0) + 1
        if ev.webhook_type:
            self.types.add(ev.webhook_type)
        if ev.detail and len(self.details) < 16:
            self.details[ev.detail[:300]] = self.details.get(ev.detail[:300], 0) + 1
        if ev.request and (ev.request in self.requests or len(self.requests) < 16):
            self.requests[ev.request] = self.requests.get(ev.request, 0) + 1

    def link(self, obj: BlockedObject, how: str) -> None:
        rank = {"direct": 3, "time": 2, "probable": 1}
        if rank[how] > rank.get(self.blocked.get(obj, ""), 0):
            self.blocked[obj] = how
        self.hooks.add(obj.hook)

    def note_context(self, rec: LogRecord, limit: int = 3) -> None:
        if len(self.context) < limit and all(r is not rec for r, _ in self.context):
            self.context.append((rec, "context"))


@dataclass
class _Recent:
    """Recent bootstrap writes and webhook failures of one source, for time correlation."""

    boots: deque = field(default_factory=lambda: deque(maxlen=64))
    calls: deque = field(default_factory=lambda: deque(maxlen=256))


_URL_TIMEOUT = re.compile(r"[?&]timeout=(\d+(?:\.\d+)?)s")


def _near(write: LogRecord, call: LogRecord, call_timeout: float = 0.0) -> bool:
    """Is a webhook failure close enough to a bootstrap write to have blocked it?

    A failure is logged when the call gives up, so it may come the webhook's whole
    timeoutSeconds after the write started.
    """
    if write.ts is not None and call.ts is not None:
        return -WINDOW_S <= call.ts - write.ts <= WINDOW_S + call_timeout
    return abs(write.line - call.line) <= WINDOW_LINES


def _behind(earlier: LogRecord, now: LogRecord, window: float) -> bool:
    """Is ``earlier`` (kept before ``now``, from the same source) so far back that neither it nor anything kept
    before it can be ``_near`` (``window``: the most ``now`` may come after a record near it)?"""
    if earlier.ts is not None and now.ts is not None:
        return now.ts - earlier.ts > window + JITTER_S
    return earlier.ts is None and now.ts is None and now.line - earlier.line > WINDOW_LINES


def _timeout_of(ev: Event) -> float:
    m = _URL_TIMEOUT.search(ev.url or "")
    return min(float(m[1]), 60.0) if m else 30.0 if ev.cause and ev.cause.cls == causes.TIMEOUT else 0.0


READYZ_BLOCK_LINES = 96  # a readiness check's `[-]`/`[+]` lines: one per check (about 50 in 1.37), under its header


class Correlator:
    def __init__(self, max_evidence: int = EVIDENCE_HEAD + EVIDENCE_TAIL) -> None:
        self.max_evidence = max_evidence
        self.accs: dict[tuple, _Acc] = {}
        self.recent: dict[str, _Recent] = {}
        self.last_leader: dict[str, str] = {}
        # a leader's read of its lock timed out, or etcd or the apiserver said it was too slow: load, not admission
        self.apiserver_slow = False
        self.configurations: dict[str, str] = {}  # webhook -> configuration, when a log line names it
        self.traced: dict[str, dict[tuple, int]] = {}  # webhook -> requests its slow-call traces name
        self.last_ts: dict[str, float] = {}  # source -> the latest time any event of it carries
        # Sources that hold the apiserver's own dispatcher lines (`Failed calling webhook, failing …`, `rejected by
        # webhook …`): a Lease
        # there with no namespace is the apiserver's identity lease, not a node's or a controller's.
        self.apiserver_sources: set[str] = set()
        self.starts: dict[str, int] = {}  # source -> kube-apiserver processes started in it (`Version: …` lines)
        self.matched = 0
        # Lines of other clusters in one input (a copied example log beside the real one, two clusters' pastes):
        # a webhook's lines are one finding unless a source shows it served by another backend than the sources
        # before it did; that source's lines then go to a finding of their own (issue 37 §3).
        self._backends: dict[str, dict[str, tuple]] = {}  # webhook -> backend -> the key part of its lines
        self._apart: dict[tuple[str, str], tuple] = {}  # (webhook, source) -> the key part, once its backend showed
        self._timed: dict[str, tuple[int, float]] = {}  # source -> (end line, time) of its latest timed event

    def _deployment(self, ev: Event) -> tuple:
        """The key part that keeps a webhook's lines from a source apart from those of other clusters: () for the
        first backend it is seen with (and lines that show none), ("from", source) for a source whose lines show
        another backend (a namespace/Service, or a url: webhook's host) than the sources before it."""
        hook, src = ev.webhook or "", ev.record.source
        part = self._apart.get((hook, src))
        if part is not None:
            return part
        backend = ev.service or _host_of(ev.url)
        if not backend:
            return ()
        seen = self._backends.setdefault(hook, {})
        if backend not in seen:
            seen[backend] = () if not seen else ("from", src)
        part = self._apart[(hook, src)] = seen[backend]
        return part

    def apart_sources(self) -> dict[str, list[str]]:
        """webhook -> the sources whose lines of it were kept apart (another backend than the first one seen)."""
        out: dict[str, list[str]] = {}
        for (hook, src), part in sorted(self._apart.items()):
            if part:
                out.setdefault(hook, []).append(src)
        return out

    def _acc(self, key: tuple, kind: str) -> _Acc:
        acc = self.accs.get(key)
        if acc is None:
            acc = self.accs[key] = _Acc(key, kind, self.max_evidence)
        return acc

    def feed(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.matched += 1
            ts = ev.record.ts
            if ts is None and ev.kind == "readyz-hook":
                ts = ev.record.ts = self._check_time(ev.record)
            elif ts is not None:
                self._timed[ev.record.source] = (ev.record.end_line, ts)
            if ts is not None and ts > self.last_ts.get(ev.record.source, float("-inf")):
                self.last_ts[ev.record.source] = ts
            getattr(self, "_on_" + ev.kind.replace("-", "_"))(ev)

    def _check_time(self, rec) -> float | None:
        """The time of a failed readiness check's `[-]poststarthook/… failed: not finished` line, which carries
        none: klog writes the check's lines as one message under the `healthz.go] … check failed: readyz` header
        just before them. Without it a hook listed only there looks timeless, and a normal start's first second
        reads as a hook that keeps failing."""
        line, ts = self._timed.get(rec.source, (None, None))
        if line is None or not 0 <= rec.line - line <= READYZ_BLOCK_LINES:
            return None
        return ts

    # -- webhook calls -------------------------------------------------------------------
    def _on_webhook_call(self, ev: Event) -> None:
        assert ev.cause  # the webhook's name may be missing: a paste cut it off, its URL and cause remain
        if ev.mode and not ev.echo:
            self.apiserver_sources.add(ev.record.source)
        if ev.mode == "open":
            key = ("open", ev.webhook, *self._deployment(ev))
            kind = "fail-open"
        else:
            key = ("call", ev.webhook, ev.cause.cls, *self._deployment(ev))
            kind = "call"
        acc = self._acc(key, kind)
        acc.webhook = ev.webhook
        acc.mode = ev.mode or acc.mode
        acc.cause = acc.cause or ev.cause
        acc.add(ev, EVIDENCE_HEAD)
        if kind == "call":
            self._tie(ev, acc)

    def _on_webhook_denied(self, ev: Event) -> None:
        assert ev.webhook
        if ev.mode == "deny":  # the dispatcher's own `rejected by webhook` line: this is the apiserver's log
            self.apiserver_sources.add(ev.record.source)
        acc = self._acc(("deny", ev.webhook, *self._deployment(ev)), "deny")
        acc.webhook = ev.webhook
        acc.add(ev, EVIDENCE_HEAD)
        if ev.detail and signatures.WEBHOOK_BLIND.search(ev.detail):
            acc.blind = True
        if ev.target and len(acc.targets) < 8:
            acc.targets[ev.target] = acc.targets.get(ev.target, 0) + 1
        if ev.obj is not None and ev.detail and signatures.unknown_bootstrap_kind(ev.detail) == ev.obj:
            acc.unknown_kind = True
        self._tie(ev, acc)

    def _on_policy_denied(self, ev: Event) -> None:
        acc = self._acc(("policy", ev.policy, ev.binding), "policy")
        acc.policy, acc.binding = ev.policy, ev.binding
        if ev.webhook_type:
            acc.types.add(ev.webhook_type)
        if ev.cause is not None and acc.cause is None:  # the policy could not be evaluated (failed closed)
            acc.cause = ev.cause
        acc.add(ev, EVIDENCE_HEAD)
        self._tie(ev, acc)

    def _count(self, ev: Event, kind: str, subject: str | None) -> _Acc:
        """Events that only need counting, keyed by what they are about."""
        acc = self._acc((kind, subject), kind)
        acc.add(ev, EVIDENCE_HEAD)
        return acc

    def _on_config_named(self, ev: Event) -> None:
        self.matched -= 1  # bookkeeping, not an event about a problem
        if ev.webhook and ev.detail and len(self.configurations) < 10_000:
            self.configurations[ev.webhook] = ev.detail
        if ev.webhook and ev.request and len(self.traced) < 10_000:
            seen = self.traced.setdefault(ev.webhook, {})
            if ev.request in seen or len(seen) < 8:
                seen[ev.request] = seen.get(ev.request, 0) + 1

    def _on_conversion_failed(self, ev: Event) -> None:
        """A CRD's conversion webhook failing: one accumulator per backend (service or URL), CRDs listed."""
        key = ("conversion", ev.service or ev.url or ev.detail)
        acc = self._acc(key, "conversion")
        acc.cause = acc.cause or ev.cause
        acc.add(ev, EVIDENCE_HEAD)
        if ev.detail and (ev.detail in acc.crds or len(acc.crds) < 16):
            acc.crds[ev.detail] = acc.crds.get(ev.detail) or ev.hook

    def _webhook_count(self, ev: Event, kind: str) -> _Acc:
        """Events about one webhook that only need counting (and, where the line says, what they were about)."""
        acc = self._count(ev, kind, ev.webhook)
        acc.webhook = ev.webhook
        if ev.target and len(acc.targets) < 8:
            acc.targets[ev.target] = acc.targets.get(ev.target, 0) + 1
        return acc

    def _on_webhook_slow(self, ev: Event) -> None:
        """A call the dispatcher's trace shows taking a second or more (its total time in details)."""
        self._webhook_count(ev, "slow")

    def _on_webhook_no_dry_run(self, ev: Event) -> None:
        self._webhook_count(ev, "no-dry-run")

    def _on_webhook_canceled(self, ev: Event) -> None:
        self._webhook_count(ev, "canceled")

    def _on_webhook_panic(self, ev: Event) -> None:
        self._webhook_count(ev, "panic")

    def _tie(self, ev: Event, acc: _Acc) -> None:
        """Tie a failing call or denial to the bootstrap write it blocked."""
        if ev.obj is not None:
            acc.link(ev.obj, "direct")
            return
        recent = self.recent.setdefault(ev.record.source, _Recent())
        timeout = _timeout_of(ev)
        for rec, obj in reversed(recent.boots):
            if _behind(rec, ev.record, WINDOW_S + timeout):
                break
            if _near(rec, ev.record, timeout):
                acc.link(obj, "time")
                acc.note_context(rec)
        recent.calls.append((ev.record, acc))

    # -- the apiserver's own bootstrap -----------------------------------------------------
    def _bootstrap(self, ev: Event, what: str) -> None:
        assert ev.obj is not None
        acc = self._acc(("boot", ev.obj.kind), "boot-" + what)
        acc.obj = acc.obj or ev.obj
        acc.hook = ev.obj.hook
        if what == "ok":
            acc.success = ev.record.source  # which log saw it: a later start in that log is judged on its own
            return
        acc.kind = "boot-failure" if what == "failure" or acc.kind == "boot-failure" else acc.kind
        acc.add(ev, EVIDENCE_HEAD)
        recent = self.recent.setdefault(ev.record.source, _Recent())
        recent.boots.append((ev.record, ev.obj))
        for rec, call_acc in reversed(recent.calls):
            if _behind(rec, ev.record, WINDOW_S):
                break
            if _near(rec, ev.record):
                call_acc.link(ev.obj, "time")
                call_acc.note_context(ev.record)

    def _on_bootstrap_attempt(self, ev: Event) -> None:
        self._bootstrap(ev, "attempt")

    def _on_bootstrap_failure(self, ev: Event) -> None:
        self._bootstrap(ev, "failure")

    def _on_bootstrap_ok(self, ev: Event) -> None:
        self._bootstrap(ev, "ok")

    # -- hooks, readiness ------------------------------------------------------------------
    def _on_hook_fatal(self, ev: Event) -> None:
        self._count(ev, "hook-fatal", ev.hook).hook = ev.hook

    def _on_readyz_hook(self, ev: Event) -> None:
        self._count(ev, "readyz", ev.hook).hook = ev.hook

    def _on_not_ready(self, ev: Event) -> None:
        acc = self._count(ev, "not-ready", ev.detail)
        acc.obj = acc.obj or ev.obj
        acc.hook = ev.hook

    def _on_hook_stopped(self, ev: Event) -> None:
        """A hook's controller stopped after its writes were refused as not ready: not a moment at start."""
        self.matched -= 1
        for acc in self.accs.values():
            if acc.kind == "not-ready" and acc.hook == ev.hook and acc.last is not None \
                    and acc.last.source == ev.record.source and not acc.superseded:
                acc.stopped = True

    def _on_apiserver_started(self, ev: Event) -> None:
        """A new kube-apiserver process in this source: the readiness failures so far were an earlier start's.
        They are kept apart (superseded) so a restart minutes later is judged on its own lines: two normal
        starts are not one hook failing for minutes, and a start that is stuck now is stuck on what it logs."""
        self.matched -= 1  # bookkeeping, not an event about a problem
        here = ev.record.source
        self.starts[here] = self.starts.get(here, 0) + 1
        for key, acc in list(self.accs.items()):
            # a bootstrap write an earlier start made (or failed) says nothing of this start's: a 1.32 boot that
            # created its ServiceCIDR, then a restart whose create is refused, is stuck now
            boot = acc.kind.startswith("boot-") and (acc.success == here or (acc.last and acc.last.source == here))
            if (boot or acc.kind in ("readyz", "not-ready") and acc.last is not None and acc.last.source == here) \
                    and not acc.superseded:
                acc.superseded = True
                del self.accs[key]
                self.accs[(*key, "before", ev.record.line)] = acc

    def _on_apiserver_unhealthy(self, ev: Event) -> None:
        acc = self._acc(("unhealthy",), "unhealthy")
        acc.add(ev, EVIDENCE_HEAD)

    def _on_storage_slow(self, ev: Event) -> None:
        """etcd or the apiserver too slow: said through the lease's finding, not a finding of its own."""
        self.matched -= 1
        self.apiserver_slow = True

    def _on_leader_lost(self, ev: Event) -> None:
        component = _component(ev.record, ev.detail)
        if component == _UNKNOWN_COMPONENT:  # "leaderelection lost" names no lease: the last one seen here
            component = self.last_leader.get(ev.record.source, component)
        self.last_leader[ev.record.source] = component
        acc = self._acc(("leader", component), "leader")
        acc.hook = component
        if ev.detail and "webhook" in ev.record.message:
            acc.blind = True  # the lease write itself was refused by a webhook
        elif _STARVED.search(ev.record.message):
            # Admission runs on writes only: a lease write (the renewal's PUT) that times out while the apiserver
            # took it may be waiting on a webhook; a read (GET) that times out waited on load or storage, and
            # says the apiserver itself is slow, so none of the renewals is blamed on admission.
            if _LEASE_READ.search(ev.record.message):
                self.apiserver_slow = True
            elif _LEASE_WRITE.search(ev.record.message):
                acc.starved = True
        acc.add(ev, EVIDENCE_HEAD)


_UNKNOWN_COMPONENT = "a controller"
# a lease request the apiserver accepted and did not answer within the client's timeout (`?timeout=5s`): not a
# connection refused (the apiserver down), but a call that waited, on a webhook or on storage
_STARVED = re.compile(r"Client\.Timeout exceeded|context deadline exceeded|request canceled")


_LEASE_READ = re.compile(r"error\s*retrieving\s*resource\s*lock|\bGet\s*\"?https?://")
_LEASE_WRITE = re.compile(r"(?:Put|PUT|Patch|PATCH|Update|Post)\s*\"?https?://[^\s\"/]{1,300}/[^\s\"]{0,600}?/leases/")


def _host_of(url: str | None) -> str | None:
    m = re.match(r"[a-z][a-z0-9+.-]*://([^/?#\s\"]+)", url or "", re.I)
    return m[1].lower() if m else None


def _component(rec: LogRecord, lease: str | None) -> str:
    for name in ("kube-controller-manager", "kube-scheduler", "cloud-controller-manager"):
        if (lease and name in lease) or name in rec.source or (rec.node and name in rec.node):
            return name
    return lease.rsplit("/", 1)[-1] if lease else _UNKNOWN_COMPONENT


