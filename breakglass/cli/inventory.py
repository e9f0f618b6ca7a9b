"""`breakglass webhooks` and `breakglass audit`: where admission configurations come from, and what they risk."""


import enum
from typing import List, Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    ContextOpt,
    _etcd_target,
    EtcdCacertOpt,
    EtcdCertOpt,
    EtcdEndpointsOpt,
    EtcdKeyOpt,
    EtcdPrefixOpt,
    EtcdViaSshOpt,
    FileOpt,
    KnownHostsOpt,
    KubeconfigOpt,
    Output,
    OutputOpt,
    _render,
    _run,
    Severity,
    _show,
    Source,
    SourceOpt,
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
    TargetOpt,
    TimeoutOpt,
    VerboseOpt,
)
from breakglass.core.errors import BadInput, ExitCode


# -- many clusters in one audit (breakglass.flows.fleet) ------------------------------------------
class AuditOutput(str, enum.Enum):
    text = "text"
    json = "json"
    junit = "junit"
    sarif = "sarif"


AuditOutputOpt = Annotated[AuditOutput, typer.Option(
    "--output", "-o", help="text for people, json for scripts, junit (JUnit XML) or sarif (SARIF 2.1.0) for CI.")]
FleetKubeconfigOpt = Annotated[Optional[List[str]], typer.Option(
    help="kubeconfig file (default: $KUBECONFIG, its ':'-separated files merged as kubectl does, else "
         "~/.kube/config). Repeatable: each file's contexts are clusters of their own.", show_default=False)]
FleetContextOpt = Annotated[Optional[List[str]], typer.Option(
    help="kubeconfig context. Repeatable or comma-separated (a,b,c): each is one cluster of a fleet audit.",
    show_default=False)]
AllContextsOpt = Annotated[bool, typer.Option(
    "--all-contexts", help="Audit every context of every kubeconfig read, each as one cluster.")]
ParallelOpt = Annotated[int, typer.Option(
    min=1, help="Clusters audited at once in a fleet audit. There --timeout bounds each cluster's whole audit, "
                "and --target-version, unless given, is each cluster's own minor plus one (from /version).")]


def _is_fleet(kubeconfigs, contexts, all_contexts: bool, output) -> bool:
    """A fleet audit: more than one cluster asked for, or a CI format (which only the fleet report renders)."""
    from breakglass.flows.fleet import split_contexts  # noqa: PLC0415

    return (all_contexts or len(kubeconfigs or []) > 1 or len(split_contexts(contexts)) > 1
            or output in (AuditOutput.junit, AuditOutput.sarif))


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
    file: FileOpt = None, source: SourceOpt = Source.auto, kubeconfig: FleetKubeconfigOpt = None,
    context: FleetContextOpt = None, all_contexts: AllContextsOpt = False, parallel: ParallelOpt = 16,
    etcd_endpoints: EtcdEndpointsOpt = None, etcd_cacert: EtcdCacertOpt = None,
    etcd_cert: EtcdCertOpt = None, etcd_key: EtcdKeyOpt = None, etcd_prefix: EtcdPrefixOpt = "/registry",
    timeout: TimeoutOpt = None, target_version: TargetOpt = None,
    fail_on: Annotated[Severity, typer.Option(help="Exit 3 when a risk of this severity or worse is found.")]
    = Severity.high,
    static_manifests: Annotated[Optional[list[str]], typer.Option(
        "--static-manifests", metavar="DIR",
        help="Also audit the manifest-based webhooks (1.36+) in this copy of a kube-apiserver's staticManifestsDir "
             "(its admission configuration's WebhookAdmission.staticManifestsDir). Repeatable.",
        show_default=False)] = None,
    static_manifests_via_ssh: Annotated[Optional[list[str]], typer.Option(
        "--static-manifests-via-ssh", metavar="HOST",
        help="Also audit the manifest-based webhooks of this kubeadm control-plane node, found over SSH from what "
             "its kube-apiserver obeys (its static-pod manifest's --admission-control-config-file, that file's "
             "staticManifestsDir). Repeatable.", show_default=False)] = None,
    static_manifests_via_talos: Annotated[Optional[list[str]], typer.Option(
        "--static-manifests-via-talos", metavar="NODE",
        help="Also audit the manifest-based webhooks of this Talos control-plane node, found through talosctl from "
             "its machine config (admissionControl's staticManifestsDir, on the host by its extraVolumes). "
             "Repeatable.", show_default=False)] = None,
    talosconfig: TalosconfigOpt = None, talos_context: TalosContextOpt = None,
    talos_endpoints: TalosEndpointsOpt = None, talosctl: TalosctlOpt = "talosctl",
    apiserver_manifest: Annotated[str, typer.Option(
        "--apiserver-manifest", help="With --static-manifests-via-ssh: the kube-apiserver static-pod manifest on "
                                     "the node.")] = "/etc/kubernetes/manifests/kube-apiserver.yaml",
    etcd_via_ssh: EtcdViaSshOpt = None,
    ssh_user: SshUserOpt = None, ssh_key: SshKeyOpt = None, ssh_port: SshPortOpt = None,
    ssh_accept_new: SshAcceptNewOpt = False, ssh_config: SshConfigOpt = "~/.ssh/config",
    known_hosts: KnownHostsOpt = "~/.ssh/known_hosts",
    output: AuditOutputOpt = AuditOutput.text, verbose: VerboseOpt = False,
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

      breakglass audit --all-contexts -o junit > audit.xml     # every cluster of the kubeconfig

      breakglass audit --context prod-eu,prod-us --kubeconfig a.yaml --kubeconfig b.yaml -o sarif

      breakglass audit --static-manifests /etc/kubernetes/webhooks    # on the node

      breakglass audit --static-manifests-via-ssh cp1 --static-manifests-via-ssh cp2

      breakglass audit --static-manifests-via-talos 10.5.0.2
    """
    plain = Output.json if output is AuditOutput.json else Output.text  # how errors are printed

    def body() -> int:
        from breakglass.webhooks import audit as _audit  # noqa: PLC0415

        if _is_fleet(kubeconfig, context, all_contexts, output):
            if file or etcd_endpoints or etcd_via_ssh or source not in (Source.auto, Source.api):
                raise BadInput("auditing many clusters reads each through its kubeconfig context: --file, "
                               "--source and the etcd options audit one target")
            from breakglass.flows import fleet  # noqa: PLC0415

            code, document = fleet.command(kubeconfig, context, all_contexts, target_version, timeout, parallel,
                                           fail_on.value, output.value, verbose)
            print(document)
            return code
        output_ = plain  # one cluster, as before
        kubeconfig_, context_ = (kubeconfig or [None])[0], (context or [None])[0]

        _audit.parse_version(target_version)  # a bad version is bad input before any connection
        from breakglass.webhooks import sources as _sources  # noqa: PLC0415

        statics = [_sources.load_static_manifests(d) for d in static_manifests or []]  # bad input first
        if static_manifests_via_ssh:
            from breakglass.access.ssh import Node, remote_path  # noqa: PLC0415
            from breakglass.flows import node_static_manifests  # noqa: PLC0415

            remote_path(apiserver_manifest, "--apiserver-manifest")
            opts = _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts, timeout)
            for host in static_manifests_via_ssh:
                node = Node(host, opts)
                try:
                    statics.append(node_static_manifests.read(node, apiserver_manifest))
                finally:
                    node.close()
        if static_manifests_via_talos:
            from breakglass.flows import talos_static_manifests  # noqa: PLC0415

            talos = _talos(talosctl, talosconfig, talos_context, talos_endpoints, timeout)
            for node_name in static_manifests_via_talos:
                statics.append(talos_static_manifests.read(talos, node_name))
        if statics and not (file or kubeconfig_ or etcd_endpoints or etcd_via_ssh):
            inv = statics.pop(0)  # only the node's files
        else:
            inv = _load_inventory(file, source, kubeconfig_, context_, etcd_endpoints, etcd_cacert, etcd_cert,
                                  etcd_key, etcd_prefix, timeout, etcd_via_ssh,
                                  _ssh_options(ssh_user, ssh_key, ssh_port, ssh_accept_new, ssh_config, known_hosts,
                                               timeout))
        for extra in statics:
            inv.configs += extra.configs
            inv.warnings += extra.warnings
            inv.problems += extra.problems
        rep = _audit.audit(inv.configs, target_version, inv.namespaces, inv.problems,
                           _audit.running_minor(inv.version))
        worst = _audit.RANK[rep.worst] if rep.worst else -1
        code = int(ExitCode.FOUND if worst >= _audit.RANK[fail_on.value] else ExitCode.OK)
        _show(output_, "AuditReport", rep, lambda: _render().audit_report(
            rep, inv.warnings + [f"encrypted, not audited: {k}" for k in inv.opaque], verbose),
            code, inv.warnings + inv.opaque)
        return code

    _run(plain, verbose, body)
