"""API versions that Kubernetes once served for the heal model's resources and stopped serving.

Why it matters: under ``matchPolicy: Equivalent`` (the v1 default) the apiserver sends a request to a webhook whose
rules name another *served* version of the same resource (``EquivalentResourceMapper``: the versions installed in
this apiserver, k8s.io/apiserver/pkg/endpoints/installer.go registers each). A rule naming only ``apps/v1beta1``
therefore intercepts every Deployment write on a cluster that still serves apps/v1beta1 and none on one that does
not. Old charts, and Gardener's care check, still carry such rules.

The releases are the Deprecated API Migration Guide's (kubernetes.io/docs/reference/using-api/deprecation-guide):
the last minor that served each group version by default. The resources are those each served that the model
writes (a resource a group version never served is left out: a rule naming it matches nothing on any cluster,
e.g. NetworkPolicy in networking.k8s.io/v1beta1, which only ever served Ingress and IngressClass).
"""

from __future__ import annotations

_APPS_V1BETA1 = ("deployments", "deployments/status", "deployments/scale", "statefulsets", "statefulsets/status",
                 "statefulsets/scale", "controllerrevisions", "replicasets", "replicasets/status", "replicasets/scale")
_APPS_V1BETA2 = _APPS_V1BETA1 + ("daemonsets", "daemonsets/status")
_RBAC = ("clusterroles", "clusterrolebindings", "roles", "rolebindings")

# (group, version): (last minor serving it, the resources it served, subresources as "resource/sub")
RETIRED: dict[tuple[str, str], tuple[tuple[int, int], frozenset[str]]] = {
    ("apps", "v1beta1"): ((1, 15), frozenset(_APPS_V1BETA1)),
    ("apps", "v1beta2"): ((1, 15), frozenset(_APPS_V1BETA2)),
    ("extensions", "v1beta1"): ((1, 15), frozenset(
        ("daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale", "replicasets",
         "replicasets/status", "replicasets/scale", "networkpolicies"))),
    ("rbac.authorization.k8s.io", "v1beta1"): ((1, 21), frozenset(_RBAC)),
    ("rbac.authorization.k8s.io", "v1alpha1"): ((1, 21), frozenset(_RBAC)),  # alpha: only where enabled
    ("scheduling.k8s.io", "v1beta1"): ((1, 21), frozenset(("priorityclasses",))),
    ("scheduling.k8s.io", "v1alpha1"): ((1, 21), frozenset(("priorityclasses",))),
    ("coordination.k8s.io", "v1beta1"): ((1, 21), frozenset(("leases",))),
    ("apiextensions.k8s.io", "v1beta1"): ((1, 21), frozenset(
        ("customresourcedefinitions", "customresourcedefinitions/status"))),
    ("apiregistration.k8s.io", "v1beta1"): ((1, 21), frozenset(("apiservices", "apiservices/status"))),
    ("certificates.k8s.io", "v1beta1"): ((1, 21), frozenset(
        ("certificatesigningrequests", "certificatesigningrequests/status", "certificatesigningrequests/approval"))),
    ("admissionregistration.k8s.io", "v1beta1"): ((1, 21), frozenset(
        ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"))),
    ("authentication.k8s.io", "v1beta1"): ((1, 21), frozenset(("tokenreviews",))),
    ("authorization.k8s.io", "v1beta1"): ((1, 21), frozenset(("subjectaccessreviews",))),
    ("discovery.k8s.io", "v1beta1"): ((1, 24), frozenset(("endpointslices",))),
    ("events.k8s.io", "v1beta1"): ((1, 24), frozenset(("events",))),
    ("policy", "v1beta1"): ((1, 24), frozenset(("poddisruptionbudgets",))),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"): ((1, 25), frozenset(("flowschemas", "prioritylevelconfigurations"))),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"): ((1, 28), frozenset(("flowschemas", "prioritylevelconfigurations"))),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"): ((1, 31), frozenset(("flowschemas", "prioritylevelconfigurations"))),
}
# extensions/v1beta1 served these resources of other groups, from the same storage: the apiserver counts them as
# equivalent to the group that serves them now
MOVED = {"daemonsets": "apps", "deployments": "apps", "replicasets": "apps", "networkpolicies": "networking.k8s.io"}


def _group_now(group: str, resource: str) -> str:
    return MOVED.get(resource, group) if group == "extensions" else group


def last_served(group: str, version: str, write_group: str, resource: str, subresource: str) -> tuple[int, int] | None:
    """The last minor whose ``group/version`` served what a write to ``write_group``'s ``resource[/subresource]``
    is equivalent to, or None (it never did, or it still does)."""
    entry = RETIRED.get((group, version))
    if entry is None or _group_now(group, resource) != write_group:
        return None
    last, resources = entry
    return last if (resource + (f"/{subresource}" if subresource else "")) in resources else None


def groups() -> frozenset[str]:
    return frozenset(g for g, _ in RETIRED)
