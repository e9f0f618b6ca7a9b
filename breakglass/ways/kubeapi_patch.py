"""The kubeconfig remedy: while the apiserver still serves, change the least, through it.

Webhook configurations are never themselves sent to webhooks, so this path works whenever
any apiserver answers; it is audited and validated and needs no restart. Three actions,
least invasive first: ``ignore`` (failurePolicy Ignore on the failing webhooks; for an
admission policy binding, validationActions Audit), ``exclude`` (the audit's matchConditions),
``delete``. Every change carries the resourceVersion that was read as a precondition (a JSON
patch ``test``, or delete preconditions), so a concurrent change is never overwritten.

Revert re-patches, or re-creates a deleted configuration from its backup; if it exists again
(an operator recreated it) the difference is reported instead. Before re-arming a fail-closed
webhook it asks whether its backend can answer the apiserver's call (``webhooks.readiness``,
read through the API), and refuses while one definitely cannot, so a revert cannot brick the
cluster again.
"""

from __future__ import annotations

import difflib
import json
import re
import time

from breakglass.heal import bootstrap

from breakglass.webhooks import vendors
from breakglass.core.errors import BadInput, BreakglassError, PreconditionFailed
from breakglass.core.journal import Run, TamperedRun
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED, RevertOutcome, Step, Unverified
from breakglass.ways.kubeapi_ops import apply_ops, pointer
from breakglass.ways.etcd_delete import parse_ref
from breakglass.webhooks import audit, backend, model, owners, readiness, resolve, sources

API = "/apis/admissionregistration.k8s.io/v1/"
ACTIONS = ("ignore", "exclude", "delete")
KINDS = (model.VALIDATING, model.MUTATING, model.VAP_BINDING)
_OP_PATH = re.compile(r"/webhooks/(?P<i>0|[1-9][0-9]*)/(?P<field>failurePolicy|matchConditions)(?P<end>/-)?")
_SERVER_SET = ("resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink")


def _yaml(obj) -> str:
    import yaml  # noqa: PLC0415

    shown = json.loads(json.dumps(obj))
    (shown.get("metadata") or {}).pop("managedFields", None)
    return yaml.safe_dump(shown, sort_keys=False)


def _diff(a, b, la: str, lb: str) -> str:
    return "".join(difflib.unified_diff(_yaml(a).splitlines(True), _yaml(b).splitlines(True), la, lb))


def _content(obj: dict) -> dict:
    """What a configuration does: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _holds(obj: dict, ops: list[dict]) -> bool:
    """Is every value the patch wrote still in ``obj`` (an appended one anywhere in its list)? A shape rewritten
    so that a path no longer leads anywhere cannot hold it. A removal is not checked: its index moves."""
    for op in ops:
        if op["op"] not in ("add", "replace"):
            continue
        *parents, last = pointer(op["path"])
        node = obj
        try:
            for part in parents:
                node = node[int(part)] if isinstance(node, list) else node[part]
            if isinstance(node, list):
                here = op["value"] in node if last == "-" else node[int(last)] == op["value"]
            else:
                here = node.get(last) == op["value"]
        except (KeyError, IndexError, ValueError, TypeError, AttributeError):
            return False
        if not here:
            return False
    return True


def operator_note(obj: dict, action: str | None = None) -> str | None:
    """Who may recreate or overwrite this configuration: what the object says first (Kyverno's or Gatekeeper's
    label, a Helm release, GitOps tracking, an owner, a managing tool), the vendor's convention only when it says
    nothing, with that vendor's advice either way; with ``action``, what that owner does to it (Kyverno undoes a
    patch and re-creates a deleted configuration within a second)."""
    try:
        who = owners.of(model.from_json(obj, "api"))
    except BadInput:
        who = None
    warning = who.warning("delete" if action == "delete" else "patch") if who and action else None
    if warning:
        return warning
    meta = obj.get("metadata") or {}
    hooks = [w.get("name", "") for w in obj.get("webhooks") or [] if isinstance(w, dict)]
    hint = next((vendors.hint_for(h) for h in hooks if vendors.hint_for(h)), None) or \
        vendors.hint_for_configuration(meta.get("name", ""), meta.get("labels") or {})
    try:
        owner = resolve.owner_of(model.from_json(obj, "api"))
    except BadInput:
        owner = None
    if owner:
        return f"{owner} may recreate or overwrite it" + (f"; {hint.vendor}: {hint.managed_note}" if hint else "")
    if hint:
        return f"{hint.vendor} manages this configuration and may recreate or overwrite it: {hint.managed_note}"
    return None


class KubeapiPatch:
    method = "kubeapi"

    def __init__(self, api, refs: list[str] = (), kinds: list[str] | None = None, action: str = "ignore",
                 webhooks: list[str] = (), kubeconfig: str | None = None, context: str | None = None,
                 take_all: bool = False) -> None:
        if action not in ACTIONS:
            raise BadInput(f"unknown action {action!r} (use {', '.join(ACTIONS)})")
        self.api, self.refs, self.action = api, list(refs), action
        self.kinds = kinds
        self.webhooks = list(webhooks)
        self.kubeconfig, self.context = kubeconfig, context
        self.notes: list[str] = []
        self.take_all = take_all  # a webhook defined in several configurations: all, if they fail together

    def describe_target(self) -> dict:
        return {"apiserver": self.api.host, "kubeconfig": self.kubeconfig, "context": self.context,
                "action": self.action}

    def _path(self, kind: str, name: str | None = None) -> str:
        return API + model.RESOURCE_OF[kind] + (f"/{name}" if name else "")

    def _get_path(self, path: str) -> dict | None:
        """The object at an API path, or None when absent or not readable (an owner check, never a blocker)."""
        try:
            status, doc = self.api.request("GET", path)
        except BreakglassError:
            return None
        return doc if status == 200 else None

    def _get(self, kind: str, name: str) -> dict | None:
        status, doc = self.api.request("GET", self._path(kind, name))
        if status == 404:
            return None
        if status != 200:
            raise PreconditionFailed(f"GET {self._path(kind, name)}: HTTP {status} {doc.get('message', '')}")
        return doc

    # -- plan --------------------------------------------------------------------------------------
    def _webhook_refs(self) -> list[str]:
        """``webhook:NAME`` references (and ``--webhook`` names with no configuration named) replaced by the
        configurations that define that webhook, as the apiserver lists them."""
        refs, hooks = resolve.webhook_names(self.refs)
        if not refs and not hooks:
            hooks = resolve.webhook_names([resolve.WEBHOOK_REF + w for w in self.webhooks])[1]
        for m in resolve.placed(hooks, lambda: sources.load_api_with(self.api, (model.VALIDATING, model.MUTATING))
                                .configs, "api", self.kinds, self.take_all):
            refs.append(m.ref)
            if m.webhook not in self.webhooks:
                self.webhooks.append(m.webhook)  # ignore or exclude this webhook only, not its neighbours
            self.notes.append(resolve.note(m, "the API", owner=False))  # operator_note names the owner
        return refs

    def plan(self) -> list[Step]:
        refs = self._webhook_refs()
        if not refs:
            raise BadInput("name at least one configuration with --webhook-config (or a webhook: -w webhook:NAME)")
        steps = []
        for ref in refs:
            kind, name = parse_ref(ref, None, "/registry")
            kinds = [kind] if kind else ([k for k in (self.kinds or KINDS)])
            found = [(k, o) for k in kinds if (o := self._get(k, name)) is not None]
            if not found:
                raise BadInput(f"no configuration named {name!r} ({', '.join(model.KIND_NAME[k] for k in kinds)})")
            if len(found) > 1:
                raise BadInput(f"{name!r} names several configurations "
                               f"({', '.join(model.KIND_NAME[k] for k, _ in found)})", hint="say which with kind/NAME")
            k, obj = found[0]
            note = operator_note(obj, self.action)
            if note:
                self.notes.append(f"{name}: {note}")
            step = self._step(len(steps) + 1, k, obj)
            if step is not None:
                steps.append(step)
        return steps

    def _step(self, i: int, kind: str, obj: dict) -> Step | None:
        name, rv = obj["metadata"]["name"], obj["metadata"].get("resourceVersion")
        data = {"kind": kind, "name": name, "rv": rv, "uid": obj["metadata"].get("uid"), "action": self.action}
        if self.action == "delete":
            return Step(f"s{i}", f"{model.KIND_NAME[kind]}/{name}", "delete",
                        f"delete {model.KIND_NAME[kind]} {name} through the API",
                        f"--- {model.KIND_NAME[kind]}/{name} (resourceVersion {rv})\n+++ (deleted)\n", data)
        ops, reverse = self._ops(kind, obj)
        if not ops:
            self.notes.append(f"{name}: nothing to change for --action {self.action}")
            return None

        after = apply_ops(obj, ops)
        data.update(ops=ops, reverse=reverse)
        return Step(f"s{i}", f"{model.KIND_NAME[kind]}/{name}", "patch",
                    f"{self.action} on {model.KIND_NAME[kind]} {name} through the API",
                    _diff(obj, after, f"{model.KIND_NAME[kind]}/{name}", f"{model.KIND_NAME[kind]}/{name} (new)"), data)

    def _ops(self, kind: str, obj: dict) -> tuple[list, list]:
        ops, reverse = [], []
        if kind == model.VAP_BINDING:
            if self.action == "exclude":
                raise BadInput("--action exclude is for webhook configurations; use ignore or delete for a binding")
            before = (obj.get("spec") or {}).get("validationActions")
            if before != ["Audit"]:
                ops.append({"op": "add", "path": "/spec/validationActions", "value": ["Audit"]})
                reverse.append({"op": "add", "path": "/spec/validationActions", "value": before} if before is not None
                               else {"op": "remove", "path": "/spec/validationActions"})
            return ops, reverse
        hooks = obj.get("webhooks") or []
        for i, w in enumerate(hooks):
            if self.webhooks and w.get("name") not in self.webhooks:
                continue
            if self.action == "ignore":
                if w.get("failurePolicy", "Fail") != "Ignore":
                    ops.append({"op": "add", "path": f"/webhooks/{i}/failurePolicy", "value": "Ignore"})
                    reverse.append({"op": "add", "path": f"/webhooks/{i}/failurePolicy", "value": w["failurePolicy"]}
                                   if "failurePolicy" in w else {"op": "remove", "path": f"/webhooks/{i}/failurePolicy"})
            else:
                wm = model.from_json({**obj, "webhooks": [w]}, "api").webhooks[0]
                kinds = [k for k, _ in audit.at_risk(wm.rules, wm.match_policy, wm.namespace_selector,
                                                     wm.object_selector, wm.match_conditions, None)]
                conds = audit.match_conditions_for(kinds or list(bootstrap.BOOTSTRAP_KINDS))
                existing = {c.get("name") for c in w.get("matchConditions") or []}
                conds = [c for c in conds if c["name"] not in existing]
                if not conds:
                    continue
                if "matchConditions" not in w:
                    ops.append({"op": "add", "path": f"/webhooks/{i}/matchConditions", "value": conds})
                    reverse.append({"op": "remove", "path": f"/webhooks/{i}/matchConditions"})
                else:
                    start = len(w["matchConditions"])
                    for j, c in enumerate(conds):
                        ops.append({"op": "add", "path": f"/webhooks/{i}/matchConditions/-", "value": c})
                        reverse.insert(0, {"op": "remove", "path": f"/webhooks/{i}/matchConditions/{start + j}"})
        return ops, reverse

    # -- apply -------------------------------------------------------------------------------------
    def backup(self, step: Step, run: Run) -> dict:
        obj = self._get(step.data["kind"], step.data["name"])
        if obj is None or obj["metadata"].get("resourceVersion") != step.data["rv"]:
            raise PreconditionFailed(f"{step.target} changed since it was read; nothing was changed")
        text = json.dumps(obj, indent=2, sort_keys=True).encode()
        return {"object": f"{step.id}.json", "object_sha256": run.write_backup(f"{step.id}.json", text),
                "yaml": f"{step.id}.yaml", "yaml_sha256": run.write_backup(f"{step.id}.yaml", _yaml(obj).encode())}

    def apply(self, step: Step, backup: dict) -> dict:
        d = step.data
        if d["action"] == "delete":
            status, doc = self.api.request("DELETE", self._path(d["kind"], d["name"]),
                                           {"kind": "DeleteOptions", "apiVersion": "v1",
                                            "preconditions": {"resourceVersion": d["rv"], "uid": d["uid"]}})
            if status in (409, 404):
                raise PreconditionFailed(f"{step.target} changed since it was backed up ({doc.get('message', status)}); "
                                         f"not deleted")
            if status not in (200, 202):
                raise PreconditionFailed(f"DELETE {step.target}: HTTP {status} {doc.get('message', '')}")
            return {}
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": d["rv"]}] + d["ops"]
        status, doc = self.api.request("PATCH", self._path(d["kind"], d["name"]), ops,
                                       content_type="application/json-patch+json")
        if status in (409, 422):
            # A failed `test` is 422 with a message that names no operation, and so is a patch the
            # apiserver validated and refused (too many matchConditions, say): the object tells which.
            now = self._get(d["kind"], d["name"])
            now_rv = now["metadata"].get("resourceVersion") if now else None
            if now_rv != d["rv"]:
                raise PreconditionFailed(f"{step.target} changed since it was backed up (resourceVersion {d['rv']}, "
                                         f"now {now_rv or 'deleted'}); not patched")
            # no hint of its own: the run's (what earlier steps touched, how to revert) must stay
            raise BadInput(f"the apiserver refused the patch of {step.target} as invalid, so it was not changed "
                           f"(another --action may fit): {doc.get('message', status)}")
        if status != 200:
            raise PreconditionFailed(f"PATCH {step.target}: HTTP {status} {doc.get('message', '')}")
        return {"rv_after": doc.get("metadata", {}).get("resourceVersion")}

    OWNER_SETTLE = 3.0  # seconds: Kyverno's reconcile rewrites a patched configuration within about one

    def verify(self, step: Step) -> str:
        obj = self._get(step.data["kind"], step.data["name"])
        if step.data["action"] == "delete":
            if obj is not None:
                raise PreconditionFailed(f"{step.target} exists again right after the delete (an operator recreated it?)")
            return "deleted"
        if obj is None:
            return "missing after patch"
        said = f"patched (resourceVersion {obj['metadata'].get('resourceVersion')})"
        owner = owners.undone_by(obj)
        if owner is None:
            return said
        # its owner rewrites the configuration on every reconcile (Kyverno: within a second): read again a
        # moment later, as the apiserver will, before calling a change that is already gone "verified"
        time.sleep(self.OWNER_SETTLE)
        later = self._get(step.data["kind"], step.data["name"])
        if later is not None and _holds(later, step.data["ops"]):
            return said + f"; still in place {self.OWNER_SETTLE:.0f} s later, although {owner.name} rewrites it"
        return Unverified(f"patched, then undone by its owner {owner.name} ({owner.evidence}) within "
                          f"{self.OWNER_SETTLE:.0f} s: the webhook is back as it was; stop {owner.name}'s admission "
                          f"controller first, or use the admission-plugin flag, which nothing in the cluster undoes")

    # -- revert ------------------------------------------------------------------------------------
    def _backend_ready(self, obj: dict) -> list:
        """The backends of the object's fail-closed webhooks that cannot answer the apiserver's call (readings
        ``down``; one unchecked from here does not hold a revert back: the engine's guard says so)."""
        try:
            cfg = model.from_json(obj, "backup")
        except BadInput:
            return []
        read = lambda ns, name: backend.from_api(self.api, ns, name)  # noqa: E731
        seen: dict[tuple, readiness.Reading] = {}
        for w in cfg.webhooks:
            if w.failure_policy != "Fail" or not (w.service or w.url):
                continue
            spec = readiness.Spec.of(w)
            if spec.key not in seen:
                seen[spec.key] = readiness.of_webhook(spec, read, f"{cfg.kind}/{cfg.name}", w.name)
        return [r for r in seen.values() if r.state == readiness.DOWN]

    # set by flows.recovery, whose revert guard reads the same backends and also weighs the heal model's case and
    # the engineer's override (--re-arm, the wizard's typed word): then that one guard decides
    guarded = False

    def revert_blocker(self, step: Step, backup: dict, run: Run) -> str | None:
        """Why reverting this step now would be unsafe (a fail-closed webhook's backend cannot answer: putting it
        back in the path re-arms a webhook whose calls fail), or None. A safety check, not a conflict: the
        driver asks before it journals anything."""
        d = step.data
        original = self._backup_of(step, backup, run)
        if d["kind"] == model.VAP_BINDING or self.guarded:
            return None
        down = self._backend_ready(original)
        if not down or (d["action"] == "delete" and self._get(d["kind"], d["name"]) is not None):
            return None
        checks = "; ".join(dict.fromkeys(r.check for r in down if r.check))
        return (f"{step.target}: the webhook's backend is not ready ({'; '.join(r.detail for r in down)})"
                + (f"; check with: {checks}" if checks else ""))

    # -- what a journal may ask revert to do -------------------------------------------------------------
    def _backup_of(self, step: Step, backup: dict, run: Run) -> dict:
        """The backed-up object, only if it is the one this step changed: the step's kind, name, uid and
        resourceVersion, and the step one this remedy makes (its action, its target's name)."""
        d = step.data
        kind, name = d.get("kind"), d.get("name")
        if kind not in KINDS or not isinstance(name, str) or step.target != f"{model.KIND_NAME[kind]}/{name}" \
                or d.get("action") not in ACTIONS or d["action"] != self.action \
                or step.action != ("delete" if d["action"] == "delete" else "patch"):
            raise TamperedRun(f"step {step.id}: the journal's step for {step.target!r} is not one this run's "
                              f"--action {self.action} makes; refusing to replay it")
        try:
            original = json.loads(run.read_backup(backup["object"], backup["object_sha256"]))
        except (KeyError, TypeError, ValueError):
            raise TamperedRun(f"step {step.id}: the journal names no readable backup of {step.target}") from None
        meta = original.get("metadata") if isinstance(original, dict) else None
        if not isinstance(meta, dict) or original.get("kind") != model.KIND_NAME[kind] or meta.get("name") != name \
                or meta.get("uid") != d.get("uid") or meta.get("resourceVersion") != d.get("rv"):
            raise TamperedRun(f"step {step.id}: the backup is not {step.target} as the run read it (kind, name, uid "
                              f"or resourceVersion differ); refusing to replay it (the run directory may have been "
                              f"altered)")
        return original

    def _journaled_changes(self, step: Step, original: dict) -> list[tuple[str | None, str, object]]:
        """What the step's patch did, as (webhook name, field, what it wrote), from the journal's operations, only
        if each is one this remedy makes on the backed-up object: failurePolicy Ignore, breakglass' own
        matchConditions, a binding's validationActions Audit. Anything else (a clientConfig, a rule, another
        index) is refused: revert never replays what the journal merely says."""
        ops = step.data.get("ops")
        hooks = original.get("webhooks") if isinstance(original.get("webhooks"), list) else []
        out: list[tuple[str | None, str, object]] = []
        ours = {audit.CONDITION_SELF, audit.CONDITION_KINDS}

        def refuse(op) -> TamperedRun:
            return TamperedRun(f"step {step.id}: the journal's patch of {step.target} holds an operation breakglass "
                               f"never makes ({json.dumps(op)[:120]}); refusing to replay it")

        for op in ops if isinstance(ops, list) else [ops]:
            if not isinstance(op, dict) or set(op) != {"op", "path", "value"} or op["op"] != "add":
                raise refuse(op)
            if step.data["kind"] == model.VAP_BINDING:
                if op["path"] != "/spec/validationActions" or op["value"] != ["Audit"]:
                    raise refuse(op)
                out.append((None, "validationActions", ["Audit"]))
                continue
            m = _OP_PATH.fullmatch(str(op["path"]))
            i = int(m["i"]) if m and len(m["i"]) < 6 else -1
            if not m or not 0 <= i < len(hooks) or not isinstance(hooks[i], dict):
                raise refuse(op)
            hook, field = hooks[i].get("name"), m["field"]
            if field == "failurePolicy" and not m["end"] and op["value"] == "Ignore":
                out.append((hook, field, "Ignore"))
                continue
            conds = op["value"] if not m["end"] else [op["value"]]
            if field == "matchConditions" and bool(m["end"]) == ("matchConditions" in hooks[i]) \
                    and isinstance(conds, list) and conds \
                    and all(isinstance(c, dict) and c.get("name") in ours for c in conds):
                out.append((hook, field, [c["name"] for c in conds]))
                continue
            raise refuse(op)
        if not out:
            raise TamperedRun(f"step {step.id}: the journal's patch of {step.target} holds no operation")
        return out

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        d = step.data
        original = self._backup_of(step, backup, run)
        changes = [] if d["action"] == "delete" else self._journaled_changes(step, original)
        cur = self._get(d["kind"], d["name"])
        if d["action"] == "delete":
            return self._recreate(step, original, cur, force, dry_run)
        # a patch: undo it only on the version breakglass wrote (or, with --force, on whatever is there now)
        if cur is None:
            return RevertOutcome(step.id, CONFLICT, f"{step.target} no longer exists; nothing to re-patch")
        if _content(cur) == _content(original):
            return RevertOutcome(step.id, ALREADY, f"{step.target} already matches the backup")
        if cur["metadata"].get("resourceVersion") != backup.get("rv_after") and not force:
            owner = owners.undone_by(cur)
            if owner is not None and not self._inverse(original, cur, changes)[1]:
                return RevertOutcome(step.id, ALREADY, f"{step.target}: {owner.name} ({owner.evidence}) has "
                                                       f"already rewritten it; none of breakglass' change is left")

            return RevertOutcome(step.id, CONFLICT, f"{step.target} changed since the run; left as it is",
                                 _diff(apply_ops(original, d["ops"]), cur, "written by breakglass", "now"))
        ops, done, gone = self._inverse(original, cur, changes)
        if not done:
            why = f"webhook(s) {', '.join(gone)} no longer in it" if gone else "none of breakglass' change is left"
            return RevertOutcome(step.id, CONFLICT if gone else ALREADY, f"{step.target}: {why}; left as it is")
        said = "; ".join(done) + (f"; not found by name, left alone: {', '.join(gone)}" if gone else "")
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would re-patch {step.target}: {said}")
        status, doc = self.api.request("PATCH", self._path(d["kind"], d["name"]), ops,
                                       content_type="application/json-patch+json")
        if status in (409, 422):
            raise PreconditionFailed(f"{step.target} changed while reverting (the webhooks moved or were renamed); "
                                     f"nothing re-patched, rerun revert")
        if status != 200:
            raise PreconditionFailed(f"re-patching {step.target}: HTTP {status} {doc.get('message', '')}")
        return RevertOutcome(step.id, RESTORED, f"{step.target} re-patched: {said}")

    def _inverse(self, original: dict, cur: dict, changes) -> tuple[list, list[str], list[str]]:
        """The JSON patch undoing ``changes`` on ``cur``, each webhook found by its name now (a ``test`` of the
        name at that index before each change, so a webhook inserted or moved since is never the one patched);
        what it does, said per webhook; and the webhooks no longer there."""
        ops: list = [{"op": "test", "path": "/metadata/resourceVersion", "value": cur["metadata"]["resourceVersion"]}]
        done: list[str] = []
        gone: list[str] = []
        if any(hook is None for hook, _, _ in changes):  # a binding
            before = (original.get("spec") or {}).get("validationActions")
            if (cur.get("spec") or {}).get("validationActions") != before:
                ops.append({"op": "add", "path": "/spec/validationActions", "value": before} if before is not None
                           else {"op": "remove", "path": "/spec/validationActions"})
                done.append(f"validationActions back to {before}")
            return ops, done, gone
        now = {w.get("name"): i for i, w in reversed(list(enumerate(cur.get("webhooks") or [])))}
        was = {w.get("name"): w for w in original.get("webhooks") or [] if isinstance(w, dict)}
        merged: dict[tuple, list] = {}  # one change per webhook and field (exclude adds conditions one op each)
        for hook, field, written in changes:
            merged.setdefault((hook, field), []).extend(written if isinstance(written, list) else [written])
        for (hook, field), written in merged.items():
            i = now.get(hook)
            if i is None:
                gone.append(str(hook))
                continue
            w, ow = cur["webhooks"][i], was.get(hook) or {}
            path = f"/webhooks/{i}/{field}"
            if field == "failurePolicy":
                if w.get("failurePolicy") == ow.get("failurePolicy", "Fail"):
                    continue
                ops += [{"op": "test", "path": f"/webhooks/{i}/name", "value": hook},
                        {"op": "add", "path": path, "value": ow.get("failurePolicy", "Fail")}]
                done.append(f"webhook {hook} failurePolicy back to {ow.get('failurePolicy', 'Fail')}")
            else:
                conds = w.get("matchConditions") or []
                keep = [c for c in conds if c.get("name") not in written]
                if len(keep) == len(conds):
                    continue
                ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook})
                ops.append({"op": "add", "path": path, "value": keep} if keep or "matchConditions" in ow
                           else {"op": "remove", "path": path})
                done.append(f"webhook {hook} matchConditions {', '.join(written)} removed")
        return ops, done, gone

    def _recreate(self, step: Step, original: dict, cur: dict | None, force: bool, dry_run: bool) -> RevertOutcome:
        d = step.data
        fresh = json.loads(json.dumps(original))
        for k in _SERVER_SET:
            fresh["metadata"].pop(k, None)
        fresh.pop("status", None)
        if cur is None:
            fitted = owners.fit_for_restore(fresh, self._get_path)
            also = f" ({'; '.join(fitted)})" if fitted else ""
            if dry_run:
                return RevertOutcome(step.id, RESTORED, f"would re-create {step.target}{also}")
            status, doc = self.api.request("POST", self._path(d["kind"]), fresh)
            if status == 201 or status == 200:
                return RevertOutcome(step.id, RESTORED, f"re-created {step.target}{also}",
                                     uid=str((doc.get("metadata") or {}).get("uid") or ""))
            if status != 409:
                raise PreconditionFailed(f"POST {step.target}: HTTP {status} {doc.get('message', '')}")
            cur = self._get(d["kind"], d["name"])
        if _content(cur) == _content(original):
            return RevertOutcome(step.id, ALREADY, f"{step.target} exists again with the backed-up content")
        diff = _diff(original, cur, "backup", f"{step.target} now")
        owner = owners.restored_by(original, cur)
        if owner is not None:  # its owner's copy is the current one (its CA, its rules): never overwritten
            return RevertOutcome(step.id, ALREADY, f"{step.target} was put back by its owner, {owner.name} "
                                                   f"({owner.evidence}); left as {owner.name} wrote it", diff)
        if not force:
            return RevertOutcome(step.id, CONFLICT, f"{step.target} was recreated (by an operator?) and differs "
                                                    f"from the backup; left as it is", diff)
        fresh["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would replace {step.target} (--force)", diff)
        status, doc = self.api.request("PUT", self._path(d["kind"], d["name"]), fresh)
        if status != 200:
            raise PreconditionFailed(f"PUT {step.target}: HTTP {status} {doc.get('message', '')}")
        return RevertOutcome(step.id, RESTORED, f"replaced {step.target} with the backup (--force)", diff,
                             uid=str((doc.get("metadata") or {}).get("uid") or ""))
