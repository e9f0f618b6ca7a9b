"""Which ways out apply to a diagnosis, least invasive first, as data for the planner.

Order (design card): through the apiserver while it still serves; the admission-plugin
flag on every control-plane node (Talos machine config or kubeadm static pod); deleting
the configuration's key from etcd. Each option says what it costs.
"""

from __future__ import annotations

import shlex

from breakglass.diagnose.model import (
    BOOTSTRAP, CONVERSION, CRITICAL, INFO, NODE_LEASE, SELF_DEPENDENCY, Finding, RemedyOption,
)
from breakglass.webhooks.model import MAP, MAP_BINDING, RESOURCE_OF, STATIC_SUFFIX, VAP, VAP_BINDING, singular

PLUGIN_BY_TYPE = {
    "validating": "ValidatingAdmissionWebhook",
    "mutating": "MutatingAdmissionWebhook",
}
POLICY_PLUGIN_BY_TYPE = {"validating": "ValidatingAdmissionPolicy", "mutating": "MutatingAdmissionPolicy"}
# the etcd key of each kind (no API group in it) and kubectl's name for it
ETCD_PREFIX = {kind: f"/registry/{resource}/" for kind, resource in RESOURCE_OF.items()}
KUBECTL_RESOURCE = {kind: singular(resource) for kind, resource in RESOURCE_OF.items()}


def _plugins(findings: list[Finding]) -> list[str]:
    plugins: set[str] = set()
    for f in findings:
        if f.policy:
            plugins.add(POLICY_PLUGIN_BY_TYPE.get(f.webhook_type or "", "ValidatingAdmissionPolicy"))
        elif f.webhook_type in PLUGIN_BY_TYPE:
            plugins.add(PLUGIN_BY_TYPE[f.webhook_type])
        elif f.webhook:  # the log did not say which kind: both webhook plugins
            plugins |= {"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}
    order = ["MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
             "ValidatingAdmissionWebhook"]  # the apiserver's own order (RecommendedPluginOrder)
    return [p for p in order if p in plugins]


def _targets(findings: list[Finding]) -> list[dict]:
    out: list[dict] = []
    seen: set[tuple] = set()
    for f in findings:
        if f.policy:
            # the line names the binding it refused through; one that names none (a policy that cannot be
            # configured refuses before any binding) leaves the policy itself as the handle
            mutating = f.webhook_type == "mutating"
            if f.binding:
                kind, name, source = (MAP_BINDING if mutating else VAP_BINDING), f.binding, "log"
            else:
                kind, name, source = (MAP if mutating else VAP), f.policy, "log"
        else:
            kind = f.webhook_type or "validating"
            name, source = f.configuration, f.configuration_source
        key = (kind, name or f.webhook)
        if key in seen:
            continue
        seen.add(key)
        out.append({"kind": kind, "configuration": name, "configuration_source": source, "webhook": f.webhook,
                    "policy": f.policy,
                    "etcd_key": (ETCD_PREFIX[kind] + name) if name and kind in ETCD_PREFIX else None})
    return out


def _conversion_options(findings: list[Finding]) -> list[RemedyOption]:
    """Ways out of a conversion webhook that is down. Never the admission flag: conversion is not admission."""
    kinds = sorted({k for f in findings for k in f.crds})
    named = sorted({n for f in findings for n in f.blocked if n})
    services = sorted({f.service for f in findings if f.service})
    look = []
    for k in kinds:
        kind = k.rpartition("Kind=")[2]
        look.append(f"kubectl get crd -o custom-columns=NAME:.metadata.name,KIND:.spec.names.kind,"
                    f"STORED:.status.storedVersions,STRATEGY:.spec.conversion.strategy | grep -w {shlex.quote(kind)}")
    crds = [shlex.quote(n) for n in named] or ["CRD_NAME"]
    patch = []
    for n in crds:
        patch.append(f"kubectl get crd {n} -o yaml > backup-crd-{n.strip(chr(39))}.yaml")
        patch.append(f"kubectl patch crd {n} --type=merge -p '{{\"spec\":{{\"conversion\":{{\"strategy\":\"None\"}}}}}}'")
    backend = [f"kubectl -n {shlex.quote(s.partition('/')[0])} get pods,endpoints   # the conversion backend "
               f"{shlex.quote(s)}" for s in services]
    return [
        RemedyOption(
            method="kubeapi", order=1, applicable="yes", family=CONVERSION,
            summary=("Bring the conversion webhook's backend back (its pods, Service and endpoints); it is what "
                     "every read and write of the resource waits for."),
            tradeoff="Nothing changes in the CRD; only possible when the backend can run.",
            targets=[{"kind": "crd", "crd": k} for k in kinds], manual=backend or look),
        RemedyOption(
            method="kubeapi", order=2, applicable="maybe", family=CONVERSION,
            summary=("Set the CRD's spec.conversion.strategy to None through the apiserver, only when its "
                     "status.storedVersions allow it (one stored version, or versions with the same schema): the "
                     "apiserver then only rewrites apiVersion, without calling the webhook."),
            tradeoff=("Objects stored in another schema are served unconverted (wrong fields) if storedVersions do "
                      "not allow it; restore strategy Webhook once the backend answers. --disable-admission-plugins "
                      "does not switch conversion off."),
            targets=[{"kind": "crd", "crd": k} for k in kinds], manual=look + patch),
        RemedyOption(
            method="etcd", order=3, applicable="maybe", family=CONVERSION,
            summary=("With the apiserver down: the same field of the CRD in etcd "
                     "(/registry/apiextensions.k8s.io/customresourcedefinitions/NAME), after a verified backup. "
                     "breakglass does not rewrite CRDs in etcd itself."),
            tradeoff="Bypasses the apiserver, its validation and audit; the stored CRD is usually protobuf.",
            targets=[{"kind": "crd", "crd": k} for k in kinds],
            manual=[f"etcdctl get /registry/apiextensions.k8s.io/customresourcedefinitions/{n} -w json > "
                    f"backup-crd-{n.strip(chr(39))}.json" for n in crds]),
    ]


def _family_manual(findings: list[Finding], targets: list[dict]) -> list[str]:
    """kubeapi commands that keep the deadlock family's objects away from the webhook, before any bypass."""
    out: list[str] = []
    for f in findings:
        resource = {"mutating": "mutatingwebhookconfiguration"}.get(f.webhook_type or "", "validatingwebhookconfiguration")
        cfg = shlex.quote(f.configuration) if f.configuration else "<configuration>"
        if f.deadlock == SELF_DEPENDENCY:
            ns = f.exclude_namespace or (f.service or "").partition("/")[0] or "<backend namespace>"
            out.append(f"# exclude {ns} from {f.webhook} (merge with any namespaceSelector it already has; i = the "
                       f"webhook's index in the configuration)")
            out.append(f"kubectl patch {resource} {cfg} --type=json -p '[{{\"op\":\"add\",\"path\":"
                       f"\"/webhooks/i/namespaceSelector\",\"value\":{{\"matchExpressions\":[{{\"key\":"
                       f"\"kubernetes.io/metadata.name\",\"operator\":\"NotIn\",\"values\":[\"{ns}\"]}}]}}}}]'")
        elif f.deadlock == NODE_LEASE and f.webhook:
            out.append(f"# keep Leases and Nodes away from {f.webhook}: a matchCondition (i = the webhook's index)")
            out.append(f"kubectl patch {resource} {cfg} --type=json -p '[{{\"op\":\"add\",\"path\":"
                       f"\"/webhooks/i/matchConditions/-\",\"value\":{{\"name\":\"breakglass-not-leases-nodes\","
                       f"\"expression\":\"!(request.resource.resource in [\\\"leases\\\", \\\"nodes\\\"])\"}}}}]'")
    return out


def _unplaced(targets: list[dict]) -> list[str]:
    """The etcd way out for webhooks the log names without their configuration: breakglass finds it in etcd."""
    hooks = list(dict.fromkeys(t["webhook"] for t in targets if t["webhook"] and not t["configuration"]))
    if not hooks:
        return []
    etcd = "--etcd-endpoints https://127.0.0.1:2379 --etcd-cacert ... --etcd-cert ... --etcd-key ..."
    return (["# the configuration name is not in the logs: breakglass finds the one defining the webhook in etcd"]
            + [f"breakglass recover --method etcd --webhook {shlex.quote(h)} --dry-run {etcd}" for h in hooks]
            + [f"breakglass webhooks {etcd}"])


def options(findings: list[Finding]) -> list[RemedyOption]:
    conv = [f for f in findings if f.deadlock == CONVERSION and f.severity != INFO]
    culprits = [f for f in findings if (f.webhook or f.policy) and f.mode in ("closed", "deny") and f.severity != INFO
                and f.deadlock != CONVERSION]
    if not culprits:
        return _conversion_options(conv) if conv else []
    stuck = any(f.bootstrap_deadlock or (f.severity == CRITICAL and f.deadlock in (None, BOOTSTRAP))
                for f in findings)
    fatal = any(f.family == "bootstrap-stuck" and "exits" in f.title for f in findings)
    plugins = _plugins(culprits)
    targets = _targets(culprits)
    named = [t for t in targets if t["configuration"]]
    flag = ",".join(plugins)
    opts: list[RemedyOption] = []

    kube_manual = _family_manual(culprits, targets)
    for t in targets:
        resource = KUBECTL_RESOURCE[t["kind"]]
        if t["configuration"]:
            name = shlex.quote(t["configuration"])  # it came from a log: quoted, it cannot become a command
            kube_manual.append(f"kubectl get {resource} {name} -o yaml > {shlex.quote('backup-' + t['configuration'] + '.yaml')}")
            kube_manual.append(f"kubectl delete {resource} {name}")
        else:
            kube_manual.append(f"kubectl get {resource} -o custom-columns=NAME:.metadata.name,"
                               f"WEBHOOKS:.webhooks[*].name | grep -F '{t['webhook']}'")
    # manifest-based configurations (1.36+: the name's required suffix) are files on the nodes: neither the API nor
    # etcd holds them, and the plugin flag turns them off with the rest of their plugin
    static = bool(named) and all(t["configuration"].endswith(STATIC_SUFFIX) for t in named)
    static_note = (" Not for a manifest-based configuration (" + ", ".join(t["configuration"] for t in named) +
                   "): it is a file in kube-apiserver's staticManifestsDir on every control-plane node, neither "
                   "served by the API nor kept in etcd: `breakglass recover static-manifests` sets it to Ignore in "
                   "that file on each node (the apiserver reloads the directory), or use the admission-plugin flag."
                   if static else "")
    # admission policies only: no backend, no failurePolicy to flip from outside; their bindings are the handle
    policies = all(f.policy and not f.webhook for f in culprits)
    noun = "policy" if policies else "webhook"
    direct = (" (point kubeconfig at one control-plane node directly: a not-ready apiserver still serves, but load "
              "balancers drop it)." if stuck else ".")
    if policies:
        kube_summary = ("Delete the policy's binding (or, when the lines name none, the policy) through the "
                        "apiserver: admission configurations (webhook "
                        "configurations, policies and their bindings) are never themselves subject to admission, "
                        "so this works whenever the apiserver answers at all" + direct)
    else:
        kube_summary = (("Exclude what the webhook must not block (its backend's namespace; Leases and Nodes) "
                         "through the apiserver first: often enough, and the webhook keeps guarding the rest. Else p"
                         if any(f.deadlock in (SELF_DEPENDENCY, NODE_LEASE) for f in culprits) else "P") +
                        "atch failurePolicy to Ignore, or delete the configuration, through the apiserver. Webhook "
                        "configurations are never themselves sent to webhooks, so this works whenever the "
                        "apiserver answers at all" + direct + static_note)
    opts.append(RemedyOption(
        method="kubeapi", order=1,
        applicable="no" if fatal or static else ("maybe" if stuck else "yes"),
        summary=kube_summary,
        tradeoff=("Least invasive and audited; whatever generated the policy (Gatekeeper from a ConstraintTemplate) "
                  "re-creates the binding while it runs." if policies else
                  "Least invasive and audited; an operator (Kyverno, Gatekeeper) may recreate the configuration."),
        targets=targets, manual=kube_manual))

    if static:
        hooks = sorted({t["webhook"] for t in named if t.get("webhook")})
        opts.append(RemedyOption(
            method="static-manifests", order=1, applicable="yes" if stuck else "maybe",
            summary="Set failurePolicy Ignore on " + (", ".join(hooks) or "the webhook") + " in its file in "
                    "kube-apiserver's staticManifestsDir on every control-plane node (1.36+: manifest-based "
                    "configurations are files there, neither in the API nor in etcd); the apiserver reloads the "
                    "directory, no restart.",
            tradeoff="Only the named webhooks stop refusing; every other webhook keeps enforcing.",
            targets=named,
            manual=[f"breakglass recover static-manifests --ssh <every control-plane node> --webhook "
                    f"{shlex.quote(h)} --dry-run" for h in hooks or ["<webhook>"]]))
    talos_patch = ('{"cluster":{"apiServer":{"extraArgs":{"disable-admission-plugins":"%s"}}}}' % flag)
    opts.append(RemedyOption(
        method="talos", order=2, applicable="yes" if stuck else "maybe",
        summary=f"Talos: add disable-admission-plugins={flag} to the kube-apiserver extraArgs on every "
                f"control-plane node, wait for the apiserver, fix the {noun}, then remove it.",
        tradeoff=f"Switches off every {' and '.join(plugins)} cluster-wide until reverted: a security gap.",
        plugins=plugins,
        manual=[f"talosctl -n <every control-plane node> patch machineconfig --mode=no-reboot -p '{talos_patch}'",
                "# Talos 1.14+ configs with a KubeAPIServerConfig document: patch that document's extraArgs instead",
                "# revert: the same patch with  disable-admission-plugins: {$patch: delete}"]))
    opts.append(RemedyOption(
        method="kubeadm", order=3, applicable="yes" if stuck else "maybe",
        summary=f"kubeadm: add --disable-admission-plugins={flag} to /etc/kubernetes/manifests/kube-apiserver.yaml "
                f"on every control-plane node (kubelet restarts the apiserver), then remove it.",
        tradeoff="Same security gap as the Talos flag; a backup left inside the manifests directory would be "
                 "run by kubelet, so keep it outside.",
        plugins=plugins,
        manual=["sudo cp /etc/kubernetes/manifests/kube-apiserver.yaml /root/kube-apiserver.yaml.breakglass",
                f"# add '- --disable-admission-plugins={flag}' under the command; make sure none of these is in "
                f"--enable-admission-plugins, or the apiserver refuses to start"]))
    etcd_manual = []
    for t in named:
        if t["etcd_key"]:
            key = shlex.quote(t["etcd_key"])
            etcd_manual.append(f"etcdctl get {key} -w json > {shlex.quote('backup-' + t['configuration'] + '.json')}")
            etcd_manual.append(f"etcdctl del {key}   # exact key, never --prefix")
    opts.append(RemedyOption(
        method="etcd", order=4,
        applicable="no" if static else ("yes" if stuck and named else ("maybe" if stuck else "no")),
        summary=f"Delete the {'binding' if policies else 'configuration'}'s key from etcd after a verified backup; "
                f"the apiserver's watch drops the {noun} at once, without a restart." + static_note,
        tradeoff="Surgical (only the culprit goes), but bypasses the apiserver and its audit log; an operator "
                 "may recreate the configuration.",
        targets=named, manual=etcd_manual + _unplaced(targets)))
    if conv:  # the flag options above are for the admission webhooks only; conversion has its own ways out
        opts += [RemedyOption(o.method, len(opts) + i, o.applicable, o.summary, o.tradeoff, o.plugins, o.targets,
                              o.manual, o.family) for i, o in enumerate(_conversion_options(conv), 1)]
    return opts
