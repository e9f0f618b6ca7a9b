"""Admission configurations as breakglass reasons about them.

Built from the JSON shape of the objects (what ``kubectl get -o json`` prints, what the
codec decodes from etcd), with API defaults applied: v1 webhooks default to
``failurePolicy: Fail``, ``timeoutSeconds: 10`` and ``matchPolicy: Equivalent``; v1beta1
ones to ``Ignore``, 30 and ``Exact``. Admission policies default to ``Fail``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from breakglass.errors import BadInput

VALIDATING, MUTATING = "validating", "mutating"
VAP, VAP_BINDING, MAP, MAP_BINDING = "vap", "vapbinding", "map", "mapbinding"

KIND_OF = {
    "ValidatingWebhookConfiguration": VALIDATING,
    "MutatingWebhookConfiguration": MUTATING,
    "ValidatingAdmissionPolicy": VAP,
    "ValidatingAdmissionPolicyBinding": VAP_BINDING,
    "MutatingAdmissionPolicy": MAP,
    "MutatingAdmissionPolicyBinding": MAP_BINDING,
}
KIND_NAME = {v: k for k, v in KIND_OF.items()}
RESOURCE_OF = {
    VALIDATING: "validatingwebhookconfigurations",
    MUTATING: "mutatingwebhookconfigurations",
    VAP: "validatingadmissionpolicies",
    VAP_BINDING: "validatingadmissionpolicybindings",
    MAP: "mutatingadmissionpolicies",
    MAP_BINDING: "mutatingadmissionpolicybindings",
}


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...]
    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = "*"
    resource_names: tuple[str, ...] = ()  # admission policies only

    @classmethod
    def from_json(cls, r: dict) -> Rule:
        return cls(tuple(r.get("operations") or ()), tuple(r.get("apiGroups") or ()),
                   tuple(r.get("apiVersions") or ()), tuple(r.get("resources") or ()), r.get("scope") or "*",
                   tuple(r.get("resourceNames") or ()))

    def describe(self) -> str:
        groups = ",".join(g or "core" for g in self.api_groups) or "-"
        return f"{'/'.join(self.operations) or '-'} {groups}:{','.join(self.resources) or '-'}" + (
            f" ({self.scope})" if self.scope != "*" else "")


@dataclass
class Webhook:
    name: str
    type: str  # validating | mutating
    failure_policy: str  # effective value
    failure_policy_explicit: bool
    rules: list[Rule]
    timeout_seconds: int
    match_policy: str
    namespace_selector: dict | None
    object_selector: dict | None
    match_conditions: list[dict]
    service: str | None  # namespace/name
    service_port: int | None
    path: str | None
    url: str | None
    side_effects: str | None
    reinvocation_policy: str | None = None

    @property
    def backend(self) -> str:
        if self.service:
            return f"service {self.service}:{self.service_port or 443}{self.path or ''}"
        return f"url {self.url}" if self.url else "none"


@dataclass
class AdmissionConfig:
    """One configuration object: a webhook configuration, an admission policy, or a binding."""

    kind: str  # validating | mutating | vap | vapbinding | map | mapbinding
    api_version: str
    name: str
    source: str  # file path#document, etcd key, or api
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owners: list[str] = field(default_factory=list)
    webhooks: list[Webhook] = field(default_factory=list)
    # admission policies and bindings
    failure_policy: str | None = None
    rules: list[Rule] = field(default_factory=list)
    exclude_rules: list[Rule] = field(default_factory=list)
    match_conditions: list[dict] = field(default_factory=list)
    namespace_selector: dict | None = None
    object_selector: dict | None = None
    policy_name: str | None = None  # bindings
    validation_actions: list[str] = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False, metadata={"internal": True})

    @property
    def kind_name(self) -> str:
        return KIND_NAME[self.kind]

    @property
    def resource(self) -> str:
        return RESOURCE_OF[self.kind]


def _webhook(w: dict, wtype: str, beta: bool) -> Webhook:
    if not isinstance(w, dict) or not w.get("name"):
        raise BadInput("a webhook without a name")
    cc = w.get("clientConfig") or {}
    svc = cc.get("service") or None
    return Webhook(
        name=str(w["name"]), type=wtype,
        failure_policy=w.get("failurePolicy") or ("Ignore" if beta else "Fail"),
        failure_policy_explicit="failurePolicy" in w,
        rules=[Rule.from_json(r) for r in w.get("rules") or [] if isinstance(r, dict)],
        timeout_seconds=int(w.get("timeoutSeconds") or (30 if beta else 10)),
        match_policy=w.get("matchPolicy") or ("Exact" if beta else "Equivalent"),
        namespace_selector=w.get("namespaceSelector"), object_selector=w.get("objectSelector"),
        match_conditions=list(w.get("matchConditions") or []),
        service=f"{svc.get('namespace', '')}/{svc.get('name', '')}" if svc else None,
        service_port=svc.get("port") if svc else None, path=svc.get("path") if svc else None,
        url=cc.get("url"), side_effects=w.get("sideEffects"),
        reinvocation_policy=w.get("reinvocationPolicy"),
    )


def _match_resources(cfg: AdmissionConfig, mr: dict | None) -> None:
    mr = mr or {}
    cfg.rules = [Rule.from_json(r) for r in mr.get("resourceRules") or [] if isinstance(r, dict)]
    cfg.exclude_rules = [Rule.from_json(r) for r in mr.get("excludeResourceRules") or [] if isinstance(r, dict)]
    cfg.namespace_selector = mr.get("namespaceSelector")
    cfg.object_selector = mr.get("objectSelector")


def from_json(obj: dict, source: str) -> AdmissionConfig:
    """Build the model from one object; BadInput if it is not an admission configuration."""
    if not isinstance(obj, dict):
        raise BadInput(f"{source}: not an object")
    kind_name = obj.get("kind")
    if kind_name not in KIND_OF:
        raise BadInput(f"{source}: kind {kind_name!r} is not an admission configuration")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict) or not meta.get("name"):
        raise BadInput(f"{source}: {kind_name} without metadata.name")
    kind = KIND_OF[kind_name]
    api_version = str(obj.get("apiVersion") or "")
    cfg = AdmissionConfig(
        kind=kind, api_version=api_version, name=str(meta["name"]), source=source,
        labels=dict(meta.get("labels") or {}), annotations=dict(meta.get("annotations") or {}),
        owners=[f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or [] if isinstance(o, dict)],
        raw=obj,
    )
    try:
        if kind in (VALIDATING, MUTATING):
            beta = api_version.endswith("/v1beta1")
            hooks = obj.get("webhooks") or []
            if not isinstance(hooks, list):
                raise BadInput(f"{source}: webhooks is not a list")
            cfg.webhooks = [_webhook(w, kind, beta) for w in hooks]
        else:
            spec = obj.get("spec") or {}
            if kind in (VAP, MAP):
                cfg.failure_policy = spec.get("failurePolicy") or "Fail"
                cfg.match_conditions = list(spec.get("matchConditions") or [])
                _match_resources(cfg, spec.get("matchConstraints"))
            else:
                cfg.policy_name = spec.get("policyName")
                cfg.validation_actions = list(spec.get("validationActions") or [])
                _match_resources(cfg, spec.get("matchResources"))
    except BadInput as e:
        raise BadInput(f"{source}: {kind_name} {cfg.name}: {e}") from None
    except (AttributeError, TypeError, ValueError) as e:
        raise BadInput(f"{source}: {kind_name} {cfg.name} is malformed ({e})") from None
    return cfg
