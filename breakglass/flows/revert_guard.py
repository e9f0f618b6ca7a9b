"""Is it safe to undo a run? The one guard every front end reaches before a revert re-arms a webhook.

Reverting puts fail-closed webhooks back in the request path: the configuration an etcd or kubeapi run removed or
relaxed, or, for the admission-plugin flag (Talos, kubeadm, k3s, RKE2), every fail-closed webhook of the cluster.
If a webhook's backend cannot answer, the next write it intercepts fails, and a bootstrap deadlock can come back.

So before a revert the engine asks, for each webhook the revert re-arms, whether its backend can answer the call
the apiserver makes (``webhooks.readiness``, one reading per distinct call):
- a ``url:`` webhook: that call, made from here (TLS verified against the webhook's caBundle, an AdmissionReview
  answered within its timeoutSeconds); a refused or silent URL is down, as it is for the apiserver on this node;
- a ``service:`` webhook: the Service, read from etcd (the apiserver may still be down) or the API, must have the
  port the webhook names and ready endpoints serving it, and an endpoint reachable from here must answer the call
  (checked as ``SERVICE.NAMESPACE.svc``); endpoints that cannot be reached from here leave it unchecked;
- a Service the diagnosis named, journaled when the run was made (a resumed run checks it again): read, not
  called (the run knows no caBundle or path for it).

What was checked and how goes into the journal (``guard-checked``), and the verdict is ``down`` (refuse unless
overridden), ``ready`` (every backend answered) or ``unchecked`` (not all could be read or called: the front end
says so; the wizard then asks for the typed override as for ``down``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from breakglass.core.errors import BreakglassError


@dataclass
class Hook:
    """A webhook the revert puts back in the path, with what the apiserver's call to it needs."""

    configuration: str  # kind/NAME
    webhook: str
    service: str | None = None  # NAMESPACE/NAME
    url: str | None = None
    ca_bundle: str | None = None  # clientConfig.caBundle (base64); None: the system's roots
    timeout: int = 10  # timeoutSeconds
    path: str | None = None  # clientConfig.service.path
    port: int | None = None  # clientConfig.service.port (None: 443)
    review_versions: tuple[str, ...] = ("v1",)
    mutating: bool = False
    known: bool = False  # built from the webhook's configuration (not only a Service a diagnosis named)
    source: object = field(default=None, repr=False, compare=False)  # the model.Webhook (for the heal model's case)

    @classmethod
    def of(cls, configuration: str, w) -> Hook:
        """From a ``model.Webhook`` of ``configuration`` (kind/NAME)."""
        return cls(configuration, w.name, w.service, None if w.service else w.url, w.ca_bundle,
                   w.timeout_seconds or 10, w.path, w.service_port, tuple(w.review_versions), w.type == "mutating",
                   True, w)

    def spec(self):
        from breakglass.webhooks import readiness  # noqa: PLC0415

        return readiness.Spec(self.service, None if self.service else self.url, self.port, self.path,
                              self.ca_bundle, self.timeout, tuple(self.review_versions), self.mutating, self.known)


@dataclass
class BackendState:
    what: str  # "service NS/NAME" (and the port and path when they are not the default) or "url https://..."
    ready: bool | None  # None: unchecked (could not be read, or not callable from here)
    detail: str
    webhooks: list = field(default_factory=list)
    check: str = ""  # the command an engineer runs to see it for themselves
    policy: bool = False  # an admission policy's trial through the apiserver (webhooks.policy_trial), not a backend


# what an engineer runs to see every webhook's backend for themselves, when breakglass could read none of them
CLUSTER_CHECKS = ("kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations",
                  "kubectl get services,endpointslices -A")


@dataclass
class Verdict:
    backends: list  # of BackendState
    unchecked: str = ""  # why nothing could be checked (no access, no webhook known)
    # set by flows.recovery: nothing could read what the revert re-arms (a blind re-arm, refused there), what the
    # cluster was read through, and why there is no verdict to give (the revert re-arms no fail-closed webhook)
    blind: bool = False
    read_through: str = ""
    nothing_armed: str = ""
    heal: dict | None = None  # set by flows.recovery for down backends: webhooks.heal_safety's Case, as JSON

    @property
    def down(self) -> list:
        return [b for b in self.backends if b.ready is False]

    @property
    def state(self) -> str:
        if self.down:
            # the heal model's case: re-armed with its backend down, the webhook refuses only what it should
            return "can-heal" if (self.heal or {}).get("safe") else "down"
        if self.backends and all(b.ready for b in self.backends):
            return "ready"
        if self.nothing_armed and not self.backends:  # read, and there is no fail-closed webhook to re-arm
            return "ready"
        return "unchecked"

    def lines(self) -> list[str]:
        out = [f"{b.detail}" + ("" if b.ready else " — do not revert yet" if b.ready is False else "")
               for b in self.backends]
        if self.heal:
            out.append(self._heal_line())
        if self.nothing_armed:
            out.append(self.nothing_armed)
        if self.unchecked:
            out.append(f"backend not checked: {self.unchecked}")
        if self.read_through and self.backends:
            out.append(f"(the cluster read through {self.read_through})")
        return out

    def _heal_line(self) -> str:
        h = self.heal or {}
        if h.get("safe"):
            return "safe to re-arm now, with its backend still down: " + "; ".join(h.get("reasons") or [])
        blockers = h.get("blockers") or []  # all of them in the JSON; the first few said
        return ("not safe to re-arm while its backend is down: " + "; ".join(blockers[:3])
                + (f" (and {len(blockers) - 3} more)" if len(blockers) > 3 else ""))

    def refusal(self) -> str:
        if self.down and all(b.policy for b in self.down):
            return ("reverting would put back an admission policy that refuses writes the cluster needs to come back: "
                    + "; ".join(b.detail for b in self.down))
        names = sorted({w for b in self.down for w in b.webhooks})
        checks = "; ".join(b.check for b in self.down if b.check)
        return ("the webhook's backend is not ready, so reverting would re-arm "
                + (", ".join(names) if names else "a fail-closed webhook") + " while it cannot answer: "
                + "; ".join(b.detail for b in self.down) + (f"; {self._heal_line()}" if self.heal else "")
                + (f"; check with: {checks}" if checks else ""))

    def to_json(self) -> dict:
        return {"state": self.state, "backends": [asdict(b) for b in self.backends], "unchecked": self.unchecked,
                "blind": self.blind, "read_through": self.read_through, "nothing_armed": self.nothing_armed,
                "heal": self.heal}


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
        out.append(Hook.of(f"{cfg.kind}/{cfg.name}", w))
    return out


def hooks_from_backups(run, st, unread: list | None = None) -> list[Hook]:
    """What an etcd or kubeapi run's revert puts back: the backed-up configurations' fail-closed webhooks.
    ``unread`` (when given) gets the id of each backed-up step whose object could not be read: what it puts back
    is then not known."""
    from breakglass.webhooks import codec  # noqa: PLC0415

    out: list[Hook] = []
    for s in st.steps:
        b = s.backup or {}
        if not b:
            continue
        obj = None
        try:
            if "value" in b and b.get("value_sha256"):
                obj = codec.decode_value(run.read_backup(b["value"], b["value_sha256"])).obj
            elif "object" in b and b.get("object_sha256"):
                obj = json.loads(run.read_backup(b["object"], b["object_sha256"]))
            elif "file" in b and b.get("file_sha256"):  # a staticManifestsDir file: the webhooks it set to Ignore
                out += _static_fail_closed(run.read_backup(b["file"], b["file_sha256"]), s.step)
                continue
        except (BreakglassError, OSError, ValueError):
            obj = None
        if isinstance(obj, dict):
            out += _fail_closed(obj, s.step.data.get("kind", ""))
        elif unread is not None:
            unread.append(s.step.id)
    return out


def _static_fail_closed(data: bytes, step) -> list[Hook]:
    """The fail-closed webhooks of a backed-up manifest file that the run set to Ignore: what its revert re-arms."""
    from breakglass.webhooks import sources  # noqa: PLC0415

    changed = step.data.get("policies") if isinstance(step.data.get("policies"), dict) else {}
    inv = sources.load_texts([(step.target, data.decode("utf-8", "replace"))], static=True)
    return [Hook.of(f"{cfg.kind}/{cfg.name}", w) for cfg in inv.configs for w in cfg.webhooks
            if w.failure_policy == "Fail" and f"{cfg.name}/{w.name}" in changed]


def hooks_from_cluster_configs(configs) -> list[Hook]:
    """Every fail-closed webhook of the cluster's admission configurations (``model.AdmissionConfig``) as read:
    what re-enabling the webhook admission plugins re-arms."""
    out: list[Hook] = []
    for cfg in configs:
        out += _fail_closed(cfg.raw, cfg.kind) if cfg.raw else [
            Hook.of(f"{cfg.kind}/{cfg.name}", w) for w in cfg.webhooks if w.failure_policy == "Fail"]
    return out


def policies_from_backups(run, st) -> list[dict]:
    """The admission policies and bindings an etcd or kubeapi run's revert puts back, as backed up."""
    from breakglass.flows.rearm_check import backed_up  # noqa: PLC0415
    from breakglass.webhooks import model  # noqa: PLC0415

    return backed_up(run, st, tuple(model.KIND_NAME[k] for k in model.POLICY_KINDS))


def policy_pairs(objs: list[dict], api) -> list[tuple[dict, dict]] | str:
    """(policy, binding) pairs the restored objects put in force: a binding with its policy (restored too, or as
    the apiserver serves it), a policy with the bindings the apiserver serves for it. A string: why not."""
    from breakglass.webhooks import policy_trial  # noqa: PLC0415

    pairs = []
    for kind, (ppath, bpath) in policy_trial.PATHS.items():
        policies = {o["metadata"]["name"]: o for o in objs if o.get("kind") == kind}
        bindings = [o for o in objs if o.get("kind") == kind + "Binding"]
        try:
            for b in bindings:
                name = str((b.get("spec") or {}).get("policyName", ""))
                pol = policies.get(name)
                if pol is None:
                    status, pol = api.request("GET", f"{ppath}/{name}")
                    if status != 200:
                        continue  # a binding to no policy refuses nothing
                    pol = {**pol, "kind": kind}
                pairs.append((pol, b))
            bound = {str((b.get("spec") or {}).get("policyName", "")) for b in bindings}
            for name, pol in policies.items():
                if name in bound:
                    continue
                status, doc = api.request("GET", bpath)
                if status != 200:
                    return f"could not list the bindings ({status})"
                pairs += [(pol, b) for b in doc.get("items") or [] if (b.get("spec") or {}).get("policyName") == name]
        except BreakglassError as e:
            return str(e)
    return pairs


def try_policies(objs: list[dict], api) -> list[BackendState]:
    """Each restored policy's trial through the apiserver (webhooks.policy_trial) as a guard reading."""
    from breakglass.webhooks import policy_trial  # noqa: PLC0415

    if not objs:
        return []
    names = ", ".join(sorted({o["metadata"]["name"] for o in objs}))
    if api is None:
        return [BackendState(f"policy {names}", None, f"admission policy {names}: not tried, no apiserver to ask",
                             [names], policy=True)]
    pairs = policy_pairs(objs, api)
    if isinstance(pairs, str):
        return [BackendState(f"policy {names}", None, f"admission policy {names}: not tried: {pairs}", [names],
                             policy=True)]
    out = []
    for pol, b in pairs:
        t = policy_trial.run(api, pol, b)
        kind = str(pol.get("kind", "ValidatingAdmissionPolicy")).lower()
        out.append(BackendState(f"policy {t.policy} (binding {t.binding})",
                                None if t.refuses is None else not t.refuses, t.detail, [f"policy {t.policy}"],
                                check=f"kubectl get {kind} {t.policy} -o yaml", policy=True))
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


def check(hooks: list[Hook], etcd=None, api=None) -> Verdict:
    """Each distinct backend call of ``hooks``, a Service read through ``etcd`` (an EtcdTarget) first, else
    ``api``; each Service read once."""
    from breakglass.webhooks import readiness  # noqa: PLC0415

    by_call: dict[tuple, BackendState] = {}
    services: dict[str, object] = {}  # NAMESPACE/NAME -> Backend, or the reason it could not be read
    for h in hooks:
        if not (h.service or h.url):
            continue
        spec = h.spec()
        if spec.key not in by_call:
            if h.service:
                if h.service not in services:
                    services[h.service] = _read_service(h.service, etcd, api)
                b = services[h.service]
                r = readiness.unread(spec, b) if isinstance(b, str) else readiness.of_service(spec, b)
            else:
                r = readiness.of_url(spec, h.configuration, h.webhook)
            by_call[spec.key] = BackendState(r.what, r.ready, r.detail, check=r.check)
        if h.webhook and h.webhook not in by_call[spec.key].webhooks:
            by_call[spec.key].webhooks.append(h.webhook)
    verdict = Verdict(list(by_call.values()))
    if not hooks:
        verdict.unchecked = "no fail-closed webhook is known to this run"
    elif not verdict.backends:
        verdict.unchecked = "the webhooks name neither a Service nor a URL"
    return verdict


def _read_service(service: str, etcd, api):
    """The Service's Backend from etcd, else the API; or why neither could read it."""
    from breakglass.webhooks import backend  # noqa: PLC0415

    ns, name = service.split("/", 1)
    errors = []
    for source, read in (("etcd", lambda: etcd.backend(service) if etcd is not None else None),
                         ("API", lambda: backend.from_api(api, ns, name) if api is not None else None)):
        try:
            b = read()
        except BreakglassError as e:
            errors.append(f"{source}: {e}")
            continue
        if b is not None:
            return b
    return "; ".join(errors) or "no etcd or apiserver access to read it with"
