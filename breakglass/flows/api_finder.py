"""Which apiserver a revert can read the cluster through, when nobody said: the guard must not re-arm blind.

Re-enabling the webhook admission plugins (the Talos, kubeadm, k3s and RKE2 ways) turns every fail-closed webhook of
the cluster back on, so the revert guard has to read them and their backends first. A run made from a file or a
node's flag carries no kubeconfig, so the candidates are tried in this order, the run's own first:

1. what was given on the command line (``--kubeconfig``/``--context``), then the run's own (a kubeapi run);
2. the node's own admin kubeconfig where the run acted on this machine: kubeadm's ``/etc/kubernetes/admin.conf``
   (and ``super-admin.conf``), k3s' ``/etc/rancher/k3s/k3s.yaml``, RKE2's ``/etc/rancher/rke2/rke2.yaml``;
3. the rehearsal sandbox's kubeconfig when the run's files are the sandbox's own;
4. ``$KUBECONFIG``, then ``~/.kube/config`` (what kubectl would use);

and the first that answers (``/readyz`` reachable, whatever it says) is used. Each candidate tried is named, so a
refusal can say exactly where it looked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from breakglass.core import textfile
from breakglass.core.errors import BreakglassError

NODE_KUBECONFIGS = {
    "kubeadm": ("/etc/kubernetes/admin.conf", "/etc/kubernetes/super-admin.conf"),
    "k3s": ("/etc/rancher/k3s/k3s.yaml",),
    "rke2": ("/etc/rancher/rke2/rke2.yaml",),
}


@dataclass
class Found:
    api: object | None  # an access.kubeapi.Api that answered, or None
    source: str = ""  # what it was: "--kubeconfig F", "the node's /etc/kubernetes/admin.conf", "~/.kube/config"
    tried: list[str] = field(default_factory=list)  # every candidate and why it was not used

    def describe_miss(self) -> str:
        return "no apiserver answered (tried: " + ("; ".join(self.tried) or "nothing to try") + ")"


def candidates(method: str | None, target: dict, kube=(None, None), state: str | None = None,
               nodes: dict | None = None) -> list[tuple]:
    """(label, kubeconfig path or None for the client's default, context) in the order they are tried; a path may be
    a function returning the kubeconfig's bytes (a node's admin.conf read over the run's own SSH, ``nodes``)."""
    out: list[tuple] = []
    kubeconfig, context = kube or (None, None)
    if kubeconfig or context:
        out.append((f"--kubeconfig {kubeconfig or '(default)'}" + (f" --context {context}" if context else ""),
                    kubeconfig, context))
    if target.get("kubeconfig") or target.get("context"):
        out.append(("the run's own kubeconfig", target.get("kubeconfig"), target.get("context")))
    if target.get("local"):
        for path in NODE_KUBECONFIGS.get(method or "", ()):
            out.append((f"the node's {path}", path, None))
    elif method == "kubeadm" and nodes:
        # kubeadm's admin.conf names the control-plane endpoint, which this machine reached the nodes beside
        for host, node in list(nodes.items())[:3]:
            out.append((f"{host}:{NODE_KUBECONFIGS['kubeadm'][0]} over SSH",
                        lambda node=node: _read_node(node, NODE_KUBECONFIGS["kubeadm"][0]), None))
    sb = _sandbox_kubeconfig(target, state)
    if sb:
        out.append(("the sandbox's kubeconfig", sb, None))
    if os.environ.get("KUBECONFIG"):
        out.append(("$KUBECONFIG", None, None))
    home = os.path.expanduser("~/.kube/config")
    if not os.environ.get("KUBECONFIG"):
        out.append(("~/.kube/config", home, None))
    return out


def find(cands: list[tuple], timeout: float = 5.0) -> Found:
    from breakglass.access import kubeapi  # noqa: PLC0415

    found = Found(None)
    seen = set()
    for label, path, context in cands:
        key = (label if callable(path) else os.path.realpath(path) if path else None, context)
        if key in seen:
            continue
        seen.add(key)
        if isinstance(path, str) and not os.path.isfile(path):
            found.tried.append(f"{label}: no such file")
            continue
        try:
            if callable(path):
                api = _connect_bytes(path(), context, timeout)
            else:
                api = kubeapi.connect(path, context, timeout)
            r = api.readyz()
        except BreakglassError as e:
            found.tried.append(f"{label}: {e}")
            continue
        if not r.reachable:
            found.tried.append(f"{label}: {api.host} {r.detail}")
            continue
        found.api, found.source = api, f"{label} ({api.host})"
        return found
    return found


def _sandbox_kubeconfig(target: dict, state: str | None) -> str | None:
    """The sandbox's admin kubeconfig, when a path the run acted on lies in a sandbox directory (its node config,
    its manifest, its k3s config) or its etcd is the run's."""
    from breakglass import sandbox  # noqa: PLC0415

    paths = [p for p in [target.get("manifest"), target.get("config")] + list(target.get("nodes") or [])
             + list(target.get("files") or []) if isinstance(p, str) and os.path.isabs(p)]
    dirs = {sandbox.default_dir(state)}
    for p in paths:
        d = os.path.dirname(p)
        while d and d != os.path.dirname(d):
            if os.path.isfile(os.path.join(d, "sandbox.json")):
                dirs.add(d)
                break
            d = os.path.dirname(d)
    eps = {e.rstrip("/") for e in target.get("etcd_endpoints") or [] if isinstance(e, str)}
    for d in sorted(dirs):
        sb = sandbox.load(d) if os.path.isdir(d) else None
        if sb is None or not sb.apiserver or not sb.apiserver.get("kubeconfig"):
            continue
        inside = any(os.path.realpath(p).startswith(os.path.realpath(d) + os.sep) for p in paths)
        if inside or sb.endpoint.rstrip("/") in eps:
            return sb.apiserver["kubeconfig"]
    return None


def _read_node(node, path: str) -> bytes:
    from breakglass.ways.nodefile import read_remote  # noqa: PLC0415

    return read_remote(node, path)


def _connect_bytes(data: bytes, context, timeout: float):
    """A kubeconfig held in memory (it carries the cluster's admin credentials): written 0600 into a private temp
    directory only for the client to load, and removed at once."""
    import tempfile  # noqa: PLC0415

    from breakglass.access import kubeapi  # noqa: PLC0415

    d = tempfile.mkdtemp(prefix="breakglass-kubeconfig-")
    path = os.path.join(d, "config")
    try:
        fd = textfile.create_new(path)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return kubeapi.connect(path, context, timeout)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.rmdir(d)
