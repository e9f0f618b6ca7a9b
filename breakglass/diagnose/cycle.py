"""Prove or refute a deadlock's cycle against the webhook's configuration and its backend (issue 28).

A cycle: webhook W refuses write X (the log shows it failing closed, or denying); the heal model says actor Y
needs X for the cluster to come back; and Y is what W needs to answer: its backend's pods, their endpoints, the
kube-system pods (CNI, kube-proxy, DNS) those pods need, a Ready node to run on and the controllers and scheduler
that recreate and place them, or a ready apiserver. With W's configuration read (etcd, the API, or a saved file),
the first two are checked by matching W's rules, selectors and conditions against the model
(``webhooks.intercept``); its backend's state is read from its Service's endpoints where the cluster was read,
and taken from the log's failure where only a file was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from breakglass.diagnose import causes
from breakglass.diagnose.model import (
    BOOTSTRAP, CRITICAL, ERROR, NODE_LEASE, PROVEN, REFUTED, SELF_DEPENDENCY, Finding,
)
from breakglass.webhooks import intercept, model

# the writes on the path back to a webhook's backend, by how the backend needs them
BACKEND_WRITES = ("kcm-backend-pods", "kcm-backend-replicasets", "kcm-endpointslices", "kcm-endpoints",
                  "kubelet-pod-status", "kubelet-sa-token", "scheduler-binding")
SYSTEM_WRITES = ("kcm-system-pods", "kcm-endpointslices", "kubelet-sa-token", "scheduler-binding",
                 "kubelet-pod-status")
NODE_WRITES = ("kubelet-node-lease", "kubelet-node-status", "kubelet-node-register", "kcm-lease", "scheduler-lease",
               "cni-node-annotate", "kcm-node-lifecycle")
DOWN_CLASSES = (causes.UNREACHABLE, causes.TIMEOUT, causes.PROXY, causes.TLS)


@dataclass
class Judgement:
    proof: str  # PROVEN | REFUTED
    family: str | None
    steps: list[str] = field(default_factory=list)


def _hit_text(h: intercept.Hit) -> str:
    w = h.write
    where = f" in {', '.join(h.namespaces)}" if h.namespaces else ""
    return f"{'/'.join(w.operations)} {w.qualified}{where}"


def _needs(hits: list[intercept.Hit], svc_ns: str | None) -> dict[str, list[intercept.Hit]]:
    own = [h for h in hits if svc_ns and h.write.id in BACKEND_WRITES and svc_ns in h.namespaces]
    system = [h for h in hits if h.write.id in SYSTEM_WRITES and "kube-system" in h.namespaces and h not in own]
    return {
        BOOTSTRAP: [h for h in hits if h.write.by_apiserver and h.write.readiness],
        SELF_DEPENDENCY: own + system if svc_ns else [],
        NODE_LEASE: [h for h in hits if h.write.id in NODE_WRITES] if svc_ns else [],
    }


def judge(f: Finding, w: model.Webhook, configuration: str, source: str, backend=None,
          namespaces: dict[str, dict[str, str]] | None = None) -> Judgement:
    """``backend``: a webhooks.backend.Backend read from the cluster, or None (a saved file: the log says)."""
    svc_ns = (w.service or "").partition("/")[0] or None
    where = f"{configuration} ({source})"
    if f.mode != "deny" and w.failure_policy != "Fail":
        return Judgement(REFUTED, None, [f'webhook "{w.name}" in {where} fails open (failurePolicy '
                                         f"{w.failure_policy}): it refuses nothing while its backend is down"])
    hits = intercept.webhook_hits(w, None, namespaces)
    needs = _needs(hits, svc_ns)
    order = [fam for fam in (f.deadlock, BOOTSTRAP, SELF_DEPENDENCY, NODE_LEASE) if fam]
    family = next((fam for fam in order if needs.get(fam)), None)
    if family is None:
        caught = ", ".join(dict.fromkeys(_hit_text(h) for h in hits))
        why = "" if svc_ns else " (its backend is a URL, not a Service in the cluster)"
        return Judgement(REFUTED, None, [
            f'webhook "{w.name}" in {where} was matched against the heal model: of the writes a cluster needs to '
            f"come back it intercepts {caught or 'none'}{why}",
            ("none of them is" if caught else "so nothing it blocks is") + " on the path back to its own "
            "backend: it heals when its backend returns"])
    steps = [f'the log: webhook "{w.name}" ' + ("denies" if f.mode == "deny" else f"fails closed ({f.cause})")
             + (" on " + ", ".join(f.requests[:3]) if f.requests else "")]
    for h in needs[family][:3]:
        steps.append(f"{where} intercepts {_hit_text(h)} (rule {h.rule.describe()}); the heal model: "
                     f"{h.write.actor} needs it, without it {h.write.breaks} ({h.write.source})")
    if family == BOOTSTRAP:
        steps.append("its backend needs a ready apiserver to come back")
    elif family == SELF_DEPENDENCY:
        steps.append(f"that is what its backend {w.service} needs: its pods, their endpoints, and the kube-system "
                     f"pods (CNI, kube-proxy, DNS) they run on")
    else:
        steps.append(f"its backend {w.service} runs as pods on nodes, recreated by kube-controller-manager and "
                     f"placed by the scheduler: it needs the Nodes and Leases this keeps alive")
    if f.mode == "deny":
        steps.append("it refuses these writes by its own answer, whatever its backend does: a cycle")
        return Judgement(PROVEN, family, steps)
    if backend is not None:
        state = backend.line()
        if backend.healthy:
            return Judgement(REFUTED, None, steps[:-1] + [
                f"but {state}: its backend answers again, so the cycle is broken (the failures in the log may be "
                f"over)"])
        steps.append(state + ": nothing can bring it back, a cycle")
        return Judgement(PROVEN, family, steps)
    if f.cause_class in DOWN_CLASSES:
        steps.append(f"its backend does not answer (the log: {f.cause}); its endpoints were not read (a saved "
                     f"configuration): a cycle")
        return Judgement(PROVEN, family, steps)
    return Judgement(REFUTED, None, steps + [f"the log shows no backend down ({f.cause}): not a cycle"])


def apply(f: Finding, j: Judgement) -> None:
    """Put a judgement on its finding: the family, the severity and the steps it showed."""
    f.cycle, f.proof, f.prove = j.steps, j.proof, None
    if j.proof == PROVEN:
        f.deadlock, f.severity = j.family, CRITICAL
    elif not f.bootstrap_deadlock:  # a cycle the apiserver's own lines show stays
        f.deadlock = None
        f.severity = ERROR if f.severity == CRITICAL else f.severity
        f.explanation += " Checked against the cluster, this is not a deadlock: " + "; ".join(j.steps) + "."

