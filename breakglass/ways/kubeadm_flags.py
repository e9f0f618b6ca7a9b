"""The kubeadm remedy: add --disable-admission-plugins to kube-apiserver's static pod manifest.

On each control-plane node (over SSH, or locally with --manifest): read the manifest, apply the
shared flag rules to its command line, back it up outside the manifests directory (on the node
and in the run directory), and write it atomically: a dot-prefixed temp file in the same
directory (kubelet ignores dot files and runs every other file there, backups included),
length and sha256 checked, fsync, rename, mode and owner kept, all in one remote script that
first compares the current file with the one that was read. Then wait for a kube-apiserver
process running with the new flag. Revert writes the previous bytes back the same way, only if
the manifest is still the one breakglass wrote.

The edit is line-based so the rest of the manifest stays byte for byte as it was; kubeadm
writes flags sorted, and the new flag goes where the sort puts it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from breakglass.core import textfile
from breakglass.access.ssh import remote_path
from breakglass.core.errors import BadInput, PreconditionFailed
from breakglass.core.journal import Run, TamperedRun
from breakglass.text import admission_flags as flags
from breakglass.ways import nodefile
from breakglass.ways.nodefile import sha
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED, RevertOutcome, Step

DEFAULT_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
NODE_BACKUP_DIR = "/etc/kubernetes/breakglass-backup"
_ITEM = re.compile(r"^(?P<lead>(?P<indent>[ ]*)-[ ]+)(?P<scalar>[^ \t].*?)[ \t]*$")
_SKIPPED = re.compile(r"^\s*(#.*)?$")  # a blank or comment line inside a YAML list
_PLAIN = re.compile(r"^-?-?[A-Za-z0-9][A-Za-z0-9,._=/:-]*$")  # written without quotes, as kubeadm does


@dataclass
class Manifest:
    """A static pod manifest's text and kube-apiserver's arguments (``command[1:] + args``, as kubelet starts
    it), each with the line it is on, and the admission flags among them as kube-apiserver reads them."""

    lines: list[str]
    args: list
    at: list[int]  # the line of each argument
    ncmd: int  # how many of args come from `command` (the rest from `args`)
    indent: str  # of the command's items
    program_line: int  # the line of command[0]
    occs: list[flags.Occurrence]

    @property
    def values(self) -> dict[str, str]:
        return flags.values_of(self.occs)

    def other_lines(self) -> list[str]:
        """The text without the admission flags' lines: what must be byte for byte the same in two manifests that
        differ only in those flags."""
        taken = {self.at[i] for o in self.occs for i in (o.at, o.value_at)}
        return [line for i, line in enumerate(self.lines) if i not in taken]

    def rest(self) -> list:
        """The arguments that are not admission flags: an edit must leave them exactly as they are."""
        taken = {i for o in self.occs for i in (o.at, o.value_at)}
        return [a for i, a in enumerate(self.args) if i not in taken]


def _scalar(text: str):
    import yaml  # noqa: PLC0415

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _items(lines: list[str]) -> list[list[tuple[int, object]]]:
    """Runs of one-line list items at one indent (blank and comment lines between them allowed): where a YAML
    list of plain or quoted scalars is written one per line."""
    runs: list[list[tuple[int, object]]] = []
    cur: list[tuple[int, object]] = []
    cur_indent = None
    for i, line in enumerate(lines):
        m = _ITEM.match(line)
        value = _scalar(m["scalar"]) if m else None
        if m and value is not None and not isinstance(value, (dict, list)):
            if cur and m["indent"] == cur_indent:
                cur.append((i, value))
                continue
            if cur:
                runs.append(cur)
            cur, cur_indent = [(i, value)], m["indent"]
        elif not _SKIPPED.match(line) and cur:
            runs.append(cur)
            cur, cur_indent = [], None
    if cur:
        runs.append(cur)
    return runs


def _lines_of(runs, want: list, source: str, what: str) -> list[int]:
    found = [[i for i, _ in run] for run in runs if [v for _, v in run] == want]
    if len(found) != 1:
        raise BadInput(f"{source}: the kube-apiserver {what} is not written one item per line (as kubeadm writes "
                       f"it); edit it by hand")
    return found[0]


def _command_flags(text: str, source: str) -> Manifest:
    """The manifest read as kubelet and kube-apiserver read it, each argument tied to its line."""
    import yaml  # noqa: PLC0415

    try:
        pod = textfile.load_yaml(text, source, "a static pod manifest")
    except yaml.YAMLError as e:
        raise BadInput(f"{source}: invalid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    containers = ((pod or {}).get("spec") or {}).get("containers") if isinstance(pod, dict) else None
    if not isinstance(containers, list):
        raise BadInput(f"{source}: not a static pod manifest (no spec.containers)")
    api = next((c for c in containers if isinstance(c, dict) and (c.get("name") == "kube-apiserver" or str(
        (c.get("command") or [""])[0]).endswith("kube-apiserver"))), None)
    if api is None or not isinstance(api.get("command"), list) or not api["command"]:
        raise BadInput(f"{source}: no kube-apiserver container with a command in this manifest")
    extra = api.get("args") or []
    if not isinstance(extra, list):
        raise BadInput(f"{source}: the kube-apiserver container's args are not a list")
    lines = text.split("\n")
    runs = _items(lines)
    command = _lines_of(runs, api["command"], source, "command")
    more = _lines_of(runs, extra, source, "args") if extra else []
    args = list(api["command"][1:]) + list(extra)
    return Manifest(lines, args, command[1:] + more, len(api["command"]) - 1,
                    _ITEM.match(lines[command[0]])["indent"], command[0], flags.occurrences(args, source))


def _render(line: str, value: str) -> str:
    """The list item on ``line`` holding ``value`` instead, in the same style (quotes, a trailing comment)."""
    m = _ITEM.match(line)
    scalar = m["scalar"]
    if scalar[0] in "'\"":
        q = scalar[0]
        rest = scalar[scalar.rindex(q) + 1:]  # after the closing quote: a comment, if any
        return m["lead"] + (f"{q}{value}{q}" if _PLAIN.match(value) else json.dumps(value)) + (
            rest if rest.strip().startswith("#") else "")
    comment = re.search(r"\s+#.*$", scalar)
    return m["lead"] + (value if _PLAIN.match(value) else json.dumps(value)) + (comment.group(0) if comment else "")


def set_flags(text: str, want: dict[str, str | None], source: str) -> str:
    """The manifest with the two admission flags set to ``want`` (None: removed), in place: a flag is rewritten
    where it is (in its own spelling and form, --flag=value or --flag value), a repeated one folded into its first
    place, a new one put where kubeadm's sorted order puts it. Every other byte stays. The result is read back as
    kube-apiserver would read it, and refused unless exactly these flags changed."""
    m = _command_flags(text, source)
    new: list[str | None] = list(m.lines)
    inserts: list[tuple[int, str]] = []
    current = m.values
    for key in (flags.DISABLE, flags.ENABLE):
        occs = [o for o in m.occs if o.key == key]
        value = want.get(key)
        if value == current.get(key) and len(occs) <= 1:
            continue
        for o in occs[1:] if value is not None else occs:
            new[m.at[o.at]] = new[m.at[o.value_at]] = None
        if value is None:
            continue
        if occs:
            o = occs[0]
            if o.at == o.value_at:
                new[m.at[o.at]] = _render(m.lines[m.at[o.at]], f"--{o.spelled}={value}")
            else:
                new[m.at[o.value_at]] = _render(m.lines[m.at[o.value_at]], value)
        else:  # where kubeadm's sorted order puts it, among the command's flags
            named = [(flags.flag_name(a), m.at[i]) for i, a in enumerate(m.args[:m.ncmd]) if flags.flag_name(a)]
            last = m.at[m.ncmd - 1] if m.ncmd else m.program_line
            pos = next((line for name, line in named if name > key), last + 1)
            inserts.append((pos, f"{m.indent}- --{key}={value}"))
    for pos, line in sorted(inserts, reverse=True):
        new.insert(pos, line)
    result = "\n".join(line for line in new if line is not None)
    after = _command_flags(result, source)
    wanted = {k: v for k, v in want.items() if v is not None}
    if after.rest() != m.rest() or set(after.values) != set(wanted) or not flags.same_plugins(after.values, wanted):
        raise BadInput(f"{source}: the admission flags cannot be edited in place here; edit them by hand")
    return result


def apiserver_args(text: str, source: str) -> list[str]:
    """The kube-apiserver arguments of a static-pod manifest (its command after the program, then its args)."""
    return _command_flags(text, source).args


def _value(m: Manifest, key: str) -> str | None:
    return m.values.get(key)


def edit(text: str, plugins: list[str], source: str) -> tuple[str, flags.FlagChange]:
    """The new manifest text and the flag change."""
    m = _command_flags(text, source)
    ch = flags.disable(m.values, plugins)
    if not ch.changed:
        return text, ch
    return set_flags(text, {k: ch.after.get(k) for k in (flags.DISABLE, flags.ENABLE)}, source), ch


MISSING = "no such manifest (not a kubeadm control-plane node?)"


def read_remote(node, path: str) -> bytes:
    return nodefile.read_remote(node, path, MISSING)


def process_with_disable(value: str, port: str | None = None) -> str:
    """A node-side command printing a kube-apiserver process's command line that disables exactly ``value``, in
    any spelling kube-apiserver accepts (--disable-admission-plugins=V, --disable_admission_plugins V). ``port``:
    the manifest's --secure-port, so that the process is the one this manifest runs, not another kube-apiserver
    on the same machine that happens to carry the same flag."""
    pattern = "(^| )--disable[-_]admission[-_]plugins[= ]" + re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", value) + " "
    own = (" | grep -E -- " + shlex.quote(f"(^| )--secure[-_]port[= ]{port} ")) if port else ""
    return ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | "
            "grep -E '(^|/)kube-apiserver ' | grep -E -- " + shlex.quote(pattern) + own + " | head -1")


_SECURE_PORT = re.compile(r"--secure[-_]port[= ]['\"]?(\d{1,5})\b")


def secure_port(manifest_text: str) -> str | None:
    """The --secure-port a manifest's command sets, if it sets one (kubeadm always does)."""
    m = _SECURE_PORT.search(manifest_text or "")
    return m.group(1) if m else None


def process_with_flag(flag: str) -> str:
    """A node-side command printing a kube-apiserver process's command line that carries ``flag``, if any."""
    return ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | "
            "grep -E '(^|/)kube-apiserver ' | grep -F -- " + shlex.quote(flag + " ") + " | head -1")


class KubeadmFlags(nodefile.Nodes):
    method = "kubeadm"
    missing = MISSING

    def __init__(self, nodes: dict, manifest: str = DEFAULT_MANIFEST, plugins: list[str] = (),
                 verify_timeout: float = 180.0, local: bool = False, backup_dir: str = NODE_BACKUP_DIR) -> None:
        self.nodes = nodes  # host -> Node (SSH) or LocalNode
        # Paths on the node (also when they come from a run's journal): absolute, never an option.
        self.manifest = remote_path(manifest, "manifest path")
        self.backup_dir = backup_dir if local else remote_path(backup_dir, "node backup directory")
        self.plugins = list(plugins)
        self.verify_timeout = verify_timeout
        self.on_wait = None  # called with one line while verify waits for kubelet (a spinner on a terminal)
        self.local = local
        self.skipped: list[str] = []

    def describe_target(self) -> dict:
        return {"hosts": list(self.nodes), "manifest": self.manifest, "plugins": self.plugins, "local": self.local,
                "backup_dir": self.backup_dir}

    def plan(self) -> list[Step]:
        plugins = flags.check_plugins(self.plugins)
        steps = []
        for host, node in self.nodes.items():
            where = f"{host}:{self.manifest}"
            raw = read_remote(node, self.manifest)
            text = textfile.decode(raw, where, "a static pod manifest")
            new, ch = edit(text, plugins, where)
            if not ch.changed:
                self.skipped.append(host)
                continue
            diff = nodefile.text_diff(text, new, where, f"{where} (new)")
            steps.append(Step(
                id=f"s{len(steps) + 1}", target=where, action="edit",
                summary=f"disable {','.join(plugins)} in {where}", diff=diff,
                data={"host": host, "path": self.manifest, "before_sha": sha(raw), "after_sha": sha(new.encode()),
                      "after": new, "disable": ch.after.get(flags.DISABLE)}))
        return steps

    def backup(self, step: Step, run: Run) -> dict:
        return self.backup_file(step, run, f"{step.id}.kube-apiserver.yaml", ("manifest", "manifest_sha256"),
                                "kubelet runs")

    def apply(self, step: Step, backup: dict) -> None:
        self.write_planned(step)

    def verify(self, step: Step) -> str:
        node = self.read_back(step)
        if self.verify_timeout <= 0:
            return "manifest written; process check skipped"
        flag = f"--{flags.DISABLE}={step.data['disable']}"
        host = step.data["host"]
        return nodefile.wait_until(
            node, process_with_disable(step.data["disable"], secure_port(step.data.get("after", ""))),
            self.verify_timeout, self.on_wait,
            f"waiting for kubelet to restart kube-apiserver with {flag} on {host}",
            f"no kube-apiserver process with {flag} within {self.verify_timeout:g}s; check `crictl ps --name "
            f"kube-apiserver` and `journalctl -u kubelet` on {host}",
            f"kube-apiserver runs with {flag}")

    def _journaled(self, step: Step, backup: dict):
        """The node and manifest of a journaled step, only if they are the ones this remedy edits (the run's
        hosts and manifest path), never another file the journal names."""
        d = step.data
        host, path = d.get("host"), d.get("path")
        if host not in self.nodes or path != self.manifest or step.target != f"{host}:{path}" \
                or not isinstance(backup.get("manifest"), str) or not isinstance(d.get("after_sha"), str):
            raise TamperedRun(f"step {step.id}: the journal asks to restore {step.target!r}, not the manifest this "
                              f"run edited ({self.manifest} on {', '.join(map(str, self.nodes)) or 'no host'}); "
                              f"refusing to write it (the run directory may have been altered)")
        return self._node(host), path

    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        """Put back the manifest as it was, only where the file is still what breakglass wrote and the backup
        differs from it exactly by breakglass' change to the admission flags; with --force, take back only that
        change (the two flags, the plugins this run disabled), keeping every later edit. Whatever the run
        directory says, nothing else is ever written, and nowhere else."""
        node, path = self._journaled(step, backup)
        plugins = flags.check_plugins(self.plugins)
        where = step.target
        original = run.read_backup(backup["manifest"], backup["manifest_sha256"])
        current = read_remote(node, path)
        if sha(current) == sha(original):
            return RevertOutcome(step.id, ALREADY, f"{where} already holds the earlier manifest")
        now = _command_flags(textfile.decode(current, where, "a static pod manifest"), where)
        try:
            before = _command_flags(textfile.decode(original, f"the backup of {where}", "a static pod manifest"),
                                    f"the backup of {where}")
        except BadInput as e:
            raise TamperedRun(f"{e}; refusing to restore it (the run directory may have been altered)") from None
        ch = flags.disable(before.values, plugins)
        made = {k: ch.after.get(k) for k in (flags.DISABLE, flags.ENABLE)}
        if sha(current) == step.data["after_sha"]:
            # the file is what breakglass wrote: the backup must be it with breakglass' change undone, and only that
            if before.other_lines() != now.other_lines() or not flags.same_plugins(now.values, made):
                raise TamperedRun(f"{where}: the backup differs from the manifest in more than the admission flags "
                                  f"breakglass changed; refusing to restore it (the run directory may have been "
                                  f"altered)")
            return self.restore_bytes(step, node, path, current, original, dry_run)
        diff = nodefile.text_diff(step.data["after"] if isinstance(step.data.get("after"), str) else "",
                                  current.decode("utf-8", "replace"), "written by breakglass", f"{where} now")
        if not force:
            return RevertOutcome(step.id, CONFLICT, f"{where} changed since the run; left as it is", diff)
        # --force on a manifest changed since: only breakglass' own change to the two flags is taken back
        want = flags.undo(now.values, before.values, plugins)
        if flags.same_plugins(want, now.values):
            return RevertOutcome(step.id, ALREADY, f"{where}: none of breakglass' change to the admission flags is "
                                                   f"left (it changed since); left as it is", diff)
        text = "\n".join(now.lines)  # the manifest now, as decoded
        new = set_flags(text, want, where)
        change = nodefile.text_diff(text, new, f"{where} now", f"{where} reverted")
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would take back only breakglass' change to the admission flags "
                                                    f"of {where} (--force)", change)
        nodefile.write_remote(node, path, sha(current), new.encode())
        return RevertOutcome(step.id, RESTORED, f"{where}: only breakglass' change to the admission flags taken back "
                                                f"(--force; the manifest's other changes since stay)", change)
