"""The command line: a thin typer layer over the core.

Commands parse options, call one core function, and hand its result object to
``render`` (text) or ``envelope`` (JSON). Errors are mapped to exit codes in exactly
one place, ``_run``. Core modules are imported inside commands so ``--help`` stays fast.
"""


import enum
import os
import sys
import traceback
from typing import Any, Callable, List, Optional

import typer
from typing_extensions import Annotated

from breakglass import __version__
from breakglass.errors import BadInput, BreakglassError, ExitCode


class Output(str, enum.Enum):
    text = "text"
    json = "json"


class Source(str, enum.Enum):
    auto = "auto"
    file = "file"
    api = "api"
    etcd = "etcd"


class Severity(str, enum.Enum):
    info = "info"
    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"


class Engine(str, enum.Enum):
    auto = "auto"
    hyperscan = "hyperscan"
    python = "python"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="text for people, json for scripts.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Full evidence lines; tracebacks on bugs.")]
StateDirOpt = Annotated[Optional[str], typer.Option(
    help="Where runs are kept (default: $BREAKGLASS_STATE_DIR, else $XDG_STATE_HOME/breakglass).",
    show_default=False)]
TalosconfigOpt = Annotated[Optional[str], typer.Option(
    help="talosconfig file (default: $TALOSCONFIG, then talosctl's own defaults).", show_default=False)]
TalosContextOpt = Annotated[Optional[str], typer.Option("--talos-context", help="talosconfig context.",
                                                        show_default=False)]
TalosEndpointsOpt = Annotated[Optional[str], typer.Option(
    "--talos-endpoints", "-e", help="Talos API endpoints (talosctl -e), comma-separated.", show_default=False)]
TalosctlOpt = Annotated[str, typer.Option(help="The talosctl binary.")]
SshUserOpt = Annotated[Optional[str], typer.Option(help="SSH user (default: ~/.ssh/config, else $USER).",
                                                   show_default=False)]
SshKeyOpt = Annotated[Optional[str], typer.Option(help="SSH private key (default: IdentityFile, agent).",
                                                  show_default=False)]
SshPortOpt = Annotated[Optional[int], typer.Option(help="SSH port (default: ~/.ssh/config, else 22).",
                                                   show_default=False)]
SshAcceptNewOpt = Annotated[bool, typer.Option(
    help="Accept and record unknown host keys (OpenSSH accept-new); changed keys are always refused.")]
SshConfigOpt = Annotated[str, typer.Option(help="OpenSSH client config to honour.")]
KnownHostsOpt = Annotated[str, typer.Option(help="known_hosts file.")]
EtcdViaSshOpt = Annotated[Optional[str], typer.Option(
    help="Reach etcd on this node's 127.0.0.1:2379 through SSH; --etcd-cacert/--etcd-cert/--etcd-key are then "
         "paths on the node (default: kubeadm's).", show_default=False)]



app = typer.Typer(
    name="breakglass",
    help="Bring a Kubernetes control plane back when admission webhooks have locked it up.",
    epilog="Exit codes: 0 ok/nothing found, 1 bug, 2 bad input, 3 problem found, 4 target changed, "
           "5 unreachable, 6 unsupported here, 130 interrupted.",
    invoke_without_command=True,
    add_completion=True,  # serves completions, and --install-completion; `breakglass completion SHELL` prints a script
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _emit_error(err_type: str, message: str, code: int, output: Output, hint: str | None = None) -> None:
    if output is Output.json:
        from breakglass.envelope import dumps, error_envelope  # noqa: PLC0415

        print(dumps(error_envelope(err_type, message, code, hint)))
    print(f"breakglass: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)


def _run(output: Output, verbose: bool, body: Callable[[], int]) -> None:
    """Run one command body; map every outcome to an exit code, never a traceback."""
    try:
        code = body()
    except BreakglassError as e:
        _emit_error(e.kind, str(e), int(e.exit_code), output, e.hint)
        code = int(e.exit_code)
    except KeyboardInterrupt:
        _emit_error("interrupted", "interrupted", int(ExitCode.INTERRUPTED), output)
        code = int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        sys.stderr.close()  # reader went away (| head): not an error worth a message
        code = 0
    except Exception as e:  # noqa: BLE001 - the one place bugs become exit 1
        if verbose:
            traceback.print_exc()
        msg = f"unexpected {type(e).__name__}: {e}".splitlines()[0][:300]
        _emit_error("failure", msg, int(ExitCode.FAILURE), output,
                    None if verbose else "rerun with --verbose for the traceback, and please report it")
        code = int(ExitCode.FAILURE)
    raise typer.Exit(code)


def _progress_line(source: str, done: int) -> None:
    print(f"\rreading {source}: {done >> 20} MiB", end="", file=sys.stderr, flush=True)


def _render():
    from breakglass import render  # noqa: PLC0415 - text rendering is only needed for text output

    return render


def _show(output: Output, kind: str, result: Any, text: Callable[[], str], code: int = 0,
          warnings: list[str] | None = None) -> None:
    """Print a result as the versioned JSON envelope or as text."""
    if output is Output.json:
        _print_json(kind, result, code, warnings or [])
    else:
        print(text())


def _print_json(kind: str, result: Any, code: int, warnings: list[str]) -> None:
    from breakglass.envelope import dumps, envelope  # noqa: PLC0415

    print(dumps(envelope(kind, result, code, warnings)))


@app.callback()
def _root(ctx: typer.Context) -> None:
    # On a terminal, `breakglass` alone is the wizard; elsewhere (scripts, pipes) it is help.
    if ctx.invoked_subcommand is None:
        if sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty():
            wizard(state_dir=None, output=Output.text, verbose=False)
        print(ctx.get_help())
        raise typer.Exit(0)


@app.command()
def wizard(state_dir: StateDirOpt = None, output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Walk through diagnosis, the ways out, the change, and its revert, asking at each step.

    Needs a terminal; scripts use `recover` and `revert` with --yes instead.

    Examples:

      breakglass wizard

      breakglass sandbox up && breakglass wizard      # rehearse on the sandbox
    """

    def body() -> int:
        if sys.stdin is None or not sys.stdin.isatty():
            raise BadInput("the wizard needs a terminal", hint="use `breakglass recover ... --yes` in scripts")
        from breakglass import wizard as _wizard  # noqa: PLC0415
        from breakglass.prompts import QuestionaryPrompter  # noqa: PLC0415

        return _wizard.run(QuestionaryPrompter(), state_dir)

    _run(output, verbose, body)


@app.command()
def diagnose(
    logs: Annotated[Optional[List[str]], typer.Argument(
        help="Log files, .gz files, directories (e.g. a copy of /var/log/pods/kube-system_kube-apiserver-*) "
             "or - for standard input. Default: standard input when it is not a terminal.",
        show_default=False)] = None,
    output: OutputOpt = Output.text,
    verbose: VerboseOpt = False,
    max_evidence: Annotated[int, typer.Option(min=1, max=100, help="Evidence lines kept per finding.")] = 5,
    year: Annotated[Optional[int], typer.Option(
        min=1970, max=9999, help="Year for klog timestamps, which carry none (default: this year).")] = None,
    scanner: Annotated[Engine, typer.Option(help="Line finder: hyperscan when installed, else python.")] = Engine.auto,
    talos_node: Annotated[Optional[List[str]], typer.Option(
        help="Read kube-apiserver's logs from these Talos nodes with `talosctl logs -k` (comma-separated).",
        show_default=False)] = None,
    talosconfig: TalosconfigOpt = None, talos_context: TalosContextOpt = None,
    talos_endpoints: TalosEndpointsOpt = None, talosctl: TalosctlOpt = "talosctl",
    ssh: Annotated[Optional[List[str]], typer.Option(
        "--ssh", help="Read kube-apiserver's CRI logs from /var/log/pods on these hosts over SSH.",
        show_default=False)] = None,
    pods_dir: Annotated[str, typer.Option(help="With --ssh: kubelet's pod log directory on the hosts.")]
    = "/var/log/pods",
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
) -> None:
    """Name the admission deadlock in kube-apiserver logs.

    Reads klog text, structured klog, JSON logging, CRI (/var/log/pods), talosctl and
    kubectl prefixed output, journald exports and text pasted into tickets, detected
    line by line, and reports which webhook blocks what, why, and the ways out.

    Examples:

      breakglass diagnose /var/log/pods/kube-system_kube-apiserver-*/

      talosctl -n 10.0.0.2 logs -k kube-system/kube-apiserver-cp1:kube-apiserver | breakglass diagnose

      breakglass diagnose apiserver.log.gz ticket-paste.txt -o json

    Exit code 3 when something needs action, 0 when nothing was found.
    """

    def body() -> int:
        from breakglass.diagnose.engine import Options, diagnose_paths  # noqa: PLC0415

        paths = list(logs or [])
        extra = []
        if talos_node:
            from breakglass.logs.remote import talos_sources  # noqa: PLC0415

            extra = talos_sources(_talos(talosctl, talosconfig, talos_context, talos_endpoints, None),
                                  _split(talos_node))
        if ssh:
            from breakglass.logs.remote import ssh_sources  # noqa: PLC0415

            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, None)
            for node in _ssh_nodes(_split(ssh), opts).values():
                extra += ssh_sources(node, pods_dir)
        if not paths and not extra:
            if sys.stdin is None or sys.stdin.isatty():
                raise BadInput("no logs given: name files or directories, or pipe a log into standard input",
                               hint="breakglass diagnose --help shows examples")
            paths = ["-"]
        progress = _progress_line if sys.stderr.isatty() else None
        try:
            diag, warnings = diagnose_paths(paths, Options(max_evidence=max_evidence, year=year,
                                                           engine=scanner.value, progress=progress),
                                        extra_sources=extra)
        finally:
            if progress:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
        code = int(ExitCode.FOUND if diag.verdict.needs_action else ExitCode.OK)
        _show(output, "Diagnosis", diag, lambda: _render().diagnosis(diag, warnings, verbose), code, warnings)
        return code

    _run(output, verbose, body)


# -- where admission configurations come from (shared by webhooks and audit) -------------------
FileOpt = Annotated[Optional[List[str]], typer.Option(
    "--file", "-f", help="YAML or JSON file (kubectl get -o yaml, List, multi-document). Repeatable.",
    show_default=False)]
SourceOpt = Annotated[Source, typer.Option(
    help="Where to read: file (with --file), api (kubeconfig), etcd; auto picks file if --file is given, "
         "etcd if --etcd-endpoints is, else api.")]
KubeconfigOpt = Annotated[Optional[str], typer.Option(help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config).",
                                                      show_default=False)]
ContextOpt = Annotated[Optional[str], typer.Option(help="kubeconfig context.", show_default=False)]
EtcdEndpointsOpt = Annotated[Optional[str], typer.Option(
    help="etcd endpoints, comma-separated (default: $ETCDCTL_ENDPOINTS, 127.0.0.1:2379).", show_default=False)]
EtcdCacertOpt = Annotated[Optional[str], typer.Option(help="etcd CA file (default: $ETCDCTL_CACERT).",
                                                      show_default=False)]
EtcdCertOpt = Annotated[Optional[str], typer.Option(help="etcd client certificate (default: $ETCDCTL_CERT).",
                                                    show_default=False)]
EtcdKeyOpt = Annotated[Optional[str], typer.Option(help="etcd client key (default: $ETCDCTL_KEY).",
                                                   show_default=False)]
EtcdPrefixOpt = Annotated[str, typer.Option(help="kube-apiserver --etcd-prefix.")]
TimeoutOpt = Annotated[Optional[float], typer.Option(
    min=0.1, help="Seconds to wait for the API or etcd (default: 10, or $ETCDCTL_COMMAND_TIMEOUT).",
    show_default=False)]
TargetOpt = Annotated[Optional[str], typer.Option(
    help="Kubernetes version to audit for, e.g. 1.33 (default: the newest rules).", show_default=False)]


def _spec(files, source, kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix,
          timeout):
    from breakglass.webhooks.sources import SourceSpec  # noqa: PLC0415

    return SourceSpec(files=list(files or []), source=source.value, kubeconfig=kubeconfig, context=context,
                      etcd_endpoints=etcd_endpoints, etcd_cacert=etcd_cacert, etcd_cert=etcd_cert,
                      etcd_key=etcd_key, etcd_prefix=etcd_prefix, timeout=timeout)


def _load_inventory(file, source, kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert, etcd_key,
                    etcd_prefix, timeout, etcd_via_ssh, ssh_opts):
    from breakglass.webhooks import sources as _sources  # noqa: PLC0415

    if etcd_via_ssh:
        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout, etcd_via_ssh,
                              ssh_opts)
        etcd = target.connect()
        try:
            return _sources.load_etcd(etcd, etcd_prefix)
        finally:
            etcd.close()
    return _sources.load(_spec(file, source, kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert, etcd_key,
                               etcd_prefix, timeout))


@app.command()
def webhooks(
    file: FileOpt = None, source: SourceOpt = Source.auto, kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None, etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None,
    etcd_cert: EtcdCertOpt = None, etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry",
    timeout: TimeoutOpt = None, target_version: TargetOpt = None, etcd_via_ssh: EtcdViaSshOpt = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """List admission webhooks and policies: what they intercept, how they fail, what backs them.

    Reads files, the live API, or etcd directly when the apiserver is down (only the
    admission key prefixes are read). BOOTSTRAP KINDS names the objects kube-apiserver
    writes at start (or a cluster needs to recover) that the webhook sees.

    Examples:

      breakglass webhooks

      kubectl get validatingwebhookconfigurations -o yaml | breakglass webhooks -f -

      breakglass webhooks --etcd-endpoints https://10.0.0.2:2379 --etcd-cacert ca.crt --etcd-cert c.crt --etcd-key c.key
    """

    def body() -> int:
        from breakglass.webhooks import listing as _listing  # noqa: PLC0415

        inv = _load_inventory(file, source, kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert, etcd_key,
                              etcd_prefix, timeout, etcd_via_ssh,
                              _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts,
                                           timeout))
        li = _listing.listing(inv, target_version)
        _show(output, "WebhookList", li, lambda: _render().listing(li, inv.warnings), 0, inv.warnings)
        return 0

    _run(output, verbose, body)


@app.command()
def audit(
    file: FileOpt = None, source: SourceOpt = Source.auto, kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None, etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None,
    etcd_cert: EtcdCertOpt = None, etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry",
    timeout: TimeoutOpt = None, target_version: TargetOpt = None,
    fail_on: Annotated[Severity, typer.Option(help="Exit 3 when a risk of this severity or worse is found.")]
    = Severity.high, etcd_via_ssh: EtcdViaSshOpt = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Audit admission webhooks and policies for deadlock risk, with the matchConditions fix.

    Flags webhooks that fail closed on objects kube-apiserver writes at start
    (ServiceCIDR, IPAddress, system Namespaces, PriorityClasses, RBAC, flow control, …)
    or that a cluster needs to recover (Nodes, Leases), webhooks that intercept their own
    pods, long timeouts and missing matchConditions. Run it before an upgrade with
    --target-version.

    Examples:

      breakglass audit --target-version 1.33

      breakglass audit -f examples/webhooks/kyverno-risky.yaml

      breakglass audit --fail-on critical -o json     # in a CI pipeline
    """

    def body() -> int:
        from breakglass.webhooks import audit as _audit  # noqa: PLC0415

        _audit.parse_version(target_version)  # a bad version is bad input before any connection
        inv = _load_inventory(file, source, kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert, etcd_key,
                              etcd_prefix, timeout, etcd_via_ssh,
                              _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts,
                                           timeout))
        rep = _audit.audit(inv.configs, target_version)
        worst = _audit.RANK[rep.worst] if rep.worst else -1
        code = int(ExitCode.FOUND if worst >= _audit.RANK[fail_on.value] else ExitCode.OK)
        _show(output, "AuditReport", rep, lambda: _render().audit_report(
            rep, inv.warnings + [f"encrypted, not audited: {k}" for k in inv.opaque], verbose),
            code, inv.warnings + inv.opaque)
        return code

    _run(output, verbose, body)


YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show exactly what would change; change nothing.")]


def _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout, via_ssh=None,
                 ssh_options=None):
    from breakglass.access.etcd import EtcdSettings  # noqa: PLC0415
    from breakglass.recovery import EtcdTarget  # noqa: PLC0415
    from breakglass.webhooks.sources import etcd_prefixes  # noqa: PLC0415

    etcd_prefixes(etcd_prefix)  # validates it
    if via_ssh:
        from breakglass.access import etcd_ssh  # noqa: PLC0415
        from breakglass.access.ssh import Node, SshOptions  # noqa: PLC0415

        from breakglass.access.etcd import _parse_endpoint  # noqa: PLC0415

        # Through SSH, --etcd-endpoints is as seen from the node (default 127.0.0.1:2379).
        remote_port = _parse_endpoint(etcd_endpoints.split(",")[0])[1] if etcd_endpoints else 2379
        node = Node(via_ssh, ssh_options or SshOptions()).connect()
        return EtcdTarget(etcd_ssh.tunnel(node, etcd_cacert, etcd_cert, etcd_key, timeout, remote_port), etcd_prefix)
    return EtcdTarget(EtcdSettings.resolve(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, timeout), etcd_prefix)


def _confirm(question: str, yes: bool) -> None:
    """Ask before changing anything. Scripts pass --yes; without a terminal there is no asking."""
    from breakglass.errors import Interrupted  # noqa: PLC0415

    if yes:
        return
    if sys.stdin is None or not sys.stdin.isatty():
        raise BadInput("refusing to change anything without --yes: standard input is not a terminal")
    answer = input(f"{question} Type yes to go on: ").strip().lower()
    if answer != "yes":
        raise Interrupted("aborted at the confirmation; nothing was changed")


_spin_state = [0]


def _spinner(states) -> None:
    from breakglass.access import readyz  # noqa: PLC0415
    from breakglass.prompts import SPIN  # noqa: PLC0415

    _spin_state[0] += 1
    print(f"\r\033[K{SPIN[_spin_state[0] % 4]} {readyz.waiting_text(states)}", end="", file=sys.stderr, flush=True)


def _write_new(path: str, text: str) -> None:
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise BadInput(f"{path} exists; choose a new file") from None
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None


def _progress_bytes(done: int, total: int) -> None:
    pct = 100 * done // total if total else 100
    print(f"\rsnapshot: {done >> 20} / {total >> 20} MiB ({pct}%)", end="", file=sys.stderr, flush=True)


class Method(str, enum.Enum):
    kubeapi = "kubeapi"
    talos = "talos"
    kubeadm = "kubeadm"
    etcd = "etcd"


class Action(str, enum.Enum):
    ignore = "ignore"
    exclude = "exclude"
    delete = "delete"


def _talos(talosctl, talosconfig, talos_context, talos_endpoints, timeout):
    from breakglass.access.talos import Talos  # noqa: PLC0415

    return Talos(talosctl=talosctl, talosconfig=talosconfig, context=talos_context,
                 endpoints=[e for e in (talos_endpoints or "").split(",") if e], timeout=timeout or 60.0)


def _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout):
    from breakglass.access.ssh import SshOptions  # noqa: PLC0415

    return SshOptions(user=ssh_user, port=ssh_port, key=ssh_key, accept_new=ssh_accept_new, config=ssh_config,
                      known_hosts=known_hosts, timeout=timeout or 10.0)


def _ssh_nodes(hosts: list[str], options) -> dict:
    from breakglass.access.ssh import Node  # noqa: PLC0415

    return {h: Node(h, options) for h in hosts}


def _split(values) -> list[str]:
    return [x.strip() for v in (values or []) for x in v.split(",") if x.strip()]


@app.command()
def recover(
    method: Annotated[Optional[Method], typer.Option(
        help="How: kubeapi, talos, kubeadm or etcd (see below). Or a --plan file, or --auto.",
        show_default=False)] = None,
    plan: Annotated[Optional[str], typer.Option(
        help="A plan file (YAML) naming the method, targets and options; flags given here win.",
        show_default=False)] = None,
    auto: Annotated[bool, typer.Option(
        help="Probe what is reachable and take the first viable way out (still needs --yes to change anything).")]
    = False,
    webhook_config: Annotated[Optional[List[str]], typer.Option(
        "--webhook-config", "-w", help="Configuration to remove: NAME, kind/NAME, or its etcd key. Repeatable.",
        show_default=False)] = None,
    kind: Annotated[Optional[List[str]], typer.Option(
        help="Limit NAME lookups to these kinds: validating, mutating, vap, vapbinding, map, mapbinding.",
        show_default=False)] = None,
    snapshot: Annotated[Optional[str], typer.Option(
        help="First save a full etcd snapshot to this new file (checksummed).", show_default=False)] = None,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry", timeout: TimeoutOpt = None,
    nodes: Annotated[Optional[List[str]], typer.Option(
        "--nodes", "-n", help="talos: control-plane nodes (every one runs an apiserver), comma-separated.",
        show_default=False)] = None,
    plugins: Annotated[Optional[List[str]], typer.Option(
        help="talos: admission plugins to disable (default: the diagnosis's, else both webhook plugins).",
        show_default=False)] = None,
    diagnosis: Annotated[Optional[str], typer.Option(
        help="talos: take the plugins from `breakglass diagnose -o json` output saved in this file.",
        show_default=False)] = None,
    config_file: Annotated[Optional[List[str]], typer.Option(
        help="talos: patch machine-config files (managed as code) instead of live nodes. Repeatable.",
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
    etcd_via_ssh: EtcdViaSshOpt = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    action: Annotated[Action, typer.Option(
        help="kubeapi: ignore (failurePolicy Ignore), exclude (add the audit's matchConditions) or delete.")]
    = Action.ignore,
    webhook: Annotated[Optional[List[str]], typer.Option(
        help="kubeapi: only these webhooks of the configuration (default: all).", show_default=False)] = None,
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

    --method etcd deletes each configuration's exact key
    (/registry/validatingwebhookconfigurations/NAME) after a backup that is written,
    fsynced and verified; the delete compares mod_revision with the backed-up version,
    so nothing that was not backed up is ever deleted.

    Every step is journaled in a run directory; `breakglass revert` undoes it exactly.

    Examples:

      breakglass recover --method talos -n 10.0.0.2,10.0.0.3,10.0.0.4 --dry-run

      breakglass recover --method talos --config-file clusters/prod/controlplane.yaml --write-patch bg.yaml

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
        from breakglass import recovery  # noqa: PLC0415

        if method is None:
            raise BadInput("say how: --method kubeapi|talos|kubeadm|etcd, a --plan file, or --auto")

        if method is Method.talos:
            return _recover_talos()
        if method is Method.kubeadm:
            return _recover_kubeadm()
        if method is Method.kubeapi:
            remedy, steps = recovery.plan_kubeapi(kubeconfig, context, list(webhook_config or []),
                                                  list(kind or []) or None, action.value, _split(webhook),
                                                  timeout or 10.0)
            for note in remedy.notes:
                print(f"note: {note}", file=sys.stderr)
            return _carry_out(remedy, steps, f"Apply {len(steps)} change(s) through the API?",
                              {"refs": list(webhook_config or []), "action": action.value},
                              ready=(lambda: [remedy.api.readyz()]) if wait else None)
        ssh_opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout,
                              etcd_via_ssh, ssh_opts)
        remedy, steps = recovery.plan_etcd(target, list(webhook_config or []), list(kind or []) or None)
        return _carry_out(remedy, steps, f"Delete {len(steps)} key(s) from etcd?",
                          {"refs": list(webhook_config or [])}, snapshot_path=snapshot)

    def _wanted() -> list[str]:
        from breakglass import scripted  # noqa: PLC0415
        from breakglass.remedies.admission_flags import WEBHOOK_PLUGINS  # noqa: PLC0415

        return _split(plugins) or scripted.plugins_from_diagnosis(diagnosis) or list(WEBHOOK_PLUGINS)

    def _carry_out(remedy, steps, question: str, meta: dict, wait_hosts=(), snapshot_path=None, ready=None) -> int:
        """Show the plan; then (unless --dry-run) confirm, execute, wait, and show the result."""
        from breakglass import recovery  # noqa: PLC0415
        from breakglass.remedies.driver import RunResult  # noqa: PLC0415

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
        res.readiness = ready() if ready else (_wait_ready(list(wait_hosts)) if wait and wait_hosts else [])
        _show(output, "RecoverResult", res, lambda: _render().run_result(res))
        return 0

    def _recover_talos() -> int:
        from breakglass import recovery  # noqa: PLC0415

        files = list(config_file or [])
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

    def _wait_ready(hosts: list[str]) -> list:
        from breakglass.access import readyz  # noqa: PLC0415

        urls = [readyz.url_for(u) for u in hosts]
        states = readyz.wait(urls, wait_timeout, on_tick=_spinner if sys.stderr.isatty() else None)
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)
        return states

    def _recover_kubeadm() -> int:
        from breakglass import recovery  # noqa: PLC0415

        wanted = _wanted()
        if manifest:
            from breakglass.access.local import LocalNode  # noqa: PLC0415

            nodes, path, hosts = {"localhost": LocalNode()}, os.path.abspath(manifest), []
        else:
            hosts = _split(ssh)
            if not hosts:
                raise BadInput("--method kubeadm needs --ssh HOSTS, or --manifest PATH on the node itself")
            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
            nodes, path = _ssh_nodes(hosts, opts), manifest_path
        remedy, steps = recovery.plan_kubeadm(nodes, path, wanted, verify_timeout, local=bool(manifest),
                                              backup_dir=node_backup_dir)
        return _carry_out(remedy, steps,
                          f"Edit {len(steps)} manifest(s)? Every {', '.join(wanted)} stays off until you revert.",
                          {"hosts": hosts or ["localhost"], "plugins": wanted}, apiserver or hosts)

    _run(output, verbose, body)


def _recover_scripted(given: dict) -> int:
    """--plan and --auto: fill recover's options, then run it as if they had been typed."""
    import inspect  # noqa: PLC0415

    from breakglass import scripted  # noqa: PLC0415

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
            raise BadInput(f"unknown method {args['method']!r} (use kubeapi, talos, kubeadm or etcd)") from None
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
                                 args["etcd_prefix"], args["timeout"], args["etcd_via_ssh"], opts))
        args["method"] = Method(scripted.auto_method(access, bool(args["webhook_config"])))
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
    etcd_key: EtcdKeyOpt = None, timeout: TimeoutOpt = None,
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
    """

    def body() -> int:
        from breakglass import recovery  # noqa: PLC0415

        target = None
        if etcd_endpoints or etcd_cacert or etcd_cert or etcd_key or timeout:
            target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, "/registry", timeout)
        ssh_opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
        talos = None
        if talosconfig or talos_context or talos_endpoints or talosctl != "talosctl":
            talos = _talos(talosctl, talosconfig, talos_context, talos_endpoints, timeout)
        if not dry_run:
            preview = recovery.revert_run(run, state_dir, target, force=force, dry_run=True, talos=talos,
                                          ssh=ssh_opts, kube=(kubeconfig, context))
            if preview.status == "nothing-to-do":
                _show(output, "RevertResult", preview, lambda: _render().revert_result(preview))
                return 0
            if output is Output.text:
                print(_render().revert_result(preview))
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
        from breakglass import recovery  # noqa: PLC0415

        items = recovery.list_runs(state_dir)
        _show(output, "RunList", items, lambda: _render().runs(items))
        return 0

    _run(output, verbose, body)


etcd_app = typer.Typer(name="etcd", help="Low-level etcd access for experts (admission keys only), "
                                          "sharing the recover/revert code.", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(etcd_app, name="etcd")


@etcd_app.command("get")
def etcd_get(
    ref: Annotated[str, typer.Argument(help="NAME, kind/NAME or the etcd key of an admission configuration.")],
    kind: Annotated[Optional[List[str]], typer.Option(help="Kinds to look NAME up in.", show_default=False)] = None,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry", timeout: TimeoutOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Show one admission configuration as stored in etcd: key, revisions and the decoded object.

    Examples:

      breakglass etcd get validating/kyverno-resource-validating-webhook-cfg

      breakglass etcd get /registry/mutatingwebhookconfigurations/istio-sidecar-injector -o json
    """

    def body() -> int:
        from breakglass import etcd_tools  # noqa: PLC0415

        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout)
        items = etcd_tools.get(target, ref, list(kind or []) or None)
        _show(output, "EtcdObjects", items, lambda: etcd_tools.render_objects(items))
        return 0

    _run(output, verbose, body)


@etcd_app.command("list")
def etcd_list(
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry", timeout: TimeoutOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """List the admission keys in etcd with their revisions, sizes and encodings.

    Examples:

      breakglass etcd list --etcd-endpoints https://127.0.0.1:2379 --etcd-cacert ca.crt --etcd-cert c.crt --etcd-key c.key
    """

    def body() -> int:
        from breakglass import etcd_tools  # noqa: PLC0415

        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout)
        items = etcd_tools.list_keys(target)
        _show(output, "EtcdKeys", items, lambda: etcd_tools.render_keys(items))
        return 0

    _run(output, verbose, body)


@etcd_app.command("snapshot")
def etcd_snapshot(
    file: Annotated[str, typer.Argument(help="New file to write the snapshot to (mode 0600).")],
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, timeout: TimeoutOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Save a full etcd snapshot, streamed, with etcd's integrity trailer checked.

    Examples:

      breakglass etcd snapshot /root/etcd-before.db --etcd-endpoints https://127.0.0.1:2379 ...
    """

    def body() -> int:
        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, "/registry", timeout)
        progress = _progress_bytes if sys.stderr.isatty() else None
        etcd = target.connect()
        try:
            info = etcd.save_snapshot(file, progress)
        finally:
            etcd.close()
        if progress:
            print(file=sys.stderr)
        _show(output, "EtcdSnapshot", info,
              lambda: f"saved {info['size']} bytes to {info['path']} (sha256 {info['sha256']})")
        return 0

    _run(output, verbose, body)


@etcd_app.command("backup")
def etcd_backup(
    refs: Annotated[List[str], typer.Argument(help="Configurations: NAME, kind/NAME or etcd keys.")],
    kind: Annotated[Optional[List[str]], typer.Option(help="Kinds to look NAME up in.", show_default=False)] = None,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry", timeout: TimeoutOpt = None,
    state_dir: StateDirOpt = None, output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Back up configurations' raw bytes into a new run directory, changing nothing.

    Examples:

      breakglass etcd backup validating/kyverno-resource-validating-webhook-cfg
    """

    def body() -> int:
        from breakglass import etcd_tools  # noqa: PLC0415

        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout)
        res = etcd_tools.backup(target, refs, list(kind or []) or None, state_dir)
        _show(output, "EtcdBackup", res,
              lambda: f"backed up {len(res['steps'])} key(s) in run {res['run']} ({res['path']})")
        return 0

    _run(output, verbose, body)


@etcd_app.command("restore")
def etcd_restore(
    run: Annotated[str, typer.Argument(help="Run (from `etcd backup` or `recover`), by name or directory.")],
    force: Annotated[bool, typer.Option(help="Overwrite keys that exist with other content.")] = False,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None, timeout: TimeoutOpt = None,
    state_dir: StateDirOpt = None, dry_run: DryRunOpt = False, yes: YesOpt = False,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Put backed-up keys back where they are absent (the same code as revert).

    Examples:

      breakglass etcd restore 20261130T081500Z-3fa2c1 --dry-run
    """
    revert(run=run, force=force, etcd_endpoints=etcd_endpoints, etcd_cacert=etcd_cacert, etcd_cert=etcd_cert,
           etcd_key=etcd_key, timeout=timeout, talosconfig=None, talos_context=None, talos_endpoints=None,
           talosctl="talosctl", ssh_user=None, ssh_key=None, ssh_port=None, ssh_accept_new=False,
           ssh_config="~/.ssh/config", known_hosts="~/.ssh/known_hosts", kubeconfig=None, context=None,
           state_dir=state_dir, dry_run=dry_run, yes=yes, output=output, verbose=verbose)


sandbox_app = typer.Typer(name="sandbox", help="A local rehearsal environment: real etcd seeded like the "
                                                "Talos/Kyverno outage, plus logs and configs.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(sandbox_app, name="sandbox")
SandboxDirOpt = Annotated[Optional[str], typer.Option(
    "--dir", help="Sandbox directory (default: the state directory's sandbox/).", show_default=False)]


@sandbox_app.command("up")
def sandbox_up(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
               output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Start the sandbox (idempotent) and print the flags that point breakglass at it.

    Examples:

      breakglass sandbox up

      breakglass webhooks $(breakglass sandbox up -o json | jq -r .result.flags)
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        sb = sandbox.up(sandbox_dir or sandbox.default_dir(state_dir))
        st = sandbox.status(sb.dir)
        _show(output, "Sandbox", st, lambda: _render_sandbox(st))
        return 0

    _run(output, verbose, body)


@sandbox_app.command("down")
def sandbox_down(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                 output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Stop the sandbox and remove its directory.

    Examples:

      breakglass sandbox down
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        d = sandbox_dir or sandbox.default_dir(state_dir)
        was = sandbox.down(d)
        _show(output, "Sandbox", {"running": False, "dir": d, "stopped": was},
              lambda: f"sandbox {'stopped and ' if was else ''}removed ({d})")
        return 0

    _run(output, verbose, body)


@sandbox_app.command("status")
def sandbox_status(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                   output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Show whether the sandbox runs, and how to point breakglass at it.

    Examples:

      breakglass sandbox status -o json
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        st = sandbox.status(sandbox_dir or sandbox.default_dir(state_dir))
        _show(output, "Sandbox", st, lambda: _render_sandbox(st))
        return 0

    _run(output, verbose, body)


def _render_sandbox(st: dict) -> str:
    if not st.get("running"):
        return f"sandbox not running ({st['dir']})"
    out = [f"sandbox running in {st['dir']} (etcd pid {st['pid']})", f"  etcd: {st['flags']}"]
    out += [f"  {k}: {v}" for k, v in st["files"].items()]
    out.append("try: breakglass diagnose " + st["files"].get("apiserver_log", "") + "; breakglass audit " + st["flags"])
    return "\n".join(out)


class LeakOutput(str, enum.Enum):
    text = "text"
    json = "json"
    csv = "csv"
    recheck = "recheck"


@app.command()
def leaks(
    audit_log: Annotated[Optional[List[str]], typer.Option(
        "--audit-log", help="kube-apiserver audit logs (JSON lines): files, .gz, directories of rotated files, "
                            "or - for standard input. Repeatable.", show_default=False)] = None,
    apiserver_log: Annotated[Optional[List[str]], typer.Option(
        "--apiserver-log", help="Without audit logs: kube-apiserver's own logs, in any format diagnose reads. "
                                "Names webhooks and causes; resources only from slow-call traces.",
        show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option(help="Only requests completed at or after this RFC 3339 time.",
                                                 show_default=False)] = None,
    until: Annotated[Optional[str], typer.Option(help="Only requests completed at or before this RFC 3339 time.",
                                                 show_default=False)] = None,
    webhook: Annotated[Optional[List[str]], typer.Option(
        help="Only these webhooks (their names, e.g. validation.gatekeeper.sh). Repeatable.", show_default=False)]
    = None,
    window_gap: Annotated[float, typer.Option(
        min=1, help="Seconds without a leak that end a failing-open window.")] = 60.0,
    year: Annotated[Optional[int], typer.Option(
        min=1970, max=9999, help="With --apiserver-log: the year of klog timestamps (default: this year).")] = None,
    output: Annotated[LeakOutput, typer.Option(
        "--output", "-o", help="text for people; json or csv for every request; recheck for the YAML list of "
                               "objects to re-validate.")] = LeakOutput.text,
    verbose: VerboseOpt = False,
) -> None:
    """List the requests admitted while a webhook was failing open.

    Reads the failed-open.*.webhook.admission.k8s.io audit annotations kube-apiserver
    writes when a webhook with failurePolicy Ignore could not be called. Reports every
    such request (time, user, verb, resource, name, webhook, response code), summaries
    per webhook, resource and user, the windows of failing open, and the objects still
    worth re-checking: written then and not deleted later.

    Without audit logs, --apiserver-log counts the "failing open" warnings instead:
    webhook, time and cause of each call, and the resource only where a slow-call
    trace shows it.

    Examples:

      breakglass leaks --audit-log /var/log/kubernetes/audit/

      breakglass leaks --audit-log audit.log.gz --since 2026-11-30T02:00:00Z

      breakglass leaks --audit-log audit.log -o recheck > recheck.yaml

      breakglass leaks --apiserver-log /var/log/pods/kube-system_kube-apiserver-*/

    Exit code 3 when requests got in, 0 when none did.
    """
    err_output = Output.json if output is LeakOutput.json else Output.text

    def body() -> int:
        from breakglass import leaks as _leaks  # noqa: PLC0415

        if bool(audit_log) == bool(apiserver_log):
            raise BadInput("give --audit-log (every request, named) or --apiserver-log (when there is no audit "
                           "log), not both" if audit_log else "no logs given: use --audit-log, or --apiserver-log "
                           "when the cluster keeps no audit log")
        if audit_log:
            from breakglass.leaks.audit import scan  # noqa: PLC0415

            rep = scan(list(audit_log), since, until, _split(webhook) or None, window_gap)
        else:
            from breakglass.leaks.apiserver import scan  # noqa: PLC0415

            rep = scan(list(apiserver_log), since, until, _split(webhook) or None, window_gap, year=year)
        code = int(ExitCode.FOUND if rep.leaks else ExitCode.OK)
        if output is LeakOutput.csv:
            _leaks.to_csv(rep, sys.stdout)
        elif output is LeakOutput.recheck:
            print(_leaks.recheck_yaml(rep), end="")
        else:
            _show(err_output, "LeakReport", rep.to_json(), lambda: _render().leak_report(rep, verbose), code)
        return code

    _run(err_output, verbose, body)


@app.command()
def version(
    output: OutputOpt = Output.text,
    short: Annotated[bool, typer.Option("--short", help="Only breakglass's own version.")] = False,
) -> None:
    """Print the versions of breakglass, its libraries, and the tools it found on PATH.

    Libraries with native code (grpcio for etcd, cryptography for SSH, hyperscan)
    are also imported, to say whether they load here; talosctl, kubectl, etcdctl
    and ssh are asked for their client version. Paste it into bug reports.

    Examples:

      breakglass version

      breakglass version -o json

      breakglass version --short
    """

    def body() -> int:
        if short:
            _show(output, "Version", {"breakglass": __version__}, lambda: f"breakglass {__version__}")
            return 0
        from breakglass.about import collect  # noqa: PLC0415

        about = collect()
        _show(output, "Version", about.to_json(), lambda: _render().about(about))
        return 0

    _run(output, False, body)


class Shell(str, enum.Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")],
               output: OutputOpt = Output.text) -> None:
    """Print the shell completion script for bash, zsh or fish.

    Commands, options and choices complete; the script asks breakglass itself,
    so it stays right after an upgrade.

    Examples:

      breakglass completion bash > ~/.local/share/bash-completion/completions/breakglass

      breakglass completion zsh > "${fpath[1]}/_breakglass"

      breakglass completion fish > ~/.config/fish/completions/breakglass.fish
    """

    def body() -> int:
        from typer._completion_shared import get_completion_script  # noqa: PLC0415

        script = get_completion_script(prog_name="breakglass", complete_var="_BREAKGLASS_COMPLETE", shell=shell.value)
        _show(output, "Completion", {"shell": shell.value, "script": script}, lambda: script)
        return 0

    _run(output, False, body)


def main() -> None:
    app()


def bundle_main() -> None:
    """The offline bundle's entry: `kubectl breakglass` when linked as kubectl-breakglass, its completion as
    kubectl_complete-breakglass."""
    name = os.path.basename(sys.argv[0])
    try:
        if name.startswith("kubectl_complete-breakglass"):
            kubectl_complete_main()
        elif name.startswith("kubectl-breakglass"):
            kubectl_main()
        else:
            app(prog_name="breakglass")
    except ImportError as e:  # typer parses typed options with pydantic, whose core is compiled code
        from breakglass.capability import unsupported  # noqa: PLC0415

        err = unsupported("the command line", e.name or "a compiled module", e)
        _emit_error(err.kind, str(err), int(err.exit_code), Output.text, err.hint)
        raise SystemExit(int(err.exit_code)) from None


def kubectl_complete_main() -> None:
    """`kubectl breakglass <TAB>`: kubectl 1.26+ runs kubectl_complete-breakglass with the words typed so far
    and reads cobra's format: one candidate per line (value, tab, help), then ':<directive>'."""
    from typer._click.shell_completion import ShellComplete  # noqa: PLC0415 - typer's own completion engine

    class _Cobra(ShellComplete):
        name, source_template = "cobra", ""

        def source_vars(self) -> dict:
            return {}

        def get_completion_args(self) -> tuple[list[str], str]:
            args = sys.argv[1:]
            return args[:-1], args[-1] if args else ""

        def format_completion(self, item) -> str:
            return f"{item.value}\t{item.help.splitlines()[0]}" if item.help else item.value

    comp = _Cobra(typer.main.get_command(app), {}, "kubectl breakglass", "_BREAKGLASS_COMPLETE")
    items = comp.get_completions(*comp.get_completion_args())
    for item in items:
        print(comp.format_completion(item))
    print(":4" if items else ":0")  # 4: no file completion; 0: let the shell complete file names (log paths)


def kubectl_main() -> None:
    """`kubectl breakglass ...`: kubectl runs kubectl-breakglass from PATH; usage lines say what was typed."""
    app(prog_name="kubectl breakglass")
