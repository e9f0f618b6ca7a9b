"""What can be done, given what is reachable: probes in parallel, then ordered options.

Order (design card): through the apiserver while it serves; else the admission-plugin flag on the
nodes (Talos or kubeadm); then the etcd deletion. Each option says what it costs; an option whose
access is missing is kept, marked unavailable with the reason, so the engineer sees the whole map.
"""

from __future__ import annotations

import os

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from breakglass.core.errors import BreakglassError


@dataclass
class Access:
    kubeconfig: str | None = None
    context: str | None = None
    talos: object | None = None  # access.talos.Talos
    talos_nodes: list[str] = field(default_factory=list)
    ssh_nodes: dict = field(default_factory=dict)  # host -> access.ssh.Node
    etcd: object | None = None  # recovery.EtcdTarget
    wants_kubeconfig: bool = False
    talos_files: list[str] = field(default_factory=list)  # machine-config files managed as code
    manifest: str | None = None  # a kubeadm manifest on this machine
    readyz_urls: list[str] = field(default_factory=list)  # apiservers to watch afterwards
    distros: dict = field(default_factory=dict)  # host -> distro.Distro, found by the SSH probe

    def local_probes(self) -> dict[str, "Probe"]:
        """Ways out through files on this machine: nothing to reach, only to read."""
        out = {}
        if self.talos_files:
            ok = all(os.access(f, os.R_OK | os.W_OK) for f in self.talos_files)
            out["talos"] = Probe("talos", ok, f"machine-config file(s) {', '.join(self.talos_files)}"
                                 + ("" if ok else ": not writable here"))
        if self.manifest:
            ok = os.access(self.manifest, os.R_OK | os.W_OK)
            out["ssh"] = Probe("ssh", ok, f"kubeadm manifest {self.manifest}" + ("" if ok else ": not writable here"))
        return out


@dataclass
class Probe:
    name: str  # apiserver | talos | ssh | etcd
    reachable: bool
    detail: str


@dataclass
class Option:
    method: str
    available: bool
    summary: str
    tradeoff: str
    reason: str = ""  # why it is unavailable


TRADEOFFS = {
    "kubeapi": ("Patch or delete the configuration through the apiserver.",
                "Least invasive, audited, no restart; an operator may recreate the configuration."),
    "talos": ("Disable the webhook admission plugins in every control-plane node's machine config.",
              "Switches off every webhook cluster-wide until reverted: a security gap."),
    "kubeadm": ("Disable the webhook admission plugins in every node's kube-apiserver manifest.",
                "Switches off every webhook cluster-wide until reverted: a security gap."),
    "k3s": ("Disable the webhook admission plugins in a drop-in of every k3s server's config, then restart k3s.",
            "Switches off every webhook cluster-wide until reverted: a security gap; k3s restarts."),
    "rke2": ("Disable the webhook admission plugins in a drop-in of every RKE2 server's config, then restart "
             "rke2-server.", "Switches off every webhook cluster-wide until reverted: a security gap; rke2-server "
                             "restarts."),
    "etcd": ("Delete the configuration's key from etcd after a verified backup.",
             "Surgical, but bypasses the apiserver and its audit log."),
}
# The admission-plugin flag, per distribution: each needs SSH (Talos its API) and only fits its own nodes.
FLAG_METHODS = ("talos", "kubeadm", "k3s", "rke2")
ALL_METHODS = ("kubeapi", "talos", "kubeadm", "k3s", "rke2", "etcd")


def _probe_apiserver(a: Access, timeout: float) -> Probe:
    from breakglass.access import kubeapi  # noqa: PLC0415

    try:
        api = kubeapi.connect(a.kubeconfig, a.context, timeout)
        r = api.readyz()
    except BreakglassError as e:
        return Probe("apiserver", False, str(e))
    if r.reachable:
        return Probe("apiserver", True, f"{api.host} answers ({r.detail})")
    return Probe("apiserver", False, f"{api.host}: {r.detail}")


def _probe_talos(a: Access, timeout: float) -> Probe:
    try:
        a.talos.timeout = timeout
        a.talos.machine_config(a.talos_nodes[0])
        return Probe("talos", True, f"talosctl reaches {a.talos_nodes[0]}")
    except BreakglassError as e:
        return Probe("talos", False, str(e))


def _probe_ssh(a: Access, timeout: float) -> Probe:
    """SSH to the first node, and what it runs (kubeadm, k3s, RKE2, Talos): the flag way out differs for each."""
    from breakglass.access import distro  # noqa: PLC0415

    host, node = next(iter(a.ssh_nodes.items()))
    try:
        node.options.timeout = timeout
        node.connect()
    except BreakglassError as e:
        return Probe("ssh", False, str(e))
    try:
        found = distro.detect(node)
    except BreakglassError as e:
        return Probe("ssh", True, f"ssh reaches {host} (what it runs is unknown: {e})")
    a.distros[host] = found
    return Probe("ssh", True, f"ssh reaches {found.summary()}")


def _probe_etcd(a: Access, timeout: float) -> Probe:
    from breakglass.webhooks import sources  # noqa: PLC0415

    etcd = a.etcd.connect()
    try:
        etcd.get(sources.etcd_key("validating", "breakglass-probe"))
        return Probe("etcd", True, f"etcd answers at {','.join(etcd.settings.endpoints)}")
    except BreakglassError as e:
        return Probe("etcd", False, str(e))
    finally:
        etcd.close()


def probe(a: Access, timeout: float = 3.0) -> dict[str, Probe]:
    jobs = {}
    if a.kubeconfig or a.wants_kubeconfig:
        jobs["apiserver"] = _probe_apiserver
    if a.talos is not None and a.talos_nodes:
        jobs["talos"] = _probe_talos
    if a.ssh_nodes:
        jobs["ssh"] = _probe_ssh
    if a.etcd is not None:
        jobs["etcd"] = _probe_etcd
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        futures = {name: pool.submit(fn, a, timeout) for name, fn in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


# The order of the ways out for each deadlock family (diagnose's Finding.deadlock / Verdict.family), least invasive
# first. Self-dependency and lease starvation: the apiserver answers, and excluding the backend's namespace (or
# Leases and Nodes) through it is often enough. Conversion: the admission flag does not switch a CRD's conversion
# webhook off, so it is never offered; etcd (the CRD's conversion strategy) only with the apiserver down.
ORDER = {
    None: ALL_METHODS,
    "bootstrap": ALL_METHODS,
    "self-dependency": ALL_METHODS,
    "node-lease": ALL_METHODS,
    "conversion": ("kubeapi", "etcd"),
}
_NO_CONVERSION = "--disable-admission-plugins does not switch a CRD's conversion webhook off"
NOT_FOR = {"conversion": {m: _NO_CONVERSION for m in FLAG_METHODS}}


def order_for(family: str | None) -> tuple[str, ...]:
    return ORDER.get(family, ORDER[None])


def _other_distribution(method: str, distros: dict) -> str:
    """Why a flag way out does not fit the nodes, when the SSH probe found what they run ("" when it fits, or
    nothing is known): kubeadm's manifest is not k3s' config, and so on."""
    if method not in FLAG_METHODS or method == "talos" or not distros:
        return ""
    known = [d for d in distros.values() if d.name != "unknown"]
    if not known or any(d.name == method for d in known):
        return ""
    return "; ".join(d.summary() for d in known)


def options(probes: dict[str, Probe], have_targets: bool = True, family: str | None = None,
            distros: dict | None = None) -> list[Option]:
    """The ways out, in the order the deadlock family calls for, each available or not with the reason (a way
    that cannot work for the family, such as the admission flag for a conversion webhook, is listed last,
    unavailable, with why)."""
    needs = {"kubeapi": "apiserver", "talos": "talos", "kubeadm": "ssh", "k3s": "ssh", "rke2": "ssh", "etcd": "etcd"}
    out = []
    order = order_for(family)
    for method in order + tuple(m for m in ALL_METHODS if m not in order):
        p = probes.get(needs[method])
        summary, tradeoff = TRADEOFFS[method]
        other = _other_distribution(method, distros or {})
        if method in NOT_FOR.get(family or "", {}):
            out.append(Option(method, False, summary, tradeoff, NOT_FOR[family][method]))
        elif other:
            out.append(Option(method, False, summary, tradeoff, other))
        elif p is None:
            out.append(Option(method, False, summary, tradeoff, f"no {needs[method]} access given"))
        elif not p.reachable:
            out.append(Option(method, False, summary, tradeoff, p.detail))
        elif method in ("kubeapi", "etcd") and not have_targets:
            out.append(Option(method, False, summary, tradeoff, "no configuration named (diagnose logs first)"))
        else:
            out.append(Option(method, True, summary, tradeoff))
    return out
