"""The ways out a diagnosis lists, narrowed to the distribution the nodes run (``breakglass.access.distro``).

A diagnosis lists the admission-plugin flag for Talos and kubeadm, as a log alone cannot say which it is; once
`diagnose --ssh` has looked at the nodes, only their distribution's flag is offered, k3s' and RKE2's included, and
each option starts with what was found on the nodes, so the choice can be checked.
"""

from __future__ import annotations

import shlex

from breakglass.diagnose.model import RemedyOption
from breakglass.access.distro import Distro, rancher

FLAG_METHODS = ("talos", "kubeadm", "k3s", "rke2")


def _rancher_option(name: str, like: RemedyOption, hosts: list[str]) -> RemedyOption:
    flag = ",".join(like.plugins)
    conf, unit = rancher(name)["config"], rancher(name)["service"]
    label = "k3s" if name == "k3s" else "RKE2"
    dropin = f"{conf}.d/99-breakglass.yaml"
    return RemedyOption(
        method=name, order=like.order, applicable=like.applicable, plugins=list(like.plugins),
        summary=f"{label}: add disable-admission-plugins={flag} to kube-apiserver-arg+ in a drop-in of "
                f"{conf}.d/ on every server node, restart {unit}, fix the webhook, then remove the drop-in.",
        tradeoff=f"Switches off every {' and '.join(like.plugins)} cluster-wide until reverted: a security gap; "
                 f"{unit} restarts.",
        manual=[f"breakglass recover --method {name} --ssh {shlex.quote(','.join(hosts))}",
                f"# by hand: kube-apiserver-arg+ appends (a plain kube-apiserver-arg there replaces your list)",
                f"printf 'kube-apiserver-arg+:\\n  - disable-admission-plugins={flag}\\n' | sudo tee {dropin}",
                f"sudo systemctl restart {unit}",
                f"# revert: sudo rm {dropin} && sudo systemctl restart {unit}"])


def _etcd_lines(d: Distro) -> list[str]:
    e = d.etcd
    if e is None:
        return []
    if e.kind == "kine":
        return [f"# {d.host}: kine (SQLite) on {e.endpoint}: breakglass recover --method etcd --etcd-via-ssh {d.host} "
                f"reaches it through SSH; kine has no snapshot: copy {rancher('k3s')['server']}/db/ with k3s stopped"]
    c = e.certs
    return [f"# {d.host}: etcd at {e.endpoint} with {c['cacert']}, {c['cert']}, {c['key']}: "
            f"breakglass recover --method etcd --etcd-via-ssh {d.host} finds them itself"]


def tailor(remedies: list[RemedyOption], found: list[Distro]) -> list[RemedyOption]:
    """``remedies`` with only the flag methods the nodes' distributions take, k3s' and RKE2's added; each kept
    option's manual steps open with what was found. Nodes nothing is known of (unknown) leave the list as it is."""
    known = [d for d in found if d.name != "unknown"]
    evidence = [f"# {d.summary()}" for d in found]
    if not remedies:
        return remedies
    if not known:
        return [RemedyOption(**{**r.__dict__, "manual": evidence + r.manual}) if r.method in FLAG_METHODS else r
                for r in remedies]
    names = {d.name for d in known}
    flag = next((r for r in remedies if r.method in FLAG_METHODS), None)
    out: list[RemedyOption] = []
    for r in remedies:
        if r.method in FLAG_METHODS:
            if r is flag:
                for name in ("talos", "kubeadm", "k3s", "rke2"):
                    if name not in names:
                        continue
                    hosts = [d.host for d in known if d.name == name]
                    opt = next((x for x in remedies if x.method == name), None) or _rancher_option(name, r, hosts)
                    out.append(RemedyOption(**{**opt.__dict__, "manual": evidence + opt.manual}))
            continue
        if r.method == "etcd":
            r = RemedyOption(**{**r.__dict__, "manual": [ln for d in known for ln in _etcd_lines(d)] + r.manual})
        out.append(r)
    for i, r in enumerate(out, 1):
        r.order = i
    return out
