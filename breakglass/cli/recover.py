"""`breakglass recover`, `revert` and `runs`: the reversible changes and their journal."""

import enum
import os
import sys
from typing import List, Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    _confirm,
    ContextOpt,
    DryRunOpt,
    _etcd_target,
    EtcdCacertOpt,
    EtcdCertOpt,
    EtcdEndpointsOpt,
    EtcdKeyOpt,
    EtcdPasswordOpt,
    EtcdPrefixOpt,
    EtcdUserOpt,
    EtcdViaSshOpt,
    KnownHostsOpt,
    KubeconfigOpt,
    Output,
    OutputOpt,
    _progress_bytes,
    _render,
    _run,
    _show,
    _spinner,
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


class Method(str, enum.Enum):
    kubeapi = "kubeapi"
    talos = "talos"
    kubeadm = "kubeadm"
    etcd = "etcd"
    k3s = "k3s"
    rke2 = "rke2"


class Action(str, enum.Enum):
    ignore = "ignore"
    exclude = "exclude"
    delete = "delete"


@app.command()
def recover(
    method: Annotated[Optional[Method], typer.Option(
        help="How: kubeapi, talos, kubeadm, k3s, rke2 or etcd (see below). Or a --plan file, or --auto.",
        show_default=False)] = None,
    plan: Annotated[Optional[str], typer.Option(
        help="A plan file (YAML) naming the method, targets and options; flags given here win.",
        show_default=False)] = None,
    auto: Annotated[bool, typer.Option(
        help="Probe what is reachable and take the first viable way out (still needs --yes to change anything).")]
    = False,
    webhook_config: Annotated[Optional[List[str]], typer.Option(
        "--webhook-config", "-w", help="Configuration to act on: NAME, kind/NAME, its etcd key, or webhook:NAME "
        "(the configuration(s) defining that webhook, read from the cluster). Repeatable.",
        show_default=False)] = None,
    kind: Annotated[Optional[List[str]], typer.Option(
        help="Limit NAME lookups to these kinds: validating, mutating, vap, vapbinding, map, mapbinding.",
        show_default=False)] = None,
    snapshot: Annotated[Optional[str], typer.Option(
        help="First save a full etcd snapshot to this new file (checksummed).", show_default=False)] = None,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None,
    etcd_prefix: EtcdPrefixOpt = "/registry", timeout: TimeoutOpt = None,
    nodes: Annotated[Optional[List[str]], typer.Option(
        "--nodes", "-n", help="talos: control-plane nodes (every one runs an apiserver), comma-separated.",
        show_default=False)] = None,
    plugins: Annotated[Optional[List[str]], typer.Option(
        help="talos: admission plugins to disable (default: the diagnosis's, else both webhook plugins).",
        show_default=False)] = None,
    diagnosis: Annotated[Optional[str], typer.Option(
        help="`breakglass diagnose -o json` output saved in this file: talos, kubeadm, k3s: its plugins; etcd, "
             "kubeapi: its culprits (webhooks it did not place are looked up in the cluster).",
        show_default=False)] = None,
    config_file: Annotated[Optional[List[str]], typer.Option(
        help="talos: patch machine-config files (managed as code) instead of live nodes. Repeatable. "
             "k3s/rke2: edit this config.yaml (and its config.yaml.d/) here, with no restart.",
        show_default=False)] = None,
    write_patch: Annotated[Optional[str], typer.Option(
        help="talos: only write the strategic-merge patch (and FILE.revert.yaml) for your own tooling.",
        show_default=False)] = None,
    talosconfig: TalosconfigOpt = None, talos_context: TalosContextOpt = None,
    talos_endpoints: TalosEndpointsOpt = None, talosctl: TalosctlOpt = "talosctl",
    wait: Annotated[bool, typer.Option(help="talos: wait for every apiserver's /readyz afterwards.")] = True,
    wait_timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for /readyz.")] = 300.0,
    apiserver: Annotated[Optional[List[str]], typer.Option(
        help="apiserver URL(s) to wait on (default: https://NODE:6443 for each node).", show_default=False)] = None,
    ssh: Annotated[Optional[List[str]], typer.Option(
        "--ssh", help="kubeadm: control-plane hosts to reach over SSH, comma-separated.", show_default=False)] = None,
    manifest: Annotated[Optional[str], typer.Option(
        help="kubeadm: edit this local manifest instead (you are on the node).", show_default=False)] = None,
    manifest_path: Annotated[str, typer.Option(help="kubeadm: the manifest's path on the nodes.")]
    = "/etc/kubernetes/manifests/kube-apiserver.yaml",
    verify_timeout: Annotated[float, typer.Option(
        min=0, help="kubeadm: seconds to wait for a kube-apiserver process with the new flag (0: skip).")] = 180.0,
    node_backup_dir: Annotated[str, typer.Option(
        help="kubeadm: where the node keeps its copy of the old manifest (never the manifests directory).")]
    = "/etc/kubernetes/breakglass-backup",
    config_path: Annotated[Optional[str], typer.Option(
        help="k3s/rke2: config.yaml's path on the nodes (default /etc/rancher/k3s|rke2/config.yaml).",
        show_default=False)] = None,
    drop_in_dir: Annotated[Optional[str], typer.Option(
        help="k3s/rke2: the drop-in directory k3s reads (default: the config's path + .d).", show_default=False)]
    = None,
    etcd_via_ssh: EtcdViaSshOpt = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    action: Annotated[Action, typer.Option(
        help="kubeapi: ignore (failurePolicy Ignore), exclude (add the audit's matchConditions) or delete.")]
    = Action.ignore,
    webhook: Annotated[Optional[List[str]], typer.Option(
        help="A webhook's name, as the log says it: the configuration(s) that define it are read from etcd or "
             "the API (the same as -w webhook:NAME). kubeapi with -w: only these webhooks of the configuration.",
        show_default=False)] = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None,
    state_dir: StateDirOpt = None, dry_run: DryRunOpt = False, yes: YesOpt = False,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Get the control plane past its admission webhooks, reversibly.

    --method kubeapi, while any apiserver answers, changes the least through it:
    --action ignore | exclude | delete, with the resourceVersion read as a precondition.

    --method talos adds disable-admission-plugins to kube-apiserver's extraArgs in the
    machine config of every control-plane node (-n), in the place the config's era uses,
    taking the plugins out of enable-admission-plugins too; it dry-runs the patch on every
    node first, backs up each config, applies with --mode=no-reboot, reads back, then waits
    for /readyz. --config-file does the same to files in a repository; --write-patch only
    writes the patch.

    --method kubeadm adds --disable-admission-plugins to each node's static pod manifest
    over SSH (--ssh HOSTS) or locally (--manifest), backed up outside the manifests
    directory and written atomically; then waits for kube-apiserver to run with it.

    --method k3s|rke2 adds a config.yaml.d drop-in of its own (kube-apiserver-arg+:), edits an
    item that enables the plugins in its own file, restarts k3s or rke2-server over SSH (--ssh
    HOSTS) and waits for kube-apiserver to run with the flag; --config-file edits a copy here.

    --method etcd deletes each configuration's exact key
    (/registry/validatingwebhookconfigurations/NAME) after a backup that is written,
    fsynced and verified; the delete compares mod_revision with the backed-up version,
    so nothing that was not backed up is ever deleted.

    Every step is journaled in a run directory; `breakglass revert` undoes it exactly.

    Examples:

      breakglass recover --method talos -n 10.0.0.2,10.0.0.3,10.0.0.4 --dry-run

      breakglass recover --method talos --config-file clusters/prod/controlplane.yaml --write-patch bg.yaml

      breakglass recover --method k3s --ssh cp1,cp2,cp3 --dry-run

      breakglass recover --method etcd -w kyverno-resource-validating-webhook-cfg --dry-run

      breakglass recover --method etcd -w validating/kyverno-resource-validating-webhook-cfg \\
        --etcd-endpoints https://127.0.0.1:2379 --etcd-cacert ca.crt --etcd-cert c.crt --etcd-key c.key

      breakglass recover --plan examples/plans/etcd.yaml --yes -o json

      breakglass recover --auto --diagnosis diag.json --etcd-endpoints https://127.0.0.1:2379 --yes
    """
    given = dict(locals())
    if plan is not None or auto:
        _run(output, verbose, lambda: _recover_scripted(given))
        return

    def body() -> int:
        from breakglass.flows import recovery  # noqa: PLC0415

        if method is None:
            raise BadInput("say how: --method kubeapi|talos|kubeadm|k3s|rke2|etcd, a --plan file, or --auto")
        if snapshot and method is not Method.etcd:  # never silently ignored: the engineer counts on that snapshot
            raise BadInput(f"--snapshot goes with --method etcd, not {method.value}; nothing was changed")

        if method is Method.talos:
            return _recover_talos()
        if method is Method.kubeadm:
            return _recover_kubeadm()
        if method in (Method.k3s, Method.rke2):
            return _recover_k3s()
        if method is Method.kubeapi:
            # --webhook alone: the configurations defining those webhooks (a webhook's name is what the log says)
            remedy, steps = _plan_or_done(lambda: recovery.plan_kubeapi(
                kubeconfig, context, _refs(), list(kind or []) or None, action.value,
                _split(webhook), timeout or 10.0, yes))
            for note in remedy.notes:
                print(f"note: {note}", file=sys.stderr)
            return _carry_out(remedy, steps, f"Apply {len(steps)} change(s) through the API?",
                              {"refs": _refs(), "action": action.value},
                              ready=(lambda: [remedy.api.readyz()]) if wait else None)
        ssh_opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout,
                              etcd_via_ssh, ssh_opts, etcd_user, etcd_password)
        remedy, steps = _plan_or_done(lambda: recovery.plan_etcd(target, _refs(), list(kind or []) or None, yes))
        for note in remedy.notes:
            print(f"note: {note}", file=sys.stderr)
        return _carry_out(remedy, steps, f"Delete {len(steps)} key(s) from etcd?",
                          {"refs": _refs()}, snapshot_path=snapshot)

    def _refs() -> list[str]:
        """What to act on: -w references, else the --webhook names (webhook:NAME, resolved in the cluster), else
        the culprits of --diagnosis (the configurations its log named, the webhooks it did not place)."""
        from breakglass.flows import scripted  # noqa: PLC0415

        return (list(webhook_config or []) or [f"webhook:{w}" for w in _split(webhook)]
                or scripted.targets_from_diagnosis(diagnosis))

    def _plan_or_done(plan):
        """Plan; a name that is gone because an earlier run (applied, not reverted) removed it is not an error:
        the change is already in place, as a second `recover --yes` in a script must learn."""
        from breakglass.flows import recovery  # noqa: PLC0415
        from breakglass.core.errors import AlreadyDone  # noqa: PLC0415

        try:
            return plan()
        except BadInput:
            done = recovery.applied_by(state_dir, method.value, _refs())
            if done is None:
                raise
            raise AlreadyDone(f"already applied by run {done.run} ({done.status}, not reverted): "
                                 f"{'; '.join(done.steps)}", hint=f"`breakglass revert {done.run}` undoes it") from None

    def _spin_line(text: str) -> None:
        from breakglass.present.prompts import SPIN  # noqa: PLC0415

        _spin_line.n = getattr(_spin_line, "n", 0) + 1
        print(f"\r\033[K{SPIN[_spin_line.n % 4]} {text}"[:200], end="", file=sys.stderr, flush=True)

    def _wanted() -> list[str]:
        from breakglass.flows import scripted  # noqa: PLC0415
        from breakglass.text.admission_flags import WEBHOOK_PLUGINS  # noqa: PLC0415

        return _split(plugins) or scripted.plugins_from_diagnosis(diagnosis) or list(WEBHOOK_PLUGINS)

    def _carry_out(remedy, steps, question: str, meta: dict, wait_hosts=(), snapshot_path=None, ready=None) -> int:
        """Show the plan; then (unless --dry-run) confirm, execute, wait, and show the result."""
        from breakglass.flows import recovery  # noqa: PLC0415
        from breakglass.ways.driver import RunResult  # noqa: PLC0415

        skipped = getattr(remedy, "skipped", None)
        note = f"\nalready disabled on: {', '.join(skipped)}" if skipped else ""
        if dry_run or not steps:
            res = RunResult(None, remedy.method, True, [s.to_json() for s in steps], "planned")
            _show(output, "RecoverResult", res,
                  lambda: _render().plan(steps, remedy.method) + note + "\n\ndry run: nothing was changed"
                  if dry_run else "nothing to change" + note)
            return 0
        if output is Output.text:
            print(_render().plan(steps, remedy.method) + note)
        _confirm(question, yes)
        progress = _progress_bytes if sys.stderr.isatty() and snapshot_path else None
        res = recovery.execute(remedy, steps, state_dir, meta, snapshot_path, progress)
        if progress:
            print(file=sys.stderr)
        if getattr(remedy, "on_wait", None):
            print("\r\033[K", end="", file=sys.stderr, flush=True)  # the kubelet spinner's line
        res.readiness = ready() if ready else (_wait_ready(list(wait_hosts)) if wait and wait_hosts else [])
        code = int(ExitCode.NOT_VERIFIED) if res.status == "applied-unverified" else 0
        _show(output, "RecoverResult", res, lambda: _render().run_result(res), code)
        return code

    def _recover_talos() -> int:
        from breakglass.flows import recovery  # noqa: PLC0415

        files = [os.path.abspath(f) for f in config_file or []]  # journaled absolute: revert works from anywhere
        node_list = files or _split(nodes)
        wanted = _wanted()
        store = recovery.talos_store(_talos(talosctl, talosconfig, talos_context, talos_endpoints, timeout),
                                     files=bool(files))
        remedy, steps = recovery.plan_talos(store, node_list, wanted)
        if write_patch:
            from breakglass.talos import machineconfig as mc  # noqa: PLC0415

            if len({s.data["era"] for s in steps}) > 1:
                raise BadInput("the nodes use different config eras; write one patch per node")
            if not steps:
                raise BadInput("nothing to patch: the plugins are already disabled everywhere")
            st = steps[0]
            _write_new(write_patch, mc.dump(mc.patch(st.data["era"], st.data["after"])))
            _write_new(write_patch + ".revert.yaml", mc.dump(mc.patch(st.data["era"], st.data["before"])))
            _show(output, "PatchFiles", {"patch": write_patch, "revert": write_patch + ".revert.yaml"},
                  lambda: f"wrote {write_patch} and {write_patch}.revert.yaml (nothing else changed)")
            return 0
        return _carry_out(remedy, steps,
                          f"Patch {len(steps)} node(s)? Every {', '.join(wanted)} stays off until you revert.",
                          {"nodes": node_list, "plugins": wanted}, [] if files else (apiserver or node_list))

    def _wait_ready(hosts: list[str], probes: list | None = None) -> list:
        """/readyz on ``hosts`` (anonymous), or through ``probes`` (a node's own kubectl), with a spinner."""
        from breakglass.access import readyz  # noqa: PLC0415

        probes = probes or [lambda u=readyz.url_for(h): readyz.probe(u) for h in hosts]
        states = readyz.wait_for(probes, wait_timeout, on_tick=_spinner if sys.stderr.isatty() else None)
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)
        return states

    def _recover_kubeadm() -> int:
        from breakglass.flows import recovery  # noqa: PLC0415

        wanted = _wanted()
        if manifest:
            from breakglass.access.local import LocalNode  # noqa: PLC0415

            nodes, path, hosts = {"localhost": LocalNode()}, os.path.abspath(manifest), []
        else:
            hosts = _split(ssh)
            if not hosts:
                raise BadInput("--method kubeadm needs --ssh HOSTS, or --manifest PATH on the node itself")
            from breakglass.access.ssh import remote_path  # noqa: PLC0415

            remote_path(manifest_path, "--manifest-path")  # paths on the nodes: never an option of cat or mv
            remote_path(node_backup_dir, "--node-backup-dir")
            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
            nodes, path = _ssh_nodes(hosts, opts), manifest_path
        remedy, steps = recovery.plan_kubeadm(nodes, path, wanted, verify_timeout, local=bool(manifest),
                                              backup_dir=node_backup_dir)
        if sys.stderr.isatty() and output is Output.text:
            remedy.on_wait = _spin_line
        return _carry_out(remedy, steps,
                          f"Edit {len(steps)} manifest(s)? Every {', '.join(wanted)} stays off until you revert.",
                          {"hosts": hosts or ["localhost"], "plugins": wanted}, apiserver or hosts)

    def _recover_k3s() -> int:
        from breakglass.flows import recovery  # noqa: PLC0415
        from breakglass.access.ssh import remote_path  # noqa: PLC0415

        wanted = _wanted()
        files = [os.path.abspath(f) for f in config_file or []]  # journaled absolute: revert works from anywhere
        if len(files) > 1:
            raise BadInput(f"--method {method.value} edits one config file (its drop-ins come with it)")
        if files:
            from breakglass.access.local import LocalNode  # noqa: PLC0415

            nodes, hosts, path = {"localhost": LocalNode()}, [], files[0]
        else:
            hosts = _split(ssh)
            if not hosts:
                raise BadInput(f"--method {method.value} needs --ssh HOSTS, or --config-file PATH for a copy here")
            for p, what in ((config_path, "--config-path"), (drop_in_dir, "--drop-in-dir")):
                if p:
                    remote_path(p, what)  # paths on the nodes: never an option
            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
            nodes, path = _ssh_nodes(hosts, opts), config_path
        kubeadm_backup = node_backup_dir == "/etc/kubernetes/breakglass-backup"
        remedy, steps = recovery.plan_k3s(method.value, nodes, path, drop_in_dir and os.path.abspath(drop_in_dir)
                                          if files else drop_in_dir, wanted, verify_timeout, local=bool(files),
                                          backup_dir=None if kubeadm_backup else node_backup_dir)
        for note in remedy.notes:  # what the plan could not check (a node without systemd's unit)
            print(f"note: {note}", file=sys.stderr)
        if sys.stderr.isatty() and output is Output.text:
            remedy.on_wait = _spin_line
        # each node's own admin kubeconfig: k3s and RKE2 answer an anonymous /readyz with 401 only
        ready = (lambda: _wait_ready([], remedy.readiness_probes())) if not files and not apiserver and wait else None
        return _carry_out(remedy, steps,
                          f"Change {len(steps)} node(s)' config and restart {remedy.distro.service}? "
                          f"Every {', '.join(wanted)} stays off until you revert." if not files else
                          f"Edit {path} (no restart)? Every {', '.join(wanted)} stays off until you revert.",
                          {"hosts": hosts or ["localhost"], "plugins": wanted}, [] if files else (apiserver or hosts),
                          ready=ready)

    _run(output, verbose, body)


def _recover_scripted(given: dict) -> int:
    """--plan and --auto: fill recover's options, then run it as if they had been typed."""
    import inspect  # noqa: PLC0415

    from breakglass.flows import scripted  # noqa: PLC0415

    defaults = {k: p.default for k, p in inspect.signature(recover).parameters.items()}
    args = {k: v for k, v in given.items() if k not in ("plan", "auto")}
    if given["plan"]:
        for k, v in scripted.load_plan(given["plan"], set(args)).items():
            if args[k] == defaults[k]:  # a flag typed on the command line wins
                args[k] = v
    if isinstance(args["method"], str):
        try:
            args["method"] = Method(args["method"])
        except ValueError:
            raise BadInput(f"unknown method {args['method']!r} (use kubeapi, talos, kubeadm, k3s, rke2 or etcd)") from None
    if isinstance(args["action"], str):
        args["action"] = Action(args["action"])
    if given["auto"]:
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
        args["method"] = Method(scripted.auto_method(access, bool(args["webhook_config"]), family=scripted.
                                                     family_from_diagnosis(args["diagnosis"])))
        if args["output"] is Output.text:
            print(f"--auto: taking {args['method'].value}", file=sys.stderr)
    try:
        recover(**args)
    except typer.Exit as e:
        return int(e.exit_code or 0)
    return 0


@app.command()
def revert(
    run: Annotated[Optional[str], typer.Argument(
        help="Run name (or unique prefix), or a run directory. Default: the latest not yet reverted.",
        show_default=False)] = None,
    force: Annotated[bool, typer.Option(help="Overwrite targets that changed since the run.")] = False,
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
) -> None:
    """Undo a run in reverse order, from its journal alone.

    Compare-before-write: a target that changed since the run (say, an operator recreated
    the configuration) is reported with a diff and left alone, exit 4, unless --force.
    Reverting twice is safe. A run directory copied to another machine reverts there too.

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
                                          ssh=ssh_opts, kube=(kubeconfig, context))
            if preview.status == "nothing-to-do":  # nothing to ask about; a run left open is closed for real
                res = recovery.revert_run(run or preview.run, state_dir, target, force=force, talos=talos,
                                          ssh=ssh_opts, kube=(kubeconfig, context))
                _show(output, "RevertResult", res, lambda: _render().revert_result(res))
                return 0
            if output is Output.text:
                print(_render().revert_result(preview, preview=True))
            _confirm(f"Revert run {preview.run}?", yes)
        res = recovery.revert_run(run, state_dir, target, force=force, dry_run=dry_run, talos=talos, ssh=ssh_opts,
                                  kube=(kubeconfig, context))
        _show(output, "RevertResult", res, lambda: _render().revert_result(res))
        return 0

    _run(output, verbose, body)


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
