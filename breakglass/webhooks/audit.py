"""Deadlock-risk audit of admission configurations, with the matchConditions fix.

What makes a webhook dangerous (shared reference §3): it fails closed (``Fail``, the v1
default) on objects kube-apiserver must write before it becomes ready, or that a cluster
needs to recover, and nothing (namespaceSelector, objectSelector, matchConditions)
keeps those writes away from it. Cluster-scoped kinds cannot be exempted by a
namespaceSelector. From 1.33 on, the apiserver writes ServiceCIDR and IPAddress objects
at start, so wildcard rules that were harmless on 1.32 become a deadlock on upgrade.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from breakglass.heal import bootstrap

from breakglass.heal import writes as heal
from breakglass.webhooks import intercept, owners, vendors
from breakglass.webhooks.intercept import selector_matches  # one LabelSelector matcher for audit and the heal model
from breakglass.heal.bootstrap import BootstrapKind
from breakglass.webhooks.model import (MAP, VAP, VAP_BINDING, MAP_BINDING, STATIC_SUFFIX, AdmissionConfig, Rule,
                                       Webhook, singular)

SEVERITIES = ("info", "low", "medium", "high", "critical")
RANK = {s: i for i, s in enumerate(SEVERITIES)}
LONG_TIMEOUT = 10  # seconds; the v1 default. Longer stalls every intercepted write for that long.
WRITE_OPS = ("CREATE", "UPDATE")
CONDITION_SELF = "breakglass-skip-apiserver-self"
CONDITION_KINDS = intercept.CONDITION_KINDS


@dataclass
class Fix:
    match_conditions: list[dict]
    patch_yaml: str
    command: str
    vendor_note: str | None = None
    # where the fix lasts when something owns the configuration (Kyverno's ConfigMap, Gatekeeper's Helm values,
    # the Helm release, Git): a direct patch of an owned configuration is undone (issue 35)
    lasting: owners.Placement | None = None


@dataclass
class AuditFinding:
    id: str
    rule: str
    severity: str
    configuration: str  # Kind/name
    webhook: str | None
    title: str
    explanation: str
    kinds: list[str] = field(default_factory=list)  # bootstrap / recovery kinds at risk
    source: str = ""
    fix: Fix | None = None


@dataclass
class AuditReport:
    findings: list[AuditFinding]
    configurations: int
    webhooks: int
    target_version: str | None
    worst: str | None


def parse_version(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
    if not m:
        from breakglass.core.errors import BadInput  # noqa: PLC0415

        raise BadInput(f"not a Kubernetes version: {text!r} (use e.g. 1.33)")
    return int(m[1]), int(m[2])


def running_minor(git_version: str | None) -> tuple[int, int] | None:
    """The minor a cluster's /version gitVersion names, or None where it names none this can read."""
    from breakglass.core.errors import BadInput  # noqa: PLC0415 - as parse_version imports it

    try:
        return parse_version(git_version)
    except BadInput:
        return None


# -- matching -----------------------------------------------------------------------------------

def rule_matches(rule: Rule, kind: BootstrapKind, match_policy: str = "Equivalent") -> bool:
    ops = set(rule.operations)
    if not ("*" in ops or ops & set(WRITE_OPS)):
        return False
    if "*" not in rule.api_groups and kind.group not in rule.api_groups:
        return False
    if match_policy == "Exact" and "*" not in rule.api_versions and "v1" not in rule.api_versions:
        return False
    res = set(rule.resources)
    if not (res & {"*", "*/*"} or kind.resource in res):
        return False
    if rule.resource_names and not set(rule.resource_names) & set(kind.names):
        return False
    scope = rule.scope or "*"
    return scope == "*" or (scope == "Cluster") == kind.cluster_scoped


def _wildcard(rule: Rule) -> bool:
    return "*" in rule.api_groups or bool({"*", "*/*"} & set(rule.resources))


def _condition_excludes(conditions: list[dict], kind: BootstrapKind, apiserver_writes: bool) -> bool:
    """Do the matchConditions (CEL) visibly keep this kind, or the apiserver's own writes, out?

    CEL cannot be evaluated here; a condition naming the resource or the apiserver's
    identity is taken as an exclusion, which the report states.
    """
    for c in conditions:
        expr = str(c.get("expression", ""))
        if re.search(rf"""['"]({re.escape(kind.resource)}|{re.escape(kind.kind)})['"]""", expr):
            return True
        if apiserver_writes and re.search(r"""['"]system:(apiserver|masters)['"]""", expr):
            return True  # excluding the apiserver's own identity keeps all its bootstrap writes out
    return False


def _exempted(kind: BootstrapKind, ns_sel: dict | None, obj_sel: dict | None, conds: list[dict]) -> str | None:
    """Why a webhook or policy does not see the apiserver's writes of ``kind`` (None: it does)."""
    obj_labels = dict(kind.labels)
    if not selector_matches(obj_sel, obj_labels):
        return "objectSelector"
    if kind.kind == "Namespace":
        names = kind.names
        if all(not selector_matches(ns_sel, {"kubernetes.io/metadata.name": n}) for n in names):
            return "namespaceSelector"
    elif not kind.cluster_scoped:
        if all(not selector_matches(ns_sel, {"kubernetes.io/metadata.name": n}) for n in kind.namespaces):
            return "namespaceSelector"
    if _condition_excludes(conds, kind, kind in bootstrap.BOOTSTRAP_KINDS):
        return "matchConditions"
    return None


def kinds_for(target: tuple[int, int] | None) -> list[BootstrapKind]:
    kinds = [k for k in bootstrap.BOOTSTRAP_KINDS if target is None or target >= k.since]
    return kinds + list(bootstrap.RECOVERY_KINDS)


def at_risk(rules: list[Rule], match_policy: str, ns_sel, obj_sel, conds, target, exclude: list[Rule] = ()):
    hit: list[tuple[BootstrapKind, Rule]] = []
    for kind in kinds_for(target):
        rule = next((r for r in rules if rule_matches(r, kind, match_policy)), None)
        if rule is None or any(rule_matches(x, kind) for x in exclude):
            continue
        if _exempted(kind, ns_sel, obj_sel, conds):
            continue
        hit.append((kind, rule))
    return hit


# -- the fix ------------------------------------------------------------------------------------

# CEL string literals in double quotes: the JSON patch escapes them, so the kubectl command
# can sit in single shell quotes.
def _cel_list(items) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def match_conditions_for(kinds: list[BootstrapKind]) -> list[dict]:
    """The conditions to add (all must hold for the webhook to be called).

    The first skips the apiserver's own writes, which covers every bootstrap kind. The
    second names the kinds that need naming anyway: ServiceCIDR and IPAddress (the fix the
    Talos/Kyverno outage ended with, robust to whoever writes them) and the recovery kinds
    kubelets and controllers write (Nodes, Leases).
    """
    named: dict[tuple[str, str], set[str]] = {}
    for k in kinds:
        if k in bootstrap.BOOTSTRAP_KINDS and k.since == (1, 0):
            continue
        named.setdefault((k.group, k.resource), set()).update(k.namespaces)
    cluster: dict[str, list[str]] = {}
    terms = []
    for (group, resource), namespaces in sorted(named.items()):
        if namespaces:
            terms.append(f'(request.resource.group == "{group}" && request.resource.resource == "{resource}" && '
                         f"request.namespace in {_cel_list(sorted(namespaces))})")
        else:
            cluster.setdefault(group, []).append(resource)
    for group, resources in sorted(cluster.items(), reverse=True):
        terms.insert(0, f'(request.resource.group == "{group}" && request.resource.resource in '
                        f"{_cel_list(sorted(resources))})")
    conds = [{"name": CONDITION_SELF, "expression": 'request.userInfo.username != "system:apiserver"'}]
    if terms:
        conds.append({"name": CONDITION_KINDS, "expression": "!(" + " || ".join(terms) + ")"})
    return conds


def _vendor_note(cfg: AdmissionConfig, webhook: str | None) -> str | None:
    hint = (vendors.hint_for(webhook) if webhook else None) or vendors.hint_for_configuration(cfg.name, cfg.labels)
    if hint is None:
        return None
    return f"{hint.vendor} manages this configuration and will overwrite a direct patch: {hint.managed_note}"


def _fix(cfg: AdmissionConfig, webhook: Webhook | None, kinds: list[BootstrapKind]) -> Fix:
    return fix_for(cfg.resource, cfg.name, webhook.name if webhook else None, kinds,
                   _vendor_note(cfg, webhook.name if webhook else None), cfg)


def fix_for(resource: str, name: str, webhook: str | None, kinds: list[BootstrapKind] | None = None,
            vendor_note: str | None = None, cfg: AdmissionConfig | None = None) -> Fix:
    """The matchConditions fix for one webhook of a configuration (``resource`` plural, as in its etcd key), or
    for a policy's spec when ``webhook`` is None: a strategic-merge patch as YAML and as a kubectl command, and,
    when ``cfg`` (the object) names an owner, where the owner keeps it. Shared by `audit` and the wizard's report,
    so both print the same valid patch."""
    conds = match_conditions_for(kinds if kinds is not None else kinds_for(None))
    return _fix_from_conditions(resource, name, webhook, conds, vendor_note, cfg)


def _fix_from_conditions(resource: str, name: str, webhook: str | None, conds: list[dict],
                         vendor_note: str | None = None, cfg: AdmissionConfig | None = None,
                         exclude: list[dict] | None = None) -> Fix:
    import yaml  # noqa: PLC0415

    if webhook is not None:
        patch = {"webhooks": [{"name": webhook, "matchConditions": conds}]}
    else:
        patch = {"spec": {"matchConditions": conds}}
        if exclude:  # an atomic list: the policy's own exclusions are kept in it
            patch["spec"]["matchConstraints"] = {"excludeResourceRules": exclude}
    body = json.dumps(patch, separators=(",", ":"))
    command = f"kubectl patch {singular(resource)} {name} --type=strategic -p {shlex.quote(body)}"
    if vendor_note is None and webhook is not None:
        hint = vendors.hint_for(webhook) or vendors.hint_for_configuration(name, {})
        vendor_note = hint and f"{hint.vendor} manages this configuration and will overwrite a direct patch: " \
                               f"{hint.managed_note}"
    patch_yaml = yaml.safe_dump(patch, sort_keys=False, width=100)
    lasting = owners.place(cfg, webhook, conds, command, patch_yaml) if cfg is not None else None
    if lasting is not None and lasting.form == "static-manifest":
        command = lasting.command  # the API cannot reach it: the change is made in its file on the nodes
    elif lasting is not None and lasting.owner is None:
        lasting = None  # nothing owns it: the patch is the lasting fix
    return Fix(match_conditions=conds, patch_yaml=patch_yaml, command=command, vendor_note=vendor_note,
               lasting=lasting)


def match_conditions_for_hits(hits: list[intercept.Hit]) -> list[dict]:
    """The conditions that keep exactly the model's writes this webhook would block away from it (all must hold
    for the webhook to be called). The apiserver's own writes go by its identity (``system:apiserver``), the 1.33
    kinds by name as well (the fix the Talos/Kyverno outage ended with, robust to whoever writes them); every
    other write by its group, resource, subresource and the namespaces where it is intercepted."""
    named: dict[tuple[str, str, str], set[str]] = {}
    for h in hits:
        w = h.write
        if w.by_apiserver and w.since == heal.OLDEST:
            continue
        named.setdefault((w.group, w.resource, w.subresource), set()).update(h.namespaces)
    terms = []
    for (group, resource, sub), namespaces in sorted(named.items()):
        sub_test = (f'has(request.subResource) && request.subResource == "{sub}"' if sub else
                    '(!has(request.subResource) || request.subResource == "")')
        term = f'request.resource.group == "{group}" && request.resource.resource == "{resource}" && {sub_test}'
        if namespaces:
            term += f" && request.namespace in {_cel_list(sorted(namespaces))}"
        terms.append(f"({term})")
    conds = []
    if any(h.write.by_apiserver for h in hits):
        conds.append({"name": CONDITION_SELF, "expression": 'request.userInfo.username != "system:apiserver"'})
    if terms:
        conds.append({"name": CONDITION_KINDS, "expression": "!(" + " || ".join(terms) + ")"})
    return conds


# -- rules --------------------------------------------------------------------------------------

def _describe(kinds: list[BootstrapKind]) -> str:
    names = (k.kind + (f" ({'/'.join(k.names)})" if k.names and len(k.names) <= 2 else "") for k in kinds)
    return ", ".join(dict.fromkeys(names))


def bootstrap_kinds_touched(w: Webhook, target=None) -> list[str]:
    """Which bootstrap or recovery kinds a webhook sees, whatever its failure policy."""
    hits = at_risk(w.rules, w.match_policy, w.namespace_selector, w.object_selector, w.match_conditions, target)
    return list(dict.fromkeys(k.kind for k, _ in hits))


RENEW_DEADLINE = 10  # seconds: leader election's default --leader-elect-renew-deadline (client-go leaderelection)
# kube-controller-manager's and the scheduler's lease renewals carry a 5 s client timeout (their lease PUTs say
# `?timeout=5s`): a webhook that may take longer than this fails the renewal even when it fails open, after the
# rest of the request has had its share (Gardener's care check draws the same line at 3 s)
LEASE_TIMEOUT_MAX = 3
# most control-plane clients give a request 30 s: a fail-open webhook that waits longer than this before failing
# open leaves too little of it (Gardener's care check: over 15 s is problematic)
SLOW_FAIL_OPEN = 15


def _hit_text(hits: list[intercept.Hit]) -> str:
    parts = []
    for h in hits:
        w = h.write
        where = f" in {', '.join(h.namespaces)}" if h.namespaces else ""
        parts.append(f"{'/'.join(w.operations)} {w.qualified}{where} by {w.actor} ({h.severity}: {w.breaks})")
    return "; ".join(dict.fromkeys(parts))


def _worst(hits: list[intercept.Hit]) -> str:
    return max((h.severity for h in hits), key=RANK.get)


def _retired_text(hits: list[intercept.Hit]) -> str:
    """Why a match through a retired API version is counted, and how to have it judged exactly."""
    old = {h.retired: h.retired_until for h in hits if h.retired}
    if not old:
        return ""
    by_release: dict[tuple[int, int], list[str]] = {}
    for version, last in old.items():
        by_release.setdefault(last, []).append(version)
    named = "; ".join(f"{' and '.join(vs)} (served by Kubernetes {last[0]}.{last[1]} and older)"
                      for last, vs in sorted(by_release.items()))
    return (f" Its rules reach {'these' if len(hits) > 1 else 'it'} only through {named}: under matchPolicy "
            f"Equivalent a rule covers the served versions of what it names, so on a newer cluster it intercepts "
            f"nothing. The cluster's version is not known here, so this counts as at most medium; --target-version "
            f"(or auditing through the API) says whether it applies.")


def _webhook_findings(cfg: AdmissionConfig, w: Webhook, target, namespaces=None, running=None) -> list[AuditFinding]:
    out: list[AuditFinding] = []
    ident = f"{cfg.kind_name}/{cfg.name}"
    fail = w.failure_policy == "Fail"
    policy_text = "failurePolicy Fail" + ("" if w.failure_policy_explicit else " (the v1 default: unset)")

    def add(rule, severity, title, explanation, kinds=(), fix=None):
        out.append(AuditFinding("", rule, severity, ident, w.name, title, explanation,
                                list(dict.fromkeys(kinds)), cfg.source, fix))

    hits = intercept.webhook_hits(w, target, namespaces, running, guess_retired=True)
    if cfg.manifest_based:
        _static_findings(cfg, w, fail, add)
    if fail:
        ready = [h for h in hits if h.write.by_apiserver and h.write.readiness]
        if ready:
            new = [h.write for h in ready if h.write.since > heal.OLDEST and _wildcard(h.rule)]
            every = [h for h in ready if h.write.every_start]
            kinds = [h.write for h in ready]
            expl = (f"{policy_text}, and its rules match {_describe_writes(kinds)}, which kube-apiserver writes "
                    f"itself before it becomes ready (readiness checks "
                    f"{', '.join(sorted({k.readiness for k in kinds}))}). If the webhook's backend is down when an "
                    f"apiserver starts, the apiserver never becomes ready, and the backend cannot come back without "
                    f"it.")
            if not every:
                expl += (" The apiserver writes these only when they are missing (a new cluster, a restore from "
                         "backup, an upgrade, or after someone deleted one), so the risk is lower than for kinds "
                         "written on every start.")
            cluster = list(dict.fromkeys(k.kind for k in kinds if k.cluster_scoped))
            if cluster:
                expl += (f" {', '.join(cluster)} {'is' if len(cluster) == 1 else 'are'} cluster-scoped: a "
                         f"namespaceSelector cannot exempt them.")
            if new:
                names = list(dict.fromkeys(k.kind for k in new))
                expl += (f" {', '.join(names)} {'is' if len(names) == 1 else 'are'} new at start from "
                         f"Kubernetes 1.33: wildcard rules that were harmless before start matching on upgrade.")
            expl += _retired_text(ready)
            add("bootstrap-intercept", _worst(ready),
                f'webhook "{w.name}" can deadlock the apiserver at start', expl, [h.write.kind for h in hits],
                _fix_writes(cfg, w, hits))
        rest = [h for h in hits if h not in ready and h.write.id != "kcm-backend-pods"]
        if rest:
            add("recovery-intercept", _worst(rest),
                f'webhook "{w.name}" intercepts writes a cluster needs to come back',
                f"{policy_text}, and while its backend is down it refuses: {_hit_text(rest)}.{_retired_text(rest)}",
                [h.write.kind for h in rest], _fix_writes(cfg, w, hits))
        own_ns = (w.service or "/").split("/")[0]
        if own_ns and any(h.write.id == "kcm-backend-pods" for h in hits):
            add("self-intercept", heal.BY_ID["kcm-backend-pods"].severity,
                f'webhook "{w.name}" intercepts the pods of its own namespace',
                f"{policy_text}, and it intercepts Pod creation in {own_ns}, where its backend runs: if all its "
                f"pods go, no new one can be admitted to replace them. Exclude {own_ns} with a namespaceSelector.",
                ["Pod"], _fix_writes(cfg, w, hits))
        if w.timeout_seconds > LONG_TIMEOUT:
            add("long-timeout", "medium", f'webhook "{w.name}" waits {w.timeout_seconds}s before failing',
                f"Every intercepted write stalls up to {w.timeout_seconds}s while the backend is unreachable, "
                f"longer than many clients wait; at start, post-start hooks retry behind it.")
        if w.service:
            add("in-cluster-backend", "low", f'webhook "{w.name}" fails closed on an in-cluster backend',
                f"Its backend ({w.backend}) runs inside the cluster it guards: when the cluster is unhealthy, "
                f"so is the webhook.")
        if any(_wildcard(r) for r in w.rules) and not w.match_conditions:
            add("no-match-conditions", "low", f'webhook "{w.name}" has wildcard rules and no matchConditions',
                "Wildcard rules match kinds added by future Kubernetes versions; matchConditions (GA in 1.30) "
                "can keep the apiserver's own writes away from it.")
    else:
        leases = [h for h in hits if h.write.kind == "Lease"]
        if leases and w.timeout_seconds > LEASE_TIMEOUT_MAX:
            add("lease-timeout", "high" if any(not h.retired for h in leases) else "medium",
                f'webhook "{w.name}" fails open, but only after {w.timeout_seconds}s, on Lease renewals',
                f"failurePolicy Ignore with timeoutSeconds {w.timeout_seconds}, on {_hit_text(leases)}. Leader "
                f"election renews within a {RENEW_DEADLINE}s deadline, each renewal with a 5s client timeout "
                f"(`?timeout=5s`): while its backend hangs (packets dropped, not refused) every renewal waits for "
                f"the webhook and times out first, so kube-controller-manager and the scheduler lose leadership "
                f"and restart in a loop, and node heartbeats fall behind. Keep Leases out (the matchConditions "
                f"below) or set timeoutSeconds to {LEASE_TIMEOUT_MAX} or less.{_retired_text(leases)}",
                [h.write.kind for h in leases], _fix_writes(cfg, w, leases))
        slow = [h for h in hits if h not in leases and heal.rank(h.severity) >= heal.rank("medium")]
        if slow and w.timeout_seconds > SLOW_FAIL_OPEN:
            add("slow-fail-open", "medium",
                f'webhook "{w.name}" fails open only after {w.timeout_seconds}s, on writes a cluster needs',
                f"failurePolicy Ignore with timeoutSeconds {w.timeout_seconds}, on {_hit_text(slow)}. Most "
                f"control-plane clients give a request 30s: while its backend hangs, each of these writes waits "
                f"{w.timeout_seconds}s before it is admitted, and with another webhook or a retry behind it, it "
                f"times out instead. Set timeoutSeconds to {SLOW_FAIL_OPEN} or less (10, the v1 default, is "
                f"enough for a healthy backend), or keep these writes out (the matchConditions below)."
                f"{_retired_text(slow)}",
                [h.write.kind for h in slow], _fix_writes(cfg, w, slow))
        add("fails-open", "info", f'webhook "{w.name}" fails open',
            "failurePolicy Ignore: it cannot deadlock the cluster, but while its backend is unreachable every "
            "request it should check is admitted unchecked (see `breakglass leaks`).")
    return out


_ADMISSION_CONFIGS = (BootstrapKind("ValidatingWebhookConfiguration", "admissionregistration.k8s.io",
                                    "validatingwebhookconfigurations", ""),
                      BootstrapKind("MutatingWebhookConfiguration", "admissionregistration.k8s.io",
                                    "mutatingwebhookconfigurations", ""))


def _static_findings(cfg: AdmissionConfig, w: Webhook, fail: bool, add) -> None:
    """A manifest-based webhook (k8s.io/apiserver 1.36, pkg/admission/plugin/webhook/manifest): what the apiserver
    refuses in its file, and what only such a webhook can do: judge webhook configurations themselves (the API
    ones never see them), so failing closed on them it blocks every API way out of every other webhook."""
    if cfg.static_manifest and not cfg.name.endswith(STATIC_SUFFIX):
        add("static-manifest-invalid", "critical", f'"{cfg.name}" in {cfg.static_manifest} has no '
            f'"{STATIC_SUFFIX}" suffix', f"kube-apiserver refuses a manifest-based configuration whose name "
            f"does not end with {STATIC_SUFFIX}: with this file in its staticManifestsDir it does not start.")
    if cfg.static_manifest and (w.service or not w.url):
        add("static-manifest-invalid", "critical", f'webhook "{w.name}" in {cfg.static_manifest} needs a url',
            "kube-apiserver refuses a manifest-based webhook with clientConfig.service (or no clientConfig.url): "
            "with this file in its staticManifestsDir it does not start.")
    blocks = fail and any(rule_matches(r, k, w.match_policy) for r in w.rules for k in _ADMISSION_CONFIGS)
    if blocks:
        add("static-intercepts-admission-config", "high",
            f'manifest-based webhook "{w.name}" fails closed on webhook configurations',
            "A manifest-based webhook is the only kind the apiserver calls for ValidatingWebhookConfiguration and "
            "MutatingWebhookConfiguration writes: failing closed there, while its backend is down no webhook "
            "configuration can be patched or deleted through the API, so the API ways out of every other webhook "
            "are blocked too. Keep those kinds out of its rules.",
            ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"])
    add("static-webhook", "info", f'webhook "{w.name}" is manifest-based (not in etcd, not in the API)',
        f"Loaded by kube-apiserver from {cfg.static_manifest or 'a file in its staticManifestsDir'} on each "
        f"control-plane node. Neither the API nor etcd can change it: edit (or move away) that file on every node, "
        f"and the apiserver reloads it; --disable-admission-plugins={'MutatingAdmissionWebhook' if cfg.kind == 'mutating' else 'ValidatingAdmissionWebhook'} "
        f"turns it off with the rest of its plugin.")


def _describe_writes(ws) -> str:
    names = (k.kind + (f" ({'/'.join(k.names)})" if k.names and len(k.names) <= 2 else "") for k in ws)
    return ", ".join(dict.fromkeys(names))


def _fix_writes(cfg: AdmissionConfig, webhook: Webhook | None, hits: list[intercept.Hit]) -> Fix:
    return _fix_from_conditions(cfg.resource, cfg.name, webhook.name if webhook else None,
                                match_conditions_for_hits(hits),
                                _vendor_note(cfg, webhook.name if webhook else None), cfg,
                                _param_exclusions(cfg, hits) if webhook is None else None)


def _param_exclusions(cfg: AdmissionConfig, hits: list[intercept.Hit]) -> list[dict] | None:
    """A policy with a paramKind refuses (``failed to configure policy``) while a starting apiserver has not
    resolved that kind, and that check comes before any matchCondition (k8s.io/apiserver policy/validating
    dispatcher): the apiserver's own cluster-scoped writes must leave its matchConstraints instead."""
    spec = (cfg.raw or {}).get("spec") if isinstance(cfg.raw, dict) else None
    if not isinstance(spec, dict) or not spec.get("paramKind"):
        return None
    own = [w for w in dict.fromkeys(h.write for h in hits) if w.by_apiserver and w.cluster_scoped]
    if not own:
        return None
    kept = ((spec.get("matchConstraints") or {}).get("excludeResourceRules") or [])
    ours = [{"apiGroups": [w.group], "apiVersions": ["*"], "operations": ["*"], "scope": "Cluster",
             "resources": [w.resource + (f"/{w.subresource}" if w.subresource else "")]} for w in own]
    return [*kept, *(r for r in ours if r not in kept)]


def _self_intercept(w: Webhook, ns: str) -> bool:
    pods = BootstrapKind("Pod", "", "pods", "", namespaces=(ns,))
    rule = next((r for r in w.rules if rule_matches(r, pods, w.match_policy)), None)
    if rule is None or "CREATE" not in rule.operations and "*" not in rule.operations:
        return False
    return _exempted(pods, w.namespace_selector, w.object_selector, w.match_conditions) is None


def _policy_findings(cfg: AdmissionConfig, bindings: list[AdmissionConfig], target,
                     namespaces=None, running=None) -> list[AuditFinding]:
    """An admission policy is at risk for every model write its matchConstraints, and some binding's
    matchResources, would send to it (a policy has no backend: no backend namespace)."""
    if cfg.failure_policy != "Fail":
        return []
    mine = [b for b in bindings if b.policy_name == cfg.name and b.kind == (VAP_BINDING if cfg.kind == VAP else MAP_BINDING)]
    ident = f"{cfg.kind_name}/{cfg.name}"
    hits = intercept.hits(cfg.rules, "Equivalent", cfg.namespace_selector, cfg.object_selector, cfg.match_conditions,
                          target, None, namespaces, cfg.exclude_rules, running, guess_retired=True)
    if not hits:
        return []
    if not mine:
        return [AuditFinding("", "policy-unbound", "info", ident, None,
                             f"{cfg.kind_name} '{cfg.name}' matches bootstrap objects but has no binding",
                             "It has no effect until bound; a binding (a revert that puts one back, or whatever "
                             "generated the policy re-creating it) would make it a deadlock risk. The fix below "
                             "makes it safe to bind.",
                             list(dict.fromkeys(h.write.kind for h in hits)), cfg.source, _fix_writes(cfg, None, hits))]
    bound: list[intercept.Hit] = []
    for b in mine:
        rules = b.rules or cfg.rules  # a binding without matchResources rules narrows nothing
        narrowed = intercept.hits(rules, "Equivalent", b.namespace_selector, b.object_selector, [], target, None,
                                  namespaces, b.exclude_rules, running, guess_retired=True)
        ids = {h.write.id for h in narrowed}
        bound += [h for h in hits if h.write.id in ids and h not in bound]
    if not bound:
        return []
    plugin = "ValidatingAdmissionPolicy" if cfg.kind == VAP else "MutatingAdmissionPolicy"
    return [AuditFinding(
        "", "policy-bootstrap-intercept", _worst(bound), ident, None,
        f"{cfg.kind_name} '{cfg.name}' can refuse writes the cluster needs to come back",
        f"failurePolicy Fail and its matchConstraints cover {_hit_text(bound)}; bound by "
        f"{', '.join(b.name for b in mine)}. A failing or denying expression blocks those writes. Disabling the "
        f"webhook admission plugins does not switch it off: that takes --disable-admission-plugins={plugin} or "
        f"deleting the binding.{_retired_text(bound)}", list(dict.fromkeys(h.write.kind for h in bound)), cfg.source,
        _fix_writes(cfg, None, bound))]


def audit(configs: list[AdmissionConfig], target_version: str | None = None,
          namespaces: dict[str, dict[str, str]] | None = None, problems: list[dict] = (),
          running: tuple[int, int] | None = None) -> AuditReport:
    """``namespaces``: name -> labels as the cluster holds them (when it was read); else the namespaces the heal
    model names are taken to carry only the label Kubernetes sets (kubernetes.io/metadata.name). ``problems``:
    what reading the nodes found wrong outside any configuration (sources.Inventory.problems). ``running``: the
    minor the cluster runs, when it was read (which retired API versions it still serves)."""
    target = parse_version(target_version)
    findings: list[AuditFinding] = [AuditFinding("", p["rule"], p["severity"], p["where"], None, p["title"],
                                                 p["explanation"]) for p in problems]
    bindings = [c for c in configs if c.kind in (VAP_BINDING, MAP_BINDING)]
    for cfg in configs:
        if cfg.kind in (VAP, MAP):
            findings += _policy_findings(cfg, bindings, target, namespaces, running)
        for w in cfg.webhooks:
            findings += _webhook_findings(cfg, w, target, namespaces, running)
    findings.sort(key=lambda f: (-RANK[f.severity], f.configuration, f.webhook or "", f.rule))
    for i, f in enumerate(findings, 1):
        f.id = f"A{i}"
    return AuditReport(findings, len(configs), sum(len(c.webhooks) for c in configs), target_version,
                       findings[0].severity if findings else None)
