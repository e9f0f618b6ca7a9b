"""The on-call wizard: from "it's down" to "it's back and reverted", one question at a time.

A thin layer, like the CLI: it asks through the prompts interface and drives the same core
(diagnose, planner, recovery). Every change is previewed as its exact diff and confirmed by
typing the name of what will be deleted or disabled.
"""

from __future__ import annotations

import os

from breakglass import planner, recovery, render, sandbox
from breakglass.errors import BadInput, Interrupted
from breakglass.prompts import Choice, Prompter
from breakglass.remedies.admission_flags import WEBHOOK_PLUGINS


def run(p: Prompter, state: str | None = None, timeout: float = 3.0) -> int:
    try:
        return _flow(p, state, timeout)
    except KeyboardInterrupt:
        raise Interrupted("wizard interrupted", hint="`breakglass runs` shows any change made; "
                                                    "`breakglass revert` undoes it; `breakglass` starts again") from None


def _flow(p: Prompter, state: str | None, timeout: float) -> int:
    p.say("breakglass: let's get the control plane past its admission webhooks. Nothing changes without your "
          "typed confirmation.")
    sb = sandbox.load(sandbox.default_dir(state))
    # 1. what is wrong
    default_log = sb.files.get("apiserver_log", "") if sb else ""
    logs = p.text("kube-apiserver logs to diagnose (file, directory, .gz; empty to skip):", default_log).strip()
    diag = None
    targets: list[dict] = []
    plugins = list(WEBHOOK_PLUGINS)
    if logs:
        from breakglass.diagnose.engine import diagnose_paths  # noqa: PLC0415

        diag, _ = diagnose_paths([os.path.expanduser(logs)])
        p.say(diag.verdict.headline)
        p.say(diag.verdict.explanation)
        for f in diag.findings[:5]:
            p.say(f"  [{f.id}] {f.severity.upper()} {f.title}")
        for r in diag.remedies:
            if r.method == "etcd":
                targets = [t for t in r.targets if t.get("configuration")]
            if r.method == "talos" and r.plugins:
                plugins = list(r.plugins)
        if diag.verdict.state == "leaking" and not _leaks(p):
            return 0
    # 2. how to reach the cluster
    access, method_hint = _access(p, state, timeout)
    probes = planner.probe(access, timeout)
    for pr in probes.values():
        p.say(f"  {pr.name}: {'reachable' if pr.reachable else 'NOT reachable'}: {pr.detail}")
    opts = planner.options(probes, have_targets=bool(targets) or method_hint == "ask")
    method = p.select("Which way out? (least invasive first)",
                      [Choice(o.method, f"{o.method}: {o.summary} Cost: {o.tradeoff}",
                              None if o.available else o.reason) for o in opts])
    # 3. the exact change
    remedy, steps, confirm_word = _plan(p, method, access, targets, plugins)
    if not steps:
        p.say("Nothing to change.")
        return 0
    p.say(render.plan(steps, remedy.method))
    typed = p.text(f"Type {confirm_word} to apply this change:").strip()
    if typed != confirm_word:
        raise Interrupted("the confirmation did not match; nothing was changed")
    res = recovery.execute(remedy, steps, state, {"wizard": True, "method": method})
    record = recovery.journal.Run.open(res.run, state)
    if diag is not None:
        record.append(
            "findings", verdict=diag.verdict.headline,
            findings=[f"[{f.id}] {f.severity} {f.title}" for f in diag.findings[:20]])
    p.say(render.run_result(res))
    _wait_ready(p, method, access, remedy)
    p.say("Before reverting, the webhook's backend must be healthy: its pods ready and its Service's endpoints "
          "present (kubectl -n NAMESPACE get endpoints SERVICE). `breakglass revert` checks the endpoints when it "
          "can reach the API.")
    _check_backends(p, access, sorted({f.service for f in (diag.findings if diag else []) if f.service}))
    # 4. the lasting fix, recorded for the postmortem
    fix = _permanent_fix(method, access, targets)
    if fix:
        p.say(fix)
        record.append("permanent-fix", text=fix)
    # 5. revert
    if p.confirm("Revert the temporary change now? Only once the webhook's backend is healthy.", False):
        rr = recovery.revert_run(res.run, state, access.etcd, talos=access.talos,
                                 kube=(access.kubeconfig, access.context))
        p.say(render.revert_result(rr))
        _wait_ready(p, method, access, remedy)  # the webhook is back in the path: is the apiserver still ready?
    else:
        p.say(f"When the webhook is healthy: breakglass revert {res.run}")
    record.write_file("report.md", recovery.report(record))
    p.say(f"Report for the postmortem: {record.path}/report.md")
    return 0


def _leaks(p: Prompter) -> bool:
    """Webhooks failed open and nothing is stuck: what got in matters more than a way out. True to go on."""
    from breakglass.leaks.audit import scan  # noqa: PLC0415

    p.say("Nothing is stuck: webhooks failed open, so requests they should have checked got in.")
    path = p.text("Audit log to list them from (file, directory, .gz, gcloud JSON; empty to skip):").strip()
    if path:
        rep = scan([os.path.expanduser(path)])
        p.say(render.leak_report(rep))
        p.say("Re-check those objects (`breakglass leaks --audit-log ... -o recheck` writes the list as YAML), "
              "and fix the webhook's reachability.")
    return p.confirm("Go on to the ways of getting a webhook out of the path anyway?", False)


def _wait_ready(p: Prompter, method: str, a: planner.Access, remedy) -> None:
    """Is the apiserver ready (after the change, and again after the revert)?"""
    from breakglass.access import readyz  # noqa: PLC0415

    if method in ("talos", "kubeadm"):
        hosts = a.talos_nodes if method == "talos" else list(a.ssh_nodes)
        p.say(f"Waiting for /readyz on {', '.join(hosts)} (up to 5 minutes; Ctrl-C stops waiting, not the change)…")
        states = readyz.wait([readyz.url_for(h) for h in hosts], 300,
                             on_tick=lambda st: p.progress(readyz.waiting_text(st)))
        for s in states:
            state = "ready" if s.ready else ("serving" if s.ready is None else "NOT READY")
            hooks = f"; post-start hooks still failing: {', '.join(s.failing_hooks)}" if s.failing_hooks else ""
            p.say(f"  {s.url}: {state}{hooks}")
    elif method == "kubeapi":
        p.say(f"  {remedy.api.readyz().detail}")


def _check_backends(p: Prompter, a: planner.Access, services: list[str]) -> None:
    """Ready endpoints (ready pods) behind each culprit's Service, when an apiserver answers now."""
    if not services:
        return
    kubeconfig = a.kubeconfig or os.environ.get("KUBECONFIG")
    if not kubeconfig and not os.path.exists(os.path.expanduser("~/.kube/config")):
        p.say("No kubeconfig to check the webhook's backend with; check it before reverting: "
              + "; ".join(f"kubectl -n {s.split('/')[0]} get endpoints {s.split('/')[1]}" for s in services))
        return
    from breakglass.access import kubeapi  # noqa: PLC0415
    from breakglass.errors import BreakglassError  # noqa: PLC0415

    try:
        api = kubeapi.connect(a.kubeconfig, a.context, 5.0)
        for svc in services:
            ns, name = svc.split("/", 1)
            ready, waiting = api.endpoint_counts(ns, name)
            p.say(f"  backend {svc}: {ready} ready endpoint(s), {waiting} not ready"
                  + ("" if ready else " — do not revert yet"))
    except BreakglassError as e:
        p.say(f"  could not check the backends through the API yet ({e})")


def _access(p: Prompter, state: str | None, timeout: float) -> tuple[planner.Access, str]:
    from breakglass.access.etcd import EtcdSettings  # noqa: PLC0415

    how = p.select("How can you reach the cluster?", [
        Choice("sandbox", "REHEARSAL: the local sandbox (starts it if needed; a real kube-apiserver if you have one)"),
        Choice("etcd", "etcd endpoints (on a control-plane node: https://127.0.0.1:2379)"),
        Choice("kubeconfig", "kubeconfig: an apiserver still answers"),
        Choice("talos", "Talos nodes, through talosctl"),
        Choice("ssh", "SSH to kubeadm control-plane nodes"),
    ])
    a = planner.Access()
    if how == "sandbox":
        d = sandbox.default_dir(state)
        sb = sandbox.load(d)
        if not sandbox.status(d).get("running"):
            binary = _rehearsal_binary(p)
            p.say("REHEARSAL: starting the sandbox; nothing outside it is touched.")
            sb = sandbox.up(d, apiserver=os.path.expanduser(binary) if binary else None, say=p.say)
        a.etcd = recovery.EtcdTarget(EtcdSettings(endpoints=(sb.endpoint,), timeout=timeout))
        if sb.apiserver:
            p.say(f"REHEARSAL: kube-apiserver {sb.apiserver['version']} at {sb.apiserver['url']} "
                  f"(log: {sb.apiserver['log']})")
            a.kubeconfig = sb.apiserver["kubeconfig"]
    elif how == "etcd":
        eps = p.text("etcd endpoints:", os.environ.get("ETCDCTL_ENDPOINTS", "https://127.0.0.1:2379"))
        ca = p.text("etcd CA file (empty for none):", os.environ.get("ETCDCTL_CACERT", ""))
        cert = p.text("etcd client certificate (empty for none):", os.environ.get("ETCDCTL_CERT", ""))
        key = p.text("etcd client key (empty for none):", os.environ.get("ETCDCTL_KEY", ""))
        a.etcd = recovery.EtcdTarget(EtcdSettings.resolve(eps, ca or None, cert or None, key or None, timeout))
    elif how == "kubeconfig":
        a.kubeconfig = p.text("kubeconfig:", os.environ.get("KUBECONFIG", "~/.kube/config")) or None
        a.kubeconfig = os.path.expanduser(a.kubeconfig) if a.kubeconfig else None
        a.context = p.text("context (empty for the current one):", "") or None
        a.wants_kubeconfig = True
    elif how == "talos":
        from breakglass.access.talos import Talos  # noqa: PLC0415

        nodes = p.text("control-plane nodes (comma-separated):", "")
        a.talos_nodes = [n.strip() for n in nodes.split(",") if n.strip()]
        a.talos = Talos(talosconfig=os.environ.get("TALOSCONFIG") or None)
    else:
        from breakglass.access.ssh import Node, SshOptions  # noqa: PLC0415

        hosts = p.text("control-plane hosts (comma-separated, as in ~/.ssh/config):", "")
        a.ssh_nodes = {h.strip(): Node(h.strip(), SshOptions()) for h in hosts.split(",") if h.strip()}
    return a, "ask" if how in ("kubeconfig", "etcd") else how


def _rehearsal_binary(p: Prompter) -> str:
    """Which kube-apiserver the sandbox runs: one built here (newest first), etcd only, or a path."""
    built = sandbox.built_apiservers()[::-1]
    choices = [Choice(b, f"kube-apiserver {os.path.basename(os.path.dirname(b))}: the real outage, for real")
               for b in built]
    choices += [Choice("", "etcd only: the webhook configurations as the apiserver stores them"),
                Choice("other", "another kube-apiserver binary (a release tarball's, or one taken from the image)")]
    pick = p.select("Rehearse on:", choices)
    if pick == "other":
        pick = p.text("Path to the kube-apiserver binary:").strip()
    return pick


def _plan(p: Prompter, method: str, a: planner.Access, targets: list[dict], plugins: list[str]):
    if method in ("etcd", "kubeapi"):
        refs = [f"{t['kind']}/{t['configuration']}" for t in targets]
        if not refs:
            refs = [p.text("Configuration to act on (kind/NAME, e.g. validating/kyverno-resource-validating-webhook-cfg):")]
        if method == "etcd":
            remedy, steps = recovery.plan_etcd(a.etcd, refs)
        else:
            action = p.select("Which change?", [Choice("ignore", "failurePolicy Ignore (least invasive)"),
                                                Choice("exclude", "add matchConditions that skip bootstrap objects"),
                                                Choice("delete", "delete the configuration")])
            remedy, steps = recovery.plan_kubeapi(a.kubeconfig, a.context, refs, None, action, [])
        return remedy, steps, ",".join(r.split("/", 1)[-1] for r in refs)
    if method == "talos":
        remedy, steps = recovery.plan_talos(recovery.talos_store(a.talos), a.talos_nodes, plugins)
        return remedy, steps, ",".join(plugins)
    if method == "kubeadm":
        remedy, steps = recovery.plan_kubeadm(a.ssh_nodes, "/etc/kubernetes/manifests/kube-apiserver.yaml",
                                              plugins, 180.0)
        return remedy, steps, ",".join(plugins)
    raise BadInput(f"unknown method {method}")


def _permanent_fix(method: str, a: planner.Access, targets: list[dict]) -> str | None:
    """The matchConditions fix for the culprit, from the configuration as it was backed up."""
    if not targets:
        return None
    from breakglass.webhooks import audit  # noqa: PLC0415

    conds = audit.match_conditions_for(audit.kinds_for(None))
    lines = ["The lasting fix: keep the apiserver's own writes (and ServiceCIDR, IPAddress, Nodes, Leases) away from "
             "the webhook with matchConditions, set where its operator expects it:"]
    for t in targets:
        lines.append(f"  {t['kind']}/{t['configuration']} (webhook {t.get('webhook')}):")
        lines += [f"    - name: {c['name']}\n      expression: {c['expression']}" for c in conds]
    lines.append("`breakglass audit` prints the kubectl patch and the operator's setting for each configuration.")
    return "\n".join(lines)
