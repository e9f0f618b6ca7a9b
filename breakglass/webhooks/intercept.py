"""Which of the heal model's writes a webhook (or admission policy) would be called for.

The apiserver's own matching, as `k8s.io/apiserver/pkg/admission/plugin/webhook/predicates` does it: rules
(operations, API groups, versions under ``matchPolicy``, ``resource/subresource`` with ``*`` for either part,
scope), then ``namespaceSelector`` (against the namespace's labels; a Namespace object is matched by its own
labels, and so is its ``objectSelector``; cluster-scoped objects are never exempted by it), ``objectSelector``
(against the labels the model knows the object carries), then ``matchConditions``. CEL is not evaluated here: a
condition counts as keeping a write out when it visibly names it (its resource, or its writer's identity), and
the conditions this tool writes itself are read exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from breakglass.heal import retired_versions
from breakglass.heal import writes as heal
from breakglass.heal.writes import Write

METADATA_NAME = "kubernetes.io/metadata.name"  # every Namespace carries it (set by the apiserver since 1.22)
CONDITION_KINDS = "breakglass-skip-bootstrap-kinds"  # the matchCondition the fix writes (audit.match_conditions_for)

# The identities the model's actors write as, as a condition would name them to keep them out.
_ACTOR_IDENTITY = {
    heal.APISERVER: r"system:(?:apiserver|masters)",
    heal.KUBELET: r"system:nodes?\b|system:node:",
    heal.SCHEDULER: r"system:kube-scheduler",
    heal.KCM: r"system:kube-controller-manager|system:serviceaccount:kube-system",
}


@dataclass(frozen=True)
class Hit:
    write: Write
    rule: object  # the model.Rule that matched
    namespaces: tuple[str, ...]  # where it is intercepted (() for cluster-scoped)
    # matched only through an API version the cluster may no longer serve (its version unknown): "apps/v1beta1"
    retired: str | None = None

    @property
    def severity(self) -> str:
        """The write's; at most medium when the match needs a cluster old enough to serve a retired version."""
        if self.retired and heal.rank(self.write.severity) > heal.rank("medium"):
            return "medium"
        return self.write.severity

    @property
    def retired_until(self) -> tuple[int, int] | None:
        """The last release serving the retired version this matched through."""
        if not self.retired:
            return None
        group, _, version = self.retired.partition("/")
        return retired_versions.last_served(group, version, self.write.group, self.write.resource,
                                            self.write.subresource)


def selector_matches(sel: dict | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics; None and {} match everything."""
    if not sel:
        return True
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in sel.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def namespace_labels(ns: str, known: dict[str, dict[str, str]] | None) -> dict[str, str]:
    """A namespace's labels: as the cluster holds them when it was read, else the one Kubernetes sets."""
    if known is not None and ns in known:
        labels = dict(known[ns])
        labels.setdefault(METADATA_NAME, ns)
        return labels
    return {METADATA_NAME: ns}


def _resource_matches(patterns, resource: str, subresource: str) -> bool:
    for p in patterns:
        res, _, sub = p.partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def rule_matches(rule, w: Write, match_policy: str = "Equivalent") -> bool:
    """Does one rule (model.Rule) cover the write? ``matchPolicy`` Equivalent maps the request onto the versions
    the rule names only where the apiserver serves them; the model's resources are served at ``versions`` only."""
    ops = set(rule.operations)
    if not ("*" in ops or ops & set(w.operations)):
        return False
    if "*" not in rule.api_groups and w.group not in rule.api_groups:
        return False
    if "*" not in rule.api_versions and not set(rule.api_versions) & set(w.versions):
        return False  # Exact: the request's version; Equivalent: no other version of it is served
    if not _resource_matches(rule.resources, w.resource, w.subresource):
        return False
    if rule.resource_names and not set(rule.resource_names) & set(w.names):
        return False
    scope = rule.scope or "*"
    return scope == "*" or (scope == "Cluster") == w.cluster_scoped


def retired_match(rule, w: Write, at: tuple[int, int] | None) -> str | None:
    """The retired group version (``apps/v1beta1``) through which an Equivalent rule that names no served version
    covers the write on a cluster at ``at``: where that version is still served (``at`` no later than its last
    release), or, with the cluster's version unknown (None), where it might be."""
    ops = set(rule.operations)
    if not ("*" in ops or ops & set(w.operations)) or "*" in rule.api_versions:
        return None
    if not _resource_matches(rule.resources, w.resource, w.subresource):
        return None
    if rule.resource_names and not set(rule.resource_names) & set(w.names):
        return None
    scope = rule.scope or "*"
    if not (scope == "*" or (scope == "Cluster") == w.cluster_scoped):
        return None
    named = retired_versions.groups() if "*" in rule.api_groups else rule.api_groups
    for group in named:
        for version in rule.api_versions:
            last = retired_versions.last_served(group, version, w.group, w.resource, w.subresource)
            if last is not None and (at is None or at <= last):
                return f"{group}/{version}"
    return None


def _generated_terms(expr: str) -> list[tuple[str, str, str | None, tuple[str, ...] | None]]:
    """(group, resource, subresource or None for any, namespaces or None for any) of the fix's own condition."""
    out = []
    for chunk in expr.split('(request.resource.group == "')[1:]:
        group = chunk.partition('"')[0]
        m = re.search(r'request\.resource\.resource (?:== "([^"]+)"|in \[([^\]]*)\])', chunk)
        if not m:
            continue
        resources = [m[1]] if m[1] else re.findall(r'"([^"]+)"', m[2])
        sm = re.search(r'request\.subResource == "([^"]*)"', chunk)
        sub = sm[1] if sm else None
        nm = re.search(r"request\.namespace in \[([^\]]*)\]", chunk)
        nss = tuple(re.findall(r'"([^"]+)"', nm[1])) if nm else None
        out += [(group, r, sub, nss) for r in resources]
    return out


def condition_excludes(conditions: list[dict], w: Write, namespace: str | None) -> bool:
    """Do the matchConditions (CEL) visibly keep this write (in ``namespace``) out?"""
    for c in conditions:
        expr = str(c.get("expression", ""))
        if c.get("name") == CONDITION_KINDS:
            for group, res, sub, nss in _generated_terms(expr):
                if group == w.group and res == w.resource and sub in (None, w.subresource) and (
                        nss is None or namespace in nss):
                    return True
            continue
        if re.search(rf"""['"]({re.escape(w.resource)}|{re.escape(w.kind)})['"]""", expr):
            return True
        ident = _ACTOR_IDENTITY.get(w.actor)
        if ident and re.search(rf"""['"]({ident})""", expr):
            return True  # excluding the writer's identity keeps all its writes out
    return False


def hits(rules, match_policy: str, ns_sel: dict | None, obj_sel: dict | None, conditions: list[dict],
         target: tuple[int, int] | None, backend_ns: str | None = None,
         known_namespaces: dict[str, dict[str, str]] | None = None, exclude_rules=(),
         running: tuple[int, int] | None = None, guess_retired: bool = False) -> list[Hit]:
    """Every model write at ``target`` these rules, selectors and conditions would send to the webhook.
    ``running``: the version the cluster runs, when ``target`` is not given (which API versions it serves). With
    neither known, a rule through a retired API version counts only when ``guess_retired`` (the audit's caution:
    the cluster might be old enough), as a Hit marked ``retired``."""
    out: list[Hit] = []
    at = target or running
    for w in heal.for_version(target):
        rule = next((r for r in rules if rule_matches(r, w, match_policy)), None)
        retired = None
        if rule is None and match_policy != "Exact" and (at is not None or guess_retired):
            rule, retired = next(((r, v) for r in rules if (v := retired_match(r, w, at))), (None, None))
            retired = retired if at is None else None  # a known version serves it: a match like any other
        if rule is None or any(rule_matches(x, w) for x in exclude_rules):
            continue
        if w.kind == "Namespace":  # both selectors see the Namespace's own labels
            where = tuple(n for n in w.names if selector_matches(ns_sel, namespace_labels(n, known_namespaces))
                          and selector_matches(obj_sel, namespace_labels(n, known_namespaces))
                          and not condition_excludes(conditions, w, None))
            if where:
                out.append(Hit(w, rule, (), retired))
            continue
        if not selector_matches(obj_sel, dict(w.labels)):
            continue
        if w.cluster_scoped:
            if not condition_excludes(conditions, w, None):
                out.append(Hit(w, rule, (), retired))
            continue
        where = tuple(ns for ns in w.where(backend_ns)
                      if selector_matches(ns_sel, namespace_labels(ns, known_namespaces))
                      and not condition_excludes(conditions, w, ns))
        if where:
            out.append(Hit(w, rule, where, retired))
    return out


def webhook_hits(w, target=None, known_namespaces=None, running=None, guess_retired=False) -> list[Hit]:
    """``hits`` for a model.Webhook, its backend's namespace taken from its Service."""
    backend_ns = (w.service or "").partition("/")[0] or None
    return hits(w.rules, w.match_policy, w.namespace_selector, w.object_selector, w.match_conditions, target,
                backend_ns, known_namespaces, running=running, guess_retired=guess_retired)
