"""Turn the correlator's accumulators into findings and a verdict a tired engineer can act on."""

from __future__ import annotations

import datetime as _dt

import re
import shlex

from breakglass.heal import bootstrap
from breakglass.heal import writes as heal

from breakglass.webhooks import vendors
from breakglass.text import shorten
from breakglass.diagnose import causes
from breakglass.diagnose.correlate import Correlator, LogRecord, _Acc
from breakglass.diagnose.model import (
    BOOTSTRAP, CLEAR, CONVERSION, CRITICAL, DEADLOCK_LIKELY, DEADLOCKED, DEGRADED, STUCK, ERROR, INFO, LEAKING, LIKELY,
    NODE_LEASE, PROVEN, PROVEN_LOG, REFUTED, SELF_DEPENDENCY, SEVERITY_RANK, WARNING, Evidence, Finding, Verdict,
)

LEADER_WINDOW_S = 120.0  # a lost lease this close to webhook failures is blamed on them
MAX_TEXT = 2000


def _overlaps(a: _Acc, b: _Acc, slack: float) -> bool:
    """Do two accumulators' first..last spans overlap, give or take ``slack`` seconds?"""
    times = [r.ts for r in (a.first, a.last, b.first, b.last) if r is not None]
    if len(times) < 4 or None in times:
        return True  # no clock to compare: the same log is close enough
    return a.first.ts - slack <= b.last.ts and b.first.ts - slack <= a.last.ts


def _fmt_time(rec: LogRecord | None) -> str | None:
    if rec is None or rec.ts is None:
        return None
    t = _dt.datetime.fromtimestamp(rec.ts, _dt.timezone.utc)
    if rec.year_known:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return t.strftime("%m-%d %H:%M:%S.%f")  # the log gave no year


def _evidence(acc: _Acc, n: int) -> list[Evidence]:
    recs = list(acc.head)
    for r in acc.tail:
        if all(r is not x for x in recs):
            recs.append(r)
    ev = [Evidence(r.location, r.raw[:MAX_TEXT], "failure", _fmt_time(r)) for r in recs[:n]]
    ev += [Evidence(r.location, r.raw[:MAX_TEXT], role, _fmt_time(r)) for r, role in acc.context]
    return ev


SETTLED = "startup-readiness"  # notice family: readiness failed briefly at start, then start-up went on
UNHEALTHY = "apiserver-unhealthy"  # an upgrade's or installer's word that the apiserver did not come back
PERSIST_S = 10.0  # a post-start hook failing for less than this, while the log goes on past it, is a normal start


def _transient(a: _Acc, last_ts: dict[str, float]) -> bool:
    """Failures of a hook at start that stopped: all within PERSIST_S, and the same log goes on PERSIST_S past the
    last of them without it failing again. (A log that ends while the hook fails cannot show it stopped.)"""
    if a.first is None or a.last is None or a.first.ts is None or a.last.ts is None:
        return False
    if a.last.ts - a.first.ts >= PERSIST_S:
        return False
    return last_ts.get(a.last.source, a.last.ts) - a.last.ts >= PERSIST_S


def _times(a: _Acc) -> list[float]:
    """The times of the lines an accumulator kept (a readyz check's `[-]…` continuation lines carry none)."""
    return [r.ts for r in [a.first, a.last, *a.head, *a.tail] if r is not None and r.ts is not None]


def settled_at_start(a: _Acc, last_ts: dict[str, float]) -> bool:
    """A readiness failure at start that does not persist: `not finished` (or not yet ready) for less than
    PERSIST_S, whether the same log goes on with later lines of start-up or ends there (a capture of the first
    second of a start shows every apiserver's hooks unfinished: only failures that keep coming over time are an
    alarm). Only asked when nothing in the logs names a webhook."""
    if a.kind not in ("readyz", "not-ready") or a.last is None or a.stopped:
        return False
    times = _times(a)
    return bool(times) and max(times) - min(times) < PERSIST_S


def _log_ends_at(accs: list[_Acc], last_ts: dict[str, float]) -> bool:
    """The logs end with these failures: nothing later shows whether start-up went on."""
    timed = [a for a in accs if a.last and _times(a)]
    latest = max((max(_times(a)) for a in timed), default=None)
    return latest is not None and all(last_ts.get(a.last.source, latest) <= latest for a in timed)


def _is_stuck(a: _Acc, fatal: set | frozenset = frozenset(), last_ts: dict[str, float] | None = None) -> bool:
    """Does this accumulator show a post-start hook that cannot finish? A fatal `PostStartHook … failed` line says
    so for every line of its hook; otherwise the failure must persist (not a second or two at start)."""
    if not a.hook or a.superseded:  # an earlier start's: the later start's own lines say whether it is stuck
        return False
    if a.kind == "hook-fatal" or a.hook in fatal:
        return a.kind != "boot-attempt" or a.count >= 3
    if a.stopped:  # its writes refused, then its controller shut down: it will not finish by itself
        return True
    if a.kind in ("readyz", "not-ready", "boot-failure") and last_ts is not None and _transient(a, last_ts):
        return False
    if a.kind in ("readyz", "not-ready"):
        return True
    if a.kind == "boot-failure":
        return not a.success
    return a.kind == "boot-attempt" and not a.success and a.count >= 3  # the ServiceCIDR burst


# Where a webhook's backend needs pods besides its own namespace: the CNI, DNS, kube-proxy.
SYSTEM_NAMESPACES = ("kube-system", "calico-system", "tigera-operator", "kube-flannel", "cilium", "cilium-system")
# "Controller": a controller's `Error creating:` of pods, the controller not named
POD_CREATORS = ("Pod", "ReplicaSet", "DaemonSet", "StatefulSet", "Job", "Deployment", "Controller")
_STEM = __import__("re").compile(r"-(?:webhook|admission|svc|service|server|controller|operator|manager|injector)"
                                 r"(?:-.*)?$")


# Pods every webhook call depends on, whatever the backend: the tunnel kube-apiserver reaches webhooks and kubelets
# through when its egress goes through one (konnectivity's agent; AKS' tunnelfront and aks-link; Gardener's
# vpn-shoot), and the node agents that give every pod its network. A webhook that blocks re-creating them cuts off
# its own calls, or its backend's pod network.
TUNNEL_PODS = ("konnectivity-agent", "tunnelfront", "aks-link", "vpn-shoot", "konnectivity")
CNI_PODS = ("calico-node", "cilium", "kube-flannel", "flannel", "aws-node", "weave-net", "canal", "antrea-agent",
            "kube-router", "ovnkube-node", "kube-ovn-cni", "multus", "azure-cns", "azure-ip-masq", "cni")


def _named(name: str | None, stems: tuple[str, ...]) -> bool:
    return bool(name) and any(name == s or name.startswith(s + "-") for s in stems)


def _stem(service_name: str) -> str:
    """The application a webhook Service belongs to: `tcaplus-webhook-service` -> `tcaplus`."""
    return _STEM.sub("", service_name)


def self_dependency(requests: dict[tuple, int], service: str | None) -> str | None:
    """What the failing requests show the webhook blocks of its own backend, or None."""
    svc_ns, _, svc_name = (service or "").partition("/")
    stem = _stem(svc_name) if svc_name else ""
    for (ns, kind, name), _n in sorted(requests.items(), key=lambda kv: -kv[1]):
        if kind == "Binding":  # every new pod is bound by the scheduler through this one write
            return ("pod bindings: the scheduler puts every new pod on a node through them, its backend's own "
                    "replacement pods and the system pods included")
        if kind not in POD_CREATORS:
            continue
        what = f"{kind} {ns + '/' if ns else ''}{name}" if name else f"{kind} pods" + (f" in {ns}" if ns else "")
        if ns and svc_ns and ns == svc_ns:
            return f"{what}: pods in {ns}, the namespace its own backend ({service}) runs in"
        if name and len(stem) >= 3 and name.startswith(stem + "-"):
            return f"{what}: its own backend's pods ({service})"
        if _named(name, TUNNEL_PODS):
            return (f"{what}: the tunnel kube-apiserver reaches webhooks and kubelets through; without its pods no "
                    f"call to any in-cluster webhook gets through, this one's included")
        if _named(name, CNI_PODS):
            return (f"{what}: the CNI agent that gives pods on its nodes their network, its backend's pods "
                    f"included")
        if ns in SYSTEM_NAMESPACES:
            return f"{what}: pods in {ns}, where the network (CNI), DNS and kube-proxy its backend needs run"
        if kind == "DaemonSet":
            return f"{what}: a DaemonSet's pods, the node agents (CNI, kube-proxy) its backend's nodes need"
    return None


def _request_text(r: tuple) -> str:
    ns, kind, name = r
    if kind == "Controller":
        return "pods a controller creates" + (f" in {ns}" if ns else "")
    if kind == "Binding":
        return "pod bindings (the scheduler)"
    return " ".join(x for x in (kind or "request", f"{ns}/{name}" if ns and name else name or (f"in {ns}" if ns else None))
                    if x)


def _exclude_ns(requests: dict[tuple, int], service: str | None) -> str | None:
    """The namespace to exclude from the webhook: the tunnel's or the CNI's when their pods are blocked (the
    backend's own pods are not what is missing), else its backend's, else the blocked pods'."""
    svc_ns = (service or "").partition("/")[0]
    carriers = [ns for (ns, kind, name), _n in requests.items()
                if ns and kind in POD_CREATORS and _named(name, TUNNEL_PODS + CNI_PODS)]
    if carriers and svc_ns not in {ns for (ns, kind, _), _n in requests.items() if kind in POD_CREATORS}:
        return carriers[0]
    nss = [ns for (ns, kind, _), _n in requests.items() if ns and kind in POD_CREATORS]
    if svc_ns and (svc_ns in nss or not nss):
        return svc_ns
    return nss[0] if nss else None


def node_lease(requests: dict[tuple, int], apiserver_only: bool = False) -> str | None:
    """The Leases or Nodes among the failing requests, or None. A Lease named by no namespace in the apiserver's
    own log (``apiserver_only``) is its identity lease: not a node's heartbeat nor a controller's."""
    for (ns, kind, name), _n in sorted(requests.items(), key=lambda kv: -kv[1]):
        if kind == "Lease" and ns is None and apiserver_only:
            continue
        if kind == "Lease" and ns == "kube-system" and (name or "").startswith("apiserver-"):
            continue  # the same identity lease, named (an audit event): `apiserver-<hash>` in kube-system
        if kind == "Lease":
            return f"Lease {ns + '/' if ns else ''}{name or ''}".rstrip("/ ") + (
                " (node heartbeats)" if ns == "kube-node-lease" else "")
        if kind == "Node":
            return f"Node {name or ''}".rstrip() + " (the kubelet's node status)"
        if kind == "Secret" and (name or "").rsplit(".", 2)[-2:-1] == ["node-password"]:
            return f"Secret kube-system/{name} (the node password k3s and RKE2 check when a node joins)"
    return None


_FATAL_LINE = re.compile(r"\[FATAL\]|\blevel=fatal\b|\"level\"\s*:\s*\"fatal\"|^F\d{4} \d\d:\d\d:\d\d|\bpanic: ",
                         re.IGNORECASE | re.MULTILINE)
# \b and a bounded \w{0,12}: one try per word, not one per letter of a long run ("setsetset...": quadratic)
_NODE_WRITE = re.compile(r"\b(?:patch|update|annotate|set|register)\w{0,12}\s+(?:the\s+)?node\b|node resource|"
                         r"\bnodes\s+\\?\"[^\"\\]+\\?\"", re.IGNORECASE)


def _lines(a: _Acc) -> list:
    return [r for r in [*a.head, *a.tail] if r is not None]


def fatal_own_start(a: _Acc, service: str | None, webhook: str | None) -> str | None:
    """A component that exits at its own start-up because its own webhook is down (Rancher's `[FATAL] … failed
    calling webhook "rancher.cattle.io.…"`): the line is fatal, and the application the webhook's Service belongs
    to is a label of the webhook's name. Its backend is deployed by the very component that cannot start."""
    svc_name = (service or "").partition("/")[2]
    stem = _stem(svc_name) if svc_name else ""
    labels = set(re.split(r"[.\-]", webhook or ""))
    if len(stem) < 3 or stem not in labels:
        return None
    if any(_FATAL_LINE.search(r.raw) for r in _lines(a)):
        return f"{stem}'s own start-up (it exits on the failed call: the component that runs its backend)"
    return None


def controller_pods_without_endpoints(requests: dict[tuple, int], cause, via_service: bool = False) -> str | None:
    """Controllers (ReplicaSet, DaemonSet, StatefulSet) refused pod creation by a webhook whose backend cannot be
    reached: its own backend's replacement pods are created by the same controllers and refused the same way,
    unless the webhook exempts their namespace (which the log cannot show). A Job's pods are never a webhook's
    backend (they run to completion), so a Job refused is not that cycle; a Service that does not exist is not
    waiting for pods at all (said apart: reinstall or delete)."""
    if cause is None or cause.cls != causes.UNREACHABLE or cause.detail in ("service not found", "DNS lookup failed"):
        return None
    # A Service's ClusterIP refusing the connection is kube-proxy's REJECT rule for a Service without endpoints; a
    # url: webhook that refuses is outside the cluster's pods
    if cause.detail == "connection refused" and not via_service:
        return None
    for (ns, kind, name), _n in requests.items():
        if kind in POD_CREATORS and kind not in ("Pod", "Job") and not ns and not name:
            who = "a controller" if kind == "Controller" else f"{kind} controllers"
            return (f"pods {who} create{'s' if kind == 'Controller' else ''}, while its backend cannot be reached "
                    f"({cause.detail}): its own pods are made the same way")
    return None


def node_write(a: _Acc) -> str | None:
    """A Node write the failing lines show (a CNI agent annotating its Node, a kubelet registering)."""
    for r in _lines(a):
        m = _NODE_WRITE.search(r.raw)
        if m:
            return f"Node write ({m[0].strip()})"
    return None


_OWNER_RESOURCE = {"ReplicaSet": "pods", "DaemonSet": "pods", "Job": "pods", "StatefulSet": "pods",
                   "Deployment": "replicasets", "Pod": "pods", "Controller": "pods", "Lease": "leases", "Node": "nodes",
                   "EndpointSlice": "endpointslices", "Endpoints": "endpoints", "Binding": "pods/binding"}


def model_needs(requests, service: str | None) -> list[heal.Write]:
    """The heal model's writes the failing requests are (a controller named as the request's owner: the pods it
    creates)."""
    backend_ns = (service or "").partition("/")[0] or None
    out: list[heal.Write] = []
    for (ns, kind, _name) in requests:
        res, _, sub = _OWNER_RESOURCE.get(kind or "", "").partition("/")
        if not res:
            continue
        for w in heal.for_version(None):
            if w.resource != res or w.subresource != sub:
                continue
            if ns is None or not w.namespaces or ns in w.where(backend_ns):
                out.append(w)
    return sorted(dict.fromkeys(out), key=lambda w: -heal.rank(w.severity))


def prove_command(f: Finding) -> str:
    return prove_command_for(f.sources)


def prove_command_for(sources) -> str:
    logs = " ".join(shlex.quote(s) for s in sorted(sources)[:3]) or "LOGS"
    return (f"breakglass diagnose {logs} --kubeconfig KUBECONFIG   # apiserver down: --etcd-endpoints URL (and "
            f"certificates); offline: --webhooks SAVED.yaml (kubectl get validatingwebhookconfigurations,"
            f"mutatingwebhookconfigurations -o yaml)")


def log_cycle(f: Finding, requests, c: Correlator | None = None) -> None:
    """The cycle as the log shows it, step by step, and how far it is shown."""
    how = "denies" if f.mode == "deny" else f"fails closed ({f.cause})"
    shown = (f.blocked + f.requests) if f.deadlock == BOOTSTRAP else (f.requests or f.blocked)
    steps = [f'the log: webhook "{f.webhook}" {how} on ' + (", ".join(shown[:3]) or "the requests it intercepts")]
    if f.deadlock == BOOTSTRAP:
        for o in bootstrap.BOOTSTRAP_KINDS:
            if any(str(b).startswith(o.kind) for b in f.blocked) and o.hook in f.hooks:
                w = next((x for x in heal.WRITES if x.kind == o.kind and x.by_apiserver), None)
                steps.append(f"the heal model: kube-apiserver writes {o.kind} in post-start hook {o.hook}"
                             + (f"; {w.readiness} waits for it ({w.source})" if w and w.readiness else ""))
                break
        steps.append("the webhook's backend needs a ready apiserver to come back (its pods are created, scheduled "
                     "and given endpoints through it): a cycle, shown by the apiserver's own lines")
        f.cycle, f.proof = steps, PROVEN_LOG
        return
    for w in model_needs(requests, f.service)[:2]:
        steps.append(f"the heal model: {w.actor} needs {w.describe()}; without it {w.breaks} ({w.source})")
    if f.deadlock == SELF_DEPENDENCY:
        why = self_dependency(requests, f.service) if isinstance(requests, dict) else None
        steps.append(f"names: {why}" if why and ("tunnel" in why or "CNI" in why) else
                     f"names: the blocked write is what the webhook's own backend ({f.service or 'its Service'}) "
                     f"needs to come back")
    elif f.deadlock == NODE_LEASE:
        steps.append(f"names: the webhook's backend ({f.service or 'its Service'}) runs as pods on nodes and is "
                     f"recreated by controllers: it needs the Nodes, Leases and leaders this write keeps alive")
    f.prove = prove_command(f)
    steps.append("not checked: the webhook's configuration and its backend's endpoints were not read; to prove or "
                 "refute it: " + f.prove)
    f.cycle, f.proof = steps, LIKELY


def _add_evidence(evidence: list[Evidence], accs: list[_Acc], role: str, limit: int | None = None) -> None:
    """Add the first and last line of each accumulator, once each, up to ``limit`` lines in all."""
    for acc in accs:
        for rec in [acc.first] + ([acc.last] if acc.last is not acc.first else []):
            if rec is None or any(e.location == rec.location for e in evidence):
                continue
            if limit is not None and len(evidence) >= limit:
                return
            evidence.append(Evidence(rec.location, rec.raw[:MAX_TEXT], role, _fmt_time(rec)))


def _top(d: dict[str, int]) -> str | None:
    return max(d, key=d.get) if d else None


_ESCAPED_SPACE = re.compile(r"(?:\\[nrt]|\s)+")


def _prose(text: str, limit: int) -> str:
    """A webhook's message as one line of prose, at most ``limit`` characters: the newlines Go's %#v and klog's
    quoting leave escaped (`denied the request: \\n\\nresource …`) read as spaces, and a cut ends at a word."""
    text = _ESCAPED_SPACE.sub(" ", text.replace('\\"', '"')).strip()
    if len(text) <= limit:
        return text
    return shorten.at_word(text[:limit - 1], limit, " ,;:.")


def _who(wtype: str, a: _Acc) -> str:
    """How a finding names its webhook: by name, or, where the paste cut the name off, by its backend."""
    if a.webhook:
        return f'{wtype} webhook "{a.webhook}"'.strip()
    at = _top(a.services) or _top(a.urls)
    return f"{wtype} webhook at {at} (its name is not in the lines)".strip() if at else \
        f"{wtype or 'a'} webhook (its name is not in the lines)".strip()


class Builder:
    """Turns the accumulators into findings, joining hooks to the webhooks that block them."""

    def __init__(self, c: Correlator) -> None:
        self.c = c
        self.n = c.max_evidence

    def build(self) -> list[Finding]:
        accs = list(self.c.accs.values())
        calls = [a for a in accs if a.kind in ("call", "deny", "policy")]
        fatal = {a.hook for a in accs if a.kind == "hook-fatal"}
        stuck = [a for a in accs if _is_stuck(a, fatal, self.c.last_ts)]
        # No alarm without cause: hooks `not finished` for a moment at start, with no webhook anywhere in the logs
        # and start-up going on after them, are a normal start (issue 28), said as a notice.
        self.settled: list[_Acc] = []
        if not any(a.kind in ("call", "deny", "policy", "fail-open", "conversion", "panic") for a in accs):
            self.settled = [a for a in stuck if a.hook not in fatal and settled_at_start(a, self.c.last_ts)]
            stuck = [a for a in stuck if a not in self.settled]
        # A stuck hook and a single suspect failing closed: tie them, labelled as a guess.
        # (A burst of unanswered attempts alone is too weak for that.)
        # The suspect is looked for among the webhooks of the hook's own sources first: another cluster's log in
        # the same input has its own webhook, kept apart (correlate.Correlator._deployment).
        closed = [a for a in calls if (a.kind != "deny" or a.blocked or a.blind) and a.mode != "open"]
        for h in (a for a in stuck if a.kind != "boot-attempt"):
            suspects = [c for c in closed if c.sources & h.sources] or closed
            if len(suspects) == 1 and h.hook not in suspects[0].hooks:
                for kind in bootstrap.by_hook(h.hook)[:1]:
                    suspects[0].link(bootstrap.blocked(kind), "probable")
        stuck_hooks = {a.hook for a in stuck}

        findings: list[Finding] = []
        explained: set[str] = set()
        for a in calls:
            f = self._call_finding(a, stuck_hooks)
            if f is None:
                continue
            self._note_apart(f, a)
            findings.append(f)
            # A hook whose write this webhook is shown refusing is explained by it, deadlock or not (the identity
            # lease controller's `failed 5 attempts to update lease` lines name no webhook, the lines before do).
            explained |= set(f.hooks)
            if f.bootstrap_deadlock:
                _add_evidence(f.evidence, [o for o in stuck if o.hook in f.hooks], "context", self.n + 6)
        # A fatal hook under its old name (`ca-registration`) whose line the deadlock already shows is explained too.
        shown = {e.location for f in findings if f.bootstrap_deadlock for e in f.evidence}
        by_hook: dict[str, list[_Acc]] = {}
        for a in stuck:
            if a.hook not in explained and not (a.kind == "hook-fatal" and a.first and a.first.location in shown):
                by_hook.setdefault(a.hook, []).append(a)
        for group in by_hook.values():
            findings.append(self._hook_finding(group))
        if self.settled:
            findings.append(self._settled_finding(self.settled))
        for a in accs:
            f = None
            if a.kind == "fail-open":
                f = self._note_apart(self._fail_open(a), a)
            elif a.kind == "leader":
                f = self._leader(a, findings)
            elif a.kind in ("canceled", "panic"):
                f = self._minor(a)
            elif a.kind == "no-dry-run":
                f = self._no_dry_run(a)
            elif a.kind == "slow":
                f = self._slow(a)
            elif a.kind == "conversion":
                f = self._conversion(a)
            elif a.kind == "unhealthy" and not any(x.webhook or x.policy or x.hooks for x in findings):
                f = self._unhealthy(a)  # with a webhook or a stuck hook in the logs, those say why
            if f is not None:
                findings.append(f)
        findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], -f.count))
        for i, f in enumerate(findings, 1):
            f.id = f"F{i}"
        return findings

    def _note_apart(self, f: Finding, a: _Acc) -> Finding:
        """Say that lines of the same webhook name in other sources were kept out of this finding: they show it
        served by another backend (another cluster's log in the same input), so neither's backend or count is
        the other's (issue 37 §3)."""
        others = [o for o in self.c.accs.values() if o is not a and o.kind == a.kind and o.webhook == a.webhook
                  and "from" in (*o.key, *a.key)]
        if others:
            elsewhere = sorted({s for o in others for s in o.sources} - a.sources)
            backends = sorted({b for o in others for b in (*o.services, *o.urls)})
            f.explanation += (f" Lines of a webhook of the same name in {', '.join(elsewhere) or 'other sources'} are "
                              f"kept apart from this finding: they show it served by "
                              f"{', '.join(backends[:3]) or 'another backend'}, another cluster's or apiserver's.")
        return f

    def _base(self, a: _Acc, **kw) -> dict:
        return dict(
            id="", count=a.count or a.echo_count, first_seen=_fmt_time(a.first), last_seen=_fmt_time(a.last),
            evidence=_evidence(a, self.n), sources=sorted(a.sources), **kw)

    def _identity(self, a: _Acc) -> dict:
        hint = vendors.hint_for(a.webhook) if a.webhook else None
        wtype = next(iter(a.types)) if len(a.types) == 1 else (hint.webhook_type if hint else None)
        # Only a service the log shows (a service URL, or the resolver naming it): a webhook called by url:
        # has none, and the vendor's usual Service may not exist in this cluster at all.
        svc = _top(a.services)
        named = self.c.configurations.get(a.webhook or "")
        return dict(
            webhook=a.webhook, webhook_type=wtype,
            configuration=named or (hint.configuration if hint else None),
            configuration_source="log" if named else (f"convention: {hint.vendor}" if hint else None),
            operator_note=hint.managed_note if hint else None,
            service=svc, url=_top(a.urls))

    def _call_finding(self, a: _Acc, stuck_hooks: set[str]) -> Finding | None:
        blocked = sorted(a.blocked, key=lambda o: (o.kind, o.name or ""))
        links = set(a.blocked.values())
        link = next((h for h in ("direct", "time", "probable") if h in links), None)
        readiness = [o for o in blocked if bootstrap.blocks_readiness(o.kind)]
        deadlock = bool(readiness) and (link in ("direct", "time") or bool(stuck_hooks & {o.hook for o in readiness}))
        requests = dict(a.requests)
        for r, n in self.c.traced.get(a.webhook or "", {}).items():
            requests[r] = requests.get(r, 0) + n
        lease = (node_lease(requests, bool(a.sources) and a.sources <= self.c.apiserver_sources)
                 if a.kind in ("call", "deny") and a.mode != "open" else None)
        if a.kind == "deny" and not blocked and not a.blind and not lease:
            return self._ordinary_denial(a)  # a webhook doing its job: said, not alarmed about
        if a.kind == "policy" and not blocked:
            return None
        ident = self._identity(a) if a.kind != "policy" else {}
        what = ", ".join(str(o) for o in blocked)
        hooks = sorted({o.hook for o in blocked})
        if a.kind == "call":
            cause = a.cause or causes.Cause(causes.OTHER, "other")
            family = causes.FAMILY_BY_CLASS[cause.cls]
            who = _who(ident["webhook_type"] or "admission", a)
            title = f"{who} fails closed: {cause.detail}"
            advice = causes.ADVICE[cause.cls]
            severity = CRITICAL if deadlock else ERROR
            explanation = (f"Every request {who} intercepts is refused because the apiserver cannot get an "
                           f"answer from it ({cause.detail}).")
            extra = dict(mode=a.mode or "closed", cause_class=cause.cls, cause=cause.detail)
        elif a.kind == "deny":
            family = "webhook-rejects-bootstrap" if blocked else "webhook-rejects"
            who = f'webhook "{a.webhook}"'
            title = f"{who} denies {'objects the apiserver must create' if blocked else 'requests'}"
            why = _top(a.details) or "without explanation"
            explanation = f'{who} answers "denied": {_prose(why, 600)}'
            if a.unknown_kind:
                explanation += (f" The message shows the webhook does not know {', '.join(o.kind for o in blocked)}: "
                                f"it refuses every write of that kind, the apiserver's own included.")
            if a.blind:
                explanation += " The message shows the webhook itself cannot reach the apiserver."
            advice = "exclude bootstrap objects from this webhook (matchConditions) or bypass it until it is healthy"
            severity = CRITICAL if deadlock else ERROR
            extra = dict(mode="deny", cause_class="rejected", cause=why[:300])
        else:
            family = "policy-rejects-bootstrap"
            kind = policy_kind(a.types)
            who = f"{kind} '{a.policy}'" + (f" (binding '{a.binding}')" if a.binding else "")
            broken = a.cause is not None and a.cause.cls == "policy-config"
            title = (f"{who} cannot be evaluated and fails closed on objects the apiserver must create" if broken
                     else f"{who} denies objects the apiserver must create")
            explanation = (f"{who} could not be evaluated, and its failurePolicy Fail refuses the request: "
                           if broken else f"{who} denies: ") + _prose(_top(a.details) or '', 600)
            advice = (f"admission policies are not switched off with the webhook plugins: delete the binding (API or "
                      f"etcd), or disable the {kind} plugin; then add matchConditions that skip the apiserver's own "
                      f"writes where the policy's owner keeps them")
            note = vendors.policy_hint(a.policy)
            if note:
                advice += f". {note}"
            severity = CRITICAL if deadlock else ERROR
            extra = dict(mode="deny", cause_class="policy-config" if broken else "rejected",
                         cause=(_top(a.details) or "")[:300], policy=a.policy, binding=a.binding,
                         webhook_type="mutating" if kind.startswith("Mutating") else "validating")
        if blocked:
            explanation = explanation.rstrip()
            explanation += "" if explanation.endswith((".", "!", "?")) else "."
            explanation += f" It blocks {what}, which the apiserver writes itself at start"
            explanation += f" (post-start hook {', '.join(hooks)})."
            if deadlock and a.kind == "policy":
                explanation += (" Until that write succeeds the apiserver never becomes ready. The policy runs inside"
                                " the apiserver: no backend comes back, and restarting the apiserver or whatever "
                                "generated the policy changes nothing: a bootstrap deadlock.")
            elif deadlock:
                explanation += (" Until that write succeeds the apiserver never becomes ready, and the webhook's own"
                                " pods cannot be scheduled or reached without it: a bootstrap deadlock.")
            if link == "time":
                explanation += " (Tied by time: the failure came right after the apiserver tried that write.)"
            elif link == "probable":
                explanation += " (Probable: the hook is stuck and this is the only webhook failing closed.)"
        fam = BOOTSTRAP if deadlock else None
        shown = sorted({_request_text(r) for r in requests})[:8]
        if fam is None and lease:
            fam, severity = NODE_LEASE, CRITICAL
            explanation += (f" It {'denies' if a.kind == 'deny' else 'blocks'} {lease}: kubelets that cannot renew "
                            f"their Lease or update their Node go NotReady and their pods are evicted (the "
                            f"webhook's backend with them); controllers that cannot renew their leader Lease stop. "
                            f"Waiting will not heal it.")
            advice = ("keep Leases and Nodes away from this webhook through the API (its rules, or a matchCondition "
                      "on request.resource), or set failurePolicy Ignore / delete the configuration; the admission "
                      "flag only when the apiserver cannot be reached")
        elif fam is None and a.kind == "call" and a.mode != "open" and ident.get("service") and (
                node := node_write(a)):
            fam, severity = NODE_LEASE, CRITICAL
            explanation += (f" It blocks a {node}: a CNI agent that cannot annotate its Node gives the node no pod "
                            f"network, and a kubelet that cannot update it goes NotReady; the webhook's backend "
                            f"needs both.")
            advice = ("keep Nodes away from this webhook through the API (its rules, or a matchCondition on "
                      "request.resource), or set failurePolicy Ignore / delete the configuration")
            requests = {**requests, (None, "Node", None): 1}
            shown = sorted({_request_text(r) for r in requests})[:8]
        elif fam is None and a.kind == "call" and a.mode != "open":
            mine = (self_dependency(requests, ident.get("service"))
                    or fatal_own_start(a, ident.get("service"), a.webhook)
                    or controller_pods_without_endpoints(requests, a.cause, bool(ident.get("service"))))
            hint = vendors.hint_for(a.webhook) if a.webhook else None
            # only where no line shows which namespace's pods were refused: pods of its own namespace refused show the
            # shipped selector is not in place (an older version, or changed), and the cycle stands
            unseen = not any(ns for (ns, kind, _n) in requests if kind in POD_CREATORS)
            if mine and hint is not None and hint.exempts_own and unseen:
                # the vendor's shipped configuration refutes the cycle the names suggest: said, not alarmed about
                explanation += (f" Its own pods are not among the refused ones as {hint.vendor} ships it: "
                                f"{hint.exempts_own}; so it heals when its backend answers again, unless that "
                                f"selector was changed (to check: {prove_command_for(a.sources)}).")
                mine = None
            if mine:
                fam, severity = SELF_DEPENDENCY, CRITICAL
                ns = _exclude_ns(requests, ident.get("service"))
                extra = {**extra, "exclude_namespace": ns}
                explanation += (f" It blocks {mine}. While it fails no replacement pod can be admitted, so its "
                                f"backend cannot come back by itself: a self-dependency.")
                advice = (f"exclude {ns or 'its backend namespace'} from this webhook through the API (a "
                          f"namespaceSelector on kubernetes.io/metadata.name, or a matchCondition), so the backend's "
                          f"pods can be created; else failurePolicy Ignore or delete the configuration")
        f = Finding(family=family, severity=severity, title=title, explanation=explanation, advice=advice,
                    blocked=[str(o) for o in blocked], hooks=hooks, link=link, bootstrap_deadlock=deadlock,
                    deadlock=fam, requests=shown, **self._base(a), **ident, **extra)
        if fam is not None:
            log_cycle(f, requests, self.c)
        return f

    def _conversion(self, a: _Acc) -> Finding:
        """A CRD's conversion webhook that fails: its own family; the admission flag does not switch it off."""
        cause = a.cause or causes.Cause(causes.OTHER, "other")
        svc, url = _top(a.services), _top(a.urls)
        kinds = sorted(a.crds)
        names = [a.crds[k] for k in kinds if a.crds[k]]
        what = ", ".join(kinds[:4]) + (f" and {len(kinds) - 4} more" if len(kinds) > 4 else "")
        return Finding(
            family="conversion-webhook", severity=ERROR,
            title=f"conversion webhook for {what} fails: {cause.detail}",
            explanation=(f"The conversion webhook of {what} ({svc or url or 'its backend'}) fails ({cause.detail}). "
                         f"Reads and writes of those resources that need another version fail, and namespace "
                         f"deletion and garbage collection stall on them, until that backend answers again. It is "
                         f"not an admission webhook: --disable-admission-plugins does not switch it off."),
            advice=("bring the conversion backend back; or, when the CRD's status.storedVersions allow it (one stored "
                    "version, or versions with the same schema), set the CRD's spec.conversion.strategy to None "
                    "through the API (with the apiserver down: in etcd); never the admission flag"),
            service=svc, url=url, mode="closed", cause_class=cause.cls, cause=cause.detail, deadlock=CONVERSION,
            crds=kinds, blocked=names, **self._base(a))

    def _ordinary_denial(self, a: _Acc) -> Finding:
        """A webhook that answered and refused: which webhook denied what, for the record (severity info)."""
        ident = self._identity(a)
        why = _top(a.details) or "without explanation"
        what = _top(a.targets)
        return Finding(
            family="webhook-denied", severity=INFO,
            title=f'webhook "{a.webhook}" denied {what or "a request"}: {_prose(why, 160)}',
            explanation=(f'Webhook "{a.webhook}" answered and refused {what or "the request"} ({a.count} time'
                         f'{"s" if a.count != 1 else ""}): "{_prose(why, 600)}". That is its policy at work, not a failure '
                         f"of admission: nothing here keeps the apiserver or other requests from working."),
            advice="if the denial is unexpected, read the webhook's policy (or ask its owner); change the request "
                   "or the policy, not the admission chain",
            mode="deny", cause_class="rejected", cause=why[:300], **self._base(a), **ident)

    def _slow(self, a: _Acc) -> Finding:
        """Calls the dispatcher's trace shows taking a second or more. A total time a hair over a whole number of
        seconds is the call's timeoutSeconds running out: the request then failed (or, failing open, went through
        unchecked) after waiting all of it."""
        ms = max(int(d) for d in a.details) if a.details else 0
        timed_out = ms >= 1000 and ms % 1000 <= max(20, ms // 50)
        ident = self._identity(a)
        who = _who(ident["webhook_type"] or "admission", a)
        what = ", ".join(sorted({_request_text(r) for r in a.requests})[:4])
        if timed_out:
            title = f"{who} timed out: calls took {ms / 1000:g} s, its whole timeout"
            explanation = (f"The apiserver's trace shows calls to {who} running {a.count} time(s) for {ms} ms, a "
                           f"whole number of seconds: the call's timeoutSeconds ran out, so the request failed (or, "
                           f"failing open, went through unchecked) after waiting all of it"
                           + (f" ({what})" if what else "") + ". Every request it intercepts waits as long.")
        else:
            title = f"{who} is slow: calls took up to {ms / 1000:g} s"
            explanation = (f"The apiserver's trace shows calls to {who} taking up to {ms} ms"
                           + (f" ({what})" if what else "") + "; every request it intercepts waits as long.")
        return Finding(
            family="webhook-slow", severity=ERROR if timed_out else INFO, title=title, explanation=explanation,
            advice=("find why the backend answers late (its pods, the network path from the control plane: a "
                    "konnectivity or tunnel agent); keep Leases and Nodes out of it and its timeoutSeconds short"),
            mode=None, cause_class=causes.TIMEOUT if timed_out else "slow",
            cause=f"timed out after {ms / 1000:g} s" if timed_out else f"slow ({ms} ms)", **self._base(a), **ident)

    def _no_dry_run(self, a: _Acc) -> Finding:
        """A dry run refused because the webhook may have side effects: the webhook works; the dry run does not."""
        what = _top(a.targets)
        return Finding(
            family="webhook-no-dry-run", severity=INFO,
            title=f'webhook "{a.webhook}" does not support dry run: {what or "a dry-run request"} was refused',
            explanation=(f'Webhook "{a.webhook}" declares side effects (sideEffects not None or NoneOnDryRun), so the '
                         f"apiserver refuses every dry run it would intercept (kubectl --dry-run=server, Flux's and "
                         f"Argo CD's diffs). The webhook answers; nothing is down."),
            advice="set the webhook's sideEffects to None (or NoneOnDryRun) in its chart, or skip the dry run",
            cause_class="no-dry-run", cause="does not support dry run", **self._base(a), **self._identity(a))

    def _fail_open(self, a: _Acc) -> Finding:
        ident = self._identity(a)
        cause = a.cause or causes.Cause(causes.OTHER, "other")
        return Finding(
            family="webhook-fail-open", severity=WARNING,
            title=f'{_who("", a).strip()} fails open: requests it should check are admitted unchecked',
            explanation=(f'Calls to {_who("", a).strip()} fail ({cause.detail}) and its failurePolicy is Ignore, so '
                         f"the apiserver admits the requests anyway. Not a deadlock, but anything it should have "
                         f"rejected got in meanwhile."),
            advice="list what was admitted with `breakglass leaks --audit-log AUDIT_LOG` (or `--apiserver-log` on "
                   "this log when there is no audit log) and re-check it; fix the webhook's reachability",
            mode="open", cause_class=cause.cls, cause=cause.detail, **self._base(a), **ident)

    def _hook_finding(self, group: list[_Acc]) -> Finding:
        """One finding per stuck hook, however many kinds of line show it."""
        strength = {"hook-fatal": 0, "readyz": 1, "not-ready": 2, "boot-failure": 3, "boot-attempt": 4}
        group = sorted(group, key=lambda x: strength[x.kind])
        a = group[0]
        hook = a.hook or "?"
        objs = bootstrap.by_hook(hook)
        obj = next((g.obj for g in group if g.obj), None)
        what = str(obj) if obj else (", ".join(o.kind for o in objs) or "its objects")
        not_ready = next((g for g in group if g.kind == "not-ready"), None)
        if a.kind == "hook-fatal":
            title = f'post-start hook "{hook}" failed: the apiserver exits'
            severity = CRITICAL
            explanation = (f"kube-apiserver aborts at start because post-start hook {hook} failed: "
                           f"{_top(a.details) or ''}")[:600].rstrip(".") + "."
        elif a.kind == "readyz":
            title = f"readiness check poststarthook/{hook} keeps failing"
            severity = CRITICAL if a.count >= 2 else ERROR
            explanation = (f"/readyz reports poststarthook/{hook} as failed {a.count} times: the hook has not "
                           f"finished writing {what}.")
        elif a.kind == "not-ready":
            title = f"{a.key[1] or 'requests'} forbidden: admission not yet ready to handle request"
            severity = CRITICAL if a.stopped else ERROR
            explanation = f"The apiserver could not write {what}: admission was not ready."
            if a.stopped:
                title += f"; then its controller shut down (hook {hook})"
                explanation += (f" The controller of post-start hook {hook} then shut down, so the hook does not "
                                f"retry and /readyz stays failing: stuck, not a moment at start. A restart of the "
                                f"apiserver retries it once admission has synced.")
        else:
            title = f"the apiserver cannot write {what} (hook {hook})"
            severity = ERROR
            explanation = (f"The apiserver tried {a.count} times to write {what} and did not succeed "
                           f"in these logs.")
        if not_ready is not None and a is not not_ready:
            explanation += (f" Its writes of {not_ready.key[1] or 'objects'} were refused with \"not yet ready to "
                            f"handle request\": admission (webhook or policy informers) had not synced.")
        explanation += " No webhook is named in these lines; look for webhook failures in earlier logs or other nodes."
        base = self._base(a)
        _add_evidence(base["evidence"], group[1:], "failure")
        base["sources"] = sorted(set().union(*(g.sources for g in group)))
        return Finding(family="admission-not-ready" if not_ready else "bootstrap-stuck",
                       severity=severity, deadlock=BOOTSTRAP if severity == CRITICAL else None, title=title, explanation=explanation,
                       advice="find what rejects or times out that write; `breakglass webhooks` lists what could intercept it",
                       hooks=[hook], blocked=[what], **base)

    def _settled_finding(self, accs: list[_Acc]) -> Finding:
        hooks = sorted({a.hook for a in accs if a.hook})
        a = max(accs, key=lambda x: x.count)
        base = self._base(a)
        _add_evidence(base["evidence"], [x for x in accs if x is not a], "failure")
        ended = _log_ends_at(accs, self.c.last_ts)
        return Finding(
            family=SETTLED, severity=INFO,
            title=(f"readiness failed for a moment at start ({', '.join(hooks)})"
                   + (": the log ends there" if ended else ", then start-up went on")),
            explanation=(f"/readyz reported {', '.join('poststarthook/' + h for h in hooks)} as not finished for "
                         f"less than {PERSIST_S:.0f} s, and "
                         + ("the log ends there, so it cannot show whether start-up went on. " if ended else
                            "the log goes on with later start-up lines. ")
                         + "Every apiserver reports its post-start hooks unfinished in its first seconds; no webhook "
                           "is named anywhere in these logs. Not an alarm: only the same hooks failing over time "
                           "are."),
            advice=("if the apiserver is not ready now, capture a longer log (kubectl get --raw='/readyz?verbose', "
                    "or the apiserver's log over a minute)" if ended else
                    "nothing to do; if the apiserver is not ready now, capture a longer log"),
            hooks=hooks, **base)

    def _leader(self, a: _Acc, findings: list[Finding]) -> Finding | None:
        closed = [c for c in self.c.accs.values() if c.kind in ("call", "deny") and c.mode != "open"]
        webhook_findings = [f for f in findings if f.webhook and f.mode != "open" and f.severity != INFO
                            and any(c.webhook == f.webhook and _overlaps(c, a, LEADER_WINDOW_S) for c in closed)]
        if not webhook_findings and not a.blind:
            # lost for reasons this tool does not diagnose, or long before/after the webhook failures; unless the
            # renewals themselves timed out while the apiserver took them: starvation behind something slow
            if a.starved and not self.c.apiserver_slow:
                return self._starved_lease(a)
            return self._slow_reads(a) if self.c.apiserver_slow else None
        names = ", ".join(sorted({f'"{f.webhook}"' for f in webhook_findings})) or "a webhook"
        f = Finding(
            family="leader-election-lost", severity=ERROR, deadlock=NODE_LEASE,
            title=f"{a.hook} lost leader election while webhooks were failing",
            explanation=(f"{a.hook} could not renew its lease while {names} failed; controllers stop until "
                         f"they win the lease again, so nothing heals meanwhile."),
            advice="fix the failing webhook first; controllers recover by themselves once the lease can be written",
            **self._base(a))
        w = heal.BY_ID["kcm-lease"]
        f.prove = prove_command(f)
        f.cycle = [f"the log: {a.hook} lost its leader Lease while {names} failed closed",
                   f"the heal model: {w.actor} needs {w.describe()}; without it {w.breaks} ({w.source})",
                   "names: the webhook's backend pods are recreated and placed by these controllers",
                   "not checked: whether the webhook intercepts Leases was not read; to prove or refute it: " + f.prove]
        f.proof = LIKELY
        return f

    def _unhealthy(self, a: _Acc) -> Finding:
        """The apiserver did not come back from a restart (an upgrade's wait, an installer's health check), and
        nothing else in these lines says why: not an all-clear, and not a webhook's deadlock either."""
        return Finding(
            family=UNHEALTHY, severity=ERROR,
            title="kube-apiserver did not come back from its restart",
            explanation=("An upgrade or installer waited for kube-apiserver and it did not become healthy, and no "
                         "line here says why: these are the tool's lines, not the apiserver's own. Whether a "
                         "webhook blocks its start cannot be told from them."),
            advice="read the apiserver's own log and the webhooks (commands in the verdict)", **self._base(a))

    def _slow_reads(self, a: _Acc) -> Finding:
        """Leader election whose reads of its lock time out: admission never runs on a read, so the apiserver (or
        its etcd) is slow to answer at all. Said, and not blamed on a webhook."""
        return Finding(
            family="apiserver-slow", severity=INFO,
            title=f"{a.hook}'s lease requests timed out: the apiserver or its etcd is slow, not admission",
            explanation=(f"{a.hook} could not renew its leader Lease in time, and the lines show the apiserver or "
                         f"etcd itself too slow: a read of the Lease timing out (admission webhooks and policies "
                         f"run on writes only, so a read waited on load or storage), or etcd or the apiserver "
                         f"saying so (`etcdserver: request timed out`, `… in the time allotted`). No webhook is in "
                         f"these lines."),
            advice="check the apiserver's load (APF: apiserver_flowcontrol_*) and etcd's latency (etcdctl endpoint "
                   "status --write-out=table)", **self._base(a))

    def _starved_lease(self, a: _Acc) -> Finding:
        """A leader lost its lease because its renewals timed out on the client side (a 5 s client timeout inside
        the 10 s renew deadline), with no webhook named: lease starvation, most often behind a webhook on Leases
        slower than 5 s, failing open or not; a slow etcd looks the same. Said as likely, with what tells."""
        prove = ("breakglass audit --kubeconfig KUBECONFIG   # the lease-timeout and recovery-intercept findings "
                 "name a webhook on Leases slower than the renewal; none: check etcd (etcdctl endpoint status "
                 "--write-out=table)")
        f = Finding(
            family="leader-election-lost", severity=ERROR, deadlock=NODE_LEASE,
            title=f"{a.hook} cannot keep its leader lease: its lease renewals timed out",
            explanation=(f"{a.hook}'s lease requests reached the apiserver and got no answer within the client's "
                         f"timeout (5 s, inside leader election's 10 s renew deadline), and no line here names a "
                         f"webhook. That is lease starvation: a webhook on Leases that takes longer than 5 s "
                         f"(timeoutSeconds unset is 10 s) holds each renewal until the client gives up, even when "
                         f"it fails open, so the controller keeps losing its lease and nothing it runs heals. A slow "
                         f"etcd does the same."),
            advice="find the webhook on Leases with `breakglass audit` (rule lease-timeout); keep Leases out of it "
                   "or set its timeoutSeconds to 3 or less",
            **self._base(a))
        w = heal.BY_ID["kcm-lease"]
        f.prove = prove
        f.cycle = [f"the log: {a.hook}'s lease renewals timed out on the client side (the apiserver took them)",
                   f"the heal model: {w.actor} needs {w.describe()}; without it {w.breaks} ({w.source})",
                   "not checked: which webhook (or etcd) holds the renewals; to find out: " + prove]
        f.proof = LIKELY
        return f

    def _minor(self, a: _Acc) -> Finding:
        if a.kind == "panic":
            return Finding(family="webhook-panic", severity=WARNING,
                           title=f'calling webhook "{a.webhook}" panicked; the request was admitted',
                           explanation="The apiserver recovered from a panic while calling this webhook and failed open.",
                           advice="report it upstream; list what was admitted with `breakglass leaks`",
                           webhook=a.webhook, mode="open",
                           **self._base(a))
        return Finding(family="webhook-canceled", severity=INFO,
                       title=f'callers gave up while webhook "{a.webhook}" was being called',
                       explanation="Clients went away before the webhook answered; usually a slow webhook.",
                       advice="check the webhook's latency", webhook=a.webhook, **self._base(a))


def _denials_said(notices: list[Finding]) -> str:
    parts = []
    for f in notices[:5]:
        parts.append(f.title)
    more = f" (and {len(notices) - 5} more)" if len(notices) > 5 else ""
    said = "; ".join(parts) + more
    return said if said.endswith((".", "…")) else said + "."


def verdict(findings: list[Finding], notices: list[Finding] = ()) -> Verdict:
    v = _verdict(findings)
    denials = [n for n in notices if n.family == "webhook-denied"]
    settled = [n for n in notices if n.family == SETTLED]
    if denials:
        said = "Ordinary denials (policy at work, nothing broken): " + _denials_said(denials)
        if v.state == CLEAR:
            v = Verdict(CLEAR, "nothing broken: webhooks denied requests by their own policy", said, False)
        else:
            v.explanation += " " + said
    if settled:
        said = settled[0].explanation
        if v.state == CLEAR and not denials:
            return Verdict(CLEAR, "nothing broken: the apiserver's readiness failed only for a moment at start", said,
                           False)
        v.explanation += " " + said
    return v


# What each deadlock family's verdict says: what is stuck, why waiting will not heal it, the way out that works
# for it, least invasive first. {who}, {what}, {cause}, {ns}, {svc} come from the finding that leads.
FAMILY_HEADLINE = {
    SELF_DEPENDENCY: "SELF-DEPENDENCY DEADLOCK: a webhook blocks the pods it needs to come back",
    NODE_LEASE: "NODE AND LEASE STARVATION: nodes and controllers cannot renew their Leases",
    CONVERSION: "CONVERSION WEBHOOK DOWN: reads and writes of custom resources fail",
}


def _unless_exempt(lead: Finding, carrier: bool) -> str:
    """A likely cycle says on what it turns: whether the pods it needs are exempt from the webhook, unknown from the
    lines (issue 45 §2); a proven one does not."""
    if lead.proof in (PROVEN, PROVEN_LOG):
        return ""
    return (" unless those pods' namespace is exempt from it" if carrier else
            " unless its own pods are exempt from it") + " (which the lines cannot show: the command below proves it)"


def _family_text(lead: Finding) -> str:
    who = f'webhook "{lead.webhook}"' if lead.webhook else "a webhook"
    cfg = f" (configuration {lead.configuration}, {lead.configuration_source})" if lead.configuration else ""
    if lead.deadlock == SELF_DEPENDENCY:
        svc = lead.service or "its backend"
        ns = lead.exclude_namespace or (svc.partition("/")[0] if lead.service else "the backend's namespace")
        carrier = bool(lead.service and lead.exclude_namespace and ns != svc.partition("/")[0])
        needs = ("pods that every call to it, or its backend's network, depends on (the apiserver's egress tunnel "
                 "or the CNI)" if carrier else "pods it needs itself")
        back = "those pods are created and its calls get through again" if carrier else "the backend comes back"
        return (f"{who}{cfg} fails closed ({lead.cause}) on the creation of {needs} "
                f"({', '.join(lead.requests[:3]) or 'its own backend'}; backend {svc}). While it fails no replacement "
                f"pod is admitted, so {'they' if carrier else 'its backend'} cannot come back and waiting will not "
                f"heal it{_unless_exempt(lead, carrier)}. The apiserver still answers: first exclude {ns} from the "
                f"webhook through the API (a "
                f"namespaceSelector on kubernetes.io/metadata.name NotIn [{ns}], or a matchCondition), which is "
                f"often enough: {back} and the webhook keeps guarding the rest. Else set its failurePolicy to Ignore or delete "
                f"the configuration (remedies below, least invasive first); the admission flag or etcd only when "
                f"the apiserver cannot be reached. Keep the exclusion in the webhook's chart.")
    if lead.deadlock == NODE_LEASE:
        if lead.family == "leader-election-lost" and "renewals timed out" in lead.title:
            return (f"{lead.title}: {lead.explanation} Keep Leases (coordination.k8s.io) away from the slow "
                    f"webhook through the API (`breakglass audit` names it: rule lease-timeout), or lower its "
                    f"timeoutSeconds to 3 or less (failurePolicy Ignore alone does not help: it fails open only "
                    f"after its timeout); controllers recover once the lease can be written.")
        if lead.family == "leader-election-lost":
            return (f"{lead.title}: {lead.explanation} Keep Leases (coordination.k8s.io) away from the failing "
                    f"webhooks through the API, or set their failurePolicy to Ignore (remedies below, least "
                    f"invasive first); controllers recover once the lease can be written.")
        how = "denies" if lead.mode == "deny" else f"fails closed ({lead.cause}) on"
        return (f"{who}{cfg} {how} the writes that keep nodes and controllers alive "
                f"({', '.join(lead.requests[:3]) or 'Leases, Nodes'}). Kubelets that cannot renew their Lease in "
                f"kube-node-lease or update their Node go NotReady, their pods are evicted (the webhook's backend "
                f"with them) and leader-elected controllers stop, so waiting will not heal it. Through the API "
                f"first: keep Leases and Nodes out of the webhook's rules (or a matchCondition on "
                f"request.resource), or set its failurePolicy to Ignore or delete the configuration; a policy "
                f"engine's freeze mode must leave Lease and Node updates out. The admission flag or etcd only when "
                f"the apiserver cannot be reached.")
    # CONVERSION
    return (f"The conversion webhook of {', '.join(lead.crds[:4])} ({lead.service or lead.url or 'its backend'}) "
            f"fails ({lead.cause}). Reads and writes of those resources that need another version fail, and "
            f"namespace deletion and garbage collection stall on them, until that backend answers; nothing else "
            f"restarts it. --disable-admission-plugins does NOT switch conversion off. Ways out, least invasive "
            f"first: bring the conversion backend back; or, when the CRD's status.storedVersions allow it (one "
            f"stored version, or versions with the same schema), set the CRD's spec.conversion.strategy to None "
            f"through the API (with the apiserver down, the same field of the CRD in etcd), and restore Webhook "
            f"conversion once the backend answers.")


# What the lines of a stuck start-up point at, when none names a webhook: (pattern, what it means)
_STUCK_CAUSES = (
    (re.compile(r"etcdserver|context deadline exceeded|request timed out|took too long|slow request|"
                r"apply request took", re.I),
     "etcd answering slowly or not at all (the hook's writes time out in storage, not in admission)"),
    (re.compile(r"reason withheld", re.I),
     "the apiserver withholding a failure's reason: a control plane not yet configured (its RBAC or its "
     "authentication not in place)"),
    (re.compile(r"not yet ready to handle request", re.I),
     "admission not ready: its informers (webhook configurations, policies) have not synced"),
    (re.compile(r"informer|cache[\w ]{0,30}sync|WaitForCacheSync", re.I), "caches that have not synced"),
    (re.compile(r"timed out waiting for the condition|Handler timeout|TLS handshake timeout", re.I),
     "the hook's own requests timing out (a slow or overloaded apiserver, or its storage: see etcd's latency)"),
)


def _stuck_text(lead: Finding) -> str:
    """What is stuck, what the lines point at, and the commands that tell whether a webhook is in it."""
    said = " ".join([lead.title, lead.explanation, *(e.text for e in lead.evidence)])
    causes = [what for rx, what in _STUCK_CAUSES if rx.search(said)]
    hooks = ", ".join(f"poststarthook/{h}" for h in lead.hooks if h and h != "?") or "a post-start hook"
    text = (f"{hooks} keeps failing ({lead.title}), and no line in these logs ties it to an admission webhook. "
            + (f"The lines point at {'; '.join(causes)}. " if causes else
               "The lines do not say why; the hook's own error is in the apiserver's log before them. ")
            + "To tell whether a webhook is in it: `breakglass webhooks` (what could intercept the hook's writes), "
              "`breakglass audit` (which of them fail closed on them), etcd's health (`etcdctl endpoint status "
              "--write-out=table`, `etcdctl endpoint health`), and the apiserver's log from its start. An admission "
              "policy (ValidatingAdmissionPolicy, MutatingAdmissionPolicy) that refuses the hook's write leaves no "
              "line in this log: the apiserver's audit log names it (give it to `breakglass diagnose` beside this "
              "log), and `breakglass audit` lists the policies that fail closed on such writes. No webhook way out "
              "is offered for it.")
    return text


def _steps(cycle: list[str]) -> str:
    return " ".join(f"({i}) {step}." for i, step in enumerate(cycle, 1))


def _proof_text(lead: Finding) -> str:
    return "Proven, step by step: " + _steps(lead.cycle) if lead.cycle else "Proven against the cluster."


_FAMILY_RANK = {BOOTSTRAP: 0, SELF_DEPENDENCY: 1, NODE_LEASE: 2, CONVERSION: 3}


def policy_kind(types) -> str:
    """Which kind of admission policy the lines show: mutating only when every line said so."""
    return "MutatingAdmissionPolicy" if set(types) == {"mutating"} else "ValidatingAdmissionPolicy"


def _policy_text(lead: Finding) -> str:
    kind = "MutatingAdmissionPolicy" if lead.webhook_type == "mutating" else "ValidatingAdmissionPolicy"
    who = f"{kind} '{lead.policy}'" + (f" (binding '{lead.binding}')" if lead.binding else "")
    how = ("cannot be evaluated and fails closed" if lead.cause_class == "policy-config" else "denies the request")
    return (f"{who} {how} when kube-apiserver writes {', '.join(lead.blocked)}, which it must write before it "
            f"becomes ready. An admission policy runs inside the apiserver: there is no backend to come back, and "
            f"restarting the apiserver, or the engine that generated the policy, changes nothing, so this will not "
            f"heal by itself. Get past it (remedies below, least invasive first): delete the binding, through the "
            f"API or from etcd after a backup, or switch the {kind} plugin off on every control-plane node; let the "
            f"apiserver start; make the policy skip the apiserver's own writes (matchConditions, where its owner "
            f"keeps them); then revert. Runbook: docs/runbooks/policy-lockout.md.")


def _verdict(findings: list[Finding]) -> Verdict:
    fams = sorted((f for f in findings if f.deadlock and f.deadlock != BOOTSTRAP),
                  key=lambda f: (_FAMILY_RANK[f.deadlock], -SEVERITY_RANK[f.severity], -f.count))
    if fams and not any(f.severity == CRITICAL and f.deadlock in (None, BOOTSTRAP) for f in findings):
        proven = [f for f in fams if f.proof == PROVEN]
        lead = proven[0] if proven and proven[0].deadlock != CONVERSION and fams[0].deadlock != CONVERSION else fams[0]
        if lead.deadlock == CONVERSION:
            return Verdict(DEGRADED, FAMILY_HEADLINE[lead.deadlock], _family_text(lead), True, lead.deadlock,
                           lead.cycle, lead.proof, lead.prove)
        text = _family_text(lead)
        if lead.proof == PROVEN:
            return Verdict(DEADLOCKED, FAMILY_HEADLINE[lead.deadlock], text + " " + _proof_text(lead), True,
                           lead.deadlock, lead.cycle, lead.proof)
        text += (" The cycle is inferred from the names in the log, not checked against the cluster: "
                 + _steps(lead.cycle[:-1]) + " To prove or refute it: " + (lead.prove or prove_command(lead)))
        return Verdict(DEADLOCK_LIKELY, "LIKELY " + FAMILY_HEADLINE[lead.deadlock], text, True, lead.deadlock,
                       lead.cycle, LIKELY, lead.prove or prove_command(lead))
    if findings and all(f.family == UNHEALTHY for f in findings):
        return Verdict(STUCK, "STUCK: kube-apiserver did not come back; these lines cannot tell why",
                       "An upgrade or installer waited for kube-apiserver and it did not become healthy, and nothing "
                       "in these lines (the tool's, not the apiserver's) says why. Cannot tell from this whether a "
                       "webhook is in it: read the apiserver's own log (`breakglass diagnose --ssh NODE`, `crictl logs "
                       "$(crictl ps -a --name kube-apiserver -q | head -1)`, `talosctl logs -k` on Talos) and the "
                       "webhooks (`breakglass webhooks --etcd-endpoints https://127.0.0.1:2379`, `breakglass "
                       "audit`), then diagnose those.", True)
    crit = [f for f in findings if f.severity == CRITICAL]
    err = [f for f in findings if f.severity == ERROR]
    warn = [f for f in findings if f.severity == WARNING]
    if crit:
        lead = next((f for f in crit if f.bootstrap_deadlock), crit[0])
        if lead.bootstrap_deadlock:
            headline = "BOOTSTRAP DEADLOCK: the apiserver cannot finish starting"
            if lead.policy and not lead.webhook:
                text = _policy_text(lead)
            else:
                who = f'webhook "{lead.webhook}"'
                cfg = f" (configuration {lead.configuration}, {lead.configuration_source})" if lead.configuration else ""
                how = f"fails closed ({lead.cause})" if lead.mode == "closed" else "denies the request"
                text = (f"{who}{cfg} {how} when kube-apiserver writes {', '.join(lead.blocked)}, which it must "
                        f"write before it becomes ready. The webhook's "
                        f"backend needs a ready apiserver to come back, so this will not heal by itself. Bypass it on "
                        f"every control-plane node (remedies below, least invasive first), let the apiserver start, "
                        f"repair the webhook, add matchConditions that keep bootstrap objects away from it, then "
                        f"revert the bypass.")
        elif not (lead.webhook or lead.policy) and not any(f.webhook or f.policy for f in findings):
            return Verdict(STUCK, "STUCK: the apiserver cannot finish starting; no line ties it to a webhook",
                           _stuck_text(lead), True)
        else:
            headline = "STUCK: the apiserver cannot finish starting"
            text = lead.explanation
        return Verdict(DEADLOCKED, headline, text, True, lead.deadlock, lead.cycle, lead.proof)
    if err and all(f.family in ("bootstrap-stuck", "admission-not-ready") for f in err) and not any(
            f.webhook or f.policy or f.service for f in findings):
        # a bootstrap write that keeps failing, no webhook anywhere: the start is what is stuck, not "admission"
        lead = max(err, key=lambda f: f.count)
        return Verdict(STUCK, "STUCK: the apiserver cannot finish starting; no line ties it to a webhook",
                       _stuck_text(lead), True)
    if err:
        # a webhook whose name a paste cut off is named by its Service
        names = sorted({f.webhook or f"{f.service} (name not in the lines)" for f in err if f.webhook or f.service})
        headline = "DEGRADED: requests are failing at admission"
        who = "Webhook(s) " + ", ".join(names) + " refuse" if names else "Admission refuses"
        text = (f"{who} requests, but nothing in "
                f"these logs shows the apiserver's own startup blocked. Workloads those webhooks intercept "
                f"cannot be created or changed until the webhooks answer again.")
        gone = sorted({f.service for f in err if f.cause == "service not found" and f.service})
        if gone:
            # no pod, rollout or restart brings back a Service that is not there: waiting is not a way out
            text += (f" The webhook's Service {', '.join(gone)} does not exist: the configuration outlived its "
                     f"backend (an uninstalled or half-installed release), so nothing will answer for it and this "
                     f"will not heal by itself unless the backend is installed again; otherwise delete the "
                     f"configuration.")
        checked = next((f for f in err if f.proof == REFUTED), None)
        if checked is not None:
            text += " Checked, not a deadlock: " + _steps(checked.cycle)
            return Verdict(DEGRADED, headline, text, True, None, checked.cycle, REFUTED)
        return Verdict(DEGRADED, headline, text, True)
    if warn:
        names = sorted({f.webhook for f in warn if f.webhook})
        return Verdict("leaking", "LEAKING: webhooks failed open and let requests through unchecked",
                       f"{', '.join(names) or 'A webhook whose name is not in the lines'} failed open. The cluster "
                       f"works, but requests those webhooks should have "
                       f"checked were admitted; list them with `breakglass leaks --audit-log AUDIT_LOG` and "
                       f"re-check them.", True)
    return Verdict("clear", "nothing found",
                   "No webhook failures, stuck post-start hooks or admission deadlocks in these logs.", False)



def build(c: Correlator) -> tuple[list[Finding], Verdict]:
    found, v, _ = build_all(c)
    return found, v


def build_all(c: Correlator) -> tuple[list[Finding], Verdict, list[Finding]]:
    """Findings (what needs action), the verdict, and notices (ordinary denials: which webhook denied what)."""
    everything = Builder(c).build()
    notices = [f for f in everything if f.family in ("webhook-denied", SETTLED)]
    found = [f for f in everything if f.family not in ("webhook-denied", SETTLED)]
    for i, f in enumerate(found, 1):
        f.id = f"F{i}"
    for i, f in enumerate(notices, 1):
        f.id = f"N{i}"
    v = verdict(found, notices)
    restarts = max(c.starts.values(), default=0) - 1
    exits = any(f.family == "bootstrap-stuck" and "exits" in f.title for f in found)
    if restarts >= 1 and exits and v.state in (DEADLOCKED, DEADLOCK_LIKELY, STUCK):
        # 1.33+ ends a start whose post-start hooks have not finished within 60 s (kubernetes/kubernetes#141220):
        # the kubelet starts it again, so a way out must land within one start
        v.explanation += (f" kube-apiserver started {restarts + 1} times in one log here, and a start that could "
                          f"not finish ended: its kubelet starts it again. A way out through etcd or a node's files "
                          f"lands whichever start is running, and is verified on the start that comes up ready.")
    return found, v, notices
