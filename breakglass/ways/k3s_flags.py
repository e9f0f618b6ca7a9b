"""The k3s and RKE2 remedy: disable the webhook admission plugins through the distribution's own config
files, restart its service, and take back exactly what was added.

Per node (over SSH, or this machine for ``--config-file``): read ``config.yaml`` and every drop-in, simulate
k3s' merge (breakglass.k3s.config), and plan one step: a drop-in of our own (``kube-apiserver-arg+:``, named to
sort last) and, where an item enables a plugin being disabled, that item's text edited in its own file. Each
edited file is backed up in the run directory and on the node (outside ``config.yaml.d``, which k3s reads
whole); writes are atomic, compare-before-write, never through a link (remedies.nodefile). Then
``systemctl restart k3s`` (or ``rke2-server``) and a wait for evidence that the flag is in effect: a
kube-apiserver process carrying it (RKE2's static pod) or k3s' own ``Running kube-apiserver`` journal line.

A config file holds the cluster token, the agent token and the datastore's password: neither the plan (its
diff, its data), nor the JSON output, nor the run's journal holds its text. The diff shows kube-apiserver-arg
lines only (k3s.config.shown_diff); the journal keeps the sha256 of the file before and after and the edited
items (their place, their value before and after), and apply makes the edit again from those on the file as it
is (which must still have the sha256 it was planned on, and gives the planned sha256 or nothing is written).

A config file here (``--config-file``: the node's own, or a copy in git) is edited, not applied: nothing restarts,
the step ends "edited" (the run "edited-not-applied", exit 8) with what puts it in effect (``apply_commands``:
the files copied to each server's /etc/rancher/<k3s|rke2>/, the restart) and the /readyz check after it.

Revert: the drop-in goes only if it still holds what breakglass wrote; an edited file gets its backed-up bytes
when it still holds exactly what breakglass wrote, else only breakglass' own lines are taken back (when they
are intact), else it is left alone with a diff (exit 4). Every file is checked before any is written, and the
service is restarted once afterwards.
"""

from __future__ import annotations

import difflib
import os
import shlex

from breakglass.core import textfile
from breakglass.access.ssh import quoted_path, remote_path
from breakglass.core.errors import BadInput, PreconditionFailed, Unreachable
from breakglass.core.journal import JournalError, Run
from breakglass.k3s import config as k3s
from breakglass.k3s import unit as k3s_unit
from breakglass.text import admission_flags as flags
from breakglass.ways import nodefile
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED, Edited, RevertOutcome, Step, Unverified
from breakglass.ways.kubeadm_flags import process_with_flag
from breakglass.ways.nodefile import ABSENT, sha

_LIST = r"""f={config}; d={dir}
if [ -L "$f" ]; then printf 'config l\0'; elif [ -e "$f" ]; then printf 'config f\0'; else printf 'config -\0'; fi
if [ -L "$d" ]; then printf 'dir l\0'; elif [ -d "$d" ]; then printf 'dir d\0'; else printf 'dir -\0'; fi
[ -d "$d" ] || exit 0
for e in "$d"/* "$d"/.[!.]* "$d"/..?*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  if [ -L "$e" ]; then t=l; elif [ -d "$e" ]; then t=d; else t=f; fi
  printf '%s %s\0' "$t" "${{e##*/}}"
done
"""


def read_node(node, config: str, directory: str) -> tuple[list[k3s.ConfigFile], list[str], str]:
    """(config.yaml and its drop-ins in k3s' order, every name in the drop-in directory, what that directory is:
    d, l (a link) or - (none))."""
    r = node.run(_LIST.format(config=quoted_path(config, "config path"), dir=quoted_path(directory, "drop-in "
                                                                                           "directory")))
    if r.rc != 0:
        raise Unreachable(f"{node.host}: cannot list {directory} ({r.err.decode('utf-8', 'replace').strip()[:200]})")
    fields = [x.decode("utf-8", "surrogateescape") for x in r.out.split(b"\0") if x]
    state = dict(x.split(" ", 1) for x in fields[:2])
    entries = [(x[0], x[2:]) for x in fields[2:]]
    files = []
    if state.get("config") != "-":
        files.append(_read(node, config, state.get("config") == "l"))
    names = sorted(n for _, n in entries)
    for t, name in sorted(entries, key=lambda e: e[1]):
        if t != "d" and k3s.is_dropin(name):
            files.append(_read(node, f"{directory.rstrip('/')}/{name}", t == "l"))
    if not files:
        raise BadInput(f"{node.host}: neither {config} nor drop-ins in {directory} (not a k3s/RKE2 server, or "
                       f"its config is elsewhere: --config-path)")
    return files, names, state.get("dir", "-")


def read_command_line(node, service: str) -> tuple[list[k3s.Item], str]:
    """The service's own ``--kube-apiserver-arg`` values (``systemctl cat``, k3s.unit), and a note when they
    could not be read (no systemd, no such unit, a command line that does not parse)."""
    r = node.run(f"systemctl cat -- {shlex.quote(service + '.service')}", timeout=30)
    if r.rc != 0:
        return [], f"{node.host}: `systemctl cat {service}` failed; flags in its ExecStart were not checked"
    unit = service + ".service"
    try:
        text = textfile.decode(r.out, f"{node.host}: systemctl cat {service}", "a unit")
    except BadInput as e:  # not text: the same as a unit that cannot be shown
        return [], f"{e}; flags in its ExecStart were not checked"
    start = k3s_unit.exec_start(text, unit=unit)
    if start is None:
        return [], ""
    if start.unparsed:
        raise PreconditionFailed(f"{node.host}:{start.path}: ExecStart does not parse ({start.unparsed}); check "
                                 f"its flags by hand")
    notes = []
    if start.variables and k3s_unit.environment_files(text, unit):
        # systemd puts the unit's environment in: read its EnvironmentFile= files (they hold K3S_TOKEN and the
        # like: read here, never shown), then split the command line again
        files, unread = _environment_files(node, text, unit)
        start = k3s_unit.exec_start(text, files, unit)
        notes += unread
    if start.undefined:
        notes.append(f"{node.host}: the {service} unit's ExecStart uses ${', $'.join(sorted(set(start.undefined)))}, "
                     f"which the unit does not set (taken as empty; flags in it were not checked)")
    where = f"{start.path} (ExecStart)"
    return [k3s.Item(v, where) for v in k3s_unit.apiserver_args(start.argv)], "; ".join(notes)


def _environment_files(node, text: str, unit: str) -> tuple[dict[str, str | None], list[str]]:
    """The unit's EnvironmentFile= texts (path -> text, None when missing), and what could not be read."""
    files: dict[str, str | None] = {}
    unread = []
    for path, optional in k3s_unit.environment_files(text, unit):
        try:
            raw = nodefile.read_optional(node, path)
            files[path] = None if raw is None else textfile.decode(raw, f"{node.host}:{path}", "an environment file")
        except (BadInput, Unreachable) as e:
            files[path] = None
            unread.append(f"{e}; variables from it in ExecStart were not checked")
            continue
        if raw is None and not optional:
            unread.append(f"{node.host}:{path} (EnvironmentFile= of {unit}) does not exist: systemd does not start "
                          f"the unit so")
    return files, unread


def _read(node, path: str, link: bool) -> k3s.ConfigFile:
    raw = nodefile.read_remote(node, path)
    return k3s.ConfigFile(path, textfile.decode(raw, f"{node.host}:{path}", "a k3s config file"), link)


def _own_diff(path: str, new: str) -> str:
    """The diff that makes breakglass' own drop-in: its text is ours, shown whole."""
    return "".join(difflib.unified_diff([], new.splitlines(True), "/dev/null", f"{path} (new)", n=0))


class K3sFlags(nodefile.Nodes):
    def __init__(self, distro: str, nodes: dict, config: str | None = None, dropin_dir: str | None = None,
                 plugins: list[str] = (), verify_timeout: float = 180.0, restart: bool = True,
                 local: bool = False, backup_dir: str | None = None) -> None:
        self.distro = k3s.distro(distro)
        self.method = self.distro.name
        self.nodes = nodes  # host -> Node (SSH) or LocalNode
        self.local = local
        # paths on the node, also when they come from a run's journal: absolute, never an option
        self.config = remote_path(config or self.distro.config, "config path")
        self.dropin_dir = remote_path(dropin_dir or k3s.dropin_dir(self.config), "drop-in directory")
        self.backup_dir = remote_path(backup_dir or self.distro.node_backup_dir, "node backup directory")
        if os.path.normpath(self.backup_dir) == os.path.normpath(self.dropin_dir):
            raise BadInput("the node backup directory must not be the drop-in directory (k3s reads every file there)")
        self.plugins = list(plugins)
        self.verify_timeout = verify_timeout
        self.restart = restart
        self.on_wait = None  # one line while verify waits (a spinner on a terminal)
        self.skipped: list[str] = []
        self.notes: list[str] = []  # what planning could not check, for the plan's output
        self._restarted: dict[str, dict] = {}

    def node_readiness(self, host: str):
        """The apiserver's readiness as the node's own admin kubeconfig sees it (k3s' `k3s kubectl`, RKE2's
        bundled kubectl): k3s and RKE2 refuse anonymous requests, so /readyz from outside only says "401"."""
        from breakglass.access import readyz  # noqa: PLC0415

        kubeconfig = shlex.quote(self.distro.kubeconfig)
        raw = "get --raw '/readyz?verbose'"
        if self.distro.name == "k3s":
            cmd = f"if command -v k3s >/dev/null; then k3s kubectl --kubeconfig {kubeconfig} {raw}; " \
                  f"else kubectl --kubeconfig {kubeconfig} {raw}; fi"
        else:
            cmd = (f"k=/var/lib/rancher/rke2/bin/kubectl; [ -x \"$k\" ] || k=kubectl; "
                   f"\"$k\" --kubeconfig {kubeconfig} {raw}")
        label = f"{host} (the node's {self.distro.kubeconfig})"
        try:
            r = self._node(host).run(cmd, timeout=20)
        except Unreachable as e:
            return readyz.Readiness(label, False, False, None, [], f"not answering ({e})")
        return readyz.from_kubectl(label, r.rc, r.out.decode("utf-8", "replace"), r.err.decode("utf-8", "replace"))

    def readiness_probes(self) -> list:
        """One ``node_readiness`` probe per node (for ``readyz.wait_for``); none when acting on a local copy."""
        return [] if self.local else [lambda h=h: self.node_readiness(h) for h in self.nodes]

    def describe_target(self) -> dict:
        return {"distro": self.distro.name, "hosts": list(self.nodes), "config": self.config,
                "dropin_dir": self.dropin_dir, "plugins": self.plugins, "local": self.local,
                "restart": self.restart, "backup_dir": self.backup_dir}

    # -- plan ----------------------------------------------------------------------------------------
    def plan(self) -> list[Step]:
        plugins = flags.check_plugins(self.plugins)
        steps = []
        for host, node in self.nodes.items():
            files, names, dir_state = read_node(node, self.config, self.dropin_dir)
            command_line, note = ([], "") if self.local else read_command_line(node, self.distro.service)
            if note:
                self.notes.append(note)
            change = k3s.plan(self.distro, files, self.dropin_dir, names, plugins, command_line)
            if not change.dropin and not change.edits:
                self.skipped.append(host)
                continue
            if change.dropin and dir_state == "l":
                raise PreconditionFailed(f"{host}:{self.dropin_dir} is a symbolic link; breakglass never writes "
                                         f"through one: pass the real directory with --drop-in-dir")
            entries, diffs = [], []
            for e in change.edits:
                # never the file's text: it holds the cluster's secrets (apply makes the edit again, redo_items)
                edited = k3s.edited_items(e.before, e.after, e.path)
                entries.append({"kind": "edit", "path": e.path, "before_sha": sha(e.before.encode()),
                                "after_sha": sha(e.after.encode()), "items": [[b, a] for _, b, a in edited],
                                "at": [i for i, _, _ in edited]})
                diffs.append(k3s.shown_diff(f"{host}:{e.path}", e.before, e.after))
            if change.dropin:
                # a directory breakglass makes goes again with its drop-in
                entries.append({"kind": "dropin", "path": change.dropin, "before_sha": ABSENT,
                                "after": change.dropin_text, "after_sha": sha(change.dropin_text.encode()),
                                "made_dir": dir_state == "-"})
                diffs.append(_own_diff(f"{host}:{change.dropin}", change.dropin_text))
            what = f"disable {','.join(change.disabled)}" if change.disabled else "stop enabling"
            restart = f", restart {self.distro.service}" if self.restart else ""
            steps.append(Step(
                id=f"s{len(steps) + 1}", target=f"{host}:{self.config}", action="edit",
                summary=f"{what} ({', '.join(os.path.basename(x['path']) for x in entries)}){restart} on {host}",
                diff="".join(diffs),
                data={"host": host, "distro": self.distro.name, "files": entries,
                      "flag": change.flag or f"--{flags.DISABLE}=", "restart": self.restart}))
        return steps

    # -- backup, apply, verify ------------------------------------------------------------------------
    def backup(self, step: Step, run: Run) -> dict:
        node = self._node(step.data["host"])
        info: dict = {"files": []}
        for i, f in enumerate(step.data["files"]):
            current = nodefile.read_optional(node, f["path"])
            if (sha(current) if current is not None else ABSENT) != f["before_sha"]:
                raise PreconditionFailed(f"{step.data['host']}:{f['path']} changed since it was read; nothing "
                                         f"was written")
            if f["kind"] != "edit":
                info["files"].append({})
                continue
            name = f"{step.id}.{i}.{os.path.basename(f['path'])}"
            entry = {"backup": name, "backup_sha256": run.write_backup(name, current)}
            if not self.local:
                entry["node_copy"] = nodefile.copy_to_node(node, self.backup_dir, f"{run.id}-{name}", current)
            info["files"].append(entry)
        return info

    def apply(self, step: Step, backup: dict) -> dict | None:
        node = self._node(step.data["host"])
        pause = nodefile.pause_for_tests()
        for f in step.data["files"]:
            data = f["after"].encode() if f["kind"] == "dropin" else self._redo(node, step.data["host"], f)
            nodefile.write_remote(node, f["path"], f["before_sha"], data, pause, refuse_links=True)
        if not step.data.get("restart"):
            return None
        res = self._restart(node)
        self._restarted[step.id] = res
        return {"restart": res}

    def _restart(self, node) -> dict:
        """``systemctl restart`` the service (bounded: k3s' unit waits for its own start), with the node's clock
        before it, for reading the journal from then on."""
        service = shlex.quote(self.distro.service)
        limit = max(int(self.verify_timeout), 30)
        r = node.run(f"date +%s; timeout {limit} systemctl restart -- {service}", timeout=limit + 30)
        lines = r.out.decode("utf-8", "replace").split()
        return {"rc": r.rc, "since": lines[0] if lines and lines[0].isdigit() else "",
                "error": r.err.decode("utf-8", "replace").strip()[-300:]}

    def verify(self, step: Step) -> str:
        host = step.data["host"]
        node = self._node(host)
        for f in step.data["files"]:
            current = nodefile.read_optional(node, f["path"])
            if current is None or sha(current) != f["after_sha"]:
                raise PreconditionFailed(f"{host}:{f['path']} does not read back as written")
        service = self.distro.service
        if not step.data.get("restart") and self.local:  # a config here: no server has it until it is put there
            commands, checks = self.apply_commands(step)
            return Edited(f"reads back as written; {service} reads it only when it next starts",
                          [f["path"] for f in step.data["files"]], commands, checks)
        if not step.data.get("restart"):
            return f"written; {service} reads it when it next starts (`systemctl restart {service}` on the node)"
        res = self._restarted.get(step.id) or {}
        if res.get("rc"):
            return Unverified(f"applied, not verified: `systemctl restart {service}` failed on {host} "
                              f"({res.get('error') or 'exit ' + str(res.get('rc'))}); check `journalctl -u "
                              f"{service}`")
        flag = step.data["flag"]
        if self.verify_timeout <= 0:
            return f"written, {service} restarted; flag check skipped"
        since = res.get("since") or ""
        journal = (f"journalctl -u {shlex.quote(service)} --since @{since} -o cat 2>/dev/null | "
                   f"grep -F 'Running kube-apiserver' | grep -F -- {shlex.quote(flag)} | head -1") if since else ":"
        script = f"{{ {process_with_flag(flag)}; {journal}; }} | head -1"
        return nodefile.wait_until(
            node, script, self.verify_timeout, self.on_wait,
            f"waiting for {service} to run kube-apiserver with {flag} on {host}",
            f"no kube-apiserver with {flag} within {self.verify_timeout:g}s; check `journalctl -u {service}` on {host}",
            f"kube-apiserver runs with {flag}")

    def apply_commands(self, step: Step) -> tuple[list[str], list[str]]:
        """(what puts the files written here in effect, what then checks /readyz). On a server node, in its own
        /etc/rancher/<k3s|rke2>/: the restart; elsewhere (a copy, in git): every file breakglass wrote copied to the
        same place on each server, then the restart there. The check asks the node's own kubectl (k3s and RKE2
        answer an anonymous /readyz with 401 only)."""
        d = self.distro
        raw = "get --raw='/readyz?verbose'"
        kubectl = ("k3s kubectl" if d.name == "k3s" else
                   f"/var/lib/rancher/rke2/bin/kubectl --kubeconfig {d.kubeconfig}")
        own_place = os.path.normpath(self.config) == d.config and \
            os.path.normpath(self.dropin_dir) == k3s.dropin_dir(d.config)
        if own_place:
            return ([f"sudo systemctl restart {d.service}   # {d.name} reads {d.config} and its drop-ins only at "
                     f"start"], [f"sudo {kubectl} {raw}"])
        dropins = k3s.dropin_dir(d.config)
        places = [(f["path"], d.config if f["path"] == self.config else f"{dropins}/{os.path.basename(f['path'])}")
                  for f in step.data["files"]]
        commands = [f"ssh SERVER sudo mkdir -p {dropins}"] if any(w != d.config for _, w in places) else []
        commands += [f"ssh SERVER sudo tee {w} < {shlex.quote(here)} > /dev/null" for here, w in places]
        commands.append(f"ssh SERVER sudo systemctl restart {d.service}")
        commands[0] += f"   # SERVER: each {'k3s' if d.name == 'k3s' else 'RKE2'} server node, in turn"
        return commands, [f'ssh SERVER "sudo {kubectl} {raw}"']

    # -- revert --------------------------------------------------------------------------------------
    def revert(self, step: Step, backup: dict, run: Run, force: bool, dry_run: bool = False) -> RevertOutcome:
        host = step.data["host"]
        node = self._node(host)
        files = _journaled(step, self)
        saved = (backup or {}).get("files") or [{} for _ in files]
        todo, already, conflicts, made = [], [], [], []
        for f, b in reversed(list(zip(files, saved))):
            where = f"{host}:{f['path']}"
            raw = nodefile.read_optional(node, f["path"])  # which also removes a killed write's temp file
            now = sha(raw) if raw is not None else ABSENT
            if now == f["before_sha"]:
                already.append(where)
                if f["kind"] == "dropin" and f.get("made_dir"):
                    made.append(os.path.dirname(f["path"]))  # a first write killed after its mkdir left it
                continue
            if now == f["after_sha"]:
                todo.append((f, raw, None if f["kind"] == "dropin" else self._original(run, b)))
                continue
            if f["kind"] == "dropin":
                diff = k3s.shown_diff(where, f["after"], raw.decode("utf-8", "replace") if raw is not None else None)
                if force:
                    todo.append((f, raw, None))
                else:
                    conflicts.append((where, diff))
                continue
            original = self._original(run, b)
            own = _own_lines_back(raw.decode("utf-8", "replace") if raw is not None else None, f)
            if own is not None:
                todo.append((f, raw, own.encode()))
            elif force and raw is not None:
                todo.append((f, raw, original))
            else:
                written = _redone(original, f)
                conflicts.append((where, k3s.shown_diff(where, written.decode("utf-8", "replace") if written else "",
                                                        raw.decode("utf-8", "replace") if raw is not None else None)))
        if conflicts:
            return RevertOutcome(step.id, CONFLICT, f"{', '.join(w for w, _ in conflicts)} changed since the run; "
                                                    f"nothing on {host} was reverted", "".join(d for _, d in conflicts))
        if not dry_run:
            for d in made:  # only if empty: anything put there since stays
                node.run(f"rmdir -- {quoted_path(d, 'drop-in directory')} 2>/dev/null")
        if not todo:
            return RevertOutcome(step.id, ALREADY, f"{host}: {', '.join(already)} already as before the run")
        what = ", ".join(("remove " if data is None else "restore ") + f["path"] for f, _, data in todo)
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"{host}: would {what}" +
                                 (f", then restart {self.distro.service}" if step.data.get("restart") else ""))
        for f, raw, data in todo:
            if data is None:
                nodefile.remove_remote(node, f["path"], sha(raw))
                if f.get("made_dir"):  # only if empty: anything put there since stays
                    node.run(f"rmdir -- {quoted_path(os.path.dirname(f['path']), 'drop-in directory')} 2>/dev/null")
            else:
                nodefile.write_remote(node, f["path"], sha(raw), data, refuse_links=True)
        detail = f"{host}: {what.replace('remove ', 'removed ').replace('restore ', 'restored ')}"
        if step.data.get("restart"):
            res = self._restart(node)
            detail += (f"; {self.distro.service} restarted" if not res["rc"] else
                       f"; `systemctl restart {self.distro.service}` failed ({res['error'] or res['rc']}): restart "
                       f"it by hand")
        return RevertOutcome(step.id, RESTORED, detail)

    @staticmethod
    def _redo(node, host: str, f: dict) -> bytes:
        """The planned edit made again on the file as it is now, which must be the file it was planned on."""
        raw = nodefile.read_remote(node, f["path"])
        if sha(raw) != f["before_sha"]:
            raise PreconditionFailed(f"{host}:{f['path']} changed since it was read; nothing was written")
        data = _redone(raw, f)
        if data is None:
            raise PreconditionFailed(f"{host}:{f['path']}: the edit made again does not give the planned bytes; "
                                     f"nothing was written")
        return data

    @staticmethod
    def _original(run: Run, b: dict) -> bytes:
        if not b.get("backup"):
            raise JournalError("the journal has no backup of an edited k3s config file; refusing to guess it")
        return run.read_backup(b["backup"], b.get("backup_sha256"))


def _changes(f: dict) -> list[tuple[int, str, str]] | None:
    """The journal's edited items as (place, before, after); None for a journal without their places."""
    at = f.get("at")
    if not isinstance(at, list) or len(at) != len(f.get("items") or []):
        return None
    return [(i, before, after) for i, (before, after) in zip(at, f["items"])]


def _redone(original: bytes, f: dict) -> bytes | None:
    """The bytes breakglass wrote (the journal's edit made again on the backed-up original), or None when that
    does not give the sha256 it wrote."""
    changes = _changes(f)
    if changes is None:
        return None
    try:
        data = k3s.redo_items(original.decode("utf-8"), changes, f["path"]).encode()
    except (BadInput, PreconditionFailed, UnicodeDecodeError):
        return None
    return data if sha(data) == f["after_sha"] else None


def _own_lines_back(current: str | None, f: dict) -> str | None:
    """``current`` (changed elsewhere since the run) with only breakglass' own items set back to their earlier
    values, the rest of its bytes as they are now; None when those items no longer hold what breakglass wrote."""
    if current is None or not f.get("items"):
        return None
    try:
        items = k3s.file_items(k3s.ConfigFile(f["path"], current))
    except (BadInput, PreconditionFailed):
        return None
    found, at = [], 0
    for before, after in f["items"]:
        while at < len(items) and items[at].value != after:
            at += 1
        if at == len(items):
            return None
        found.append((items[at], before))
        at += 1
    try:
        return k3s.edit_items(current, found, f["path"])
    except (BadInput, PreconditionFailed):
        return None


def _journaled(step: Step, remedy: K3sFlags) -> list[dict]:
    """A run directory can be copied, and so edited: revert replays only what this remedy writes (its own drop-in
    in the run's drop-in directory, and files it edited, put back from their backups)."""
    files = step.data.get("files")
    ok = isinstance(files, list) and files and isinstance(step.data.get("host"), str)
    for f in files or []:
        ok = ok and isinstance(f, dict) and f.get("kind") in ("dropin", "edit") and isinstance(f.get("path"), str) \
            and f["path"].startswith("/") \
            and isinstance(f.get("before_sha"), str) and isinstance(f.get("after_sha"), str)
        if ok and f["kind"] == "dropin":
            ok = f["before_sha"] == ABSENT and os.path.dirname(f["path"]) == remedy.dropin_dir.rstrip("/") \
                and os.path.basename(f["path"]) in k3s.DROPIN_NAMES and _is_own_dropin(f.get("after"))
        if ok and f["kind"] == "edit":
            ok = (f["path"] == remedy.config or os.path.dirname(f["path"]) == remedy.dropin_dir.rstrip("/")) \
                and _only_enable_items(f.get("items"))
    if not ok:
        raise JournalError(f"the journal's step {step.id} holds changes breakglass never makes; refusing to replay it")
    return files


def _is_own_dropin(text) -> bool:
    """Exactly the text breakglass writes as its drop-in (for some plugins and service)."""
    if not isinstance(text, str) or not text.startswith("# Written by breakglass"):
        return False
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    prefix = f"  - {flags.DISABLE}="
    if not last.startswith(prefix):
        return False
    plugins = last[len(prefix):].split(",")
    return any(text == k3s.dropin_text(plugins, d.service) for d in (k3s.distro("k3s"), k3s.distro("rke2")))


def _only_enable_items(items) -> bool:
    """An edit breakglass makes changes enable-admission-plugins items only (their values before and after)."""
    def enables(v) -> bool:
        return isinstance(v, str) and k3s.normalised(k3s.split_arg(v)[0]) == flags.ENABLE

    return isinstance(items, list) and bool(items) and all(
        isinstance(p, list) and len(p) == 2 and enables(p[0]) and enables(p[1]) for p in items)
