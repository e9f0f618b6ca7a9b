"""After a re-arm, one canary write through the apiserver per fail-closed webhook: does the call work again?

A revert puts fail-closed webhooks back in the request path. Their backends may look ready (the guard counts
endpoints, or connects to a URL) and still fail the call: a wrong caBundle, a path that 404s, a NetworkPolicy
between the apiserver and the pod. Only the apiserver calling the webhook proves it, so for each webhook this
sends one server-side dry-run write (``?dryRun=All``: admission runs in full, nothing is stored) of an object
the webhook matches, and reads the answer as the apiserver words it (shared reference §1.4):

- admitted (200/201): the webhook was called and allowed it, or a matchCondition skipped it (CEL is not
  evaluated here, so that is said, not decided);
- ``admission webhook "X" denied the request``: X answered, so its call works: passed, the denial shown;
- ``failed calling webhook "X": ...``: the call to X failed: failed, with the apiserver's message. X may be
  another webhook than the one the canary was for (every matching webhook sees the canary): the failure is
  X's, and the canary says nothing about its own webhook;
- anything else (RBAC, an admission policy's denial, a timeout): inconclusive, with the message.

Only webhooks whose ``sideEffects`` are None or NoneOnDryRun are tried: the apiserver refuses a dry-run request
that reaches any other (``does not support dry run``) without calling it. The object is the simplest kind the
rules cover, CREATE first: a ConfigMap, a Namespace, a Secret, a ServiceAccount, a ClusterRole, named
``breakglass-canary-<random>`` so it cannot meet a real one; a webhook that sees only UPDATE gets an existing
object written back unchanged but for the labels its objectSelector needs. Namespaced canaries go into an
existing namespace the namespaceSelector matches; a Namespace canary carries the labels both selectors ask for
(the apiserver matches a Namespace's own labels against both).
"""

from __future__ import annotations

import re
import secrets
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Iterable

from breakglass.core.errors import BreakglassError
from breakglass.core.safetext import printable
from breakglass.heal.writes import Write
from breakglass.webhooks import intercept, model

PASSED, FAILED, NOT_TRIED, INCONCLUSIVE = "passed", "failed", "not-tried", "inconclusive"
ANNOTATION = "breakglass.io/canary"  # names the webhook the canary was sent for (seen in the backend's logs)
EXISTS_VALUE = "breakglass-canary"  # the value given to a label an Exists expression asks for
DRY_RUN_SIDE_EFFECTS = ("None", "NoneOnDryRun")  # what the apiserver lets a dry-run request call
MESSAGE_MAX = 600  # a message is kept whole up to here: URL and cause fit; a webhook's essay does not
UPDATE_NAMESPACES = 5  # namespaces searched for an object to rewrite: enough to find one, few requests

# the apiserver's own words (k8s.io/apiserver webhook/errors and util/webhook; "admission webhook" before 1.11)
_FAILED = re.compile(r'failed calling (?:admission )?webhook "([^"]+)"')
_DENIED = re.compile(r'admission webhook "([^"]+)" denied the request')
_NO_DRY_RUN = re.compile(r'admission webhook "([^"]+)" does not support dry run')


@dataclass(frozen=True)
class _Kind:
    kind: str
    resource: str
    cluster: bool
    fields: tuple = ()  # (key, value) of what a valid new object needs besides metadata
    rewrite: bool = True  # may an existing one be read and written back for an UPDATE
    group: str = ""  # "" for the core group

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1" if self.group else "v1"

    @property
    def collection(self) -> str:
        return f"/apis/{self.group}/v1/{self.resource}" if self.group else f"/api/v1/{self.resource}"

    def write(self, operation: str) -> Write:
        """The heal model's shape of this write, so intercept.rule_matches (the apiserver's rule matching) decides."""
        return Write(id=f"canary-{self.resource}", actor="breakglass", kind=self.kind, group=self.group,
                     resource=self.resource, subresource="", operations=(operation,),
                     namespaces=() if self.cluster else ("*",), breaks="", severity="info", source="")


# in the order they are tried; Secrets are never read back for an UPDATE (a canary has no business reading them)
KINDS = (_Kind("ConfigMap", "configmaps", False, (("data", {"breakglass": "canary"}),)),
         _Kind("Namespace", "namespaces", True),
         _Kind("Secret", "secrets", False, (("type", "Opaque"),), rewrite=False),
         _Kind("ServiceAccount", "serviceaccounts", False),
         # what a webhook on the apiserver's bootstrap writes matches: a ClusterRole without rules (nothing to
         # escalate), created only, never an existing role written back
         _Kind("ClusterRole", "clusterroles", True, (("rules", []),), rewrite=False, group="rbac.authorization.k8s.io"))


@dataclass
class Canary:
    """One dry-run write."""

    operation: str  # CREATE | UPDATE
    kind: str
    namespace: str | None
    name: str
    method: str
    path: str
    body: dict = field(repr=False)

    def describe(self) -> str:
        return f"dry-run {self.operation} {self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass
class Result:
    webhook: str
    configuration: str  # kind/NAME; "" for a webhook the apiserver named that was not among those given
    status: str  # passed | failed | not-tried | inconclusive
    reason: str
    canary: str = ""  # what was sent (Canary.describe)
    message: str = ""  # the apiserver's message, verbatim but trimmed
    denied: bool = False  # the webhook answered allowed:false: its call works
    notes: list[str] = field(default_factory=list)


@dataclass
class Summary:
    results: list[Result]

    @property
    def ok(self) -> bool:
        return not any(r.status == FAILED for r in self.results)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    def lines(self) -> list[str]:
        head = f"canary: {len(self.results)} webhook(s): " + ", ".join(
            f"{self.count(s)} {s.replace('-', ' ')}" for s in (PASSED, FAILED, INCONCLUSIVE, NOT_TRIED)
            if self.count(s))
        out = [head if self.results else "canary: no webhook to try"]
        for r in self.results:
            label = "passed (denied by policy)" if r.denied else r.status.replace("-", " ")
            where = f" ({r.configuration})" if r.configuration else " (not among the re-armed configurations)"
            text = f"  {label}: {r.webhook}{where}: {r.reason}"
            if r.message and r.message not in r.reason:
                text += f": {r.message}"
            out.append(printable(text))
            out += [printable(f"    note: {n}") for n in r.notes]
        return out

    def to_json(self) -> dict:
        return {"ok": self.ok, "results": [asdict(r) for r in self.results]}


def run(api, configs: Iterable, webhooks: Iterable[str] | None = None) -> Summary:
    """Send the canaries. ``api``: an ``access.kubeapi`` client; ``configs``: the webhook configurations the
    revert put back (model.AdmissionConfig or their JSON); ``webhooks``: only these webhook names (all if None).
    The apiserver not answering (or refusing the credentials) stops the run: what was not sent says so."""
    wanted = set(webhooks) if webhooks is not None else None
    pairs = [(cfg, w) for cfg in _configs(configs) for w in cfg.webhooks if wanted is None or w.name in wanted]
    results: list[Result] = []
    outcomes: list[tuple[Result, str | None, str]] = []  # (result, webhook the apiserver named, how)
    ctx = _Context(api)
    stopped = ""
    for cfg, w in pairs:
        r = Result(w.name, f"{cfg.kind}/{cfg.name}", NOT_TRIED, "")
        results.append(r)
        if stopped:
            r.reason = stopped
            continue
        why = _untried(w)
        if why:
            r.reason = why
            continue
        try:
            plan = _plan(ctx, w)
            if isinstance(plan, str):
                r.reason = plan
                continue
            r.canary = plan.describe()
            status, doc = api.request(plan.method, plan.path, plan.body, query=ctx.query(w),
                                      forbidden_returns=True)
        except BreakglassError as e:
            stopped = f"not sent: the apiserver refused or did not answer ({e})"
            r.reason = stopped
            continue
        outcomes.append((r, *_read(r, w, status, doc)))
        if r.status == INCONCLUSIVE and w.timeout_seconds + 2 > ctx.limit():
            r.notes.append(f"its timeoutSeconds ({w.timeout_seconds}) is longer than a canary may wait "
                           f"({ctx.limit()}s): a slow answer is cut short")
    _attribute(results, outcomes)
    return Summary(results)


def _configs(configs: Iterable) -> list[model.AdmissionConfig]:
    out = []
    for c in configs:
        cfg = c if isinstance(c, model.AdmissionConfig) else model.from_json(c, "canary")
        if cfg.kind in (model.VALIDATING, model.MUTATING):  # admission policies have no backend to call
            out.append(cfg)
    return out


def _untried(w: model.Webhook) -> str:
    if w.failure_policy != "Fail":
        return f"failurePolicy {w.failure_policy}: a failed call does not block writes"
    if w.side_effects not in DRY_RUN_SIDE_EFFECTS:
        return f"sideEffects {w.side_effects or 'unset'} does not allow dry-run (the apiserver would refuse it)"
    return ""


class _Context:
    """What every canary of a run shares: the namespaces, read once."""

    def __init__(self, api) -> None:
        self.api = api
        self._namespaces: list[dict] | None = None
        self.unreadable = ""

    def limit(self) -> int:
        """The longest the apiserver may take: less than the client waits, so it is the apiserver that answers."""
        return max(1, int(float(getattr(self.api, "timeout", 10) or 10)) - 1)

    def query(self, w: model.Webhook) -> str:
        # the webhook's own timeout ends first where the client's allows: a hanging backend comes back as the
        # apiserver's "failed calling webhook ... context deadline exceeded", naming it
        return f"dryRun=All&timeout={min(self.limit(), w.timeout_seconds + 2)}s"

    def namespaces(self) -> list[dict]:
        """Active namespaces, ``default`` first (where a canary surprises no one), then by name."""
        if self._namespaces is None:
            status, doc = self.api.request("GET", "/api/v1/namespaces")
            if status != 200:
                self.unreadable = f"namespaces not readable (HTTP {status})"
            items = [i for i in (doc.get("items") or []) if isinstance(i, dict)] if status == 200 else []
            items = [i for i in items if (i.get("status") or {}).get("phase") != "Terminating"]
            self._namespaces = sorted(items, key=lambda i: (_name(i) != "default", _name(i)))
        return self._namespaces

    def matching(self, ns_sel: dict | None) -> list[dict]:
        return [n for n in self.namespaces() if intercept.selector_matches(ns_sel, _ns_labels(n))]


def _name(obj: dict) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _labels(obj: dict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _ns_labels(ns: dict) -> dict[str, str]:
    """A namespace's labels, with the name label the apiserver always sets."""
    return intercept.namespace_labels(_name(ns), {_name(ns): _labels(ns)})


def _plan(ctx: _Context, w: model.Webhook) -> Canary | str:
    """The canary for ``w``, or why there is none."""
    why: dict[str, list[str]] = {}  # reason: the writes it stopped ("CREATE ConfigMap")
    for op in ("CREATE", "UPDATE"):  # an UPDATE may still reach it: an existing namespace can carry a fixed name
        for k in KINDS:
            if op == "UPDATE" and not k.rewrite:
                continue
            if not any(intercept.rule_matches(rule, k.write(op), w.match_policy) for rule in w.rules):
                continue
            plan = _create(ctx, w, k) if op == "CREATE" else _update(ctx, w, k)
            if isinstance(plan, Canary):
                return plan
            why.setdefault(plan, []).append(f"{op} {k.kind}")
    if why:
        return "; ".join(f"{', '.join(writes)}: {reason}" for reason, writes in why.items())
    rules = "; ".join(r.describe() for r in w.rules) or "none"
    return f"no canary object for rules {rules} (a canary is a CREATE or UPDATE of a " \
           f"{', '.join(k.kind for k in KINDS)})"


def _create(ctx: _Context, w: model.Webhook, k: _Kind) -> Canary | str:
    name = f"breakglass-canary-{secrets.token_hex(4)}"
    meta = {"name": name, "annotations": {ANNOTATION: w.name}}
    if k.cluster and k.kind != "Namespace":  # cluster-scoped: no namespaceSelector applies, its objectSelector does
        labels = labels_for(w.object_selector)
        if labels is None:
            return _unsatisfiable("objectSelector", w.object_selector)
        body = {"apiVersion": k.api_version, "kind": k.kind, "metadata": {**meta, "labels": labels}, **dict(k.fields)}
        return Canary("CREATE", k.kind, None, name, "POST", k.collection, body)
    if k.cluster:  # a Namespace: both selectors look at its own labels
        labels = labels_for(_both(w), fixed={intercept.METADATA_NAME: name})
        if labels is None:
            return _unsatisfiable("namespaceSelector and objectSelector", _both(w))
        body = {"apiVersion": "v1", "kind": k.kind, "metadata": {**meta, "labels": labels}}
        return Canary("CREATE", k.kind, None, name, "POST", f"/api/v1/{k.resource}", body)
    spaces = ctx.matching(w.namespace_selector)
    if not spaces:
        return ctx.unreadable or _no_namespace(w)
    labels = labels_for(w.object_selector)
    if labels is None:
        return _unsatisfiable("objectSelector", w.object_selector)
    ns = _name(spaces[0])
    body = {"apiVersion": "v1", "kind": k.kind, "metadata": {**meta, "namespace": ns, "labels": labels},
            **dict(k.fields)}
    return Canary("CREATE", k.kind, ns, name, "POST", f"/api/v1/namespaces/{_q(ns)}/{k.resource}", body)


def _update(ctx: _Context, w: model.Webhook, k: _Kind) -> Canary | str:
    """An existing object written back (dry-run) with the labels the objectSelector needs added."""
    if k.cluster:
        for ns in ctx.namespaces():
            labels = labels_for(_both(w), base=_ns_labels(ns), fixed={intercept.METADATA_NAME: _name(ns)})
            if labels is not None:
                return _rewrite(w, k, {**ns, "apiVersion": "v1", "kind": k.kind}, labels, None,
                                f"/api/v1/{k.resource}/{_q(_name(ns))}")
        return ctx.unreadable or _unsatisfiable("namespaceSelector and objectSelector", _both(w)) + \
            " by any existing namespace"
    spaces = ctx.matching(w.namespace_selector)
    if not spaces:
        return ctx.unreadable or _no_namespace(w)
    for ns in spaces[:UPDATE_NAMESPACES]:
        path = f"/api/v1/namespaces/{_q(_name(ns))}/{k.resource}"
        status, doc = ctx.api.request("GET", path, query="limit=1")
        items = (doc.get("items") or []) if status == 200 else []
        if items and isinstance(items[0], dict):
            obj = {**items[0], "apiVersion": "v1", "kind": k.kind}
            labels = labels_for(w.object_selector, base=_labels(obj))
            if labels is None:
                return _unsatisfiable("objectSelector", w.object_selector)
            return _rewrite(w, k, obj, labels, _name(ns), f"{path}/{_q(_name(obj))}")
    return f"no existing {k.kind} to rewrite in the namespaces the namespaceSelector matches"


def _rewrite(w, k: _Kind, obj: dict, labels: dict, ns: str | None, path: str) -> Canary:
    meta = {key: v for key, v in (obj.get("metadata") or {}).items() if key != "managedFields"}
    meta["labels"] = labels
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION: w.name}
    body = {key: v for key, v in obj.items() if key != "status"}
    body["metadata"] = meta
    return Canary("UPDATE", k.kind, ns, _name(obj), "PUT", path, body)


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _both(w: model.Webhook) -> dict:
    """namespaceSelector and objectSelector as one selector: what a Namespace's labels must satisfy."""
    exprs = []
    for sel in (w.namespace_selector, w.object_selector):
        sel = sel or {}
        exprs += [{"key": k, "operator": "In", "values": [v]} for k, v in (sel.get("matchLabels") or {}).items()]
        exprs += list(sel.get("matchExpressions") or [])
    return {"matchExpressions": exprs}


def _no_namespace(w: model.Webhook) -> str:
    return f"no namespace matches the namespaceSelector {_selector_text(w.namespace_selector)}"


def _unsatisfiable(what: str, sel) -> str:
    return f"no labels satisfy the {what} {_selector_text(sel)}"


def _selector_text(sel) -> str:
    sel = sel or {}
    parts = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        vals = ",".join(e.get("values") or [])
        parts.append(f"{e.get('key')} {e.get('operator')}" + (f" ({vals})" if vals else ""))
    return "{" + "; ".join(parts) + "}"


def labels_for(sel: dict | None, base: dict[str, str] | None = None,
               fixed: dict[str, str] | None = None) -> dict[str, str] | None:
    """Labels that satisfy a metav1.LabelSelector, starting from ``base`` and changing it as little as needed;
    ``fixed`` labels cannot change (a Namespace's name label). None if no labels can satisfy it."""
    labels = {**(base or {}), **(fixed or {})}
    sel = sel or {}
    reqs = [{"key": k, "operator": "In", "values": [v]} for k, v in (sel.get("matchLabels") or {}).items()]
    reqs += list(sel.get("matchExpressions") or [])
    for key in dict.fromkeys(r.get("key") for r in reqs):
        mine = [r for r in reqs if r.get("key") == key]
        ops = {r.get("operator") for r in mine}
        allowed = None  # any value
        for r in mine:
            if r.get("operator") == "In":
                vals = set(r.get("values") or [])
                allowed = vals if allowed is None else allowed & vals
        banned = {v for r in mine if r.get("operator") == "NotIn" for v in r.get("values") or []}
        required = bool(ops & {"In", "Exists"})
        if (fixed or {}).get(key) is not None:
            continue  # cannot change: the check below says whether it fits
        if "DoesNotExist" in ops:
            labels.pop(key, None)
            continue
        current = labels.get(key)
        if current is not None and current not in banned and (allowed is None or current in allowed):
            continue  # already fits
        if not required:
            labels.pop(key, None)  # only NotIn: absence satisfies it
            continue
        choices = sorted((allowed if allowed is not None else {EXISTS_VALUE, EXISTS_VALUE + "-1"}) - banned)
        if not choices:
            return None
        labels[key] = choices[0]
    return labels if intercept.selector_matches(sel, labels) else None


def _trim(message: str) -> str:
    text = " ".join(str(message or "").split())
    return text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX - 1] + "…"


def _read(r: Result, w: model.Webhook, status: int, doc: dict) -> tuple[str | None, str]:
    """Fill ``r`` from the apiserver's answer; (the webhook the answer names, "failed"/"denied"/"") for
    ``_attribute``, which settles what concerns another webhook."""
    message = _trim(doc.get("message") or "") if isinstance(doc, dict) else ""
    r.message = message
    if 200 <= status < 300:
        r.status, r.reason = PASSED, f"{r.canary} admitted"
        if w.match_conditions:
            r.notes.append("matchConditions may have skipped the webhook (CEL is not evaluated here)")
        return None, ""
    for how, pattern in (("failed", _FAILED), ("denied", _DENIED), ("no-dry-run", _NO_DRY_RUN)):
        m = pattern.search(message)
        if m:
            return m[1], how
    r.status = INCONCLUSIVE
    r.reason = f"{r.canary}: HTTP {status}, the answer names no webhook"
    return None, ""


def _attribute(results: list[Result], outcomes: list[tuple[Result, str | None, str]]) -> None:
    """Each answer concerns the webhook it names: a failure is that webhook's, wherever it came from."""
    by_name: dict[str, Result] = {}
    for r in results:
        by_name.setdefault(r.webhook, r)
    failed_elsewhere: dict[str, tuple[Result, str]] = {}
    for r, named, how in outcomes:
        if named is None:
            continue
        if named == r.webhook:
            if how == "failed":
                r.status, r.reason = FAILED, f"{r.canary}: the apiserver's call to it failed"
            elif how == "denied":
                r.status, r.denied, r.reason = PASSED, True, f"{r.canary}: it answered, and denied it"
            else:
                r.status, r.reason = NOT_TRIED, f"{r.canary}: the apiserver refuses dry-run requests to it"
            continue
        r.status = INCONCLUSIVE
        r.reason = {"failed": f"{r.canary}: stopped at webhook {named}, whose call failed",
                    "denied": f"{r.canary}: webhook {named} denied it first",
                    "no-dry-run": f"{r.canary}: webhook {named} also matches it and does not allow dry-run"}[how]
        if how == "failed":
            failed_elsewhere.setdefault(named, (r, r.message))
    for named, (origin, message) in failed_elsewhere.items():
        target = by_name.get(named)
        if target is None:
            results.append(Result(named, "", FAILED, f"its call failed on the canary for {origin.webhook}",
                                  origin.canary, message))
        elif target.status != FAILED:  # its own canary may have gone another way: kept as a note
            target.notes.append(f"its own canary: {target.status}: {target.reason}")
            target.status, target.message = FAILED, message
            target.reason = f"its call failed on the canary for {origin.webhook}"
