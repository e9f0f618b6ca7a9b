"""Which Kubernetes distribution a control-plane node runs: kubeadm, k3s, rke2, talos or unknown, with the evidence.

Each way out is distribution-specific (kubeadm's static-pod manifest, k3s' and RKE2's config.yaml, Talos' machine
config; etcd's certificates in a different place on each, or no etcd at all but kine on a unix socket), so breakglass
looks before it offers one. One shell command lists what exists of a fixed set of paths; nothing is changed, nothing
is read but /etc/os-release. The checks run in a fixed order and every one is kept as evidence, found or not, so a
wrong guess can be seen for what it was.

Paths are the distributions' own defaults: k3s and RKE2 keep their server state in /var/lib/rancher/<k3s|rke2>/server
(the etcd client certificate files are named in k3s' pkg/daemons/control/deps/deps.go: tls/etcd/server-ca.crt,
tls/etcd/client.crt, tls/etcd/client.key; RKE2 uses the same code with its own data directory), a k3s server without
embedded etcd serves kine on server/kine.sock, kubeadm writes /etc/kubernetes/manifests/kube-apiserver.yaml.

``root`` is the node's filesystem root as the SSH session sees it: "/" on the node itself, /host in a debug container
that mounts the node there (``kubectl debug node/...``), a directory in the tests. $BREAKGLASS_NODE_ROOT sets it.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from breakglass.access.layouts import DISTROS
from breakglass.core.errors import BadInput

NAMES = ("kubeadm", "k3s", "rke2", "talos", "unknown")
ETCD_PORT = 2379
UNIT_DIRS = ("/etc/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")


def rancher(distro: str) -> dict:
    """k3s' and RKE2's paths (their layouts differ only in the name); the config file and the service are the
    ones the k3s/RKE2 remedy edits and restarts (``access.layouts.DISTROS``)."""
    server = f"/var/lib/rancher/{distro}/server"
    d = DISTROS[distro]
    return {"server": server, "config": d.config, "service": d.service, "unit": f"{d.service}.service",
            "cacert": f"{server}/tls/etcd/server-ca.crt", "cert": f"{server}/tls/etcd/client.crt",
            "key": f"{server}/tls/etcd/client.key", "etcd_db": f"{server}/db/etcd", "kine": f"{server}/kine.sock",
            "sqlite": f"{server}/db/state.db"}


KUBEADM = {"manifest": "/etc/kubernetes/manifests/kube-apiserver.yaml",
           "cacert": "/etc/kubernetes/pki/etcd/ca.crt",
           "cert": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
           "key": "/etc/kubernetes/pki/apiserver-etcd-client.key"}

# What each distribution offers as a way out besides the apiserver (which is always offered).
WAYS_OUT = {"kubeadm": ("kubeadm", "etcd"), "k3s": ("k3s", "etcd"), "rke2": ("rke2", "etcd"),
            "talos": ("talos", "etcd"), "unknown": ("talos", "kubeadm", "k3s", "rke2", "etcd")}


@dataclass
class EtcdFound:
    """How etcd (or kine) is reached on the node, as the node sees it."""

    kind: str  # tls (etcd with client certificates) | kine (a unix socket, no TLS)
    endpoint: str  # https://127.0.0.1:2379 | unix:///var/lib/rancher/k3s/server/kine.sock
    certs: dict = field(default_factory=dict)  # cacert, cert, key: paths on the node

    @property
    def socket(self) -> str | None:
        return self.endpoint[len("unix://"):] if self.endpoint.startswith("unix://") else None


@dataclass
class Distro:
    host: str
    name: str  # one of NAMES
    root: str
    evidence: list[str]  # every check in order: "found PATH (what)" or "no PATH"
    etcd: EtcdFound | None = None

    @property
    def found(self) -> list[str]:
        return [e[len("found "):] for e in self.evidence if e.startswith("found ")]

    def summary(self) -> str:
        what = "; ".join(self.found) or "none of the known markers"
        verdict = f"runs {self.name}" if self.name != "unknown" else "runs no distribution breakglass knows"
        return f"{self.host} {verdict} (found: {what})"

    def ways_out(self) -> tuple[str, ...]:
        return ("kubeapi",) + WAYS_OUT[self.name]


def node_root(root: str | None = None) -> str:
    root = root or os.environ.get("BREAKGLASS_NODE_ROOT") or "/"
    if not root.startswith("/") or any(c in root for c in "\0\n\r"):
        raise BadInput(f"node root {root!r} must be an absolute path on the node")
    return root.rstrip("/") or "/"


def on(root: str, path: str) -> str:
    """``path`` (absolute on the node) under ``root``."""
    return path if root == "/" else root + path


def _probe(node, root: str, paths: list[str]) -> tuple[dict[str, str], str]:
    """What each path is on the node (S socket, D directory, F file, - absent), and /etc/os-release's ID line."""
    quoted = " ".join(shlex.quote(on(root, p)) for p in paths)
    osr = shlex.quote(on(root, "/etc/os-release"))
    script = (f'for p in {quoted}; do if [ -S "$p" ]; then t=S; elif [ -d "$p" ]; then t=D; '
              f'elif [ -f "$p" ]; then t=F; else t=-; fi; printf "%s %s\\n" "$t" "$p"; done; '
              f"grep -E '^ID=' {osr} 2>/dev/null; true")
    r = node.run(script)
    kinds: dict[str, str] = {}
    os_id = ""
    for line in r.out.decode("utf-8", "replace").splitlines():
        if line.startswith("ID="):
            os_id = line[3:].strip().strip('"')
        elif len(line) > 2 and line[1] == " ":
            kinds[line[2:]] = line[0]
    return {p: kinds.get(on(root, p), "-") for p in paths}, os_id


_WHAT = {"S": "socket", "D": "directory", "F": "file"}


def detect(node, root: str | None = None) -> Distro:
    """Look at the node and say which distribution it runs. Checked in this order: Talos (os-release), RKE2, k3s
    (their server directory, unit and config), kubeadm (the apiserver manifest); a node with markers of more than one
    server distribution is 'unknown', with all of them in the evidence."""
    root = node_root(root)
    k3s, rke2 = rancher("k3s"), rancher("rke2")
    units = {d: [f"{u}/{r['unit']}" for u in UNIT_DIRS] for d, r in (("k3s", k3s), ("rke2", rke2))}
    order = [("rke2", [rke2["server"], *units["rke2"], rke2["config"]]),
             ("k3s", [k3s["server"], *units["k3s"], k3s["config"]]),
             ("kubeadm", [KUBEADM["manifest"]])]
    etcd_paths = [p for r in (rke2, k3s) for p in (r["cacert"], r["cert"], r["key"], r["etcd_db"], r["kine"],
                                                   r["sqlite"])] + [KUBEADM["cacert"], KUBEADM["cert"], KUBEADM["key"]]
    kinds, os_id = _probe(node, root, [p for _, ps in order for p in ps] + etcd_paths)

    evidence = [f"found /etc/os-release ID={os_id}" if os_id else "no ID in /etc/os-release"]
    if os_id == "talos":
        return Distro(node.host, "talos", root, evidence)
    hits = []
    for name, paths in order:
        seen = [p for p in paths if kinds[p] != "-"]
        # a unit file that is not there is not worth a line each; the server directory and config are
        evidence += [f"found {on(root, p)} ({_WHAT[kinds[p]]})" if kinds[p] != "-" else f"no {on(root, p)}"
                     for p in paths if kinds[p] != "-" or "/systemd/" not in p]
        # a server directory or a unit (k3s agents have /etc/rancher/k3s too, but no server directory)
        if any(p == paths[0] or "/systemd/" in p or name == "kubeadm" for p in seen):
            hits.append(name)
    if len(hits) != 1:
        if len(hits) > 1:
            evidence.append(f"markers of {' and '.join(hits)} on one node: not guessing which serves the apiserver")
        return Distro(node.host, "unknown", root, evidence)
    name = hits[0]
    d = Distro(node.host, name, root, evidence)
    d.etcd = _etcd(d, kinds, k3s if name == "k3s" else rke2)
    return d


def _etcd(d: Distro, kinds: dict, r: dict) -> EtcdFound | None:
    """Where etcd is, by what the node has: embedded etcd's client certificates first, then k3s' kine socket."""
    root = d.root
    if d.name == "kubeadm":
        files = {k: KUBEADM[k] for k in ("cacert", "cert", "key")}
    else:
        files = {k: r[k] for k in ("cacert", "cert", "key")}
    have = [k for k, p in files.items() if kinds[p] == "F"]
    d.evidence += [f"found {on(root, p)} (etcd {k})" if kinds[p] == "F" else f"no {on(root, p)}"
                   for k, p in files.items()]
    if len(have) == 3:
        return EtcdFound("tls", f"https://127.0.0.1:{ETCD_PORT}", {k: on(root, p) for k, p in files.items()})
    if d.name == "kubeadm":
        return None
    sock = kinds[r["kine"]]
    d.evidence.append(f"found {on(root, r['kine'])} ({_WHAT[sock]})" if sock != "-" else f"no {on(root, r['kine'])}")
    if sock == "S":
        return EtcdFound("kine", "unix://" + on(root, r["kine"]))
    for p, what in ((r["etcd_db"], "embedded etcd's data"), (r["sqlite"], "kine's SQLite database")):
        if kinds[p] != "-":
            d.evidence.append(f"found {on(root, p)} ({what})")
    return None


def etcd_route(node, root: str | None = None) -> tuple[Distro, EtcdFound]:
    """The node's etcd as its distribution sets it up, or BadInput in one line saying what was looked for."""
    d = detect(node, root)
    if d.etcd is None:
        looked = "; ".join(d.evidence[-6:])
        raise BadInput(f"{d.summary()}, but no etcd client certificates or kine socket where it keeps them "
                       f"({looked})",
                       hint="give the paths on the node: --etcd-cacert, --etcd-cert, --etcd-key "
                            "(and --etcd-endpoints as the node sees it)")
    return d, d.etcd
