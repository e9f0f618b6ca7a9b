"""Is it safe to undo a run? The one guard every front end reaches before a revert re-arms a webhook.

Reverting puts fail-closed webhooks back in the request path: the configuration an etcd or kubeapi run removed or
relaxed, or, for the admission-plugin flag (Talos, kubeadm, k3s, RKE2), every fail-closed webhook of the cluster.
If a webhook's backend cannot answer, the next write it intercepts fails, and a bootstrap deadlock can come back.

So before a revert the engine asks, for each webhook the revert re-arms, whether its backend answers:
- a ``service:`` webhook: ready endpoints behind the Service, read from etcd (the apiserver may still be down) or
  the API (``webhooks.backend``);
- a ``url:`` webhook: a TCP connection to the URL's host and port from here (the sandbox's webhooks are URLs);
- a Service the diagnosis named, journaled when the run was made (a resumed run checks it again).

What was checked and how goes into the journal (``guard-checked``), and the verdict is ``down`` (refuse unless
overridden), ``ready`` or ``unchecked`` (nothing could be read: the front end says so; the wizard then asks for the
typed override as for ``down``).
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from dataclasses import asdict, dataclass, field

from breakglass.core.errors import BreakglassError

CONNECT_TIMEOUT = 3.0


@dataclass
class Hook:
    """A webhook the revert puts back in the path."""

    configuration: str  # kind/NAME
    webhook: str
    service: str | None = None  # NAMESPACE/NAME
    url: str | None = None


@dataclass
class BackendState:
    what: str  # "service NS/NAME" or "url https://..."
    ready: bool | None  # None: could not be read
    detail: str
    webhooks: list = field(default_factory=list)
    check: str = ""  # the command an engineer runs to see it for themselves


@dataclass
class Verdict:
    backends: list  # of BackendState
    unchecked: str = ""  # why nothing could be checked (no access, no webhook known)

    @property
    def down(self) -> list:
        return [b for b in self.backends if b.ready is False]

    @property
    def state(self) -> str:
        if self.down:
            return "down"
        if self.backends and all(b.ready for b in self.backends):
            return "ready"
        return "unchecked"

    def lines(self) -> list[str]:
        out = [f"{b.detail}" + ("" if b.ready else " — do not revert yet" if b.ready is False else "")
               for b in self.backends]
        if self.unchecked:
            out.append(f"backend not checked: {self.unchecked}")
        return out

    def refusal(self) -> str:
        names = sorted({w for b in self.down for w in b.webhooks})
        checks = "; ".join(b.check for b in self.down if b.check)
        return ("the webhook's backend is not ready, so reverting would re-arm "
                + (", ".join(names) if names else "a fail-closed webhook") + " while it cannot answer: "
                + "; ".join(b.detail for b in self.down) + (f"; check with: {checks}" if checks else ""))

    def to_json(self) -> dict:
        return {"state": self.state, "backends": [asdict(b) for b in self.backends], "unchecked": self.unchecked}


def _fail_closed(obj: dict, kind: str) -> list[Hook]:
    """The fail-closed webhooks of a configuration object (JSON shape)."""
    from breakglass.webhooks import model  # noqa: PLC0415

    try:
        cfg = model.from_json(obj, "backup")
    except BreakglassError:
        return []
    out = []
    for w in cfg.webhooks:
        if w.failure_policy != "Fail":
            continue
        out.append(Hook(f"{cfg.kind}/{cfg.name}", w.name, w.service, None if w.service else w.url))
    return out


def hooks_from_backups(run, st) -> list[Hook]:
    """What an etcd or kubeapi run's revert puts back: the backed-up configurations' fail-closed webhooks."""
    from breakglass.webhooks import codec  # noqa: PLC0415

    out: list[Hook] = []
    for s in st.steps:
        b = s.backup or {}
        obj = None
        try:
            if "value" in b and b.get("value_sha256"):
                obj = codec.decode_value(run.read_backup(b["value"], b["value_sha256"])).obj
            elif "object" in b and b.get("object_sha256"):
                obj = json.loads(run.read_backup(b["object"], b["object_sha256"]))
        except (BreakglassError, OSError, ValueError):
            obj = None
        if isinstance(obj, dict):
            out += _fail_closed(obj, s.step.data.get("kind", ""))
    return out


def hooks_from_cluster(inventory) -> list[Hook]:
    """Every fail-closed webhook a cluster holds: what re-enabling the webhook admission plugins re-arms."""
    out: list[Hook] = []
    for cfg in inventory.configs:
        out += _fail_closed(cfg.raw, cfg.kind) if cfg.raw else [
            Hook(f"{cfg.kind}/{cfg.name}", w.name, w.service, None if w.service else w.url)
            for w in cfg.webhooks if w.failure_policy == "Fail"]
    return out


def hooks_journaled(run) -> list[Hook]:
    """Services the diagnosis named when the run was made (``services`` in its start, or a ``guard`` event)."""
    out = []
    for e in run.events():
        if e.get("event") in ("guard", "run-started") and isinstance(e.get("services"), list):
            for svc in e.get("services") or []:
                if isinstance(svc, str) and svc.count("/") == 1:
                    out.append(Hook("(named by the diagnosis)", "", svc, None))
    return out


def _url_state(url: str) -> BackendState:
    """Whether something accepts connections at a url: webhook's host and port, seen from here."""
    try:
        u = urllib.parse.urlsplit(url)
        host, port = u.hostname, u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return BackendState(f"url {url}", None, f"backend url {url}: not a URL")
    if not host:
        return BackendState(f"url {url}", None, f"backend url {url}: no host")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            return BackendState(f"url {url}", True, f"backend url {url}: accepts connections (checked from here)")
    except OSError as e:
        why = e.strerror or type(e).__name__
        return BackendState(f"url {url}", False, f"backend url {url}: {why.lower()} (checked from here)")


def check(hooks: list[Hook], etcd=None, api=None) -> Verdict:
    """Each distinct backend of ``hooks``, read through ``etcd`` (an EtcdTarget) first, else ``api``."""
    from breakglass.webhooks import backend  # noqa: PLC0415

    by_backend: dict[str, BackendState] = {}
    for h in hooks:
        key = f"service {h.service}" if h.service else f"url {h.url}" if h.url else None
        if key is None:
            continue
        if key not in by_backend:
            if h.url:
                by_backend[key] = _url_state(h.url)
            else:
                by_backend[key] = _service_state(h.service, etcd, api, backend)
        if h.webhook and h.webhook not in by_backend[key].webhooks:
            by_backend[key].webhooks.append(h.webhook)
    verdict = Verdict(list(by_backend.values()))
    if not hooks:
        verdict.unchecked = "no fail-closed webhook is known to this run"
    elif not verdict.backends:
        verdict.unchecked = "the webhooks name neither a Service nor a URL"
    return verdict


def _service_state(service: str, etcd, api, backend) -> BackendState:
    ns, name = service.split("/", 1)
    check = f"kubectl -n {ns} get endpoints {name}"
    errors = []
    for source, read in (("etcd", lambda: etcd.backend(service) if etcd is not None else None),
                         ("API", lambda: backend.from_api(api, ns, name) if api is not None else None)):
        try:
            b = read()
        except BreakglassError as e:
            errors.append(f"{source}: {e}")
            continue
        if b is not None:
            # ready endpoints are what answers the apiserver's call (the Service object itself routes nothing)
            ready = b.ready > 0
            detail = b.line() if ready else f"{b.line()}: no ready endpoints"
            return BackendState(f"service {service}", ready, detail, check=check)
    why = "; ".join(errors) or "no etcd or apiserver access to read it with"
    return BackendState(f"service {service}", None, f"backend {service}: not checked ({why})", check=check)
