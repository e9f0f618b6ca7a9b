"""What can be done, given what is reachable: probes in parallel, then ordered options.

Order (design card): through the apiserver while it serves; else the admission-plugin flag on the
nodes (Talos or kubeadm); then the etcd deletion. Each option says what it costs; an option whose
access is missing is kept, marked unavailable with the reason, so the engineer sees the whole map.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from breakglass.core.errors import BreakglassError
from breakglass.ways import registry


# What the engineer gave to reach the cluster, and what answered: declared with the ways out (ways.registry),
# which alone decide what an access can use.
Access = registry.Reach
Probe = registry.Probe


@dataclass
class Option:
    method: str
    available: bool
    summary: str
    tradeoff: str
    reason: str = ""  # why it is unavailable
    variant: str = ""  # how it acts with this access (talosctl or file, SSH or a local manifest, ...)
    label: str = ""


TRADEOFFS = {w.name: (w.summary, w.tradeoff) for w in registry.WAYS}
FLAG_METHODS = registry.FLAG_WAYS
ALL_METHODS = registry.NAMES


# A deadlocked kube-apiserver exits about once a minute and the kubelet starts it again: a probe that lands in that
# gap finds nothing listening. Which way out is offered must not depend on when it was asked, so a refused or reset
# connection is asked again up to this long (a timeout or a TLS failure is not a restart gap: it is final).
RESTART_GAP = 90.0
_GAP_WORDS = ("connection refused", "reset", "remote end closed", "connection aborted", "eof occurred")


def _in_gap(detail: str) -> bool:
    return any(w in detail.lower() for w in _GAP_WORDS)


def _probe_apiserver(a: Access, timeout: float, gap: float = 0.0, on_wait=None) -> Probe:
    from breakglass.access import kubeapi  # noqa: PLC0415

    deadline = time.monotonic() + gap
    while True:
        try:
            api = kubeapi.connect(a.kubeconfig, a.context, timeout)
            r = api.readyz()
        except BreakglassError as e:
            return Probe("apiserver", False, str(e))
        if r.reachable:
            return Probe("apiserver", True, f"{api.host} answers ({r.detail})")
        left = deadline - time.monotonic()
        if left <= 0 or not _in_gap(r.detail):
            waited = f" (asked again for {gap:.0f}s: not a restart gap)" if gap and _in_gap(r.detail) else ""
            return Probe("apiserver", False, f"{api.host}: {r.detail}{waited}")
        if on_wait:
            on_wait(f"{int(left)}s left: {api.host} {r.detail}; a restart gap? asking again")
        time.sleep(min(2.0, max(0.05, left)))


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


def probe(a: Access, timeout: float = 3.0, gap: float = 0.0, on_wait=None) -> dict[str, Probe]:
    """Every access given, probed at once. ``gap``: how long a refused apiserver is asked again (RESTART_GAP), with
    ``on_wait`` told the time left."""
    jobs = {}
    if a.kubeconfig or a.wants_kubeconfig:
        jobs["apiserver"] = lambda a, t: _probe_apiserver(a, t, gap, on_wait)
    if a.talos is not None and a.talos_nodes:
        jobs["talos"] = _probe_talos
    if a.ssh_nodes:
        jobs["ssh"] = _probe_ssh
    if a.etcd is not None:
        jobs["etcd"] = _probe_etcd
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        futures = {name: pool.submit(fn, a, timeout) for name, fn in jobs.items()}
        out = {name: f.result() for name, f in futures.items()}
    out.update(a.local_probes())  # files on this machine: read, not reached
    return out


def order_for(family: str | None) -> tuple[str, ...]:
    return registry.order_for(family)


def options(probes: dict[str, Probe], have_targets: bool = True, family: str | None = None,
            distros: dict | None = None, static: bool = False) -> list[Option]:
    """The ways out, in the order the deadlock family calls for, each available or not with the reason (a way
    that cannot work for the family, such as the admission flag for a conversion webhook, unavailable, with why).
    ``probes`` holds what answered, files on this machine included (``Access.local_probes``)."""
    out = []
    for v in registry.assess_all(probes, family, distros, have_targets, static):
        if v.way.static_only and not static:
            continue  # only for manifest-based culprits (files on the nodes): not a choice for any other
        tradeoff = (v.variant.tradeoff if v.variant else "") or v.way.tradeoff
        out.append(Option(v.way.name, v.usable, v.way.summary, tradeoff, v.reason,
                          v.variant.name if v.variant else "", v.variant.label if v.variant else ""))
    return out
