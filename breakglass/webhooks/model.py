"""Admission configurations as breakglass reasons about them.

Built from the JSON shape of the objects (what ``kubectl get -o json`` prints, what the
codec decodes from etcd), with API defaults applied: v1 webhooks default to
``failurePolicy: Fail``, ``timeoutSeconds: 10`` and ``matchPolicy: Equivalent``; v1beta1
ones to ``Ignore``, 30 and ``Exact``. Admission policies default to ``Fail``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from breakglass.core.errors import BadInput

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
POLICY_KINDS = (VAP, VAP_BINDING, MAP, MAP_BINDING)  # admission policies and their bindings: no webhook, no backend


def singular(resource: str) -> str:
    """kubectl's singular of a plural resource: ...policies is ...policy, ...configurations ...configuration."""
    return resource[:-3] + "y" if resource.endswith("ies") else resource[:-1]


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
    # what the apiserver's call needs besides the address: the roots it trusts (clientConfig.caBundle, base64 as
    # in JSON; None: the system's) and the AdmissionReview versions it may send, in the webhook's order. Internal:
    # the JSON output has never carried them (a caBundle is kilobytes of base64 per webhook)
    ca_bundle: str | None = field(default=None, metadata={"internal": True})
    review_versions: tuple[str, ...] = field(default=("v1",), metadata={"internal": True})

    @property
    def backend(self) -> str:
        if self.service:
            return f"service {self.service}:{self.service_port or 443}{self.path or ''}"
        return f"url {self.url}" if self.url else "none"


# the name suffix kube-apiserver 1.36+ requires of every manifest-based admission configuration
# (k8s.io/apiserver pkg/admission/plugin/manifest/validation.go, StaticConfigSuffix)
STATIC_SUFFIX = ".static.k8s.io"


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
    # the file it was read from when it is a manifest-based (static) webhook configuration (1.36+): loaded by the
    # apiserver from its admission configuration's staticManifestsDir, neither in etcd nor served by the API
    static_manifest: str | None = None

    @property
    def manifest_based(self) -> bool:
        """Loaded from files on the node (KEP-5793), not through the API: the name says so (the apiserver
        requires the suffix), or it was read from a staticManifestsDir."""
        return self.static_manifest is not None or self.name.endswith(STATIC_SUFFIX)

    @property
    def kind_name(self) -> str:
        return KIND_NAME[self.kind]

    @property
    def resource(self) -> str:
        return RESOURCE_OF[self.kind]


def _strings(v, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BadInput(f"{what} must be a list of strings")
    return tuple(v)


def _dict(v, what: str) -> dict:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BadInput(f"{what} must be an object")
    return v


def _selector(v, what: str) -> dict | None:
    """A metav1.LabelSelector, checked so that evaluating it later cannot fail."""
    if v is None:
        return None
    sel = _dict(v, what)
    labels = _dict(sel.get("matchLabels"), f"{what}.matchLabels")
    if not all(isinstance(k, str) and isinstance(x, str) for k, x in labels.items()):
        raise BadInput(f"{what}.matchLabels must map strings to strings")
    exprs = sel.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise BadInput(f"{what}.matchExpressions must be a list")
    for e in exprs:
        e = _dict(e, f"{what}.matchExpressions[]")
        if not isinstance(e.get("key"), str) or e.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise BadInput(f"{what}.matchExpressions needs a key and an operator In, NotIn, Exists or DoesNotExist")
        _strings(e.get("values"), f"{what}.matchExpressions[].values")
    return sel


def _rules(v, what: str) -> list[Rule]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise BadInput(f"{what} must be a list")
    out = []
    for r in v:
        r = _dict(r, f"{what}[]")
        for k in ("operations", "apiGroups", "apiVersions", "resources", "resourceNames"):
            _strings(r.get(k), f"{what}[].{k}")
        if r.get("scope") is not None and not isinstance(r.get("scope"), str):
            raise BadInput(f"{what}[].scope must be a string")
        out.append(Rule.from_json(r))
    return out


def _conditions(v, what: str) -> list[dict]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(c, dict) for c in v):
        raise BadInput(f"{what} must be a list of objects")
    return list(v)


def _versions(v, beta: bool) -> tuple[str, ...]:
    """admissionReviewVersions: v1 requires the list (an empty one leaves the apiserver nothing to send); v1beta1
    defaults it to v1beta1. Read leniently: a malformed list was never a reason to refuse the whole object."""
    if isinstance(v, list):
        return tuple(x for x in v if isinstance(x, str))
    return ("v1beta1",) if beta and v is None else ()


def _webhook(w: dict, wtype: str, beta: bool) -> Webhook:
    if not isinstance(w, dict) or not isinstance(w.get("name"), str) or not w.get("name"):
        raise BadInput("a webhook without a name")
    cc = _dict(w.get("clientConfig"), "clientConfig")
    svc = _dict(cc.get("service"), "clientConfig.service") or None
    timeout = w.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)):
        raise BadInput("timeoutSeconds must be a number")
    for k in ("failurePolicy", "matchPolicy", "sideEffects", "reinvocationPolicy"):
        if w.get(k) is not None and not isinstance(w[k], str):
            raise BadInput(f"{k} must be a string")
    return Webhook(
        name=str(w["name"]), type=wtype,
        failure_policy=w.get("failurePolicy") or ("Ignore" if beta else "Fail"),
        failure_policy_explicit="failurePolicy" in w,
        rules=_rules(w.get("rules"), "rules"),
        timeout_seconds=timeout or (30 if beta else 10),
        match_policy=w.get("matchPolicy") or ("Exact" if beta else "Equivalent"),
        namespace_selector=_selector(w.get("namespaceSelector"), "namespaceSelector"),
        object_selector=_selector(w.get("objectSelector"), "objectSelector"),
        match_conditions=_conditions(w.get("matchConditions"), "matchConditions"),
        service=f"{svc.get('namespace', '')}/{svc.get('name', '')}" if svc else None,
        service_port=svc.get("port") if svc else None, path=svc.get("path") if svc else None,
        url=cc.get("url"), side_effects=w.get("sideEffects"),
        reinvocation_policy=w.get("reinvocationPolicy"),
        ca_bundle=cc.get("caBundle") if isinstance(cc.get("caBundle"), str) and cc.get("caBundle") else None,
        # v1 requires the list (an empty one calls nothing); v1beta1 defaults it to v1beta1
        review_versions=_versions(w.get("admissionReviewVersions"), beta),
    )


def _match_resources(cfg: AdmissionConfig, mr: dict | None) -> None:
    mr = _dict(mr, "matchResources")
    cfg.rules = _rules(mr.get("resourceRules"), "resourceRules")
    cfg.exclude_rules = _rules(mr.get("excludeResourceRules"), "excludeResourceRules")
    cfg.namespace_selector = _selector(mr.get("namespaceSelector"), "namespaceSelector")
    cfg.object_selector = _selector(mr.get("objectSelector"), "objectSelector")


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
    cfg = AdmissionConfig(kind=kind, api_version=api_version, name=str(meta["name"]), source=source, raw=obj)
    try:
        cfg.labels = {str(k): str(v) for k, v in _dict(meta.get("labels"), "metadata.labels").items()}
        cfg.annotations = {str(k): str(v) for k, v in _dict(meta.get("annotations"), "metadata.annotations").items()}
        owners = meta.get("ownerReferences") or []
        cfg.owners = [f"{o.get('kind')}/{o.get('name')}" for o in owners if isinstance(o, dict)] \
            if isinstance(owners, list) else []
        if kind in (VALIDATING, MUTATING):
            beta = api_version.endswith("/v1beta1")
            hooks = obj.get("webhooks") or []
            if not isinstance(hooks, list):
                raise BadInput(f"{source}: webhooks is not a list")
            cfg.webhooks = [_webhook(w, kind, beta) for w in hooks]
        else:
            spec = _dict(obj.get("spec"), "spec")
            if kind in (VAP, MAP):
                cfg.failure_policy = str(spec.get("failurePolicy") or "Fail")
                cfg.match_conditions = _conditions(spec.get("matchConditions"), "spec.matchConditions")
                _match_resources(cfg, spec.get("matchConstraints"))
            else:
                cfg.policy_name = str(spec.get("policyName") or "")
                cfg.validation_actions = list(_strings(spec.get("validationActions"), "spec.validationActions"))
                _match_resources(cfg, spec.get("matchResources"))
    except BadInput as e:
        raise BadInput(f"{source}: {kind_name} {cfg.name}: {e}") from None
    except (AttributeError, TypeError, ValueError) as e:
        raise BadInput(f"{source}: {kind_name} {cfg.name} is malformed ({e})") from None
    return cfg
