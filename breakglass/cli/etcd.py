"""`breakglass etcd ...`: low-level access to the admission keys, sharing the recover and revert code."""

import sys
from typing import List, Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
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
    Output,
    OutputOpt,
    _line_open,
    _progress_bytes,
    _run,
    _show,
    SshAcceptNewOpt,
    SshConfigOpt,
    SshKeyOpt,
    SshPortOpt,
    SshUserOpt,
    StateDirOpt,
    TimeoutOpt,
    VerboseOpt,
    YesOpt,
)
from breakglass.cli.recover import revert


etcd_app = typer.Typer(name="etcd", help="Low-level etcd access for experts (admission keys only), "
                                          "sharing the recover/revert code.", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(etcd_app, name="etcd")


@etcd_app.command("get")
def etcd_get(
    ref: Annotated[str, typer.Argument(help="NAME, kind/NAME or the etcd key of an admission configuration.")],
    kind: Annotated[Optional[List[str]], typer.Option(help="Kinds to look NAME up in.", show_default=False)] = None,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None,
    etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry",
    timeout: TimeoutOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Show one admission configuration as stored in etcd: key, revisions and the decoded object.

    Examples:

      breakglass etcd get validating/kyverno-resource-validating-webhook-cfg

      breakglass etcd get /registry/mutatingwebhookconfigurations/istio-sidecar-injector -o json
    """

    def body() -> int:
        from breakglass.flows import etcd_tools  # noqa: PLC0415

        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout,
                              etcd_user=etcd_user, etcd_password=etcd_password)
        items = etcd_tools.get(target, ref, list(kind or []) or None)
        _show(output, "EtcdObjects", items, lambda: etcd_tools.render_objects(items))
        return 0

    _run(output, verbose, body)


@etcd_app.command("list")
def etcd_list(
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None,
    etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry",
    timeout: TimeoutOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """List the admission keys in etcd with their revisions, sizes and encodings.

    Examples:

      breakglass etcd list --etcd-endpoints https://127.0.0.1:2379 --etcd-cacert ca.crt --etcd-cert c.crt --etcd-key c.key
    """

    def body() -> int:
        from breakglass.flows import etcd_tools  # noqa: PLC0415

        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout,
                              etcd_user=etcd_user, etcd_password=etcd_password)
        items = etcd_tools.list_keys(target)
        _show(output, "EtcdKeys", items, lambda: etcd_tools.render_keys(items))
        return 0

    _run(output, verbose, body)


@etcd_app.command("snapshot")
def etcd_snapshot(
    file: Annotated[str, typer.Argument(help="New file to write the snapshot to (mode 0600).")],
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None,
    etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None, timeout: TimeoutOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Save a full etcd snapshot, streamed, with etcd's integrity trailer checked.

    Examples:

      breakglass etcd snapshot /root/etcd-before.db --etcd-endpoints https://127.0.0.1:2379 ...
    """

    def body() -> int:
        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, "/registry", timeout,
                              etcd_user=etcd_user, etcd_password=etcd_password)
        progress = _progress_bytes if sys.stderr.isatty() else None
        etcd = target.connect()
        try:
            info = etcd.save_snapshot(file, progress)
        finally:
            etcd.close()
        if progress:
            print(file=sys.stderr)
            _line_open(False)
        _show(output, "EtcdSnapshot", info,
              lambda: f"saved {info['size']} bytes to {info['path']} (sha256 {info['sha256']})")
        return 0

    _run(output, verbose, body)


@etcd_app.command("backup")
def etcd_backup(
    refs: Annotated[List[str], typer.Argument(help="Configurations: NAME, kind/NAME or etcd keys.")],
    kind: Annotated[Optional[List[str]], typer.Option(help="Kinds to look NAME up in.", show_default=False)] = None,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None,
    etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry",
    timeout: TimeoutOpt = None,
    state_dir: StateDirOpt = None, output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Back up configurations' raw bytes into a new run directory, changing nothing.

    Examples:

      breakglass etcd backup validating/kyverno-resource-validating-webhook-cfg
    """

    def body() -> int:
        from breakglass.flows import etcd_tools  # noqa: PLC0415

        target = _etcd_target(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, etcd_prefix, timeout,
                              etcd_user=etcd_user, etcd_password=etcd_password)
        res = etcd_tools.backup(target, refs, list(kind or []) or None, state_dir)
        _show(output, "EtcdBackup", res,
              lambda: f"backed up {len(res['steps'])} key(s) in run {res['run']} ({res['path']})")
        return 0

    _run(output, verbose, body)


@etcd_app.command("restore")
def etcd_restore(
    run: Annotated[str, typer.Argument(help="Run (from `etcd backup` or `recover`), by name or directory.")],
    force: Annotated[bool, typer.Option(help="Overwrite keys that exist with other content (the backend guard "
                                             "still holds: --re-arm).")] = False,
    re_arm: Annotated[bool, typer.Option("--re-arm", help="Restore although a restored webhook's backend is not "
                                                          "ready or could not be read.")] = False,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None,
    etcd_key: EtcdKeyOpt = None,
    etcd_user: EtcdUserOpt = None, etcd_password: EtcdPasswordOpt = None, timeout: TimeoutOpt = None,
    etcd_via_ssh: EtcdViaSshOpt = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    state_dir: StateDirOpt = None, dry_run: DryRunOpt = False, yes: YesOpt = False,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Put backed-up keys back where they are absent (the same code as revert).

    Examples:

      breakglass etcd restore 20261130T081500Z-3fa2c1 --dry-run

      breakglass etcd restore 20261130T081500Z-3fa2c1 --etcd-via-ssh cp1 --yes
    """
    revert(run=run, force=force, re_arm=re_arm, force_guard=False, etcd_endpoints=etcd_endpoints, etcd_cacert=etcd_cacert, etcd_cert=etcd_cert,
           etcd_key=etcd_key, etcd_user=etcd_user, etcd_password=etcd_password, timeout=timeout,
           etcd_via_ssh=etcd_via_ssh, talosconfig=None, talos_context=None, talos_endpoints=None,
           talosctl="talosctl", ssh_user=ssh_user, ssh_key=ssh_key, ssh_port=ssh_port, ssh_accept_new=ssh_accept_new,
           ssh_config=ssh_config, known_hosts=known_hosts, kubeconfig=None, context=None,
           state_dir=state_dir, dry_run=dry_run, yes=yes, output=output, verbose=verbose)
