"""`breakglass etcd get|list|backup|restore`: expert access on the same code as recover/revert."""

from __future__ import annotations

from dataclasses import dataclass

from breakglass.core import journal
from breakglass.core.journal import Run
from breakglass.flows.recovery import EtcdTarget, report
from breakglass.ways.etcd_delete import EtcdDelete
from breakglass.webhooks import codec, sources
from breakglass.webhooks.model import KIND_NAME


@dataclass
class StoredObject:
    key: str
    kind: str
    name: str
    create_revision: int
    mod_revision: int
    version: int
    size: int
    encoding: str  # protobuf | json | encrypted | undecodable
    object: dict | None


def _encoding(value: bytes) -> tuple[str, dict | None]:
    try:
        dec = codec.decode_value(value)
    except codec.CodecError as e:
        return f"undecodable: {e}", None
    return dec.encoding + (f" ({dec.detail})" if dec.detail else ""), dec.obj


def get(target: EtcdTarget, ref: str, kinds: list[str] | None) -> list[StoredObject]:
    remedy = EtcdDelete(target.connect(), [ref], kinds, target.prefix)
    out = []
    for t, kv in remedy.resolve():
        enc, obj = _encoding(kv.value)
        out.append(StoredObject(t.key.decode(), KIND_NAME[t.kind], t.name, kv.create_revision, kv.mod_revision,
                                kv.version, len(kv.value), enc, obj))
    return out


def list_keys(target: EtcdTarget) -> list[StoredObject]:
    etcd = target.connect()
    out = []
    try:
        for kind, prefix in sources.etcd_prefixes(target.prefix).items():
            for kv in etcd.range_prefix(prefix):
                enc, _ = _encoding(kv.value)
                key = kv.key.decode("utf-8", "replace")
                out.append(StoredObject(key, KIND_NAME[kind], key.rsplit("/", 1)[-1],
                                        kv.create_revision, kv.mod_revision, kv.version, len(kv.value), enc, None))
    finally:
        etcd.close()
    return out


def backup(target: EtcdTarget, refs: list[str], kinds: list[str] | None, state: str | None) -> dict:
    remedy = EtcdDelete(target.connect(), refs, kinds, target.prefix)
    steps = remedy.plan()
    for s in steps:
        s.action, s.summary = "backup", s.summary.replace("delete", "back up", 1)
        s.diff = "(no change)\n"
    run = Run.create(journal.state_dir(state), "backup", {"method": "etcd", "refs": refs})
    try:
        run.append("planned", method="etcd", target=remedy.describe_target(), steps=[s.to_json() for s in steps])
        for s in steps:
            run.append("backing-up", step=s.id)
            run.append("backed-up", step=s.id, backup=remedy.backup(s, run))
    except BaseException as e:  # the run ends failed or interrupted, never left "applying"
        from breakglass.flows.recovery import _close  # noqa: PLC0415

        interrupted = isinstance(e, KeyboardInterrupt)
        _close(run, "interrupted" if interrupted else "failed", str(e), getattr(e, "kind", "failure"))
        raise
    run.append("run-finished", status="backed-up")
    run.write_file("report.md", report(run))
    return {"run": run.id, "path": run.path, "steps": [s.to_json() for s in steps]}


def render_objects(items: list[StoredObject]) -> str:
    import yaml  # noqa: PLC0415

    out = []
    for o in items:
        out.append(f"# {o.key}")
        out.append(f"# create_revision {o.create_revision}, mod_revision {o.mod_revision}, version {o.version}, "
                   f"{o.size} bytes, {o.encoding}")
        out.append(yaml.safe_dump(o.object, sort_keys=False).rstrip() if o.object else "# (no readable object)")
    return "\n".join(out)


def render_keys(items: list[StoredObject]) -> str:
    if not items:
        return "no admission configurations in etcd"
    from breakglass.present.render import _table  # noqa: PLC0415

    rows = [[o.key, str(o.mod_revision), str(o.size), o.encoding] for o in items]
    return "\n".join(_table(["KEY", "MOD_REVISION", "BYTES", "ENCODING"], rows))

