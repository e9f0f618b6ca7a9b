"""Whose config.yaml is this, k3s' or RKE2's? Read from the file (and its drop-ins) and its path, never guessed.

Both read the same format (RKE2 embeds k3s' config parser), and most keys are common to both (token, tls-san,
write-kubeconfig-mode, etcd-expose-metrics, selinux, node-taint, kube-apiserver-arg, ...). What tells them apart:

- the path: the distribution's own ``/etc/rancher/k3s/`` or ``/etc/rancher/rke2/`` (a directory named ``k3s`` in a
  repository is not evidence: tests/k3s/rke2-hardened.yaml lives in one);
- a key only one of them reads. RKE2 adds ``cni``, ``profile``, ``audit-policy-file``,
  ``pod-security-admission-config-file``, ``control-plane-resource-requests``/``-limits``/``-probe-configuration``,
  the components' ``*-image``, ``*-extra-mount`` and ``*-extra-env``, ``ingress-controller``, ``enable-servicelb``,
  ``cloud-provider-name``/``-config`` (rke2 pkg/cli/cmds: serverFlag, commonFlag, and its rke2.Config); it drops
  k3s' ``flannel-*``, ``cluster-init``, ``disable-network-policy``, ``default-local-storage-path``, ``rootless``,
  ``disable-helm-controller``, ``https-listen-port``, ``vpn-auth`` and the like (its ``dropFlag`` list), so those
  are k3s';
- the values: ``disable`` names RKE2's charts as ``rke2-…`` (rke2-ingress-nginx, rke2-coredns) and k3s' packaged
  components bare (traefik, servicelb, local-storage, metrics-server, coredns); ``data-dir`` and
  ``write-kubeconfig`` under the distribution's own directories.

A file with markers of both, or of neither, is not told: both ways stay offered, and the reading says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import yaml

from breakglass.core import textfile
from breakglass.core.errors import BreakglassError
from breakglass.k3s import config as k3s

LABEL = {"k3s": "k3s", "rke2": "RKE2"}
OWNED = {"k3s": "k3s'", "rke2": "RKE2's"}  # whose config it is

RKE2_KEYS = frozenset({
    "cni", "profile", "audit-policy-file", "pod-security-admission-config-file",
    "control-plane-resource-requests", "control-plane-resource-limits", "control-plane-probe-configuration",
    "kube-apiserver-image", "kube-controller-manager-image", "kube-scheduler-image", "kube-proxy-image",
    "etcd-image", "cloud-controller-manager-image", "runtime-image",
    "ingress-controller", "enable-servicelb", "cloud-provider-name", "cloud-provider-config",
} | {f"{c}-extra-{w}" for c in ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kube-proxy", "etcd",
                                 "cloud-controller-manager") for w in ("mount", "env")})
K3S_KEYS = frozenset({
    "flannel-backend", "flannel-iface", "flannel-conf", "flannel-cni-conf", "flannel-ipv6-masq",
    "flannel-external-ip", "cluster-init", "vpn-auth", "vpn-auth-file", "https-listen-port", "supervisor-port",
    "apiserver-port", "apiserver-bind-address", "advertise-port", "default-local-storage-path",
    "disable-network-policy", "rootless", "prefer-bundled-bin", "disable-helm-controller", "docker", "kine-tls",
    "image-service-endpoint", "no-flannel", "no-deploy", "cluster-secret", "disable-selinux",
})
K3S_COMPONENTS = frozenset({"traefik", "servicelb", "local-storage", "metrics-server", "coredns", "runtimes"})
# the distributions' own directories: config, data, the admin kubeconfig
OWN_DIRS = {"k3s": ("/etc/rancher/k3s/", "/var/lib/rancher/k3s"), "rke2": ("/etc/rancher/rke2/", "/var/lib/rancher/rke2")}


@dataclass
class Reading:
    path: str
    name: str | None  # k3s | rke2 | None: cannot be told
    evidence: list[tuple[str, str]] = field(default_factory=list)  # (distribution, what points to it)

    def found(self, name: str) -> list[str]:
        return [what for d, what in self.evidence if d == name]

    def line(self) -> str:
        """One line: whose it is and why, or why it cannot be told."""
        if self.name:
            return f"{self.path} is {OWNED[self.name]} config ({'; '.join(self.found(self.name))})"
        if self.evidence:
            return (f"{self.path}: k3s or RKE2 cannot be told (k3s: {'; '.join(self.found('k3s'))}; RKE2: "
                    f"{'; '.join(self.found('rke2'))}), so both are offered")
        return (f"{self.path}: nothing in it tells k3s from RKE2 (no key only one of them reads, not under "
                f"/etc/rancher/k3s/ or /etc/rancher/rke2/), so both are offered")


def read(path: str, dropin_dir: str | None = None) -> Reading:
    """The reading of ``path`` and the drop-ins beside it (``config.yaml.d``), as they are on this machine. A file
    that cannot be read or parsed counts for nothing here (planning says what is wrong with it)."""
    texts = []
    directory = dropin_dir or k3s.dropin_dir(path)
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for p in [path] + [os.path.join(directory, n) for n in names if k3s.is_dropin(n)]:
        try:
            texts.append((p, textfile.read(p, "a k3s config file")))
        except BreakglassError:
            continue
    return of(path, texts)


def of(path: str, texts: list[tuple[str, str]]) -> Reading:
    """Whose config ``path`` is, from its path and the texts of it and its drop-ins (path, text)."""
    evidence: list[tuple[str, str]] = []
    where = os.path.normpath(path)
    for name, (etc, _) in OWN_DIRS.items():
        if where.startswith(etc):
            evidence.append((name, f"under {etc}"))
    for p, text in texts:
        evidence += _markers(p, text)
    names = {d for d, _ in evidence}
    return Reading(path, names.pop() if len(names) == 1 else None, list(dict.fromkeys(evidence)))


def _markers(path: str, text: str) -> list[tuple[str, str]]:
    try:
        root = k3s._root(k3s.ConfigFile(path, text))
    except (BreakglassError, yaml.YAMLError, RecursionError):
        return []
    out = []
    for k, v in (root.value if root is not None else []):
        if not isinstance(k, yaml.ScalarNode) or not isinstance(k.value, str):
            continue
        key = k.value.rstrip("+")
        if key in RKE2_KEYS:
            out.append(("rke2", f"{key}: only RKE2 reads it"))
        elif key in K3S_KEYS:
            out.append(("k3s", f"{key}: only k3s reads it"))
        values = _strings(v)
        if key == "disable":
            out += [("rke2", f"disable: {x} (an RKE2 chart)") for x in values if x.startswith("rke2-")]
            out += [("k3s", f"disable: {x} (a k3s packaged component)") for x in values if x in K3S_COMPONENTS]
        elif key in ("data-dir", "write-kubeconfig"):
            for name, dirs in OWN_DIRS.items():
                out += [(name, f"{key}: {x}") for x in values if any(x.startswith(d.rstrip("/") + "/") or x == d
                                                                     for d in dirs)]
    return out


def _strings(node) -> list[str]:
    """A scalar's or a list of scalars' values, comma-separated ones split (as RKE2 splits --cni and --disable)."""
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    return [part.strip() for it in items if isinstance(it, yaml.ScalarNode) and isinstance(it.value, str)
            for part in it.value.split(",") if part.strip()]
