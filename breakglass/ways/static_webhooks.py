"""The manifest-based webhook remedy (1.36+, KEP-5793): set failurePolicy Ignore on the named webhooks in the files
of kube-apiserver's staticManifestsDir, on every control-plane node.

Such a configuration (its name ends in ``.static.k8s.io``) is neither served by the API nor kept in etcd, so
neither `recover kubeapi` nor `recover etcd` can touch it; the apiserver reloads the directory when a file changes
(checked on a real 1.36 apiserver in tests/test_static_manifests_real.py), so no restart is needed. Only the named
webhooks change, to failurePolicy Ignore: every other webhook and policy in the directory keeps enforcing, which is
less than the admission-plugin flag takes away.

The file is written through ways.nodefile (compare-and-swap on its sha256, atomic rename, mode kept), after a
backup in the run directory and, over SSH, a copy on the node outside the staticManifestsDir (the apiserver loads
every .yaml, .yml and .json there: a backup inside it would be loaded too). The file is rewritten from its parsed
documents (comments are not kept: the diff shows the whole change, and revert puts the bytes back as they were).
Revert writes the old bytes only where the file is still what breakglass wrote; with --force, a file changed since
gets only breakglass' change taken back (those webhooks' failurePolicy as it was).
"""

from __future__ import annotations

import difflib
import json
import os
import posixpath

from breakglass.access.ssh import quoted_path, remote_path
from breakglass.core import textfile
from breakglass.core.errors import BadInput
from breakglass.core.journal import Run, TamperedRun
from breakglass.ways import kubeadm_flags, nodefile
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED, RevertOutcome, Step
from breakglass.ways.nodefile import sha
from breakglass.webhooks import static_manifests

KUBEADM_MANIFEST, NODE_BACKUP_DIR = kubeadm_flags.DEFAULT_MANIFEST, kubeadm_flags.NODE_BACKUP_DIR
KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
IGNORE = "Ignore"


def _documents(text: str, where: str) -> list:
    import yaml  # noqa: PLC0415

    try:  # JSON is YAML: one reader for both, with the guards against nesting and aliases
        return [d for d in textfile.load_yaml(text, where, "a webhook manifest", all_documents=True) if d is not None]
    except yaml.YAMLError as e:
        raise BadInput(f"{where}: invalid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None


def _configurations(docs: list):
    """Each webhook configuration object in the documents (a List's items included)."""
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else [doc]
        for obj in items or []:
            if isinstance(obj, dict) and obj.get("kind") in KINDS:
                yield obj


def _wanted(obj: dict, hook: dict, names: set[str]) -> bool:
    """A webhook the engineer named: by its own name, or by its configuration's (every webhook in it)."""
    config = (obj.get("metadata") or {}).get("name")
    return isinstance(hook, dict) and (hook.get("name") in names or config in names)


def set_policy(text: str, where: str, names: set[str], policies: dict | None = None) -> tuple[str, dict]:
    """The file's text with failurePolicy set on the named webhooks: Ignore, or (``policies``: "configuration/
    webhook" -> the policy to put back, None for unset) what revert restores. Returns the new text (unchanged
    when nothing needed it) and, for each webhook it changed, its policy before (None: unset)."""
    docs = _documents(text, where)
    before: dict[str, str | None] = {}
    for obj in _configurations(docs):
        config = (obj.get("metadata") or {}).get("name")
        for hook in obj.get("webhooks") or []:
            key = f"{config}/{hook.get('name') if isinstance(hook, dict) else ''}"
            if policies is not None:
                if key not in policies or not isinstance(hook, dict):
                    continue
                want = policies[key]
            elif _wanted(obj, hook, names):
                want = IGNORE
            else:
                continue
            if hook.get("failurePolicy") == want:
                continue
            before[key] = hook.get("failurePolicy")
            if want is None:
                hook.pop("failurePolicy", None)
            else:
                hook["failurePolicy"] = want
    if not before:
        return text, before
    return _dump(docs, where), before


def _dump(docs: list, where: str) -> str:
    import yaml  # noqa: PLC0415

    if where.endswith(".json"):
        return json.dumps(docs[0], indent=2) + "\n"
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120)


def webhooks_in(text: str, where: str) -> list[str]:
    """Every "configuration/webhook" in a file (for the message when nothing named is there)."""
    return [f"{(o.get('metadata') or {}).get('name')}/{h.get('name')}" for o in _configurations(_documents(text, where))
            for h in o.get("webhooks") or [] if isinstance(h, dict)]


def apiserver_dirs(node, kubeadm_manifest: str = KUBEADM_MANIFEST) -> list[str]:
    """The staticManifestsDir(s) the node's kube-apiserver loads, read from its static pod manifest's flags (none:
    it loads no manifest-based webhook)."""
    text = kubeadm_flags.read_remote(node, kubeadm_manifest).decode("utf-8", "replace")
    args = kubeadm_flags.apiserver_args(text, f"{node.host}:{kubeadm_manifest}")
    return static_manifests.manifest_dirs(args, lambda path: nodefile.read_remote(node, path))


NO_DIR = (f"kube-apiserver names no staticManifestsDir (no --{static_manifests.CONFIG_FLAG}, or no "
          f"WebhookAdmission.staticManifestsDir in it)")


def manifest_dirs(node, kubeadm_manifest: str) -> list[str]:
    """apiserver_dirs, refused when there is none (a remedy for a manifest-based webhook needs one)."""
    dirs = apiserver_dirs(node, kubeadm_manifest)
    if not dirs:
        raise BadInput(f"{node.host}: {NO_DIR}: it loads no manifest-based webhook")
    return dirs


def manifest_paths(node, directory: str) -> list[str]:
    """The files the apiserver loads from ``directory`` on the node, in the order it reads them."""
    r = node.run(f"ls -1A -- {quoted_path(directory, 'staticManifestsDir')}")
    if r.rc != 0:
        raise BadInput(f"{node.host}:{directory}: {r.err.decode('utf-8', 'replace').strip()[:200] or 'cannot list it'}")
    names = static_manifests.manifest_files(r.out.decode("utf-8", "replace").splitlines())
    return [posixpath.join(directory, n) for n in names]


class StaticWebhooks(nodefile.Nodes):
    method = "static-manifests"

    def __init__(self, nodes: dict, names: list[str], dirs: list[str] | None = None,
                 kubeadm_manifest: str = KUBEADM_MANIFEST, local: bool = False,
                 backup_dir: str = NODE_BACKUP_DIR) -> None:
        self.nodes = nodes  # host -> Node (SSH) or LocalNode
        self.names = [n for n in names if n]
        self.local = local
        # paths on the node (also when they come from a run's journal): absolute, never an option
        self.dirs = [d if local else remote_path(d, "--static-manifests") for d in dirs or []]
        self.kubeadm_manifest = remote_path(kubeadm_manifest, "--manifest-path")
        self.backup_dir = backup_dir if local else remote_path(backup_dir, "--node-backup-dir")
        self.notes: list[str] = []
        self.skipped: list[str] = []

    def describe_target(self) -> dict:
        return {"hosts": list(self.nodes), "webhooks": self.names, "dirs": self.dirs, "local": self.local,
                "manifest": self.kubeadm_manifest, "backup_dir": self.backup_dir}

    def plan(self) -> list[Step]:
        if not self.names:
            raise BadInput("name the manifest-based webhook(s) to set to Ignore: --webhook NAME (or its "
                           "configuration with -w NAME, or --diagnosis FILE)")
        names, steps, seen = set(self.names), [], []
        for host, node in self.nodes.items():
            dirs = self.dirs or manifest_dirs(node, self.kubeadm_manifest)
            found = False
            for d in dirs:
                for path in manifest_paths(node, d):
                    where = f"{host}:{path}"
                    raw = nodefile.read_remote(node, path)
                    text = textfile.decode(raw, where, "a webhook manifest")
                    seen += webhooks_in(text, where)
                    new, before = set_policy(text, where, names)
                    if not before:
                        found = found or any(k.split("/", 1)[0] in names or k.split("/", 1)[1] in names
                                             for k in webhooks_in(text, where))
                        continue
                    found = True
                    diff = nodefile.text_diff(text, new, where, f"{where} (new)")
                    steps.append(Step(
                        id=f"s{len(steps) + 1}", target=where, action="edit",
                        summary=f"failurePolicy Ignore for {', '.join(sorted(before))} in {where}", diff=diff,
                        data={"host": host, "path": path, "before_sha": sha(raw), "after_sha": sha(new.encode()),
                              "after": new, "policies": before}))
            if not found:
                known = sorted({part for k in seen for part in k.split("/", 1)})
                close = [m for n in sorted(names) for m in difflib.get_close_matches(n, known, 1, 0.8)]
                raise BadInput(f"{host}: no manifest-based webhook named {', '.join(sorted(names))} in "
                               f"{', '.join(dirs)}" + (f"; did you mean {', '.join(close)}?" if close else
                                                       f" (found: {', '.join(sorted(set(seen)))[:300] or 'none'})"))
            if not any(s.data["host"] == host for s in steps):
                self.skipped.append(host)
        return steps

    def backup(self, step: Step, run: Run) -> dict:
        return self.backup_file(step, run, f"{step.id}.{os.path.basename(step.data['path'])}",
                                ("file", "file_sha256"), "the apiserver loads")

    def apply(self, step: Step, backup: dict) -> None:
        self.write_planned(step)

    def verify(self, step: Step) -> str:
        self.read_back(step)
        return f"{step.target} reads back as written (the apiserver reloads its staticManifestsDir by itself)"

    def _journaled(self, step: Step, backup: dict):
        """The node and file of a journaled step, only if it is a file this remedy edits (a run's host, a manifest
        file name in a staticManifestsDir the run named or that the node's apiserver names), never another."""
        d = step.data
        host, path = d.get("host"), d.get("path")
        ok = (host in self.nodes and isinstance(path, str) and step.target == f"{host}:{path}"
              and isinstance(backup.get("file"), str) and isinstance(d.get("after_sha"), str)
              and isinstance(d.get("policies"), dict) and static_manifests.manifest_files([posixpath.basename(path)]))
        if ok:
            dirs = self.dirs or manifest_dirs(self._node(host), self.kubeadm_manifest)
            ok = posixpath.dirname(path) in [posixpath.normpath(x) for x in dirs]
        if not ok:
            raise TamperedRun(f"step {step.id}: the journal asks to restore {step.target!r}, not a file of the "
                              f"staticManifestsDir this run edited; refusing to write it (the run directory may "
                              f"have been altered)")
        return self._node(host), path

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        node, path = self._journaled(step, backup)
        where = step.target
        original = run.read_backup(backup["file"], backup["file_sha256"])
        current = nodefile.read_remote(node, path)
        if sha(current) == sha(original):
            return RevertOutcome(step.id, ALREADY, f"{where} already holds the earlier file")
        policies = step.data["policies"]
        if sha(current) == step.data["after_sha"]:
            # what breakglass wrote: the backup must be it with only those webhooks' failurePolicy put back
            text = textfile.decode(original, f"the backup of {where}", "a webhook manifest")
            redone, _ = set_policy(text, where, set(), {k: IGNORE for k in policies})
            if _documents(redone, where) != _documents(step.data["after"], where):
                raise TamperedRun(f"{where}: the backup differs from the file in more than the failurePolicy "
                                  f"breakglass changed; refusing to restore it (the run directory may have been "
                                  f"altered)")
            return self.restore_bytes(step, node, path, current, original, dry_run)
        now = textfile.decode(current, where, "a webhook manifest")
        diff = nodefile.text_diff(step.data["after"], now, "written by breakglass", f"{where} now")
        if not force:
            return RevertOutcome(step.id, CONFLICT, f"{where} changed since the run; left as it is", diff)
        # --force on a file changed since: only the webhooks breakglass set to Ignore, and still Ignore, go back
        still = {k: v for k, v in policies.items() if _policy_of(now, where, k) == IGNORE}
        new, back = set_policy(now, where, set(), still)
        if not back:
            return RevertOutcome(step.id, ALREADY, f"{where}: none of breakglass' change is left (it changed since); "
                                                   f"left as it is", diff)
        change = nodefile.text_diff(now, new, f"{where} now", f"{where} reverted")
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would put back the failurePolicy of {', '.join(sorted(back))} "
                                                    f"in {where} (--force)", change)
        nodefile.write_remote(node, path, sha(current), new.encode())
        return RevertOutcome(step.id, RESTORED, f"{where}: only the failurePolicy breakglass changed is put back "
                                                f"(--force; the file's other changes since stay)", change)


def _policy_of(text: str, where: str, key: str):
    config, _, hook = key.partition("/")
    for obj in _configurations(_documents(text, where)):
        if (obj.get("metadata") or {}).get("name") == config:
            for h in obj.get("webhooks") or []:
                if isinstance(h, dict) and h.get("name") == hook:
                    return h.get("failurePolicy")
    return None
