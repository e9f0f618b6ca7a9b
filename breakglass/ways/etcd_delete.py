"""The etcd remedy: delete admission configurations' keys directly, after a verified backup.

For when the apiserver cannot start. Each name resolves to its exact key
(``/registry/validatingwebhookconfigurations/<name>``: no API group, whatever widely
shared recipes say); only keys under the admission prefixes can be touched, and never by
prefix. The delete is a transaction that compares ``mod_revision`` with the backed-up
version, so a version that was not backed up is never deleted. Revert puts the exact
bytes back only while the key is absent (``create_revision == 0``).
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass

from breakglass.access.etcd import KV, Etcd
from breakglass.core.errors import BadInput, PreconditionFailed
from breakglass.core.journal import Run, TamperedRun
from breakglass.ways.base import ALREADY, CONFLICT, NOT_APPLIED, RESTORED, RevertOutcome, Step
from breakglass.webhooks import codec, model, owners, resolve, sources

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
KIND_ALIASES = {
    "validating": model.VALIDATING, "validatingwebhookconfiguration": model.VALIDATING,
    "validatingwebhookconfigurations": model.VALIDATING,
    "mutating": model.MUTATING, "mutatingwebhookconfiguration": model.MUTATING,
    "mutatingwebhookconfigurations": model.MUTATING,
    "vap": model.VAP, "validatingadmissionpolicy": model.VAP, "validatingadmissionpolicies": model.VAP,
    "vapbinding": model.VAP_BINDING, "validatingadmissionpolicybinding": model.VAP_BINDING,
    "validatingadmissionpolicybindings": model.VAP_BINDING,
    "map": model.MAP, "mutatingadmissionpolicy": model.MAP, "mutatingadmissionpolicies": model.MAP,
    "mapbinding": model.MAP_BINDING, "mutatingadmissionpolicybinding": model.MAP_BINDING,
    "mutatingadmissionpolicybindings": model.MAP_BINDING,
}
DEFAULT_KINDS = (model.VALIDATING, model.MUTATING, model.VAP_BINDING, model.MAP_BINDING, model.VAP, model.MAP)


def check_name(name: str) -> str:
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):  # match() with $ would accept a final newline
        raise BadInput(f"{name!r} is not a valid Kubernetes object name (lower-case DNS subdomain, at most 253 characters)")
    return name


def kind_of(alias: str) -> str:
    k = KIND_ALIASES.get(alias.lower().rstrip("."))
    if k is None:
        raise BadInput(f"unknown kind {alias!r} (use validating, mutating, vap, vapbinding, map or mapbinding)")
    return k


@dataclass(frozen=True)
class Target:
    kind: str
    name: str
    key: bytes


def parse_ref(ref: str, kind: str | None, prefix: str) -> tuple[str | None, str]:
    """NAME, kind/NAME or an etcd key → (kind or None, name). Recognises the wrong recipe key."""
    base = prefix.rstrip("/")
    if ref.startswith("/"):
        m = re.fullmatch(re.escape(base) + r"/(?:(?P<group>admissionregistration\.k8s\.io)/)?(?P<res>[a-z]+)/(?P<name>[^/]+)",
                         ref)
        if not m or m["res"] not in model.RESOURCE_OF.values():
            raise BadInput(f"{ref} is not the etcd key of an admission configuration (they look like "
                           f"{base}/validatingwebhookconfigurations/<name>)")
        k = next(k for k, r in model.RESOURCE_OF.items() if r == m["res"])
        if m["group"]:
            right = f"{base}/{m['res']}/{m['name']}"
            raise BadInput(f"{ref} has the API group in it, which kube-apiserver does not use for built-in kinds: "
                           f"the key is {right}", hint="that widely shared recipe deletes nothing")
        return k, check_name(m["name"])
    if "/" in ref:
        alias, name = ref.split("/", 1)
        return kind_of(alias.split(".")[0]), check_name(name)
    return kind, check_name(ref)


class EtcdDelete:
    method = "etcd"

    def __init__(self, etcd: Etcd, refs: list[str] = (), kinds: list[str] | None = None,
                 prefix: str = sources.DEFAULT_ETCD_PREFIX, take_all: bool = False) -> None:
        self.etcd = etcd
        self.refs = list(refs)
        self.kinds = [kind_of(k) for k in kinds] if kinds else None
        self.prefix = prefix
        self.take_all = take_all  # a webhook defined in several configurations: all, if they fail together
        self.notes: list[str] = []
        self.held: dict[str, str] = {}  # kind/NAME -> the webhook name that led to it (webhook:NAME references)

    def describe_target(self) -> dict:
        # the way back to etcd (through SSH: the route, not the forward port); a user's name, never a password
        return {**self.etcd.settings.journal_target(), "etcd_prefix": self.prefix}

    # -- plan ------------------------------------------------------------------------------------
    def _webhook_refs(self) -> list[str]:
        """``webhook:NAME`` references replaced by the configurations that define that webhook in this etcd."""
        refs, hooks = resolve.webhook_names(self.refs)
        for m in resolve.placed(hooks, lambda: sources.load_etcd(self.etcd, self.prefix).configs, "etcd",
                                self.kinds, self.take_all):
            refs.append(m.ref)
            self.held[m.ref] = m.webhook
            self.notes.append(resolve.note(m, "etcd"))
        return refs

    def resolve(self) -> list[tuple[Target, KV]]:
        found: list[tuple[Target, KV]] = []
        seen: set[bytes] = set()
        for ref in self._webhook_refs():
            kind, name = parse_ref(ref, None, self.prefix)
            candidates = [kind] if kind else (self.kinds or list(DEFAULT_KINDS))
            hits = []
            for k in candidates:
                key = sources.etcd_key(k, name, self.prefix)
                kv = self.etcd.get(key)
                if kv is not None:
                    hits.append((Target(k, name, key), kv))
            if not hits:
                raise BadInput(self._not_found(name, candidates))
            if len(hits) > 1 and not kind and not self.kinds:
                keys = ", ".join(t.key.decode() for t, _ in hits)
                raise BadInput(f"{name!r} names several configurations ({keys})",
                               hint="say which with --kind, or kind/name (validating/NAME)")
            for t, kv in hits:
                if t.key not in seen:
                    seen.add(t.key)
                    found.append((t, kv))
        return found

    def _not_found(self, name: str, kinds: list[str]) -> str:
        keys = [sources.etcd_key(k, name, self.prefix).decode() for k in kinds]
        existing: list[str] = []
        for k in kinds[:2]:
            for kv in self.etcd.range_prefix(sources.etcd_prefixes(self.prefix, (k,))[k], keys_only=True):
                existing.append(kv.key.decode().rsplit("/", 1)[-1])
                if len(existing) >= 20:
                    break
        close = [e for e in existing if name in e or e in name]
        msg = f"no configuration named {name!r} in etcd (looked at {', '.join(keys)})"
        if close:
            msg += f"; similar: {', '.join(sorted(close)[:5])}"
        elif existing:
            msg += f"; there are: {', '.join(sorted(existing)[:8])}"
        return msg

    def plan(self) -> list[Step]:
        steps = []
        for i, (t, kv) in enumerate(self.resolve(), 1):
            desc = _describe_value(kv.value)
            diff = (f"--- etcd {t.key.decode()} (mod_revision {kv.mod_revision}, {len(kv.value)} bytes{desc})\n"
                    f"+++ (deleted)\n")
            hook = self.held.get(f"{t.kind}/{t.name}")
            warning = _owner_warning(kv.value)
            if warning and not any(warning in n for n in self.notes):
                self.notes.append(f"{t.name}: {warning}")
            steps.append(Step(
                id=f"s{i}", target=t.key.decode(), action="delete",
                summary=f"delete {model.KIND_NAME[t.kind]} {t.name} from etcd"
                        + (f" (it holds webhook {hook})" if hook else ""),
                diff=diff,
                data={"kind": t.kind, "name": t.name, "key_b64": base64.b64encode(t.key).decode(),
                      "mod_revision": kv.mod_revision, "create_revision": kv.create_revision,
                      "version": kv.version, "size": len(kv.value)}))
        return steps

    # -- apply -----------------------------------------------------------------------------------
    def backup(self, step: Step, run: Run) -> dict:
        key = base64.b64decode(step.data["key_b64"])
        kv = self.etcd.get(key)
        if kv is None or kv.mod_revision != step.data["mod_revision"]:
            raise PreconditionFailed(f"{step.target} changed between plan and backup; nothing was deleted")
        value_sha = run.write_backup(f"{step.id}.value", kv.value)
        meta = {"key_b64": step.data["key_b64"], "key": step.target, "create_revision": kv.create_revision,
                "mod_revision": kv.mod_revision, "version": kv.version, "value_sha256": value_sha,
                "etcd_endpoints": self.etcd.settings.journal_target()["etcd_endpoints"]}
        meta_sha = run.write_backup(f"{step.id}.meta.json", json.dumps(meta, indent=2, sort_keys=True).encode())
        info = {"value": f"{step.id}.value", "value_sha256": value_sha, "meta": f"{step.id}.meta.json",
                "meta_sha256": meta_sha, "mod_revision": kv.mod_revision}
        readable = _readable(kv.value)
        if readable is not None:
            info["yaml"] = f"{step.id}.yaml"
            info["yaml_sha256"] = run.write_backup(info["yaml"], readable)
        return info

    def apply(self, step: Step, backup: dict) -> None:
        key = base64.b64decode(step.data["key_b64"])
        if not self.etcd.delete_if_mod_revision(key, backup["mod_revision"]):
            raise PreconditionFailed(
                f"{step.target} changed after it was backed up (mod_revision is no longer {backup['mod_revision']}); "
                f"nothing was deleted", hint="rerun recover to back up and delete the current version")

    def verify(self, step: Step) -> str:
        key = base64.b64decode(step.data["key_b64"])
        if self.etcd.get(key) is not None:
            raise PreconditionFailed(f"{step.target} is present again right after the delete (an operator recreated it?)")
        return "key absent"

    # -- revert ----------------------------------------------------------------------------------
    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        key = self._journaled_key(step)
        value = self._journaled_value(step, backup, run)
        cur = self.etcd.get(key)
        if cur is not None and cur.value == value:
            return RevertOutcome(step.id, ALREADY if cur.mod_revision != backup["mod_revision"] else NOT_APPLIED,
                                 f"{step.target} holds the backed-up bytes")
        if cur is None:
            if dry_run:
                return RevertOutcome(step.id, RESTORED, f"would put {len(value)} bytes back at {step.target}")
            if self.etcd.put_if_absent(key, value):
                return RevertOutcome(step.id, RESTORED, f"put {len(value)} bytes back at {step.target}")
            cur = self.etcd.get(key)  # recreated between our read and our write
            if cur is None:
                raise PreconditionFailed(f"{step.target}: put-if-absent failed but the key is absent")
        diff = _diff(value, cur.value)
        owner = _restored_by(value, cur.value)
        if owner is not None:  # its owner's copy is the current one (its CA, its rules): never overwritten
            return RevertOutcome(step.id, ALREADY, f"{step.target} was put back by its owner, {owner.name} "
                                                   f"({owner.evidence}); left as {owner.name} wrote it", diff)
        if not force:
            return RevertOutcome(step.id, CONFLICT, f"{step.target} was recreated since (mod_revision "
                                                    f"{cur.mod_revision}); left as it is", diff)
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would overwrite {step.target} (--force)", diff)
        if not self.etcd.put_if_mod_revision(key, value, cur.mod_revision):
            raise PreconditionFailed(f"{step.target} changed again while reverting; rerun revert")
        return RevertOutcome(step.id, RESTORED, f"overwrote {step.target} with the backup (--force)", diff)

    def _journaled_value(self, step: Step, backup: dict, run: Run) -> bytes:
        """The backed-up value, only if it is what this step deleted: its sha256 the journal's (and the backup's
        own meta's), and the object it decodes to of the step's kind and name. A run directory is a copy that can
        be edited: without this, a value put under another name (or a new key) would be written as it is."""
        kind, name = step.data["kind"], step.data["name"]
        value_name, value_sha = backup.get("value"), backup.get("value_sha256")
        if not isinstance(value_name, str) or not isinstance(value_sha, str):
            raise TamperedRun(f"step {step.id}: the journal names no backed-up value for {step.target}")
        value = run.read_backup(value_name, value_sha)
        if isinstance(backup.get("meta"), str) and isinstance(backup.get("meta_sha256"), str):
            try:
                meta = json.loads(run.read_backup(backup["meta"], backup["meta_sha256"]))
            except ValueError:
                meta = None
            if not isinstance(meta, dict) or meta.get("key_b64") != step.data.get("key_b64") \
                    or meta.get("value_sha256") != value_sha:
                raise TamperedRun(f"step {step.id}: the backup's own record of {step.target} names another key or "
                                  f"value; refusing to put it back (the run directory may have been altered)")
        try:
            dec = codec.decode_value(value)
        except BadInput as e:
            raise TamperedRun(f"step {step.id}: the backup of {step.target} is not a Kubernetes object ({e}); "
                              f"refusing to put it back") from None
        if dec.obj is None:
            raise TamperedRun(f"step {step.id}: the backup of {step.target} is encrypted at rest ({dec.detail}), so "
                              f"breakglass cannot check that it is {model.KIND_NAME[kind]} {name}; not put back",
                              hint=f"put it back by hand if you trust this run directory: etcdctl put {step.target} "
                                   f"< {os.path.join(run.backups, value_name)}")
        got_kind = dec.obj.get("kind")
        got_name = (dec.obj.get("metadata") or {}).get("name") if isinstance(dec.obj.get("metadata"), dict) else None
        if got_kind != model.KIND_NAME[kind] or got_name != name:
            raise TamperedRun(f"step {step.id}: the backup of {step.target} holds {got_kind} {got_name!r}, not "
                              f"{model.KIND_NAME[kind]} {name}; refusing to put it back (the run directory may have "
                              f"been altered)")
        return value

    def _journaled_key(self, step: Step) -> bytes:
        """The step's key, only if it is the exact key of its kind and name under the run's prefix."""
        try:
            key = base64.b64decode(step.data.get("key_b64") or "", validate=True)
        except (ValueError, TypeError):
            raise BadInput(f"step {step.id}: the journal's key is not base64") from None
        kind, name = step.data.get("kind"), step.data.get("name")
        if kind not in model.RESOURCE_OF or not isinstance(name, str):
            raise BadInput(f"step {step.id}: the journal names no admission kind and name for {key!r}")
        want = sources.etcd_key(kind, check_name(name), self.prefix)
        if key != want:
            raise BadInput(f"step {step.id}: the journal's key {key.decode('utf-8', 'replace')!r} is not "
                           f"{want.decode()} (the key of {kind}/{name} under the run's prefix {self.prefix})")
        if step.target != want.decode() or step.action not in ("delete", "backup"):  # recover, `etcd backup`
            raise TamperedRun(f"step {step.id}: the journal's step names {step.target!r} but asks to put back "
                              f"{want.decode()}; refusing (the run directory may have been altered)")
        return key


def _decode(value: bytes):
    try:
        return codec.decode_value(value)
    except BadInput:
        return None


def _describe_value(value: bytes) -> str:
    dec = _decode(value)
    if dec is None:
        return ", undecodable"
    if dec.obj is None:
        return f", encrypted: {dec.detail}"
    hooks = [w.get("name") for w in dec.obj.get("webhooks") or [] if isinstance(w, dict)]
    return f"; webhooks: {', '.join(map(str, hooks))}" if hooks else ""


def _readable(value: bytes) -> bytes | None:
    import yaml  # noqa: PLC0415

    dec = _decode(value)
    if dec is None or dec.obj is None:
        return None
    return yaml.safe_dump(dec.obj, sort_keys=False).encode()


def _diff(old: bytes, new: bytes) -> str:
    import difflib  # noqa: PLC0415

    a, b = _readable(old), _readable(new)
    if a is None or b is None:
        return f"backup: {len(old)} bytes; now: {len(new)} bytes (not decodable as objects)"
    return "".join(difflib.unified_diff(a.decode().splitlines(True), b.decode().splitlines(True),
                                        "backup", "etcd now"))


def _restored_by(backed_up: bytes, now: bytes):
    """The owner that wrote the configuration now at the key, when it is another object than the one deleted."""
    try:
        a, b = codec.decode_value(backed_up).obj, codec.decode_value(now).obj
    except BadInput:
        return None
    return owners.restored_by(a, b) if isinstance(a, dict) and isinstance(b, dict) else None


def _owner_warning(value: bytes) -> str | None:
    """What the configuration's owner does to a delete, from the stored object (None if it says nothing)."""
    try:
        obj = codec.decode_value(value).obj
        return owners.of(model.from_json(obj, "etcd")).warning("delete") if isinstance(obj, dict) else None
    except BadInput:
        return None
