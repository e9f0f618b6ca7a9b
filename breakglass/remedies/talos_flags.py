"""The Talos remedy: disable the webhook admission plugins in each control-plane node's machine
config (kube-apiserver ``extraArgs``), and put exactly the changed keys back on revert.

Per node: read the config, find the era's extraArgs, compute the change with the shared
flag rules, dry-run the patch through talosctl on every node before touching any, back up the
node's whole config (it holds secrets: mode 0600, never printed), apply with
``--mode=no-reboot``, read back. Revert compares first: it restores only if the keys still hold
what breakglass wrote.

A *store* hides where the config lives: a node through talosctl, or a file in a repository
(``--config-file``, for clusters managed as code).
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass

from breakglass import textfile
from breakglass.access.talos import Talos
from breakglass.errors import BadInput, PreconditionFailed
from breakglass.journal import Run
from breakglass.remedies import admission_flags as flags
from breakglass.remedies.base import ALREADY, CONFLICT, RESTORED, RevertOutcome, Step
from breakglass.talos import machineconfig as mc


class TalosctlStore:
    kind = "talosctl"

    def __init__(self, talos: Talos) -> None:
        self.talos = talos

    def read(self, node: str) -> str:
        return self.talos.machine_config(node)

    def check(self, node: str, patch: dict) -> None:
        self.talos.patch(node, mc.dump(patch), dry_run=True)

    def write(self, node: str, patch: dict) -> None:
        self.talos.patch(node, mc.dump(patch))

    def describe(self) -> dict:
        return {"talosconfig": self.talos.talosconfig, "context": self.talos.context,
                "endpoints": self.talos.endpoints}


class FileStore:
    """A machine-config file edited in place, keeping comments and key order (ruamel.yaml)."""

    kind = "file"

    def read(self, node: str) -> str:
        return textfile.read(node, "a Talos machine config")

    def check(self, node: str, patch: dict) -> None:
        apply_to_text(self.read(node), patch)

    def write(self, node: str, patch: dict) -> None:
        text = apply_to_text(self.read(node), patch)
        st = os.stat(node)
        tmp = os.path.join(os.path.dirname(os.path.abspath(node)), f".{os.path.basename(node)}.breakglass.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, st.st_mode & 0o7777)
        os.replace(tmp, node)

    def describe(self) -> dict:
        return {"store": "file"}


def apply_to_text(text: str, patch: dict) -> str:
    """Apply one of our extraArgs patches to a config file's text, keeping its comments."""
    import io  # noqa: PLC0415

    from ruamel.yaml import YAML  # noqa: PLC0415

    y = YAML()
    y.preserve_quotes = True
    y.width = 4096
    mapping, sequence, offset = _indentation(text)
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    docs = list(y.load_all(text))
    if patch.get("kind") == "KubeAPIServerConfig":
        target = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "KubeAPIServerConfig"), None)
        if target is None:
            raise BadInput("the config has no KubeAPIServerConfig document to patch")
        values = patch["extraArgs"]
    else:
        target = next((d for d in docs if isinstance(d, dict) and d.get("version") == "v1alpha1"), None)
        if target is None:
            raise BadInput("the config has no v1alpha1 document to patch")
        for key in ("cluster", "apiServer"):
            if target.get(key) is None:
                target[key] = {}
            target = target[key]
        values = patch["cluster"]["apiServer"]["extraArgs"]
    if target.get("extraArgs") is None:
        target["extraArgs"] = {}
    extra = target["extraArgs"]
    for k, v in values.items():
        if isinstance(v, dict) and v.get("$patch") == "delete":
            extra.pop(k, None)
        else:
            extra[k] = v
    if not extra:
        del target["extraArgs"]
    out = io.StringIO()
    y.dump_all(docs, out)
    return out.getvalue()


def _indentation(text: str) -> tuple[int, int, int]:
    """The file's own indentation, so a rewrite changes only the lines it must.

    `talosctl gen config` writes 4-space mappings with list dashes indented 4; hand-written
    files often use 2. Returns ruamel's (mapping, sequence, offset).
    """
    import re  # noqa: PLC0415

    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    mapping = 2
    for prev, cur in zip(lines, lines[1:]):
        if prev.rstrip().endswith(":") and not cur.lstrip().startswith("- "):
            step = len(cur) - len(cur.lstrip()) - (len(prev) - len(prev.lstrip()))
            if step > 0:
                mapping = step
                break
    offset = None
    for prev, cur in zip(lines, lines[1:]):
        if prev.rstrip().endswith(":") and re.match(r"\s*- ", cur):
            offset = (len(cur) - len(cur.lstrip())) - (len(prev) - len(prev.lstrip()))
            break
    if offset is None or offset < 0:
        offset = 0 if mapping == 2 else mapping
    return mapping, offset + 2, offset


@dataclass
class NodeChange:
    node: str
    era: str
    change: flags.FlagChange
    patch: dict


class TalosFlags:
    method = "talos"

    def __init__(self, store, nodes: list[str] = (), plugins: list[str] = ()) -> None:
        self.store = store
        self.nodes = list(nodes)
        self.plugins = list(plugins)
        self.skipped: list[str] = []  # nodes that already had the plugins disabled

    def describe_target(self) -> dict:
        return {**self.store.describe(), "nodes": self.nodes, "plugins": self.plugins}

    def _read(self, node: str) -> mc.ApiServerArgs:
        text = self.store.read(node)
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
            changes.append(NodeChange(node, loc.era, ch, mc.patch(loc.era, {k: ch.after[k] for k in ch.keys()})))
        # Every node must accept its patch before any node is changed.
        for c in changes:
            self.store.check(c.node, c.patch)
        steps = []
        for i, c in enumerate(changes, 1):
            before = {k: c.change.before.get(k) for k in c.change.keys()}
            after = {k: c.change.after.get(k) for k in c.change.keys()}
            steps.append(Step(
                id=f"s{i}", target=c.node, action="patch",
                summary=f"disable {','.join(plugins)} on {c.node} ({c.era})",
                diff=_diff(c.node, c.era, c.change),
                data={"node": c.node, "era": c.era, "before": before, "after": after}))
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

    def apply(self, step: Step, backup: dict) -> None:
        self.store.write(step.data["node"], mc.patch(step.data["era"], step.data["after"]))

    def verify(self, step: Step) -> str:
        loc = self._read(step.data["node"])
        wrong = [k for k, v in step.data["after"].items() if loc.args.get(k) != v]
        if wrong:
            raise PreconditionFailed(f"{step.target}: after the patch {', '.join(wrong)} do not read back as written")
        overlapping = flags.overlap(loc.args)
        if overlapping:
            raise PreconditionFailed(f"{step.target}: {overlapping} in both enable- and disable-admission-plugins")
        return f"{flags.DISABLE}={loc.args.get(flags.DISABLE)}"

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        node, era = step.data["node"], step.data["era"]
        before, after = step.data["before"], step.data["after"]
        loc = self._read(node)
        current = {k: loc.args.get(k) for k in before}
        if current == before:
            return RevertOutcome(step.id, ALREADY, f"{node}: the keys hold their earlier values (never changed, or "
                                                   f"already restored)")
        diff = "".join(difflib.unified_diff(mc.args_text(after).splitlines(True), mc.args_text(current).splitlines(True),
                                            "written by breakglass", f"{node} now"))
        if current != after and not force:
            return RevertOutcome(step.id, CONFLICT, f"{node}: {', '.join(before)} changed since the run; left as it is",
                                 diff)
        patch = mc.patch(era, before)
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"{node}: would apply\n{mc.dump(patch)}".rstrip(), diff)
        self.store.check(node, patch)
        self.store.write(node, patch)
        loc = self._read(node)
        if any(loc.args.get(k) != v for k, v in before.items()):
            raise PreconditionFailed(f"{node}: revert patch applied but the keys do not read back as before")
        return RevertOutcome(step.id, RESTORED, f"{node}: {', '.join(before)} back to their earlier values")


def _label(node: str, store) -> str:
    return node if getattr(store, "kind", "") == "file" else f"node {node}"


def _diff(node: str, era: str, ch: flags.FlagChange) -> str:
    a = {k: v for k, v in ch.before.items() if v is not None}
    b = {k: v for k, v in ch.after.items() if v is not None}
    return "".join(difflib.unified_diff(mc.args_text(a).splitlines(True), mc.args_text(b).splitlines(True),
                                        f"{node} {era} (only the admission keys; other keys unchanged)",
                                        f"{node} {era}"))
