"""`breakglass exporter`: the in-cluster guard (deploy/helm/breakglass runs it), audit on a timer as metrics."""

import os
import sys
from typing import Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    ContextOpt,
    KubeconfigOpt,
    Output,
    OutputOpt,
    _run,
    TargetOpt,
    TimeoutOpt,
    VerboseOpt,
)


DEFAULT_PORT = 9847


def _in_pod(kubeconfig, context) -> bool:
    return kubeconfig is None and context is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def default_listen(kubeconfig, context) -> str:
    """In a pod, every address of the pod's own network namespace (its IP, for the kubelet's probes and the
    scrape; loopback): 0.0.0.0 there exposes nothing beyond the pod, and the chart's NetworkPolicy says who may
    connect. Anywhere else, loopback only: a workstation or a node must not publish the audit to its network
    unless told to (--listen 0.0.0.0:9847)."""
    return f"{'0.0.0.0' if _in_pod(kubeconfig, context) else '127.0.0.1'}:{DEFAULT_PORT}"


def _connector(kubeconfig, context, timeout, account_dir):
    """In a pod (KUBERNETES_SERVICE_HOST set, no --kubeconfig/--context): the pod's ServiceAccount; else kubeconfig
    as every other command reads it."""
    from breakglass.access import kubeapi  # noqa: PLC0415

    if _in_pod(kubeconfig, context):
        return lambda: kubeapi.connect_in_cluster(timeout, account_dir)
    return lambda: kubeapi.connect(kubeconfig, context, timeout)


@app.command()
def exporter(
    listen: Annotated[Optional[str], typer.Option(
        help="HOST:PORT to serve /metrics, /findings and /healthz on (default: 127.0.0.1:9847; in a pod, "
             "0.0.0.0:9847, the pod's own addresses).", show_default=False)] = None,
    findings: Annotated[bool, typer.Option(
        "--findings/--no-findings", help="Serve /findings, the whole last audit (which webhooks fail open and how: "
                                         "what the read-only RBAC protects). The chart turns it off unless "
                                         "findings.enabled.")] = True,
    interval: Annotated[float, typer.Option(min=5, help="Seconds between audits.")] = 300,
    once: Annotated[bool, typer.Option("--once", help="Audit once, print the metrics (or -o json: the audit) "
                                                      "and exit: what a CronJob runs.")] = False,
    push: Annotated[Optional[str], typer.Option(help="With --once: also PUT the metrics to this Prometheus "
                                                     "Pushgateway URL (job breakglass).", show_default=False)] = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, timeout: TimeoutOpt = None,
    service_account_dir: Annotated[str, typer.Option(
        help="In a pod: where its ServiceAccount token and ca.crt are mounted.")]
    = "/var/run/secrets/kubernetes.io/serviceaccount",
    target_version: TargetOpt = None,
    output: OutputOpt = Output.text, verbose: VerboseOpt = False,
) -> None:
    """Audit admission webhooks on a timer and serve the findings as Prometheus metrics.

    Runs the same audit as `breakglass audit` every --interval seconds, plus the ready
    endpoints behind each webhook's Service, and serves them at /metrics
    (breakglass_webhook_risk, breakglass_webhook_backend_ready, the time of the last
    successful audit). /findings gives the last audit as `breakglass audit -o json` does.
    In a pod it reads the API as the pod's ServiceAccount (read-only RBAC: the Helm chart
    in deploy/helm/breakglass). A failed audit keeps the last metrics and counts the error.

    Examples:

      breakglass exporter --listen 127.0.0.1:9847 --interval 300

      breakglass exporter --once

      breakglass exporter --once --push http://pushgateway.monitoring:9091
    """

    def body() -> int:
        from breakglass.core.errors import BadInput  # noqa: PLC0415
        from breakglass.flows import exporter as _exporter  # noqa: PLC0415

        connect = _connector(kubeconfig, context, timeout or 10.0, service_account_dir)
        if once:
            snap = _exporter.audit_once(connect(), target_version)
            text = _exporter.once_metrics(snap, interval)
            if push:
                _exporter.push(push, text, timeout=timeout or 10.0)
            print(_exporter.report_json(snap) if output is Output.json else text, end="" if output is Output.text
                  else "\n")
            return 0
        if push:
            raise BadInput("--push goes with --once (a long-running exporter is scraped, not pushed)")
        where = listen or default_listen(kubeconfig, context)
        _exporter.parse_listen(where)  # bad input before any connection
        exp = _exporter.Exporter(connect, interval, target_version, log=lambda line: print(line, file=sys.stderr,
                                                                                             flush=True),
                                 findings_enabled=findings)

        def ready(srv):
            host, port = srv.server_address[:2]
            print(f"breakglass exporter: serving http://{host}:{port}/metrics, auditing every {interval:g} s",
                  file=sys.stderr, flush=True)

        _exporter.serve(exp, where, ready)  # returns on SIGTERM: a pod's stop, exit 0
        return 0

    _run(output, verbose, body)
