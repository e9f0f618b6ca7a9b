"""After a change: which apiservers to watch, the wait for their /readyz through restart gaps, and the journal entry.

"Done" is the apiserver's own word: every way out (the API, a node's flag, etcd) ends by waiting for /readyz on every
apiserver it can name, up to ``--wait-timeout``; a refused or reset connection (the kubelet restarting a
crash-looping kube-apiserver) is a probe that says "not answering" and is asked again, so a restart gap is waited
out, not reported. What was seen goes into the run's journal as a ``readiness`` event, so `runs`, `revert` and
report.md say the same as the command did, and a run whose apiservers were not ready at the deadline is
``applied-unverified`` (exit 8) whatever its steps' own checks said.

Where nothing names an apiserver (an etcd run given only etcd's address), the watch is empty with the reason, and
the outcome says that readiness was not checked: never an all-clear.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field

from breakglass.access import readyz
from breakglass.core.errors import BreakglassError
from breakglass.core.journal import Run


@dataclass
class Watch:
    """What to ask after a change: one probe per apiserver (each returns a ``readyz.Readiness``)."""

    probes: list = field(default_factory=list)
    source: str = ""  # where the apiservers came from: --apiserver, the sandbox, the manifest's --secure-port, ...
    unchecked: str = ""  # why there is nothing to watch (then the outcome says so, and the exit code is 8)
    # what else may still block, asked only when an apiserver is not ready: /readyz names hooks, not webhooks
    still_armed: object = None  # () -> list of "kind/NAME (webhook, ...)" still failing closed

    @classmethod
    def urls(cls, urls: list[str], source: str) -> Watch:
        return cls([lambda u=readyz.url_for(u): readyz.probe(u) for u in urls], source)


def all_ready(states: list) -> bool:
    """Every apiserver answered 200 (a 401/403 behind auth is serving, not verified ready)."""
    return bool(states) and all(s.ready is True for s in states)


def wait(watch: Watch, timeout: float, on_tick=None) -> list:
    if not watch.probes:
        return []
    return readyz.wait_for(watch.probes, timeout, on_tick=on_tick)


def to_json(states: list, unchecked: str = "", stopped: bool = False, source: str = "",
            still_armed: list | None = None) -> dict:
    return {"ready": all_ready(states) and not unchecked and not stopped, "source": source,
            "unchecked": unchecked, "stopped": stopped, "still_armed": list(still_armed or []),
            "checks": [{"url": s.url, "ready": s.ready, "status": s.status, "failing": list(s.failing),
                        "detail": s.detail, "restarts": getattr(s, "restarts", 0)} for s in states]}


def record(run: Run, states: list, unchecked: str = "", stopped: bool = False, source: str = "") -> dict:
    """Journal what the wait saw (``stopped``: the engineer stopped waiting before the deadline)."""
    entry = to_json(states, unchecked, stopped, source)
    run.append("readiness", **entry)
    return entry


def armed_in(inventory) -> list[str]:
    """The fail-closed webhooks of an inventory (webhooks.sources), as "kind/NAME (webhook, ...)"."""
    out = []
    for cfg in inventory.configs:
        hooks = [w.name for w in cfg.webhooks if w.failure_policy == "Fail"]
        if hooks:
            out.append(f"{cfg.kind}/{cfg.name} ({', '.join(hooks)})")
    return out


def armed_through_etcd(target) -> list[str]:
    """Still failing closed in etcd (a ``recovery.EtcdTarget``): what an etcd run left behind it."""
    from breakglass.webhooks import sources  # noqa: PLC0415

    conn = target.connect()
    try:
        return armed_in(sources.load_etcd(conn, target.prefix))
    finally:
        conn.close()


def armed_through_api(api) -> list[str]:
    from breakglass.webhooks import sources  # noqa: PLC0415

    return armed_in(sources.load_api_with(api, ("validating", "mutating")))


# -- where a kubeadm manifest's apiserver is --------------------------------------------------------------------

def manifest_url(path: str) -> str:
    """The apiserver a kubeadm manifest runs: its --secure-port and --advertise-address (else 127.0.0.1:6443), so
    the default to watch is what was read, not a guess."""
    flags = manifest_flags(path)
    port = flags.get("secure-port") or "6443"
    host = flags.get("bind-address") or flags.get("advertise-address") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"https://{'[' + host + ']' if ':' in host else host}:{port}"


def manifest_flags(path: str) -> dict[str, str]:
    """kube-apiserver's flags in a static-pod manifest, as its flag parser reads them (--name=value or --name value;
    ``_`` in a name is ``-``); empty when the file cannot be read as one."""
    from breakglass.core import textfile  # noqa: PLC0415

    try:
        doc = textfile.load_yaml(textfile.read(path, "a kube-apiserver manifest"), path, "a manifest")
        containers = doc["spec"]["containers"]
        c = next((c for c in containers if c.get("name") == "kube-apiserver"), containers[0])
        argv = [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
    except (BreakglassError, KeyError, IndexError, TypeError, AttributeError, ValueError):
        return {}
    out, i = {}, 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                value, i = argv[i + 1], i + 1
            out[name.replace("_", "-")] = value
        i += 1
    return out


# -- where an etcd run's apiserver is ------------------------------------------------------------------------------

ETCD_CLIENT_PORT = 2379  # etcd's registered client port: kubeadm's stacked etcd, Talos, RKE2
APISERVER_PORT = 6443


def for_etcd(endpoints: list[str], via_ssh: str | None, state: str | None) -> Watch:
    """The apiserver(s) in front of this etcd: the sandbox's own (its etcd endpoint is this one), else the control-
    plane node etcd runs on (etcd on its registered port 2379, or reached through SSH: kubeadm, Talos and RKE2 put
    kube-apiserver on 6443 of the same node), else none, with the reason."""
    sb = sandbox_for(endpoints, state)
    if sb is not None:
        return Watch.urls([sb], "the sandbox's apiserver")
    if via_ssh:
        return Watch.urls([f"https://{_host_for_url(via_ssh)}:{APISERVER_PORT}"],
                          f"the node etcd was reached through ({via_ssh})")
    hosts = []
    for ep in endpoints:
        try:
            u = urllib.parse.urlsplit(ep if "://" in ep else f"https://{ep}")
            port = u.port
        except ValueError:
            continue
        if u.hostname and port == ETCD_CLIENT_PORT:
            hosts.append(f"https://{_host_for_url(u.hostname)}:{APISERVER_PORT}")
    if hosts:
        return Watch.urls(list(dict.fromkeys(hosts)), "kube-apiserver's port 6443 on etcd's node")
    return Watch(unchecked="no apiserver is known for this etcd: give --apiserver URL to wait for its /readyz")


def _host_for_url(host: str) -> str:
    host = host.split("@")[-1]
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def sandbox_for(endpoints: list[str], state: str | None) -> str | None:
    """The URL of the rehearsal sandbox's apiserver whose etcd is one of ``endpoints``, if one is running."""
    from breakglass import sandbox  # noqa: PLC0415

    directory = sandbox.default_dir(state)
    sb = sandbox.load(directory) if os.path.isdir(directory) else None
    if sb is None or not sb.apiserver or not sb.apiserver.get("url"):
        return None
    norm = {e.rstrip("/") for e in endpoints}
    return sb.apiserver["url"] if sb.endpoint.rstrip("/") in norm else None
