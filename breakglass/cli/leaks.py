"""`breakglass leaks`: what got in while a webhook failed open."""

import enum
import sys
from typing import List, Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    ContextOpt,
    KnownHostsOpt,
    KubeconfigOpt,
    Output,
    _render,
    _run,
    _show,
    _split,
    SshAcceptNewOpt,
    SshConfigOpt,
    SshKeyOpt,
    _ssh_nodes,
    _ssh_options,
    SshPortOpt,
    SshUserOpt,
    _talos,
    TalosconfigOpt,
    TalosContextOpt,
    TalosctlOpt,
    TalosEndpointsOpt,
    VerboseOpt,
)
from breakglass.core.errors import BadInput, ExitCode


# Where Talos keeps kube-apiserver's audit log (--audit-log-path=/var/log/audit/kube/kube-apiserver.log)
TALOS_AUDIT_DIR = "/var/log/audit/kube/"


class LeakOutput(str, enum.Enum):
    text = "text"
    json = "json"
    csv = "csv"
    recheck = "recheck"


@app.command()
def leaks(
    audit_log: Annotated[Optional[List[str]], typer.Option(
        "--audit-log", help="kube-apiserver audit logs (JSON lines, also inside CloudWatch, Fluent Bit or Azure "
                            "records) or GKE Cloud Logging entries (JSON lines or gcloud's JSON array): files, .gz, "
                            "directories of rotated files, or - for standard input. Repeatable.",
        show_default=False)] = None,
    apiserver_log: Annotated[Optional[List[str]], typer.Option(
        "--apiserver-log", help="Without audit logs: kube-apiserver's own logs, in any format diagnose reads. "
                                "Names webhooks and causes; resources only from slow-call traces.",
        show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option(help="Only requests completed at or after this RFC 3339 time, "
                                                      "or this long ago (90m, 2h).",
                                                 show_default=False)] = None,
    until: Annotated[Optional[str], typer.Option(help="Only requests completed at or before this RFC 3339 time, "
                                                      "or this long ago.",
                                                 show_default=False)] = None,
    webhook: Annotated[Optional[List[str]], typer.Option(
        help="Only these webhooks (their names, e.g. validation.gatekeeper.sh). Repeatable.", show_default=False)]
    = None,
    window_gap: Annotated[float, typer.Option(
        min=1, help="Seconds without a leak that end a failing-open window.")] = 60.0,
    year: Annotated[Optional[int], typer.Option(
        min=1970, max=9999, help="With --apiserver-log: the year of klog timestamps (default: this year).")] = None,
    talos_node: Annotated[Optional[List[str]], typer.Option(
        help="Read the logs on these Talos nodes with `talosctl read` (comma-separated); --audit-log "
             "defaults to " + TALOS_AUDIT_DIR + ".", show_default=False)] = None,
    talosconfig: TalosconfigOpt = None, talos_context: TalosContextOpt = None,
    talos_endpoints: TalosEndpointsOpt = None, talosctl: TalosctlOpt = "talosctl",
    ssh: Annotated[Optional[List[str]], typer.Option(
        "--ssh", help="Read the logs on these hosts over SSH (with sudo): the paths are theirs.",
        show_default=False)] = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    recheck: Annotated[bool, typer.Option(
        "--recheck", help="Once the webhooks answer again: send each object still worth re-checking back through "
                          "admission (a server-side dry-run update of it as it is now, through --kubeconfig) and "
                          "report which the webhooks now reject, and why. Changes nothing.")] = False,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None,
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
    worth re-checking: written then and not deleted later. On GKE the annotations are
    the labels of the Cloud Logging entries, which are read the same way.

    Without audit logs, --apiserver-log counts the "failing open" warnings instead:
    webhook, time and cause of each call, and the resource only where a slow-call
    trace shows it.

    Examples:

      breakglass leaks --audit-log /var/log/kubernetes/audit/

      breakglass leaks --audit-log gke.json   # gcloud --format=json output

      breakglass leaks --audit-log audit.log.gz --since 2026-11-30T02:00:00Z

      breakglass leaks --audit-log audit.log -o recheck > recheck.yaml

      breakglass leaks --audit-log audit.log --recheck --context prod

      breakglass leaks --apiserver-log kube-apiserver.log

      breakglass leaks --talos-node 10.0.0.2,10.0.0.3,10.0.0.4

      breakglass leaks --audit-log /var/log/kubernetes/audit/ --ssh cp1,cp2,cp3

    Exit code 3 when requests got in, 0 when none did.
    """
    err_output = Output.json if output is LeakOutput.json else Output.text

    def body() -> int:
        from breakglass import leaks as _leaks  # noqa: PLC0415

        audit = list(audit_log or []) or ([TALOS_AUDIT_DIR] if talos_node and not apiserver_log else [])
        if bool(audit) == bool(apiserver_log):
            raise BadInput("give --audit-log (every request, named) or --apiserver-log (when there is no audit "
                           "log), not both" if audit_log else "no logs given: use --audit-log, or --apiserver-log "
                           "when the cluster keeps no audit log")
        paths = audit or list(apiserver_log)
        remote = None
        if talos_node and ssh:
            raise BadInput("read the logs with --talos-node or with --ssh, not both")
        if talos_node:
            from breakglass.logs.remote import talos_files  # noqa: PLC0415

            remote = talos_files(_talos(talosctl, talosconfig, talos_context, talos_endpoints, None),
                                 _split(talos_node), paths)
        elif ssh:
            from breakglass.access.ssh import remote_path  # noqa: PLC0415
            from breakglass.logs.remote import ssh_files  # noqa: PLC0415

            for p in paths:  # paths on the nodes, refused before connecting: `-delete` would be an option of find
                remote_path(p, "--audit-log" if audit else "--apiserver-log")

            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, None)
            remote = [s for node in _ssh_nodes(_split(ssh), opts).values() for s in ssh_files(node, paths)]
        if audit:
            from breakglass.leaks.audit import scan  # noqa: PLC0415

            rep = scan(paths, since, until, _split(webhook) or None, window_gap, sources=remote)
        else:
            from breakglass.leaks.apiserver import scan  # noqa: PLC0415

            rep = scan(paths, since, until, _split(webhook) or None, window_gap, sources=remote, year=year)
        if recheck and rep.recheck:
            from breakglass.access import kubeapi  # noqa: PLC0415
            from breakglass.leaks import recheck as _recheck  # noqa: PLC0415

            rep.rechecked = _recheck.ask(kubeapi.connect(kubeconfig, context), rep.recheck)
        code = int(ExitCode.FOUND if rep.leaks else ExitCode.OK)
        if output is LeakOutput.csv:
            _leaks.to_csv(rep, sys.stdout)
        elif output is LeakOutput.recheck:
            print(_leaks.recheck_yaml(rep), end="")
        else:
            _show(err_output, "LeakReport", rep.to_json(), lambda: _render().leak_report(rep, verbose), code)
        return code

    _run(err_output, verbose, body)
