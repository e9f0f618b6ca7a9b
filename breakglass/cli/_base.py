"""What every command shares: the typer app, the output and error contract, common options and helpers.

Errors are mapped to exit codes in exactly one place, ``_run``. Core modules are imported inside
functions so ``--help`` stays fast."""

import enum
import re
import sys
import traceback
from typing import Any, Callable, List, Optional

import typer
from typing_extensions import Annotated

from breakglass.core import textfile
from breakglass.core.errors import BadInput, BreakglassError, ExitCode


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
    help="Reach etcd on this node through SSH; --etcd-endpoints (default 127.0.0.1:2379, or unix:///path) and "
         "--etcd-cacert/--etcd-cert/--etcd-key are then as the node sees them, the files read into memory only. "
         "With none of them, the node's distribution says: kubeadm's certificates, k3s'/RKE2's embedded etcd "
         "ones, or k3s' kine socket. A run journals this route: revert and etcd restore take it again with no "
         "etcd options.", show_default=False)]



app = typer.Typer(
    name="breakglass",
    help="Bring a Kubernetes control plane back when admission webhooks have locked it up.",
    epilog="Exit codes: 0 ok/nothing found, 1 bug, 2 bad input, 3 problem found, 4 target changed, "
           "5 unreachable, 6 unsupported here, 7 declined, 8 applied not verified, 9 disk full, 130 interrupted.",
    invoke_without_command=True,
    add_completion=True,  # serves completions, and --install-completion; `breakglass completion SHELL` prints a script
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _emit_error(err_type: str, message: str, code: int, output: Output, hint: str | None = None,
                outcome=None) -> None:
    """``outcome``: what the failed command did (a run that changed something before it failed), when known.
    The JSON keeps the message as it is; the error line escapes it (it may carry a hostile file or webhook
    name: a newline would start a second line, an ESC or U+202E would rewrite this one)."""
    if output is Output.json:
        from breakglass.core.envelope import dumps, error_envelope  # noqa: PLC0415

        print(dumps(error_envelope(err_type, message, code, hint, outcome)))
    _print_err(f"breakglass: error: {message}")
    if hint:
        _print_err(f"hint: {hint}")


def _print_err(line: str) -> None:
    """One line on stderr, escaped. To a terminal it folds at words to its width (the terminal would break
    it inside a word); to a file or a pipe it stays one line, for grep."""
    from breakglass.core.safetext import printable  # noqa: PLC0415

    line = printable(line)
    if sys.stderr is not None and sys.stderr.isatty():
        from breakglass.present import layout  # noqa: PLC0415

        line = "\n".join(layout.fold(line, layout.width(sys.stderr), "", "  "))
        if layout.open_line:  # a spinner's or progress line (and a ^C echoed after it): this starts a new line
            print(file=sys.stderr)
            layout.open_line = False
    print(line, file=sys.stderr)


def _run(output: Output, verbose: bool, body: Callable[[], int]) -> None:
    """Run one command body; map every outcome to an exit code, never a traceback."""
    try:
        code = body()
    except BreakglassError as e:
        if e.exit_code == ExitCode.OK:  # an outcome that stops the command but is no failure (already applied)
            _show(output, "Notice", {"status": e.kind, "message": str(e), "hint": e.hint},
                  lambda: _safe(str(e)) + (f"\n{_safe(e.hint)}" if e.hint else ""))
            raise typer.Exit(0) from None
        _emit_error(e.kind, str(e), int(e.exit_code), output, e.hint, getattr(e, "outcome", None))
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


def _safe(text) -> str:
    """Untrusted text (a name, a path) escaped onto one line: ``breakglass.core.safetext.printable``."""
    from breakglass.core.safetext import printable  # noqa: PLC0415

    return printable(text)


def _progress_line(source: str, done: int) -> None:
    print(f"\rreading {_safe(source)}: {done >> 20} MiB", end="", file=sys.stderr, flush=True)
    _line_open()


def _render():
    from breakglass.present import render  # noqa: PLC0415 - text rendering is only needed for text output

    return render


def _show(output: Output, kind: str, result: Any, text: Callable[[], str], code: int = 0,
          warnings: list[str] | None = None) -> None:
    """Print a result as the versioned JSON envelope (with its outcome block) or as text."""
    if output is Output.json:
        _print_json(kind, result, code, warnings or [])
    else:
        print(text())


def _print_json(kind: str, result: Any, code: int, warnings: list[str]) -> None:
    from breakglass.core.envelope import dumps, envelope  # noqa: PLC0415

    print(dumps(envelope(kind, result, code, warnings)))


def usage_error(message: str, command: str, output: Output) -> None:
    """click's usage errors (a missing value, an unknown option) as every other error: one line, and a hint
    naming the command's help, instead of click's usage block."""
    msg = " ".join(message.split()).rstrip(".")  # click lists choices on lines of their own
    # pydantic's wording, which Typer 0.29 passes on for a bad choice: "Value error, 'yaml' is not one of ..."
    msg = re.sub(r"(?i)\bvalue error, ", "", msg)
    _emit_error("bad-input", msg[:1].lower() + msg[1:] if msg[:2] != msg[:2].upper() else msg,
                int(ExitCode.BAD_INPUT), output, f"`{command} --help` shows the options")


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
EtcdUserOpt = Annotated[Optional[str], typer.Option(
    help="etcd user, as USER or USER:PASSWORD like etcdctl --user (default: $ETCDCTL_USER). Without a password "
         "(here, --etcd-password or $ETCDCTL_PASSWORD) it is asked for, hidden, on a terminal.",
    show_default=False)]
EtcdPasswordOpt = Annotated[Optional[str], typer.Option(
    help="etcd password for --etcd-user (default: $ETCDCTL_PASSWORD; prefer it or the prompt: a flag shows in "
         "ps). Never printed, logged or journaled.", show_default=False)]
EtcdPrefixOpt = Annotated[str, typer.Option(help="kube-apiserver --etcd-prefix.")]
TimeoutOpt = Annotated[Optional[float], typer.Option(
    min=0.1, help="Seconds to wait for the API or etcd (default: 10, or $ETCDCTL_COMMAND_TIMEOUT).",
    show_default=False)]
TargetOpt = Annotated[Optional[str], typer.Option(
    help="Kubernetes version to audit for, e.g. 1.33 (default: the newest rules).", show_default=False)]


YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show exactly what would change; change nothing.")]


def _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout, via_ssh=None,
                 ssh_options=None, etcd_user=None, etcd_password=None):
    from breakglass.access.etcd import EtcdSettings  # noqa: PLC0415
    from breakglass.flows.recovery import EtcdTarget  # noqa: PLC0415
    from breakglass.webhooks.sources import etcd_prefixes  # noqa: PLC0415

    etcd_prefixes(etcd_prefix)  # validates it
    if via_ssh:
        from breakglass.access import etcd_ssh  # noqa: PLC0415
        from breakglass.access.ssh import Node, SshOptions  # noqa: PLC0415

        from breakglass.access.ssh import remote_path  # noqa: PLC0415

        for flag, path in (("--etcd-cacert", etcd_cacert), ("--etcd-cert", etcd_cert), ("--etcd-key", etcd_key)):
            if path:
                remote_path(path, flag)  # a path on the node: refused before connecting if it is not absolute
        # Through SSH, --etcd-endpoints is as seen from the node (default 127.0.0.1:2379, or a unix:// socket
        # there); with no certificate paths, the node's distribution says where they (or kine's socket) are.
        remote_host, remote_port, remote_socket = etcd_ssh.endpoint_on_node(etcd_endpoints)
        from breakglass.access.etcd import credentials  # noqa: PLC0415

        user, password = credentials(etcd_user, etcd_password)  # asked for before connecting
        node = Node(via_ssh, ssh_options or SshOptions()).connect()
        settings = etcd_ssh.tunnel(node, etcd_cacert, etcd_cert, etcd_key, timeout, remote_port, user=user,
                                   password=password, remote_host=remote_host, remote_socket=remote_socket,
                                   detect=not (etcd_cacert or etcd_cert or etcd_key),
                                   tcp_given=bool(etcd_endpoints) and not remote_socket)
        if settings.route and settings.route.get("found"):  # what was chosen, and why, before anything is read
            print(_safe(f"{settings.route['found']['summary']}: etcd at {settings.route['endpoint']} on {via_ssh}"),
                  file=sys.stderr)
        return EtcdTarget(settings, etcd_prefix)
    return EtcdTarget(EtcdSettings.resolve(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, timeout,
                                           user=etcd_user, password=etcd_password), etcd_prefix)


def _confirm(question: str, yes: bool, word: str = "yes") -> None:
    """Ask before changing anything: the change goes ahead only on ``word`` typed exactly (what it acts on, as
    the wizard asks: a stray "y" or Enter changes nothing). Scripts pass --yes; without a terminal there is no
    asking."""
    from breakglass.core.errors import Declined  # noqa: PLC0415

    if yes:
        return
    if sys.stdin is None or not sys.stdin.isatty():
        raise BadInput("refusing to change anything without --yes: standard input is not a terminal")
    answer = input(f"{_safe(question)} Type {_safe(word)} to go on: ").strip()
    if answer != word and not (word == "yes" and answer.lower() == "yes"):
        raise Declined("declined at the confirmation; nothing was changed")


def _write_new(path: str, text: str) -> None:
    textfile.write_new(path, text.encode("utf-8"))


def _progress_bytes(done: int, total: int) -> None:
    pct = 100 * done // total if total else 100
    print(f"\rsnapshot: {done >> 20} / {total >> 20} MiB ({pct}%)", end="", file=sys.stderr, flush=True)
    _line_open()


def _line_open(still: bool = True) -> None:
    """Whether a progress line is left without its newline (see layout.open_line)."""
    from breakglass.present import layout  # noqa: PLC0415

    layout.open_line = still


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
