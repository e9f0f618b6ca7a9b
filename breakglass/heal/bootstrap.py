"""Objects kube-apiserver writes to itself while it starts, and the post-start hooks that write them.

A webhook that fails closed (or denies) on any of these can keep the apiserver from ever
becoming ready. Source: shared reference §3 (pkg/controlplane, pkg/registry/*/rest).
None of these kinds is exempt from admission webhooks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BootstrapKind:
    kind: str
    group: str  # "" for the core group
    resource: str
    hook: str  # the post-start hook (or controller) that writes it
    names: tuple[str, ...] = ()  # well-known object names, when fixed
    namespaces: tuple[str, ...] = ()  # () for cluster-scoped kinds
    blocks_readiness: bool = True  # the hook must finish before /readyz passes
    since: tuple[int, int] = (1, 0)  # first Kubernetes version whose apiserver writes it at start
    labels: tuple[tuple[str, str], ...] = ()  # labels the apiserver puts on the objects (for objectSelector)
    # Written on every start or upgrade (created, reconciled or status-updated), not only when missing.
    every_start: bool = True

    @property
    def cluster_scoped(self) -> bool:
        return not self.namespaces

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


BOOTSTRAP_KINDS: tuple[BootstrapKind, ...] = (
    # MultiCIDRServiceAllocator is on by default (GA) from 1.33: before it, neither is written.
    BootstrapKind("ServiceCIDR", "networking.k8s.io", "servicecidrs",
                  "start-kubernetes-service-cidr-controller", ("kubernetes",), since=(1, 33)),
    BootstrapKind("IPAddress", "networking.k8s.io", "ipaddresses", "start-service-ip-repair-controllers",
                  since=(1, 33)),
    BootstrapKind("Namespace", "", "namespaces", "start-system-namespaces-controller",
                  ("kube-system", "kube-public", "kube-node-lease", "default"), every_start=False),
    BootstrapKind("PriorityClass", "scheduling.k8s.io", "priorityclasses",
                  "scheduling/bootstrap-system-priority-classes",
                  ("system-node-critical", "system-cluster-critical"), every_start=False),
    BootstrapKind("ClusterRole", "rbac.authorization.k8s.io", "clusterroles", "rbac/bootstrap-roles",
                  labels=(("kubernetes.io/bootstrapping", "rbac-defaults"),)),
    BootstrapKind("ClusterRoleBinding", "rbac.authorization.k8s.io", "clusterrolebindings", "rbac/bootstrap-roles",
                  labels=(("kubernetes.io/bootstrapping", "rbac-defaults"),)),
    BootstrapKind("Role", "rbac.authorization.k8s.io", "roles", "rbac/bootstrap-roles",
                  namespaces=("kube-system", "kube-public"), labels=(("kubernetes.io/bootstrapping", "rbac-defaults"),)),
    BootstrapKind("RoleBinding", "rbac.authorization.k8s.io", "rolebindings", "rbac/bootstrap-roles",
                  namespaces=("kube-system", "kube-public"), labels=(("kubernetes.io/bootstrapping", "rbac-defaults"),)),
    BootstrapKind("FlowSchema", "flowcontrol.apiserver.k8s.io", "flowschemas",
                  "priority-and-fairness-config-producer"),
    BootstrapKind("PriorityLevelConfiguration", "flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations",
                  "priority-and-fairness-config-producer"),
    BootstrapKind("Lease", "coordination.k8s.io", "leases", "start-kube-apiserver-identity-lease-controller",
                  namespaces=("kube-system",), blocks_readiness=False),
    BootstrapKind("Service", "", "services", "bootstrap-controller", ("kubernetes",), ("default",),
                  blocks_readiness=False, labels=(("component", "apiserver"), ("provider", "kubernetes"))),
    BootstrapKind("Endpoints", "", "endpoints", "bootstrap-controller", ("kubernetes",), ("default",),
                  blocks_readiness=False, labels=(("endpointslice.kubernetes.io/skip-mirror", "true"),)),
    BootstrapKind("EndpointSlice", "discovery.k8s.io", "endpointslices", "bootstrap-controller",
                  ("kubernetes",), ("default",), blocks_readiness=False),
    BootstrapKind("ConfigMap", "", "configmaps", "start-cluster-authentication-info-controller",
                  ("extension-apiserver-authentication",), ("kube-system",)),
)

# Not written by the apiserver, but a cluster cannot recover without them: kubelets register
# and renew Nodes and node Leases, controllers renew their leader Leases.
RECOVERY_KINDS: tuple[BootstrapKind, ...] = (
    BootstrapKind("Node", "", "nodes", "kubelet registration", blocks_readiness=False, every_start=False),
    BootstrapKind("Lease", "coordination.k8s.io", "leases", "node heartbeats and leader election",
                  namespaces=("kube-node-lease", "kube-system"), blocks_readiness=False, every_start=False),
    # The control plane's own Services in kube-system (kube-dns) and their endpoints, kept by controllers.
    BootstrapKind("Service", "", "services", "kube-system Services (kube-dns)", namespaces=("kube-system",),
                  blocks_readiness=False, every_start=False),
    BootstrapKind("Endpoints", "", "endpoints", "endpoints controller", namespaces=("kube-system",),
                  blocks_readiness=False, every_start=False),
    BootstrapKind("EndpointSlice", "discovery.k8s.io", "endpointslices", "endpointslice controller",
                  namespaces=("kube-system",), blocks_readiness=False, every_start=False),
)

_BY_RESOURCE = {k.resource: k for k in BOOTSTRAP_KINDS}
_BY_KIND = {k.kind.lower(): k for k in BOOTSTRAP_KINDS}
_BY_HOOK: dict[str, list[BootstrapKind]] = {}
for _k in BOOTSTRAP_KINDS:
    _BY_HOOK.setdefault(_k.hook, []).append(_k)


def by_resource(resource: str) -> BootstrapKind | None:
    """Look up ``servicecidrs``, ``ipaddresses.networking.k8s.io`` or ``ServiceCIDR``."""
    r = resource.split(".", 1)[0].lower()
    return _BY_RESOURCE.get(r) or _BY_KIND.get(r)


def blocks_readiness(kind: str) -> bool:
    """Must the apiserver write this kind before /readyz passes? Unknown kinds: no."""
    k = by_resource(kind)
    return bool(k and k.blocks_readiness)


def by_hook(hook: str) -> list[BootstrapKind]:
    return _BY_HOOK.get(hook.removeprefix("poststarthook/"), [])


@dataclass(frozen=True)
class BlockedObject:
    """A concrete bootstrap object a log line shows being blocked."""

    kind: str
    name: str | None
    namespace: str | None
    hook: str

    def __str__(self) -> str:
        ref = self.kind
        if self.name:
            ref += f' "{self.name}"'
        if self.namespace:
            ref += f" in {self.namespace}"
        return ref


def blocked(kind: BootstrapKind, name: str | None = None, namespace: str | None = None) -> BlockedObject:
    if name is None and len(kind.names) == 1:
        name = kind.names[0]
    return BlockedObject(kind.kind, name, namespace, kind.hook)
