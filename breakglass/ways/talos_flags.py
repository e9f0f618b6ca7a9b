"""The Talos remedy: disable the webhook admission plugins in each control-plane node's machine
config (kube-apiserver ``extraArgs``), and put exactly the changed keys back on revert.

Per node: read the config, find the era's extraArgs, compute the change with the shared
flag rules, dry-run the patch through talosctl on every node before touching any, back up the
node's whole config (it holds secrets: mode 0600, never printed), apply with
``--mode=no-reboot``, read back. Revert compares first: it restores only if the keys still hold
what breakglass wrote.

A *store* hides where the config lives: a node through talosctl, or a file in a repository
(``--config-file``, for clusters managed as code). A file is edited as text
(breakglass.text.textedit): only the lines of the admission keys change, and the plan's diff is those
lines. The journal keeps the sha256 of the bytes written; revert puts back the backed-up bytes when the
file still has exactly them, else takes back only breakglass' own lines (if the keys still hold what it
wrote), else refuses with a diff. A file is edited, not applied: its step ends "edited" (the run
"edited-not-applied", exit 8) with the `talosctl apply-config --mode=no-reboot` that applies it and the /readyz
check after it.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import os
import shlex
from dataclasses import dataclass

from breakglass.core import textfile
from breakglass.access.talos import Talos
from breakglass.core.errors import BadInput, PreconditionFailed
from breakglass.core.journal import Run, sha256
from breakglass.text import admission_flags as flags
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED, Edited, RevertOutcome, Step
from breakglass.talos import machineconfig as mc
from breakglass.text import durations, textedit


class TalosctlStore:
    kind = "talosctl"

    def __init__(self, talos: Talos) -> None:
        self.talos = talos

    def read(self, node: str) -> str:
        return self.talos.machine_config(node)

    def check(self, node: str, era: str, values: dict) -> None:
        self.talos.patch(node, mc.dump(mc.patch(era, values)), dry_run=True)

    def write(self, node: str, era: str, values: dict, try_for: str | None = None) -> None:
        self.talos.patch(node, mc.dump(mc.patch(era, values)), try_for=try_for)

    def describe(self) -> dict:
        return {"talosconfig": self.talos.talosconfig, "context": self.talos.context,
                "endpoints": self.talos.endpoints}


class FileStore:
    """A machine-config file edited in place, as text (breakglass.text.textedit): only the lines of the keys
    change; every other byte, comment and indentation stays. Revert puts back the exact bytes it backed up."""

    kind = "file"

    def __init__(self, nodes: list[str] = ()) -> None:
        self.nodes = list(nodes)  # the nodes the files are for (-n with --config-file), for the apply command

    def read(self, node: str) -> str:
        return textfile.read(node, "a Talos machine config")

    def edit(self, node: str, era: str, values: dict) -> tuple[str, str]:
        """The file's text now and with these keys set."""
        text = self.read(node)
        return text, textedit.apply(text, era, values, node)

    def check(self, node: str, era: str, values: dict) -> None:
        self.edit(node, era, values)

    def preview(self, node: str, era: str, values: dict) -> str:
        old, new = self.edit(node, era, values)
        return textedit.diff(old, new, f"{node} (only the admission keys' lines are shown)", f"{node} {era}")

    def write(self, node: str, era: str, values: dict, expect: str | None = None) -> dict:
        """Edit the file; ``expect``: the sha256 it must still have (the backup's), or nothing is written."""
        old, new = self.edit(node, era, values)
        if expect and sha256(old.encode()) != expect:
            raise PreconditionFailed(f"{node}: the file changed since it was backed up; nothing was written")
        data = new.encode()
        self.put(node, data)
        # not a key ending in "sha256": the run report reads those as names of backup files
        return {"written": {"sha256": sha256(data), "bytes": len(data)}}

    def put(self, node: str, data: bytes) -> None:
        """Replace the file with these bytes, atomically, keeping its mode and owner (it holds the cluster's
        secrets: the temp file is 0600 until then, and never a planted link)."""
        if os.path.islink(node):
            raise BadInput(f"{node} is a symbolic link; name the file itself")
        textfile.write_atomic(node, data, like=os.stat(node))

    def tidy(self, node: str) -> list[str]:
        """Remove what a write killed midway left beside the file (its temp file: a copy of the config's secrets)."""
        if os.path.islink(node):
            return []
        return textfile.remove_stale_temps(node)

    def describe(self) -> dict:
        return {"store": "file"}


@dataclass
class NodeChange:
    node: str
    era: str
    change: flags.FlagChange
    values: dict  # the extraArgs keys to set (None: delete)


class TalosFlags:
    method = "talos"

    def __init__(self, store, nodes: list[str] = (), plugins: list[str] = (), try_for: str | None = None) -> None:
        self.store = store
        self.nodes = list(nodes)
        self.plugins = list(plugins)
        self.try_for = try_duration(try_for) if try_for is not None else None
        self.skipped: list[str] = []  # nodes that already had the plugins disabled
        self.notes: list[str] = [try_note(self.try_for, store)] if self.try_for else []

    def describe_target(self) -> dict:
        return {**self.store.describe(), "nodes": self.nodes, "plugins": self.plugins}

    def _read(self, node: str, text: str | None = None) -> mc.ApiServerArgs:
        text = self.store.read(node) if text is None else text
        return mc.locate(mc.parse(text, _label(node, self.store)), _label(node, self.store))

    def plan(self) -> list[Step]:
        if not self.nodes:
            raise BadInput("name the control-plane nodes with -n NODE[,NODE...]")
        plugins = flags.check_plugins(self.plugins)
        changes: list[NodeChange] = []
        for node in self.nodes:
            loc = self._read(node)
            ch = flags.disable(loc.args, plugins)
            if not ch.changed:
                self.skipped.append(node)
                continue
            changes.append(NodeChange(node, loc.era, ch, {k: ch.after[k] for k in ch.keys()}))
        # Every node must accept its change before any node is changed.
        for c in changes:
            self.store.check(c.node, c.era, c.values)
        preview = getattr(self.store, "preview", None)
        steps = []
        for i, c in enumerate(changes, 1):
            before = {k: c.change.before.get(k) for k in c.change.keys()}
            after = {k: c.change.after.get(k) for k in c.change.keys()}
            steps.append(Step(
                id=f"s{i}", target=c.node, action="patch",
                summary=f"disable {','.join(plugins)} on {c.node} ({c.era})",
                diff=preview(c.node, c.era, c.values) if preview else _diff(c.node, c.era, c.change),
                data={"node": c.node, "era": c.era, "before": before, "after": after,
                      **({"try_for": self.try_for} if self.try_for else {})}))
        return steps

    def backup(self, step: Step, run: Run) -> dict:
        text = self.store.read(step.data["node"])
        loc = mc.locate(mc.parse(text, step.target), step.target)
        if any(loc.args.get(k) != v for k, v in step.data["before"].items()) or loc.era != step.data["era"]:
            raise PreconditionFailed(f"{step.target}: the machine config changed since it was read; nothing was patched")
        info = {"config": f"{step.id}.machineconfig.yaml",
                "config_sha256": run.write_backup(f"{step.id}.machineconfig.yaml", text.encode())}
        keys = {"node": step.data["node"], "era": step.data["era"], "before": step.data["before"],
                "after": step.data["after"]}
        info["keys"] = f"{step.id}.extraargs.json"
        info["keys_sha256"] = run.write_backup(info["keys"], json.dumps(keys, indent=2).encode())
        return info

    def apply(self, step: Step, backup: dict) -> dict | None:
        # A file store answers the sha256 of the bytes it wrote; the journal's "applied" entry keeps it, so
        # revert knows whether the file is still exactly that.
        if getattr(self.store, "kind", "") == "file":
            return self.store.write(step.data["node"], step.data["era"], step.data["after"],
                                    expect=backup.get("config_sha256"))
        try_for = step.data.get("try_for")
        self.store.write(step.data["node"], step.data["era"], step.data["after"], try_for=try_for)
        if not try_for:
            return None
        # journaled with the step ("applied"): revert and the outcome tell a rolled-back try from a revert
        until = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=duration_seconds(try_for))
        return {"try_until": until.isoformat(timespec="seconds")}

    def verify(self, step: Step) -> str:
        loc = self._read(step.data["node"])
        wrong = [k for k, v in step.data["after"].items() if loc.args.get(k) != v]
        if wrong:
            raise PreconditionFailed(f"{step.target}: after the patch {', '.join(wrong)} do not read back as written")
        overlapping = flags.overlap(loc.args)
        if overlapping:
            raise PreconditionFailed(f"{step.target}: {overlapping} in both enable- and disable-admission-plugins")
        shown = f"{flags.DISABLE}={loc.args.get(flags.DISABLE)}"
        if getattr(self.store, "kind", "") == "file":  # a file here: no node has it until it is applied
            path = step.data["node"]
            return Edited(f"reads back as written: {shown}", [path],
                          [apply_command(path, self._node_for(path), self.try_for)], [READYZ_CHECK])
        if step.data.get("try_for"):
            return (f"{shown} (--mode=try: the node puts its previous config back by itself "
                    f"{step.data['try_for']} after the apply, unless confirmed)")
        return shown

    def _node_for(self, path: str) -> str:
        """The node(s) a file is applied to: the -n given with --config-file (one file: every node named; as many
        nodes as files: in the same order), else NODE for the engineer to fill in."""
        given = list(getattr(self.store, "nodes", None) or [])
        if given and len(self.nodes) == 1:
            return ",".join(given)
        if given and len(given) == len(self.nodes) and path in self.nodes:
            return given[self.nodes.index(path)]
        return ""

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        node, era = step.data["node"], step.data["era"]
        before, after = step.data["before"], step.data["after"]
        _check_journaled(node, era, before, after, getattr(self.store, "kind", "") == "file")
        # a recover killed while writing the file left its temp file (the config, secrets and all) beside it
        tidy = getattr(self.store, "tidy", None)
        tidied = tidy(node) if tidy is not None and not dry_run else []
        outcome = self._revert(step, backup, run, force, dry_run, node, era, before, after)
        if tidied:
            outcome.detail += f"; removed {', '.join(tidied)} (left beside it by an interrupted write)"
        return outcome

    def _revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool, node: str, era: str,
                before: dict, after: dict) -> RevertOutcome:
        text = self.store.read(node)
        loc = self._read(node, text)
        current = {k: loc.args.get(k) for k in before}
        if current == before:
            until = backup.get("try_until")
            if until:
                how = (f"Talos rolled the try back at its deadline ({until})" if _past(until) else
                       f"the try was rolled back before its deadline ({until}; a reboot does that too)")
                return RevertOutcome(step.id, ALREADY, f"{node}: the keys hold their earlier values: {how}")
            return RevertOutcome(step.id, ALREADY, f"{node}: the keys hold their earlier values (never changed, or "
                                                   f"already restored)")
        is_file = getattr(self.store, "kind", "") == "file"
        written = (backup.get("written") or {}).get("sha256")
        if is_file and written and written == sha256(text.encode()):
            # the file is exactly what breakglass wrote: put back exactly what was there
            original = run.read_backup(backup["config"], backup.get("config_sha256"))
            _only_admission_keys_differ(original.decode("utf-8", "replace"), text, node)
            if dry_run:
                return RevertOutcome(step.id, RESTORED, f"{node}: would restore the backed-up file byte for byte")
            self.store.put(node, original)
            return RevertOutcome(step.id, RESTORED, f"{node}: restored byte for byte as it was before the run")
        diff = "".join(difflib.unified_diff(mc.args_text(after).splitlines(True), mc.args_text(current).splitlines(True),
                                            "written by breakglass", f"{node} now"))
        if current != after and not force:
            return RevertOutcome(step.id, CONFLICT, f"{node}: {', '.join(before)} changed since the run; left as it is",
                                 diff)
        if is_file:
            # the file changed elsewhere since (or --force): take back breakglass' own lines only
            original = run.read_backup(backup["config"], backup.get("config_sha256")).decode()
            new = textedit.unapply(text, original, era, after, before, node)
            if dry_run:
                return RevertOutcome(step.id, RESTORED, f"{node}: would change only these lines",
                                     textedit.diff(text, new, f"{node} now", f"{node} reverted"))
            self.store.put(node, new.encode())
        else:
            patch = mc.patch(era, before)
            if dry_run:
                return RevertOutcome(step.id, RESTORED, f"{node}: would apply\n{mc.dump(patch)}".rstrip(), diff)
            self.store.check(node, era, before)
            self.store.write(node, era, before)
        loc = self._read(node)
        if any(loc.args.get(k) != v for k, v in before.items()):
            raise PreconditionFailed(f"{node}: revert patch applied but the keys do not read back as before")
        how = " (only breakglass' own lines; the file's other changes since stay)" if is_file else ""
        return RevertOutcome(step.id, RESTORED, f"{node}: {', '.join(before)} back to their earlier values{how}")


# cluster.apiServer's extraArgs (and the KubeAPIServerConfig document) apply without a reboot on every Talos
# version (CanApplyImmediate: the cluster section); --mode=no-reboot refuses rather than reboot if that ever changed
APPLY_MODE = "no-reboot"
READYZ_CHECK = "kubectl get --raw='/readyz?verbose'   # then: every apiserver ready once it runs with the flag"


def apply_command(path: str, node: str = "", try_for: str | None = None) -> str:
    """What applies a machine-config file edited here to its node: talosctl, in the mode that never reboots (or
    try mode with its deadline, for --try-for)."""
    where = shlex.quote(node) if node else "NODE"
    mode = f"--mode=try --timeout {try_for}" if try_for else f"--mode={APPLY_MODE}"
    return (f"talosctl apply-config -n {where} -f {shlex.quote(path)} {mode}"
            + ("" if node else "   # NODE: the control-plane node(s) this file is for"))


# -- --try-for: Talos' own dead man's switch --------------------------------------------------------------------

MIN_TRY_SECONDS = 60  # Talos' own default; less rolls back before a restarted apiserver has written anything


def try_duration(text: str) -> str:
    """A --try-for value as talosctl's --timeout takes it (a Go duration: 10m, 1h30m), at least a minute; bad
    input otherwise, in one line."""
    secs = durations.seconds(text)
    if secs is None:
        raise BadInput(f"--try-for {text!r}: not a duration (use h, m and s: 10m, 1h30m, 90s)")
    if secs < MIN_TRY_SECONDS:
        raise BadInput(f"--try-for {text}: at least 1m (Talos would roll back before the apiserver is up)")
    return text


def duration_seconds(text: str) -> float:
    return durations.seconds(text) or 0.0


def try_note(try_for: str, store) -> str:
    if getattr(store, "kind", "") == "file":
        return (f"--try-for {try_for}: the apply command below uses talosctl's try mode: once applied, the node "
                f"puts its previous config back by itself {try_for} later")
    return (f"--try-for {try_for}: applied with talosctl's --mode=try; each node puts its previous config back by "
            f"itself {try_for} after the apply (Talos' rollback timer; a reboot does too), re-arming the webhooks "
            f"whether or not their backends are back: long enough for the apiserver to come up and write its "
            f"bootstrap objects (the default ServiceCIDR, its IPAddress). `breakglass revert` before then re-arms "
            f"with its checks; any apply in another mode cancels the rollback and keeps the change")


def _past(iso: str) -> bool:
    try:
        return _dt.datetime.fromisoformat(iso) <= _dt.datetime.now(_dt.timezone.utc)
    except (TypeError, ValueError):
        return False


def _label(node: str, store) -> str:
    return node if getattr(store, "kind", "") == "file" else f"node {node}"


def _diff(node: str, era: str, ch: flags.FlagChange) -> str:
    a = {k: v for k, v in ch.before.items() if v is not None}
    b = {k: v for k, v in ch.after.items() if v is not None}
    return "".join(difflib.unified_diff(mc.args_text(a).splitlines(True), mc.args_text(b).splitlines(True),
                                        f"{node} {era} (only the admission keys; other keys unchanged)",
                                        f"{node} {era}"))


def _check_journaled(node, era, before, after, is_file: bool) -> None:
    """A run directory can be copied, and so edited: revert replays only what this remedy ever writes (the two
    admission keys, as strings or lists, in a known era, of a file named absolutely), never other keys such as
    authorization-mode or anonymous-auth."""
    from breakglass.core.journal import JournalError  # noqa: PLC0415

    def value_ok(v) -> bool:
        return v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))

    ok = (isinstance(before, dict) and isinstance(after, dict) and era in (mc.LEGACY, mc.DOCUMENT)
          and set(before) <= {flags.DISABLE, flags.ENABLE} and set(after) <= {flags.DISABLE, flags.ENABLE}
          and all(value_ok(v) for v in [*before.values(), *after.values()])
          and isinstance(node, str) and (not is_file or os.path.isabs(node)))
    if not ok:
        raise JournalError(f"the journal's step for {node!r} holds changes breakglass never makes; refusing to "
                           f"replay it (only {flags.DISABLE} and {flags.ENABLE} are ever reverted)")


def _only_admission_keys_differ(original: str, current: str, node: str) -> None:
    """Before putting a backup's bytes back, check they differ from the file now only in the admission keys, and
    in the sections that hold nothing else: recover creates ``cluster.apiServer.extraArgs`` (and ``cluster``)
    where a config had none, so a section left empty once the admission keys are out counts as absent (empty,
    null or absent: the same to Talos). Any other key in it still counts."""
    from breakglass.core.journal import JournalError  # noqa: PLC0415

    def strip(text: str) -> list:
        docs = mc.parse(text, node)
        for d in docs:
            if d.get("kind") == "KubeAPIServerConfig":
                _drop_admission_keys(d)
                continue
            cluster = d.get("cluster")
            if isinstance(cluster, dict) and isinstance(cluster.get("apiServer"), dict):
                _drop_admission_keys(cluster["apiServer"])
                if not cluster["apiServer"]:
                    cluster.pop("apiServer")
            if "cluster" in d and d["cluster"] in ({}, None) and "version" in d and "kind" not in d:
                d.pop("cluster")
        return docs

    if strip(original) != strip(current):
        raise JournalError(f"{node}: the backup differs from the file in more than the admission keys; refusing "
                           f"to restore it (the run directory may have been altered)")


def _drop_admission_keys(place: dict) -> None:
    extra = place.get("extraArgs")
    if isinstance(extra, dict):
        for k in (flags.DISABLE, flags.ENABLE):
            extra.pop(k, None)
    if "extraArgs" in place and not place["extraArgs"]:
        place.pop("extraArgs")
