"""`breakglass recover WAY`, `revert` and `runs`: the reversible changes and their journal.

`recover` has one subcommand per way out, generated from ``ways.registry`` (``cli/ways.py``). Each way runs in
kubectl's shape: its options are completed with the registry's defaults (``Options``), checked (``validate_*``)
and run (``run_*``). `recover --method WAY` is `recover WAY` (an alias, rewritten before parsing); `--plan FILE`
and `--auto` choose the way, then run that way's same body with the same values.
"""

import os
import shlex
import sys
import time
from typing import Optional

import typer
from typing_extensions import Annotated

from breakglass.cli import ways as cli_ways
from breakglass.cli._base import (
    app,
    _safe,
    _confirm,
    ContextOpt,
    DryRunOpt,
    _etcd_target,
    EtcdCacertOpt,
    EtcdCertOpt,
    EtcdEndpointsOpt,
    EtcdKeyOpt,
    EtcdPasswordOpt,
    EtcdUserOpt,
    EtcdViaSshOpt,
    KnownHostsOpt,
    KubeconfigOpt,
    Output,
    OutputOpt,
    _line_open,
    _progress_bytes,
    _render,
    _run,
    _show,
    _split,
    _ssh_nodes,
    _ssh_options,
    SshAcceptNewOpt,
    SshConfigOpt,
    SshKeyOpt,
    SshPortOpt,
    SshUserOpt,
    StateDirOpt,
    _talos,
    TalosconfigOpt,
    TalosContextOpt,
    TalosctlOpt,
    TalosEndpointsOpt,
    TimeoutOpt,
    VerboseOpt,
    _write_new,
    YesOpt,
)
from breakglass.core.errors import BadInput, ExitCode
from breakglass.ways import registry


class Options:
    """One way's options, completed with the registry's defaults: what a `recover WAY` body reads."""

    def __init__(self, way: registry.Way, given: dict) -> None:
        self.way = way.name
        for opt in cli_ways.own_options(way):
            value = given.get(opt.name, opt.default)
            setattr(self, opt.name, value.value if opt.kind == "choice" and hasattr(value, "value") else value)
        for name, _, fallback in cli_ways.COMMON:
            setattr(self, name, given.get(name, fallback))

    def ssh_options(self):
        return _ssh_options(self.ssh_user, self.ssh_key, self.ssh_port, self.ssh_accept_new, self.ssh_config,
                            self.known_hosts, self.timeout)


# -- what the ways share: what to act on, the plan, the confirmation, the wait ------------------------------------

def _notes(remedy) -> None:
    for note in getattr(remedy, "notes", None) or []:  # what the plan could not check, or where it looked
        print(f"note: {note}", file=sys.stderr)


def _refs(o: Options) -> list:
    """What to act on: -w references, else the --webhook names (webhook:NAME, resolved in the cluster), else the
    culprits of --diagnosis (the configurations its log named, the webhooks it did not place)."""
    from breakglass.flows import scripted  # noqa: PLC0415

    return (list(o.webhook_config or []) or [f"webhook:{w}" for w in _split(o.webhook)]
            or scripted.targets_from_diagnosis(o.diagnosis))


def _plan_or_done(o: Options, plan, watch=None):
    """Plan, waiting out a restart gap (a refused connection is asked again up to RETRY_SECONDS, or --timeout if
    longer); a name that is gone because an earlier run (applied, not reverted) removed it is not an error: the
    change is already in place, as a second `recover --yes` in a script must learn. "Already applied" is said only
    while the apiserver is ready; else it is exit 8, with what still fails (``watch``: the apiservers to ask)."""
    from breakglass.core.errors import AlreadyDone  # noqa: PLC0415
    from breakglass.flows import recovery, retry  # noqa: PLC0415

    deadline = time.monotonic() + max(RETRY_SECONDS, o.timeout or 0)
    try:
        return retry.call(plan, deadline, _retrying, what="the target")
    except BadInput:
        done = recovery.applied_by(o.state_dir, o.way, _refs(o))
        if done is None:
            raise
        said = f"already applied by run {done.run} ({done.status}, not reverted): {'; '.join(done.steps)}"
        _already_ready(o, done.run, _watch(o, (), watch() if watch else None), said)
        raise AlreadyDone(said, hint=f"`breakglass revert {done.run}` undoes it") from None


def _already_ready(o: Options, run_id: str | None, watch, said: str) -> None:
    """The change is in place: the apiserver's /readyz says whether it did its job. Ready: return; else raise
    NotVerified (exit 8) naming what still fails. The wait is journaled in the run that made the change."""
    from breakglass.core import outcome  # noqa: PLC0415
    from breakglass.core.errors import NotVerified  # noqa: PLC0415
    from breakglass.flows import recovery  # noqa: PLC0415

    _, entry = _verify(o, watch)
    if run_id:
        recovery.record_readiness(run_id, o.state_dir, entry)
    if entry["ready"]:
        return
    _, bad = outcome.readiness_lines(entry)
    raise NotVerified(f"{said}; but {'; '.join(bad)}",
                      hint=f"`breakglass revert {run_id}` undoes it" if run_id else None)


_spun = [0]
# A restart gap (the apiserver crash-looping, etcd's leader moving) is waited out this long at each step: reads on
# any unreachable target, writes only on a refused connection (flows.retry).
RETRY_SECONDS = 60.0


def _retrying(text: str) -> None:
    """The time left of a retry, on its own stderr line (a spinner's line on a terminal)."""
    if sys.stderr.isatty():
        _spin_line(text)
    else:
        print(f"retrying: {_safe(text)}", file=sys.stderr, flush=True)


def _spin_line(text: str) -> None:
    from breakglass.present.prompts import SPIN  # noqa: PLC0415

    _spun[0] += 1
    import shutil  # noqa: PLC0415

    width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)  # one line: a wrapped one is never erased
    print(f"\r\033[K{SPIN[_spun[0] % 4]} {_safe(text)}"[:width + 4], end="", file=sys.stderr, flush=True)
    _line_open()


def _wanted(o: Options) -> list:
    from breakglass.flows import scripted  # noqa: PLC0415
    from breakglass.text.admission_flags import WEBHOOK_PLUGINS  # noqa: PLC0415

    return _split(o.plugins) or scripted.plugins_from_diagnosis(o.diagnosis) or list(WEBHOOK_PLUGINS)


def _watch(o: Options, hosts=(), watch=None):
    """The apiservers to ask after the change: --apiserver, else what the way knows (``watch``), else ``hosts``."""
    from breakglass.flows import readiness  # noqa: PLC0415

    if getattr(o, "apiserver", None):
        given = readiness.Watch.urls(list(o.apiserver), "--apiserver")
        given.still_armed = getattr(watch, "still_armed", None)
        return given
    if watch is not None:
        return watch
    if hosts:
        return readiness.Watch.urls(list(hosts), "the nodes")
    return readiness.Watch(unchecked="no apiserver to watch: give --apiserver URL")


def _verify(o: Options, watch) -> tuple[list, dict]:
    """Wait for /readyz through restart gaps (a probe that finds nothing listening is asked again) up to
    --wait-timeout, with the time left on a terminal; Ctrl-C stops the wait only. (states, the journal entry)."""
    from breakglass.access import readyz  # noqa: PLC0415
    from breakglass.flows import readiness  # noqa: PLC0415

    if not getattr(o, "wait", True):
        return [], readiness.to_json([], unchecked="not waited for (--no-wait)")
    if not watch.probes:
        return [], readiness.to_json([], unchecked=watch.unchecked or "no apiserver to watch", source=watch.source)
    deadline = time.monotonic() + o.wait_timeout
    tick = (lambda st: _spin_line(f"{max(0, int(deadline - time.monotonic()))}s left: "
                                  f"{readyz.waiting_text(st)}")) if sys.stderr.isatty() else None
    stopped = False
    try:
        states = readiness.wait(watch, o.wait_timeout, on_tick=tick)
    except KeyboardInterrupt:
        states, stopped = [], True
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    armed = []
    if not readiness.all_ready(states) and watch.still_armed is not None:
        from breakglass.core.errors import BreakglassError  # noqa: PLC0415

        try:
            armed = watch.still_armed()
        except BreakglassError:
            armed = []
    return states, readiness.to_json(states, stopped=stopped, source=watch.source, still_armed=armed)


def _confirm_word(meta: dict) -> str:
    """What the engineer types to go ahead, as the wizard asks it: the configurations (or webhooks) the change
    acts on, or the admission plugins it turns off; "yes" when the run names neither (a --diagnosis' culprits
    found by webhook name)."""
    names = [r.split("/", 1)[-1] for r in meta.get("refs") or [] if not str(r).startswith("webhook:")]
    word = ",".join(dict.fromkeys(names or meta.get("webhooks") or meta.get("plugins") or []))
    return word if word and len(word) <= 120 else "yes"


def _carry_out(o: Options, remedy, steps, question: str, meta: dict, wait_hosts=(), snapshot_path=None,
               watch=None) -> int:
    """Show the plan; then (unless --dry-run) confirm, execute, wait for /readyz, and show the result. Exit 0 only
    when every apiserver named was seen ready (--apiserver, else ``watch``, else ``wait_hosts``); else 8."""
    from breakglass.flows import readiness, recovery  # noqa: PLC0415
    from breakglass.ways.driver import RunResult  # noqa: PLC0415

    watch = _watch(o, wait_hosts, watch)
    skipped = getattr(remedy, "skipped", None)
    note = f"\nalready disabled on: {', '.join(skipped)}" if skipped else ""
    if not steps and not o.dry_run:
        # "already done" only for a run in the journal that made exactly this change, and only while /readyz is
        # 200; else what was found
        done = recovery.applied_exactly(o.state_dir, remedy.method, remedy.describe_target())
        said = (f"already in place: run {done.run} ({done.status}) made this change" if done
                else "no run of breakglass made this change: it was found so")
        _already_ready(o, done.run if done else None, watch, said)
        note += f"\n{said}; /readyz is ready" + (f"; `breakglass revert {done.run}` undoes it" if done else "")
    if o.dry_run or not steps:
        res = RunResult(None, remedy.method, True, [s.to_json() for s in steps], "planned")
        _show(o.output, "RecoverResult", res,
              lambda: _render().plan(steps, remedy.method) + note + "\n\ndry run: nothing was changed"
              if o.dry_run else "nothing to change" + note)
        return 0
    if o.output is Output.text:
        print(_render().plan(steps, remedy.method) + note)
    _confirm(question, o.yes, _confirm_word(meta))
    progress = _progress_bytes if sys.stderr.isatty() and snapshot_path else None
    res = recovery.execute(remedy, steps, o.state_dir, meta, snapshot_path, progress, retry=RETRY_SECONDS,
                           on_retry=_retrying)
    if progress:
        print(file=sys.stderr)
        _line_open(False)
    if getattr(remedy, "on_wait", None):
        print("\r\033[K", end="", file=sys.stderr, flush=True)  # the kubelet spinner's line
        _line_open(False)
    states, entry = _verify(o, watch)
    res.readiness, res.ready_check = states, entry
    recovery.record_readiness(res.run, o.state_dir, entry)
    if not entry["ready"] and res.status == "applied":
        res.status = "applied-unverified"  # as the journal now says (driver.replay)
    res.backends = _backends_now(res.run, o.state_dir)
    from breakglass.core.runstates import exit_code  # noqa: PLC0415 - 8: applied-unverified, edited-not-applied
    code = exit_code(res.status)
    _show(o.output, "RecoverResult", res, lambda: _render().run_result(res), code)
    return code


def _backends_now(run_id: str, state: str | None) -> dict | None:
    """The revert guard's reading of the backends this run's revert would re-arm, said with the result so the
    engineer knows what to repair before reverting (the same check revert makes)."""
    from breakglass.core.errors import BreakglassError  # noqa: PLC0415
    from breakglass.flows import recovery  # noqa: PLC0415

    try:
        _, verdict = recovery.revert_check(run_id, state)
    except BreakglassError:
        return None
    return {**verdict.to_json(), "lines": verdict.lines()}


def _spinner_on(o: Options, remedy) -> None:
    if sys.stderr.isatty() and o.output is Output.text:
        remedy.on_wait = _spin_line


# -- the ways out: each checked, then run (its docstring is its `recover WAY --help`) -----------------------------

def run_kubeapi(o: Options) -> int:
    """While any apiserver answers, this changes the least, through it: --action ignore (failurePolicy Ignore),
    exclude (the audit's matchConditions) or delete, with the resourceVersion read as a precondition.
    --webhook alone acts on the configurations defining those webhooks (a webhook's name is what the log says)."""
    from breakglass.flows import readiness  # noqa: PLC0415
    from breakglass.flows import recovery  # noqa: PLC0415

    remedy, steps = _plan_or_done(o, lambda: recovery.plan_kubeapi(
        o.kubeconfig, o.context, _refs(o), list(o.kind or []) or None, o.action, _split(o.webhook),
        o.timeout or 10.0, o.yes), watch=lambda: _kube_watch(o))
    _notes(remedy)
    return _carry_out(o, remedy, steps, f"Apply {len(steps)} change(s) through the API?",
                      {"refs": _refs(o), "action": o.action},
                      watch=readiness.Watch([remedy.api.readyz], "the kubeconfig's apiserver",
                                            still_armed=lambda: readiness.armed_through_api(remedy.api)))


def _kube_watch(o: Options):
    """/readyz through the kubeconfig's credentials (what an "already applied" is checked against)."""
    from breakglass.flows import readiness  # noqa: PLC0415
    from breakglass.access import kubeapi  # noqa: PLC0415
    from breakglass.core.errors import BreakglassError  # noqa: PLC0415

    try:
        api = kubeapi.connect(o.kubeconfig, o.context, o.timeout or 10.0)
    except BreakglassError as e:
        return readiness.Watch(unchecked=str(e))
    return readiness.Watch([api.readyz], "the kubeconfig's apiserver")


def run_talos(o: Options) -> int:
    """Adds disable-admission-plugins to kube-apiserver's extraArgs in the machine config of every control-plane
    node (-n), in the place the config's era uses, taking the plugins out of enable-admission-plugins too; it
    dry-runs the patch on every node first, backs up each config, applies with --mode=no-reboot, reads back, then
    waits for /readyz. --config-file edits files here instead (a repository's), applied to no node: it ends
    "edited, not applied" (exit 8) with the `talosctl apply-config` that applies each (-n: the nodes they are for)
    and the /readyz check; --write-patch only writes the patch."""
    from breakglass.flows import recovery  # noqa: PLC0415

    files = [os.path.abspath(f) for f in o.config_file or []]  # journaled absolute: revert works from anywhere
    node_list = files or _split(o.nodes)
    wanted = _wanted(o)
    store = recovery.talos_store(_talos(o.talosctl, o.talosconfig, o.talos_context, o.talos_endpoints, o.timeout),
                                 files=bool(files))
    if files:
        store.nodes = _split(o.nodes)  # with --config-file, -n names the nodes the files are for
    remedy, steps = recovery.plan_talos(store, node_list, wanted, o.try_for)
    if o.write_patch:
        return _write_talos_patch(o, steps)
    _notes(remedy)
    if files:  # nothing to wait for: no node has the change until it is applied (the outcome says how)
        return _carry_out(o, remedy, steps, f"Edit {len(steps)} file(s) here (no node is changed until you apply "
                                            f"them)? Every {', '.join(wanted)} stays off once applied, until you "
                                            f"revert.", {"nodes": node_list, "plugins": wanted}, [],
                          watch=_file_watch())
    until = (f"for {o.try_for} (Talos then rolls it back by itself), or until you revert" if o.try_for
             else "until you revert")
    return _carry_out(o, remedy, steps,
                      f"Patch {len(steps)} node(s)? Every {', '.join(wanted)} stays off {until}.",
                      {"nodes": node_list, "plugins": wanted}, o.apiserver or node_list)


def _file_watch():
    """A file edited here: no apiserver has the change yet, so none is waited for (--apiserver still is)."""
    from breakglass.flows import readiness  # noqa: PLC0415

    return readiness.Watch(unchecked="the change is only in the file here: apply it (next), then check /readyz")


def _write_talos_patch(o: Options, steps) -> int:
    from breakglass.talos import machineconfig as mc  # noqa: PLC0415

    if len({s.data["era"] for s in steps}) > 1:
        raise BadInput("the nodes use different config eras; write one patch per node")
    if not steps:
        raise BadInput("nothing to patch: the plugins are already disabled everywhere")
    st, path = steps[0], o.write_patch
    _write_new(path, mc.dump(mc.patch(st.data["era"], st.data["after"])))
    _write_new(path + ".revert.yaml", mc.dump(mc.patch(st.data["era"], st.data["before"])))
    _show(o.output, "PatchFiles", {"patch": path, "revert": path + ".revert.yaml"},
          lambda: f"wrote {path} and {path}.revert.yaml (nothing else changed)")
    return 0


def validate_kubeadm(o: Options) -> None:
    if o.manifest:
        return
    if not _split(o.ssh):
        raise BadInput("`breakglass recover kubeadm` needs --ssh HOSTS, or --manifest PATH on the node itself")
    from breakglass.access.ssh import remote_path  # noqa: PLC0415

    remote_path(o.manifest_path, "--manifest-path")  # paths on the nodes: never an option of cat or mv
    remote_path(o.node_backup_dir, "--node-backup-dir")


def run_kubeadm(o: Options) -> int:
    """Adds --disable-admission-plugins to each node's static pod manifest over SSH (--ssh HOSTS) or locally
    (--manifest), backed up outside the manifests directory and written atomically; then waits for kube-apiserver
    to run with it."""
    from breakglass.flows import readiness  # noqa: PLC0415
    from breakglass.flows import recovery  # noqa: PLC0415

    wanted = _wanted(o)
    if o.manifest:
        from breakglass.access.local import LocalNode  # noqa: PLC0415

        nodes, path, hosts = {"localhost": LocalNode()}, os.path.abspath(o.manifest), []
        watch = readiness.Watch.urls([readiness.manifest_url(path)], "the manifest's --secure-port")
    else:
        hosts = _split(o.ssh)
        nodes, path = _ssh_nodes(hosts, o.ssh_options()), o.manifest_path
        watch = None
    remedy, steps = recovery.plan_kubeadm(nodes, path, wanted, o.verify_timeout, local=bool(o.manifest),
                                          backup_dir=o.node_backup_dir)
    _spinner_on(o, remedy)
    return _carry_out(o, remedy, steps,
                      f"Edit {len(steps)} manifest(s)? Every {', '.join(wanted)} stays off until you revert.",
                      {"hosts": hosts or ["localhost"], "plugins": wanted}, hosts, watch=watch)


def validate_static(o: Options) -> None:
    if not _split(o.ssh) and not o.static_manifests:
        raise BadInput("`breakglass recover static-manifests` needs --ssh HOSTS, or --static-manifests DIR on the "
                       "node itself")
    if _split(o.ssh):
        from breakglass.access.ssh import remote_path  # noqa: PLC0415

        remote_path(o.manifest_path, "--manifest-path")
        remote_path(o.node_backup_dir, "--node-backup-dir")
        if o.static_manifests:
            remote_path(o.static_manifests, "--static-manifests")
    elif not os.path.isdir(o.static_manifests):
        raise BadInput(f"--static-manifests {o.static_manifests}: no such directory here")


def run_static(o: Options) -> int:
    """Sets failurePolicy Ignore on the named manifest-based webhooks (configurations NAME.static.k8s.io, 1.36+) in
    the files of kube-apiserver's staticManifestsDir on each node, over SSH (--ssh HOSTS) or here on the node
    (--static-manifests DIR); each file backed up first and written atomically. The apiserver reloads the
    directory by itself: no restart. Then waits for /readyz."""
    from breakglass.flows import recovery, scripted  # noqa: PLC0415

    names = (_split(o.webhook) + _split(o.webhook_config)
             or [t.split(":", 1)[-1].split("/")[-1] for t in scripted.targets_from_diagnosis(o.diagnosis)])
    if not _split(o.ssh):
        from breakglass.access.local import LocalNode  # noqa: PLC0415

        nodes, hosts, dirs = {"localhost": LocalNode()}, [], [os.path.abspath(o.static_manifests)]
    else:
        hosts = _split(o.ssh)
        nodes, dirs = _ssh_nodes(hosts, o.ssh_options()), [o.static_manifests] if o.static_manifests else []
    remedy, steps = recovery.plan_static(nodes, names, dirs, o.manifest_path, local=not hosts,
                                         backup_dir=o.node_backup_dir)
    _notes(remedy)
    return _carry_out(o, remedy, steps, f"Edit {len(steps)} file(s)? Those webhooks admit everything they cannot "
                                        f"reach until you revert.",
                      {"hosts": hosts or ["localhost"], "webhooks": names}, hosts)


def validate_k3s(o: Options) -> None:
    if len(o.config_file or []) > 1:
        raise BadInput(f"`breakglass recover {o.way}` edits one config file (its drop-ins come with it)")
    if o.config_file:
        from breakglass.k3s import which  # noqa: PLC0415

        path = os.path.abspath(o.config_file[0])
        reading = which.read(path, o.drop_in_dir and os.path.abspath(o.drop_in_dir))
        if reading.name and reading.name != o.way:  # the other distribution's file: its own way reads it right
            raise BadInput(f"{reading.line()}: use `breakglass recover {reading.name} --config-file "
                           f"{shlex.quote(o.config_file[0])}`")
        return
    if not _split(o.ssh):
        raise BadInput(f"`breakglass recover {o.way}` needs --ssh HOSTS, or --config-file PATH for a copy here")
    from breakglass.access.ssh import remote_path  # noqa: PLC0415

    for p, what in ((o.config_path, "--config-path"), (o.drop_in_dir, "--drop-in-dir")):
        if p:
            remote_path(p, what)  # paths on the nodes: never an option


def run_k3s(o: Options) -> int:
    """Adds a config.yaml.d drop-in of its own (kube-apiserver-arg+:), edits an item that enables the plugins in
    its own file, restarts the server over SSH (--ssh HOSTS) and waits for kube-apiserver to run with the flag;
    --config-file edits a config.yaml here (the node's own, or a copy in git), with no restart: it ends "edited,
    not applied" (exit 8) with what puts it on the servers and restarts them, then the /readyz check. A file that
    is clearly the other distribution's (RKE2's to `recover k3s`) is refused, naming its way."""
    from breakglass.flows import readiness  # noqa: PLC0415
    from breakglass.flows import recovery  # noqa: PLC0415

    wanted = _wanted(o)
    files = [os.path.abspath(f) for f in o.config_file or []]  # journaled absolute: revert works from anywhere
    if files:
        from breakglass.access.local import LocalNode  # noqa: PLC0415

        nodes, hosts, path = {"localhost": LocalNode()}, [], files[0]
        drop_in = o.drop_in_dir and os.path.abspath(o.drop_in_dir)
    else:
        hosts = _split(o.ssh)
        nodes, path, drop_in = _ssh_nodes(hosts, o.ssh_options()), o.config_path, o.drop_in_dir
    kubeadm_backup = o.node_backup_dir == "/etc/kubernetes/breakglass-backup"  # the shared default: k3s' own
    remedy, steps = recovery.plan_k3s(o.way, nodes, path, drop_in, wanted, o.verify_timeout, local=bool(files),
                                      backup_dir=None if kubeadm_backup else o.node_backup_dir)
    _notes(remedy)  # what the plan could not check (a node without systemd's unit)
    _spinner_on(o, remedy)
    # each node's own admin kubeconfig: k3s and RKE2 answer an anonymous /readyz with 401 only
    watch = _file_watch() if files else readiness.Watch(remedy.readiness_probes(), "each server's own kubectl")
    question = (f"Change {len(steps)} node(s)' config and restart {remedy.distro.service}? " if not files else
                f"Edit {path} here (no restart: no server has it until you put it there)? ") + \
        f"Every {', '.join(wanted)} stays off until you revert."
    return _carry_out(o, remedy, steps, question, {"hosts": hosts or ["localhost"], "plugins": wanted},
                      [] if files else hosts, watch=watch)


def run_etcd(o: Options) -> int:
    """Deletes each configuration's exact key (/registry/validatingwebhookconfigurations/NAME) after a backup
    that is written, fsynced and verified; the delete compares mod_revision with the backed-up version, so
    nothing that was not backed up is ever deleted. --snapshot first saves all of etcd to a new file."""
    from breakglass.flows import readiness  # noqa: PLC0415
    from breakglass.flows import recovery  # noqa: PLC0415

    target = _etcd_target(o.etcd_endpoints, o.etcd_cacert, o.etcd_cert, o.etcd_key, o.etcd_prefix, o.timeout,
                          o.etcd_via_ssh, o.ssh_options(), o.etcd_user, o.etcd_password)
    # the apiserver in front of this etcd decides whether the delete did its job: --apiserver, else the sandbox's
    # or the node's (flows.readiness.for_etcd)
    watch = readiness.for_etcd(list(target.settings.endpoints or ()), o.etcd_via_ssh, o.state_dir)
    watch.still_armed = lambda: readiness.armed_through_etcd(target)
    remedy, steps = _plan_or_done(o, lambda: recovery.plan_etcd(target, _refs(o), list(o.kind or []) or None,
                                                                o.yes), watch=lambda: watch)
    _notes(remedy)
    return _carry_out(o, remedy, steps, f"Delete {len(steps)} key(s) from etcd?", {"refs": _refs(o)},
                      snapshot_path=o.snapshot, watch=watch)


# way -> (validate, run); rke2 is k3s' body with RKE2's paths and service
BODIES = {"kubeapi": (None, run_kubeapi), "static-manifests": (validate_static, run_static),
          "talos": (None, run_talos), "kubeadm": (validate_kubeadm, run_kubeadm),
          "k3s": (validate_k3s, run_k3s), "rke2": (validate_k3s, run_k3s), "etcd": (None, run_etcd)}


def run_way(name: str, given: dict) -> int:
    """Complete, validate, run: the one body of `recover WAY`, `--method WAY`, `--plan` and `--auto`."""
    o = Options(registry.get(name), given)
    validate, run = BODIES[name]
    if validate:
        validate(o)
    return run(o)


# -- the commands --------------------------------------------------------------------------------------------------

recover_app = typer.Typer(cls=cli_ways.RecoverGroup, invoke_without_command=True, rich_markup_mode=None,
                          pretty_exceptions_enable=False)
app.add_typer(recover_app, name="recover")

METHOD = registry.Opt("method", "choice", None, "The way out (the same as `recover WAY`).", choices=registry.NAMES)
SCRIPTED = (registry.Opt("plan", "str", None, "A plan file (YAML) naming the way (method:), targets and options; "
                                              "flags given here win."),
            registry.Opt("auto", "bool", False, "Probe what is reachable and take the first usable way out (still "
                                                "needs --yes to change anything)."))


def _way_command(way: registry.Way):
    def command(ctx: typer.Context, **values) -> None:
        given, foreign = _with_typed_before_the_way(ctx, values)

        def body() -> int:
            if foreign:
                raise BadInput(f"{', '.join(foreign)}: not an option of `breakglass recover {way.name}` (see its "
                               f"--help)")
            return run_way(way.name, given)

        _run(given["output"], given["verbose"], body)

    command.__name__ = f"recover_{way.name}"
    command.__doc__ = cli_ways.help_text(way, BODIES[way.name][1].__doc__)
    return cli_ways.with_signature(command, cli_ways.signature(cli_ways.own_options(way)))


def _with_typed_before_the_way(ctx, values: dict) -> tuple[dict, list]:
    """`recover -o json etcd ...`: what was typed before the way's name counts as typed after it; an option the
    way does not take is named, not dropped."""
    parent = cli_ways.typed(ctx.parent) if ctx.parent is not None else {}
    mine = cli_ways.typed(ctx)
    out, foreign = dict(values), []
    by_name = {o.name: o for o in cli_ways.union_options()}
    for k, v in parent.items():
        if k in ("plan", "auto", "method") or k in mine:
            continue
        if k in out:
            out[k] = v
        else:
            foreign.append(by_name[k].flag if k in by_name else k)
    return out, foreign


for _way in sorted(registry.WAYS, key=lambda w: w.rank):
    recover_app.command(name=_way.name, short_help=_way.summary)(_way_command(_way))


def recover(ctx: typer.Context, **values) -> None:
    """Get the control plane past its admission webhooks, reversibly: one way out per subcommand.

    Each way has only its own options and examples: `breakglass recover WAY --help`. --plan FILE names the way
    and its options in YAML (flags typed here win); --auto probes what the options given reach and takes the
    first usable way. Every step is journaled; `breakglass revert` undoes it exactly.

    Examples:

      \b
      breakglass recover etcd -w kyverno-resource-validating-webhook-cfg --dry-run

      \b
      breakglass recover talos -n 10.0.0.2,10.0.0.3,10.0.0.4 --dry-run

      \b
      breakglass recover --plan examples/plans/etcd.yaml --yes -o json

      \b
      breakglass recover --auto --diagnosis diag.json --etcd-endpoints https://127.0.0.1:2379 --yes
    """
    if ctx.invoked_subcommand is not None:
        if values["plan"] or values["auto"]:
            def refuse() -> int:
                raise BadInput(f"--plan and --auto choose the way themselves: drop `{ctx.invoked_subcommand}` "
                               f"(or give --method {ctx.invoked_subcommand} to override a plan's)")
            _run(values["output"], values["verbose"], refuse)
        return
    _run(values["output"], values["verbose"], lambda: _recover_scripted(ctx, values))


recover = cli_ways.with_signature(recover, cli_ways.signature(
    cli_ways.union_options(), hidden=True, first=[cli_ways.parameter(o) for o in SCRIPTED]
    + [cli_ways.parameter(METHOD, hidden=True)]))
recover_app.callback()(recover)


def _recover_scripted(ctx, values: dict) -> int:
    """--plan and --auto (or neither: say how): the values of the way they choose, then that way's body."""
    from breakglass.flows import scripted  # noqa: PLC0415

    typed = cli_ways.typed(ctx)
    plan = scripted.load_plan(values["plan"]) if values["plan"] else {}
    merged = {**values, **plan, **typed}  # a flag typed on the command line wins over the plan
    method = merged.get("method")
    if values["auto"]:
        method = _auto_method(merged)
        if merged["output"] is Output.text:
            print(f"--auto: taking {method}", file=sys.stderr)
    elif method is None:
        raise BadInput(f"{values['plan']}: names no way out (method: {'|'.join(registry.NAMES)})" if values["plan"]
                       else f"say how: `breakglass recover WAY` ({', '.join(registry.NAMES)}), a --plan file, "
                            f"or --auto")
    else:
        method = getattr(method, "value", method)
        if values["plan"]:
            scripted.check_plan_way(plan, method, values["plan"])
            foreign = [k for k in typed if k not in ("plan", "method") and not scripted.belongs(k, method)]
            if foreign:
                raise BadInput(f"{', '.join(_flag(k) for k in foreign)}: not an option of `breakglass recover "
                               f"{method}` (the plan's way)")
    way = registry.get(method)
    names = {o.name for o in way.options} | set(cli_ways.COMMON_NAMES)
    return run_way(method, {k: v for k, v in merged.items() if k in names})


def _flag(name: str) -> str:
    return next((o.flag for o in cli_ways.union_options() if o.name == name), "--" + name.replace("_", "-"))


def _auto_method(args: dict) -> str:
    """The first way out that the options given reach (probed), in the order the diagnosis's family calls for."""
    from breakglass.flows import scripted  # noqa: PLC0415

    if not args["webhook_config"]:
        args["webhook_config"] = scripted.targets_from_diagnosis(args["diagnosis"])
    opts = _ssh_options(args["ssh_user"], args["ssh_key"], args["ssh_port"], args["ssh_accept_new"],
                        args["ssh_config"], args["known_hosts"], args["timeout"])
    access = scripted.access_from(
        args,
        lambda: _talos(args["talosctl"], args["talosconfig"], args["talos_context"], args["talos_endpoints"],
                       args["timeout"]),
        lambda hosts: _ssh_nodes(hosts, opts),
        lambda: _etcd_target(args["etcd_endpoints"], args["etcd_cacert"], args["etcd_cert"], args["etcd_key"],
                             args["etcd_prefix"], args["timeout"], args["etcd_via_ssh"], opts,
                             args["etcd_user"], args["etcd_password"]))
    note = scripted.verdict_note(args["diagnosis"])
    if note:
        print(f"note: {_safe(note)}", file=sys.stderr)  # it may name a webhook from the diagnosis file
    return scripted.auto_method(access, bool(args["webhook_config"]),
                                family=scripted.family_from_diagnosis(args["diagnosis"]), on_wait=_retrying)


@app.command()
def revert(
    run: Annotated[Optional[str], typer.Argument(
        help="Run name (or unique prefix), or a run directory. Default: the latest not yet reverted.",
        show_default=False)] = None,
    force: Annotated[bool, typer.Option(help="Overwrite targets that changed since the run, and revert although "
                                             "a re-armed webhook's backend is not ready or could not be read "
                                             "(both: --re-arm for the second alone).")] = False,
    re_arm: Annotated[bool, typer.Option("--re-arm", help="Revert although a re-armed webhook's backend is not "
                                                          "ready or could not be read (never overwrites).")] = False,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None,
    timeout: TimeoutOpt = None, etcd_via_ssh: EtcdViaSshOpt = None,
    talosconfig: TalosconfigOpt = None, talos_context: TalosContextOpt = None,
    talos_endpoints: TalosEndpointsOpt = None, talosctl: TalosctlOpt = "talosctl",
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None,
    state_dir: StateDirOpt = None, dry_run: DryRunOpt = False, yes: YesOpt = False,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
    force_guard: Annotated[bool, typer.Option(hidden=True)] = True,  # `etcd restore --force`: overwrite only
) -> None:
    """Undo a run in reverse order, from its journal alone.

    Compare-before-write: a target that changed since the run (say, an operator recreated
    the configuration) is reported with a diff and left alone, exit 4, unless --force.

    The guard asks what the apiserver would: a url: webhook is called (TLS against its
    caBundle, an AdmissionReview answered in its timeoutSeconds); a service: webhook needs
    its Service, the port it names and a ready endpoint, called where one can be reached.
    A revert that re-arms a webhook whose backend cannot answer is refused first, exit 4,
    with the command that checks it; so is re-enabling the admission plugins (Talos,
    kubeadm, k3s, RKE2) when no apiserver or etcd can be found to read the cluster's
    webhooks (--kubeconfig, $KUBECONFIG, ~/.kube/config, the node's admin.conf, the
    sandbox's are tried). --re-arm (or --force) reverts anyway. After the revert a
    dry-run canary through the apiserver proves each re-armed webhook answers it; a
    failure is exit 8 with the command that takes the change back. Exit 0 only when all
    of that was verified; a revert that could not verify it is exit 8. Reverting twice
    is safe; a run directory copied to another machine reverts there too.

    Examples:

      breakglass revert --dry-run

      breakglass revert 20261130T081500Z-3fa2c1 --yes

      breakglass revert ./copied-run-dir --etcd-endpoints https://10.0.0.2:2379 ...

      breakglass revert 20261130T081500Z-3fa2c1 --ssh-user admin   # an --etcd-via-ssh run: the same route
    """

    def body() -> int:
        from breakglass.flows import recovery  # noqa: PLC0415

        target = None
        ssh_opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
        if etcd_endpoints or etcd_cacert or etcd_cert or etcd_key or etcd_user or etcd_password or timeout \
                or etcd_via_ssh:
            # the prefix is the run's own (from its journal), whatever is given here; with none of these, etcd
            # is reached as the journal says (an --etcd-via-ssh run: through SSH to the same node again)
            target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, "/registry", timeout,
                                  etcd_via_ssh, ssh_opts, etcd_user, etcd_password)
        talos = None
        if talosconfig or talos_context or talos_endpoints or talosctl != "talosctl":
            talos = _talos(talosctl, talosconfig, talos_context, talos_endpoints, timeout)
        if not dry_run:
            preview = recovery.revert_run(run, state_dir, target, force=force, dry_run=True, talos=talos,
                                          ssh=ssh_opts, kube=(kubeconfig, context), override_backend=re_arm,
                                          force_guard=force_guard)
            if preview.status == "nothing-to-do":  # nothing to ask about; a run left open is closed for real
                res = recovery.revert_run(run or preview.run, state_dir, target, force=force, talos=talos,
                                          ssh=ssh_opts, kube=(kubeconfig, context), override_backend=re_arm,
                                          force_guard=force_guard)
                _show(output, "RevertResult", res, lambda: _render().revert_result(res))
                return 0
            if output is Output.text:
                print(_render().revert_result(preview, preview=True))
            _confirm(f"Revert run {preview.run}?", yes)
        # the run the question named, not "the latest" again: another run may have started while it was asked
        res = recovery.revert_run(run if dry_run else preview.run, state_dir, target, force=force, dry_run=dry_run,
                                  talos=talos, ssh=ssh_opts, kube=(kubeconfig, context), override_backend=re_arm,
                                  force_guard=force_guard)
        code = _revert_code(res)
        _show(output, "RevertResult", res, lambda: _render().revert_result(res), code)
        return code

    _run(output, verbose, body)


def _revert_code(res) -> int:
    """0 only when everything the revert re-armed was verified (its backends answered, the canary through the
    apiserver passed); a revert that put things back but could not verify them is exit 8, as `recover` is."""
    from breakglass.core import outcome  # noqa: PLC0415

    if res.dry_run:
        return 0
    return int(ExitCode.NOT_VERIFIED) if outcome.of("RevertResult", res).not_verified else 0


@app.command()
def runs(state_dir: StateDirOpt = None, output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """List recovery runs in the state directory, with their state.

    Examples:

      breakglass runs

      breakglass runs -o json | jq '.result[] | select(.status != "reverted")'
    """

    def body() -> int:
        from breakglass.flows import recovery  # noqa: PLC0415

        items = recovery.list_runs(state_dir)
        _show(output, "RunList", items, lambda: _render().runs(items))
        return 0

    _run(output, verbose, body)
