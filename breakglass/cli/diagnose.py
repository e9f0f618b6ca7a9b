"""`breakglass diagnose`."""

import sys
from typing import List, Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    ContextOpt,
    EtcdCacertOpt,
    EtcdCertOpt,
    EtcdEndpointsOpt,
    EtcdKeyOpt,
    EtcdPrefixOpt,
    Engine,
    KubeconfigOpt,
    TimeoutOpt,
    KnownHostsOpt,
    Output,
    OutputOpt,
    _line_open,
    _progress_line,
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
    _talos,
    TalosconfigOpt,
    TalosContextOpt,
    TalosctlOpt,
    TalosEndpointsOpt,
    VerboseOpt,
)
from breakglass.core.errors import BadInput, ExitCode

PODS_DIR = "/var/log/pods"


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
        "--ssh", help="Read kube-apiserver's logs on these hosts over SSH, where the distribution found there keeps "
                      "them: kubelet's /var/log/pods (kubeadm), `journalctl -u k3s` (k3s), the static pod's logs and "
                      "`journalctl -u rke2-server` (RKE2). The ways out listed are that distribution's.",
        show_default=False)] = None,
    pods_dir: Annotated[str, typer.Option(help="With --ssh: read kubelet's pod logs in this directory on the hosts, "
                                               "whatever they run.")] = "/var/log/pods",
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, etcd_endpoints: EtcdEndpointsOpt = None,
    etcd_cacert: EtcdCacertOpt = None, etcd_cert: EtcdCertOpt = None, etcd_key: EtcdKeyOpt = None,
    etcd_prefix: EtcdPrefixOpt = "/registry", timeout: TimeoutOpt = None,
    webhooks: Annotated[Optional[str], typer.Option(
        "--webhooks", metavar="FILE",
        help="Webhook configurations saved from the cluster (kubectl get validatingwebhookconfigurations,"
             "mutatingwebhookconfigurations -o yaml, or a backup): place the failing webhooks in them and prove "
             "or refute each deadlock's cycle without access to the cluster.", show_default=False)] = None,
) -> None:
    """Name the admission deadlock in kube-apiserver logs.

    Reads klog text, structured klog, JSON logging, CRI (/var/log/pods), talosctl and
    kubectl prefixed output, journald exports and text pasted into tickets, detected
    line by line, and reports which webhook blocks what, why, and the ways out.

    Examples:

      breakglass diagnose /var/log/pods/kube-system_kube-apiserver-*/

      talosctl -n 10.0.0.2 logs -k kube-system/kube-apiserver-cp1:kube-apiserver | breakglass diagnose

      breakglass diagnose apiserver.log.gz ticket-paste.txt -o json

      breakglass diagnose apiserver.log --etcd-endpoints https://127.0.0.1:2379

    With --etcd-endpoints (or --kubeconfig) each webhook the log names is placed in the
    configuration that defines it, as the cluster holds it, instead of a vendor's naming
    convention, and each deadlock's cycle is proven or refuted against that configuration
    and its Service's endpoints (--webhooks FILE: against a saved configuration); only
    those flags make diagnose read the cluster. A cycle inferred from the log's names
    alone is reported as deadlock-likely.

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
        found = []  # what each --ssh node runs, with the evidence: it picks the logs and the ways out
        if ssh:
            from breakglass.access import distro  # noqa: PLC0415
            from breakglass.logs.remote import distro_sources  # noqa: PLC0415

            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, None)
            for node in _ssh_nodes(_split(ssh), opts).values():
                found.append(distro.detect(node))
                # an explicit --pods-dir is read whatever the node runs
                extra += distro_sources(node, found[-1], pods_dir if pods_dir != PODS_DIR else None)
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
                _line_open(False)
        if webhooks:
            warnings += _prove_from_file(diag, webhooks)
        if etcd_endpoints or kubeconfig:
            warnings += _place_in_cluster(diag)
        if found:
            from breakglass.flows.distro_ways import tailor  # noqa: PLC0415

            diag.remedies = tailor(diag.remedies, found)
        code = int(ExitCode.FOUND if diag.verdict.needs_action else ExitCode.OK)
        _show(output, "Diagnosis", diag, lambda: _render().diagnosis(diag, warnings, verbose), code, warnings)
        return code

    def _place_in_cluster(diag) -> list[str]:
        """The findings' configurations from the cluster; a cluster that cannot be read is a warning: the
        diagnosis of the log stands without it."""
        from breakglass.cli.inventory import _load_inventory  # noqa: PLC0415
        from breakglass.cli._base import Source  # noqa: PLC0415
        from breakglass.diagnose import cluster  # noqa: PLC0415
        from breakglass.core.errors import BreakglassError  # noqa: PLC0415

        source = "etcd" if etcd_endpoints else "api"
        try:
            inv = _load_inventory(None, Source(source), kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert,
                                  etcd_key, etcd_prefix, timeout, None, None)
        except BreakglassError as e:
            return [f"could not read the webhook configurations from {source} ({e}): configurations named here "
                    f"come from the log or a vendor's naming convention"]
        notes = cluster.place(diag, inv.configs, source)
        try:
            reader = cluster.backend_reader(source, kubeconfig, context, etcd_endpoints, etcd_cacert, etcd_cert,
                                            etcd_key, etcd_prefix, timeout)
        except BreakglassError as e:
            notes.append(f"the webhooks' endpoints could not be read ({e}): the log says whether they answer")
            reader = None
        notes += cluster.prove(diag, inv.configs, source, reader, inv.namespaces)
        return [f"{n} (read from {source})" for n in notes]

    def _prove_from_file(diag, path: str) -> list[str]:
        """The configurations of a saved file: read like `audit -f` (bad input is bad input: nothing is changed)."""
        from breakglass.diagnose import cluster  # noqa: PLC0415
        from breakglass.webhooks import sources  # noqa: PLC0415

        inv = sources.load_files([path])
        notes = cluster.place(diag, inv.configs, "file") + cluster.prove(diag, inv.configs, "file")
        return inv.warnings + [f"{n} (read from {path})" for n in notes]

    _run(output, verbose, body)
