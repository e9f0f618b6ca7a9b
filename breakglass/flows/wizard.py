"""The on-call wizard: from "it's down" to "it's back and reverted", one question at a time.

A thin layer, like the CLI: it asks through the prompts interface and drives the same core
(diagnose, planner, recovery, audit). Every change is previewed as its exact diff and confirmed by
typing the name of what will be deleted or disabled.

It has no dead ends: a bad path or name is asked again with the reason; every step has a way back (``<`` at a
question, "back" in a list, Enter at the confirmation) with what was typed kept; a way in that does not answer says
why; a restart gap (connection refused) is waited out, and past its deadline the choice is offered again. It starts
by offering to finish runs that are applied and not reverted.

It decides nothing the engine does not: which ways out an access can use is the registry's (ways.registry through
planner.options), "already in place" is a run in the journal (recovery.applied_exactly), and whether a revert is
safe is the revert guard's (recovery.revert_check / revert_run): the wizard only states it and asks for the typed
word.
"""

from __future__ import annotations

import glob
import os
import shlex
import time
from dataclasses import dataclass, field

from breakglass import sandbox

from breakglass.flows import planner, readiness, recovery, retry

from breakglass.present import render
from breakglass.core.errors import BadInput, BreakglassError, Declined, ExitCode, Interrupted, Unreachable
from breakglass.core.runstates import EDITED
from breakglass.core.safetext import printable
from breakglass.diagnose.model import BOOTSTRAP
from breakglass.present.prompts import Choice, Prompter
from breakglass.text.admission_flags import WEBHOOK_PLUGINS
from breakglass.ways.kubeadm_flags import DEFAULT_MANIFEST as KUBEADM_MANIFEST
from breakglass.webhooks import model

WAIT_SECONDS = 300.0


def run(p: Prompter, state: str | None = None, timeout: float = 3.0) -> int:
    try:
        return _flow(p, state, timeout)
    except KeyboardInterrupt:
        raise Interrupted("wizard interrupted", hint=_interrupted_hint(state)) from None


def _interrupted_hint(state: str | None) -> str:
    """What Ctrl-C leaves: the run that changed the cluster and is not reverted, by name (issue 37 §3), or that
    nothing was changed."""
    from breakglass.core import journal  # noqa: PLC0415
    from breakglass.ways import driver  # noqa: PLC0415

    try:
        for run in reversed(journal.list_runs(state)):
            try:
                st = driver.replay(run)
            except (BreakglassError, OSError, ValueError):
                continue
            if st.status != "reverted" and any(s.backup for s in st.steps):
                return (f"run {run.id} changed the cluster and is not reverted: `breakglass revert {run.id}` undoes "
                        f"it; `breakglass` starts again")
    except (BreakglassError, OSError):
        pass
    return "no run of breakglass has a change left to revert; `breakglass` starts again"


@dataclass
class Typed:
    """What the engineer typed for a way in, kept when it did not work so the next try starts from it."""

    values: dict = field(default_factory=dict)

    def get(self, key: str, default: str = "") -> str:
        return self.values.get(key, default)


class _Back(Exception):
    """The engineer asked to go back one step (a choice, or ``<`` typed at a question)."""


BACK = "<"  # typed at any question of a way in: back to the list of ways in
OVERRIDE_WORD = "re-arm"  # typed to revert while a webhook's backend is down or unchecked
RETRY_SECONDS = 90.0  # how long a restart gap (connection refused) is waited out while planning or applying


def _flow(p: Prompter, state: str | None, timeout: float) -> int:
    p.say("breakglass: let's get the control plane past its admission webhooks. Nothing changes without your "
          "typed confirmation.")
    finished = _resume(p, state, timeout)
    if finished is not None:
        return finished
    # 1. what is wrong
    diag, targets, plugins = _diagnose(p)
    if diag is not None and diag.verdict.state == "leaking" and not _leaks(p):
        return 0
    if diag is not None and diag.verdict.state == "degraded" and not _degraded(p, diag):
        return 0
    if diag is not None and diag.verdict.state == "stuck" and not _stuck(p):
        return int(ExitCode.FOUND)  # stuck, and nothing changed: not an all-clear
    family = diag.verdict.family if diag else None
    # 2. how to reach the cluster, and which way out; every step has a way back, and nothing typed is lost
    typed = Typed()
    declined = False
    while True:
        try:
            access = _access(p, state, timeout, typed)
        except _Back:
            continue
        if access is None:
            raise Declined(("declined at the confirmation; " if declined else "") + "nothing was changed")
        probes = planner.probe(access, timeout, planner.RESTART_GAP, p.progress)  # a restart gap waited out
        for pr in probes.values():
            p.say(f"  {pr.name}: {'reachable' if pr.reachable else 'NOT reachable'}: {pr.detail}")
        while True:
            chosen = _choose_way(p, planner.options(probes, have_targets=True, family=family,
                                                    distros=access.distros, static=_static(targets)), targets,
                                 access)
            if chosen is None:
                break  # back to the ways in, with what was typed
            method, variant = chosen
            planned = list(targets)  # what the plan acts on (picked from the cluster too): the lasting fix names it
            # asked once, before the planning a restart gap may retry
            try_for = _try_for(p, family) if method == "talos" and variant != "file" else None
            answered: dict = {}  # what _plan asked, kept across the retries of a restart gap
            try:
                remedy, steps, confirm_word, refs = retry.call(
                    lambda: _plan(p, method, variant, access, planned, plugins, typed, try_for, answered),
                    time.monotonic() + RETRY_SECONDS, p.progress, what="the cluster")
            except _Back:
                continue
            except BreakglassError as e:
                p.say(f"That way out cannot be planned: {e}")
                if isinstance(e, Unreachable):
                    p.say("Nothing was changed. Pick it again to retry, pick another way out, or go back to "
                          "another way in; the manual commands are in the list too.")
                continue
            if not steps:
                if _already_done(p, state, remedy, access):
                    return 0
                continue
            # 3. the exact change
            p.say(render.plan(steps, remedy.method))
            for note in getattr(remedy, "notes", []):
                p.say(f"note: {note}")
            if not _confirm_typed(p, confirm_word):
                declined = True
                p.say("Nothing was changed. Back to the ways out.")
                continue
            if hasattr(remedy, "on_wait"):
                remedy.on_wait = p.progress
            services = sorted({f.service for f in (diag.findings if diag else []) if f.service}
                              | {t["service"] for t in planned if t.get("service")})
            try:
                res = recovery.execute(remedy, steps, state, {"wizard": True, "method": method, "refs": refs,
                                                              "services": services},
                                       retry=RETRY_SECONDS, on_retry=p.progress)
            except Unreachable as e:
                p.say(f"The change could not be made: {e}")
                p.say(f"({e.hint})" if e.hint else "")
                p.say("Pick the way out again to retry (nothing typed is lost), or another way.")
                continue
            return _after_change(p, state, access, remedy, res, diag, planned, services)


def _static(targets: list[dict]) -> bool:
    """The culprits are manifest-based configurations (1.36+): files on the nodes, in neither the API nor etcd."""
    from breakglass.webhooks.model import STATIC_SUFFIX  # noqa: PLC0415

    return bool(targets) and all(str(t.get("configuration") or "").endswith(STATIC_SUFFIX) for t in targets)


def _choose_way(p: Prompter, opts, targets: list[dict], access=None):
    """(way, variant) from the registry's verdicts, or None to go back to the ways in. Unusable ways are shown
    greyed out with the reason; the manual commands are one choice away."""
    choices = [Choice(o.method, f"{o.method}{' (' + o.label + ')' if o.label else ''}: {o.summary}",
                      _short(o.reason) if not o.available else None,
                      f"Cost: {o.tradeoff}" + (f" Unavailable: {o.reason}" if not o.available else ""))
               for o in opts]
    if not any(o.available for o in opts):
        p.say("No way out can be used with this access. By hand, the same ways are:")
        p.say(_manual(targets, access))
        p.say("Or go back to another way in (the last choice below); what you typed is kept.")
    choices += [Choice("manual", "show the commands to do it by hand"),
                Choice("back", "back: another way in (what you typed is kept)")]
    while True:
        pick = p.select("Which way out? (least invasive first)", choices)
        if pick == "back":
            return None
        if pick == "manual":
            p.say(_manual(targets, access))
            continue
        o = next(o for o in opts if o.method == pick)
        return o.method, o.variant


def _already_done(p: Prompter, state: str | None, remedy, access: planner.Access) -> bool:
    """An empty plan is "already in place" only when a run in the journal applied exactly this change and the
    apiserver is ready; anything else says what was found and goes back to the ways out (False)."""
    done = recovery.applied_exactly(state, remedy.method, remedy.describe_target())
    found = "; ".join(getattr(remedy, "notes", []) or [])
    skipped = getattr(remedy, "skipped", None)
    if skipped:
        found = (found + "; " if found else "") + f"already disabled on: {', '.join(skipped)}"
    if done is None:
        p.say("Nothing to change, and no run of breakglass made this change"
              + (f": {found}." if found else "."))
        p.say("Pick another way out, or go back to another way in.")
        return False
    p.say(f"Run {done.run} already applied this change ({done.status}, not reverted).")
    states = _wait_ready(p, access, "now")
    if states and all(s.ready for s in states):
        p.say(f"It is in place and the apiserver is ready. `breakglass revert {done.run}` undoes it once the "
              f"webhook's backend is healthy.")
        return True
    p.say("The apiserver is not ready (or was not checked) although that change is in place: pick another way out.")
    return False


def _after_change(p: Prompter, state, access, remedy, res, diag, targets, services) -> int:
    record = recovery.journal.Run.open(res.run, state)
    if diag is not None:
        record.append("findings", verdict=diag.verdict.headline,
                      findings=[f"[{f.id}] {f.severity} {f.title}" for f in diag.findings[:20]])
    p.say(render.run_result(res))
    if res.status == EDITED:  # a file here: no node has the change until the engineer applies it
        return _after_edit(p, state, access, res, record, targets, services)
    ready = _journal_wait(record, state, _wait_ready(p, access, "after the change", remedy))
    # an admission policy has no backend: what makes the revert safe is the policy's own fix, which the
    # revert's trial asks the apiserver about
    policies = bool(targets) and all(t.get("kind") in model.POLICY_KINDS for t in targets)
    if policies:
        p.say("Before reverting, the policy must skip the apiserver's own writes (the lasting fix below): the "
              "revert asks the apiserver first, as kube-apiserver, and refuses while the policy would refuse them.")
    else:
        p.say("Before reverting, the webhook's backend must be healthy: " + _backend_hint(targets))
    _check_backends(p, access, res.run, state)
    # 4. the lasting fix, recorded for the postmortem
    fix = _permanent_fix(targets, _configurations_of(res.run, state, access))
    if fix:
        p.say(fix)
        record.append("permanent-fix", text=fix)
    # 5. revert, guarded by the engine: a backend that cannot answer is stated, and only a typed word goes on
    p.say("Revert only once the policy's fix is in place." if policies else
          "Revert only once the webhook's backend is healthy again.")
    code = _revert(p, res.run, state, access) if p.confirm("Revert the temporary change now?", False) else None
    if code is None or code == int(ExitCode.DECLINED):
        p.say(f"When the {'policy is fixed' if policies else 'webhook is healthy'}: breakglass revert {res.run}")
    record.write_file("report.md", recovery.report(record))
    p.say(f"Report for the postmortem: {record.path}/report.md")
    if code is not None and code != int(ExitCode.DECLINED):
        return code  # the revert's own: 0 verified, 8 not verified
    if not ready:
        p.say("Not verified: the apiserver was not seen ready after the change (exit 8).")
        return int(ExitCode.NOT_VERIFIED)
    return 0


def _journal_wait(record, state, states) -> bool:
    """Journal a /readyz wait of the wizard's (``states``: None when Ctrl-C stopped it) in the run and its report,
    as `recover` does: what the run's state and report.md say of readiness. True when every apiserver was ready."""
    from breakglass.flows import readiness  # noqa: PLC0415

    entry = readiness.to_json(states or [], stopped=states is None,
                              unchecked="" if states is None or states else "no apiserver address to watch")
    recovery.record_readiness(os.path.basename(record.path), state, entry)
    return entry["ready"]


def _backend_hint(targets: list[dict]) -> str:
    """How to see the backend for yourself: the Service's endpoints, or a url: webhook's own URL."""
    svc = next((t["service"] for t in targets if t.get("service")), None)
    if svc and "/" in svc:
        ns, name = svc.split("/", 1)
        return (f"its pods ready and its Service's endpoints present (kubectl -n {ns} get endpointslices -l "
                f"kubernetes.io/service-name={name}).")
    url = next((t["url"] for t in targets if t.get("url")), None)
    if url:
        return f"its URL answering the apiserver ({url}, with the webhook's caBundle)."
    return ("its pods ready and its Service's endpoints present (kubectl get validatingwebhookconfigurations -o "
            "wide names each webhook's Service).")


def _after_edit(p: Prompter, state, access, res, record, targets, services) -> int:
    """A file edited here (a Talos machine config, a k3s/RKE2 config.yaml): no node has the change until the
    engineer applies it. Said, with the commands; then: applied now? and if so, which apiserver's /readyz to watch.
    Only that apiserver seen ready goes on to the backends, the lasting fix and the revert (0); not applied, not
    watched or not ready ends with the commands, exit 8, and never says done."""
    from breakglass.access import readyz  # noqa: PLC0415

    files = list(dict.fromkeys(f for s in res.steps for f in s.get("files") or []))
    commands = list(dict.fromkeys(c for s in res.steps for c in s.get("apply") or []))
    checks = list(dict.fromkeys(c for s in res.steps for c in s.get("check") or []))
    p.say(f"Edited, not applied: {' and '.join(files)} {'holds' if len(files) == 1 else 'hold'} the change, and no "
          f"node has it yet. To apply it:")
    p.say("\n".join(f"  $ {c}" for c in commands))
    applied = p.confirm("Have you applied it (the commands above)? Enter alone: not yet, and the wizard ends with "
                        "the commands", False)
    url, states = "", []
    if applied:
        p.say("Which apiserver should breakglass watch for /readyz? A URL or host:port; Enter alone skips.")
        url = p.text("Apiserver to watch:", access.readyz_urls[0] if access.readyz_urls else "",
                     validate=_url_problem).strip()
        if url:
            states = _show_readiness(p, "after you applied it",
                                     lambda tick: readyz.wait([readyz.url_for(url)], WAIT_SECONDS,
                                                              on_tick=tick)) or []
    ready = bool(states) and all(s.ready is True for s in states)
    record.append("applied-by-hand" if applied else "not-applied-yet", apiserver=url or None, ready=ready,
                  seen=[{"url": s.url, "ready": s.ready, "detail": s.detail} for s in states])
    if not ready:
        why = ("not applied yet" if not applied else "no apiserver was watched" if not url else
               "the apiserver was not seen ready" + ("" if any(s.ready is False for s in states) else
                                                     " (it keeps /readyz to authenticated callers)"))
        fix = _permanent_fix(targets, _configurations_of(res.run, state, access))
        if fix:
            record.append("permanent-fix", text=fix)
        record.write_file("report.md", recovery.report(record))
        p.say(f"Report for the postmortem: {record.path}/report.md")
        p.say(f"Edited, not applied ({why}): nothing is verified in the cluster. To apply it, check it, and undo it:")
        steps = ([] if applied else commands) + checks + [
            f"breakglass revert {res.run}   # puts the file back here; if you applied it, apply it again the same way"]
        p.say("\n".join(f"  $ {c}" for c in steps))
        return int(ExitCode.NOT_VERIFIED)
    p.say(f"Applied by you, and {url} is ready.")
    p.say("Before reverting, the webhook's backend must be healthy: its pods ready and its Service's endpoints "
          "present, or for a url: webhook, the server at its URL answering:")
    p.say("\n".join(_backend_commands(services, [])))
    _check_backends(p, access, res.run, state)
    fix = _permanent_fix(targets, _configurations_of(res.run, state, access))
    if fix:
        p.say(fix)
        record.append("permanent-fix", text=fix)
    p.say("Revert only once the webhook's backend is healthy again. The revert puts the file back here; apply it "
          "again the same way afterwards, so the nodes have it too.")
    if not (p.confirm("Revert the temporary change now?", False)
            and _revert(p, res.run, state, access) in (0, int(ExitCode.NOT_VERIFIED))):
        p.say(f"When the webhook is healthy: breakglass revert {res.run}, then apply the file again the same way")
    else:
        p.say("Now apply the reverted file the same way:\n" + "\n".join(f"  $ {c}" for c in commands))
    record.write_file("report.md", recovery.report(record))
    p.say(f"Report for the postmortem: {record.path}/report.md")
    return 0


# -- 0. runs left open ---------------------------------------------------------------------------------

def _resume(p: Prompter, state: str | None, timeout: float) -> int | None:
    """A change applied and not reverted (the wizard was stopped, or `recover` ran): finish it first."""
    runs = recovery.open_runs(state)
    if not runs:
        return None
    latest = runs[-1]
    p.say(f"Run {latest.run} ({latest.method}, {latest.status}) "
          + ("edited a file here (applied to no node by breakglass)" if latest.status == EDITED else
             "changed the cluster") + " and is not reverted:")
    for step in latest.steps:
        p.say(f"  * {step}")  # not "- ": a line that starts like a diff is never folded
    what = p.select("What now?", [
        Choice("revert", "revert it (its webhooks' backends are checked first)"),
        Choice("report", "write its report for the postmortem, keep the change"),
        Choice("continue", "leave it, and diagnose or recover something else"),
    ])
    if what == "continue":
        return None
    if what == "report":
        record = recovery.journal.Run.open(latest.run, state)
        record.write_file("report.md", recovery.report(record))
        p.say(f"Report for the postmortem: {record.path}/report.md (the change stays; "
              f"`breakglass revert {latest.run}` undoes it)")
        return 0
    access = planner.Access()
    sb = sandbox.load(sandbox.default_dir(state))
    if sb and sb.apiserver:
        access.readyz_urls = [sb.apiserver["url"]]
        access.kubeconfig = sb.apiserver.get("kubeconfig")
    code = _revert(p, latest.run, state, access)
    if code in (int(ExitCode.DECLINED), int(ExitCode.PRECONDITION)):
        p.say(f"The change stays. When the webhook is healthy: breakglass revert {latest.run}")
    return code


def _revert(p: Prompter, run_id: str, state: str | None, access: planner.Access) -> int:
    """Revert ``run_id`` through the engine's guard: the backends of the webhooks it re-arms are read and said;
    while one is down (or none could be read) it goes on only on the typed word. Afterwards the engine's canary
    through the apiserver says whether the apiserver itself can call them; if not, the way out is offered again at
    once. Returns the exit code: 0 reverted and verified, 8 reverted but not verified, 7 declined, 4 not checkable."""
    from breakglass.core import outcome  # noqa: PLC0415

    kube = (access.kubeconfig, access.context)
    try:
        _, verdict = recovery.revert_check(run_id, state, access.etcd, kube=kube)
    except BreakglassError as e:
        p.say(f"Cannot check the run before reverting it: {e}")
        return int(ExitCode.PRECONDITION)
    for line in verdict.lines():
        p.say("  " + line)
    override = False
    if verdict.state == "can-heal":
        # the heal model's case: nothing the webhook intercepts is on the cluster's way back, so re-arming now only
        # shortens the time no policy is enforced
        if not p.confirm("Re-arm now, with the backend still down (every write it intercepts is refused until it is "
                         "back)?", True):
            return int(ExitCode.DECLINED)
    elif verdict.state != "ready":
        risk = (verdict.refusal() if verdict.state == "down" else verdict.unchecked if verdict.blind else
                "breakglass could not call the backend of every webhook this revert re-arms, so it cannot tell "
                "whether they can answer")
        p.say(f"Not safe to revert yet: {risk}. Reverting now can lock the cluster up again.")
        if not _typed_word(p, OVERRIDE_WORD, f"Type {OVERRIDE_WORD} to revert anyway; Enter alone keeps the "
                                             f"change (recommended until the backend is ready)."):
            return int(ExitCode.DECLINED)
        override = True
    try:
        rr = recovery.revert_run(run_id, state, access.etcd, talos=access.talos, kube=kube,
                                 override_backend=override)
    except BreakglassError as e:
        p.say(f"Not reverted: {e}")
        return int(e.exit_code)
    p.say(render.revert_result(rr))
    canary = (getattr(rr, "guard", None) or {}).get("canary") or {}
    if canary.get("ok") is False and rr.guard.get("redo") and rr.guard.get("state") != "can-heal":
        redo = rr.guard["redo"]
        p.say("The apiserver itself cannot call a webhook this revert re-armed: writes it intercepts fail now.")
        p.say(f"To take the change back: {redo}")
        if p.confirm("Take the change back now (run that command)?", False):
            import subprocess  # noqa: PLC0415
            import sys  # noqa: PLC0415

            # the same engine, guards and journal as typed by hand: a new run that a later revert undoes
            subprocess.run([sys.executable, "-m", "breakglass", *shlex.split(redo)[1:]], check=False)
        return int(ExitCode.NOT_VERIFIED)
    # the webhook is back in the path: is the apiserver still ready? (k3s/RKE2: asked through the nodes' kubectl)
    _wait_ready(p, access, "after the revert", _node_prober(run_id, state, access))
    return int(ExitCode.NOT_VERIFIED) if outcome.of("RevertResult", rr).not_verified else 0


def _node_prober(run_id: str, state: str | None, access: planner.Access):
    """For a k3s/RKE2 run over SSH, something whose node_readiness(host) asks the node's own kubectl."""
    if not access.ssh_nodes:
        return None
    from breakglass.ways import driver  # noqa: PLC0415

    method = driver.replay(recovery.journal.Run.open(run_id, state)).method
    if method not in ("k3s", "rke2"):
        return None
    from breakglass.ways.k3s_flags import K3sFlags  # noqa: PLC0415

    return K3sFlags(method, access.ssh_nodes)


# -- 1. diagnosis ----------------------------------------------------------------------------------------

def _paths(text: str) -> list[str]:
    """A path as typed: ~ expanded, globs expanded (sorted), several separated by spaces or commas."""
    out = []
    for part in text.replace(",", " ").split():
        part = os.path.abspath(os.path.expanduser(part))  # journaled absolute: revert works from anywhere
        out += sorted(glob.glob(part)) if any(c in part for c in "*?[") else [part]
    return out


def _readable(text: str) -> str | None:
    if not text.strip():
        return None
    paths = _paths(text)
    if not paths:
        return f"nothing matches {text.strip()!r}"
    missing = [x for x in paths if not os.path.exists(x)]
    if missing:
        return f"{missing[0]}: no such file or directory"
    unreadable = [x for x in paths if not os.access(x, os.R_OK)]
    return f"{unreadable[0]}: permission denied" if unreadable else None


def _diagnose(p: Prompter):
    targets: list[dict] = []
    plugins = list(WEBHOOK_PLUGINS)
    p.say("Which kube-apiserver logs? Files, a directory, .gz or globs; Enter alone skips the diagnosis.")
    logs = p.text("Logs to diagnose:", validate=_readable).strip()
    if not logs:
        return None, targets, plugins
    from breakglass.diagnose.engine import diagnose_paths  # noqa: PLC0415

    try:
        diag, _ = diagnose_paths(_paths(logs))
    except BadInput as e:
        p.say(f"Could not read the logs: {e}. Going on without a diagnosis.")
        return None, targets, plugins
    p.say(diag.verdict.headline)
    p.say(diag.verdict.explanation)
    if diag.verdict.state == "deadlock-likely" and diag.verdict.prove:
        p.say(f"The names in the log point to a cycle; to prove it: {diag.verdict.prove}")
    for f in diag.findings[:5]:
        p.say(f"  [{f.id}] {f.severity.upper()} {f.title}")
    if not diag.findings:
        p.say("Nothing in these logs points at a webhook. You can still pick a configuration below.")
    for r in diag.remedies:
        if r.method == "kubeapi":  # every culprit: named by the log, guessed by convention, or only a webhook
            targets = [dict(t) for t in r.targets if t.get("configuration") or t.get("webhook")]
        if r.method == "talos" and r.plugins:
            plugins = list(r.plugins)
    return diag, targets, plugins


# -- 2. the way in ---------------------------------------------------------------------------------------

WAYS_IN = [
    ("etcd", "etcd endpoints", "On a control-plane node: https://127.0.0.1:2379 with the etcd client certificates."),
    ("kubeconfig", "kubeconfig", "An apiserver still answers (not ready is fine): point at one node directly."),
    ("talos", "Talos nodes, through talosctl", "talosctl with a talosconfig that reaches the control plane."),
    ("talos-file", "a Talos machine-config file", "The cluster is managed as code: edit the file, apply it."),
    ("ssh", "SSH to control-plane nodes (kubeadm, k3s, RKE2)", "kubeadm: the kube-apiserver manifest; k3s, RKE2: "
     "a drop-in of their config.yaml and a service restart. breakglass finds which the node runs."),
    ("manifest", "a kubeadm manifest on this machine", "You are on the control-plane node, as root."),
    ("k3s-file", "a k3s or RKE2 config.yaml (here, or managed as code)", "A drop-in beside it turns the webhook "
     "plugins off; nothing is restarted: you restart k3s or rke2-server, or roll the file out."),
]
# where k3s and RKE2 read their config.yaml on a server node (the first that exists is the default answer)
K3S_CONFIGS = ("/etc/rancher/k3s/config.yaml", "/etc/rancher/rke2/config.yaml")


def _access(p: Prompter, state: str | None, timeout: float, typed: Typed) -> planner.Access:
    from breakglass.access.etcd import EtcdSettings  # noqa: PLC0415

    d = sandbox.default_dir(state)
    running = sandbox.status(d).get("running")
    choices = [Choice(k, title, None, hint) for k, title, hint in WAYS_IN]
    rehearsal = Choice("sandbox", "REHEARSAL: the local sandbox" + (" (running)" if running else ""),
                       None, "A sandbox on this machine (a real kube-apiserver if you have one): nothing real is "
                             "touched.")
    choices.append(rehearsal)  # last but one: two Enters never act on a rehearsal by accident
    choices.append(Choice("quit", "quit: leave (nothing is changed)"))
    how = p.select("How can you reach the cluster?", choices)
    if how == "quit":
        return None
    a = planner.Access()
    typed.values["how"] = how
    if how != "sandbox":
        p.say(f"Type {BACK} at any question to come back to this list.")
    if how == "sandbox":
        sb = sandbox.load(d) if running else None
        if sb is None:
            binary = _rehearsal_binary(p)
            p.say("Starting the sandbox; nothing outside it is touched.")
            sb = sandbox.up(d, apiserver=binary or None, say=p.say)
        p.banner = "REHEARSAL"
        a.etcd = recovery.EtcdTarget(EtcdSettings(endpoints=(sb.endpoint,), timeout=timeout))
        if sb.apiserver:
            p.say(f"kube-apiserver {sb.apiserver['version']} at {sb.apiserver['url']} (log: {sb.apiserver['log']})")
            a.kubeconfig = sb.apiserver["kubeconfig"]
            a.readyz_urls = [sb.apiserver["url"]]
            if sb.apiserver.get("node") == "talos":
                a.talos_files = [sb.apiserver["node_config"]]
            else:
                a.manifest = sb.apiserver["manifest"]
    elif how == "etcd":
        from breakglass.access.etcd import endpoints_problem  # noqa: PLC0415

        # checked where it is typed: a typo (htps//host) is asked again before the CA, cert and key are
        eps = _ask(p, typed, "etcd_endpoints", "etcd endpoints (a,b,c):",
                   os.environ.get("ETCDCTL_ENDPOINTS", "https://127.0.0.1:2379"), endpoints_problem)
        ca = _ask(p, typed, "etcd_ca", "etcd CA file (empty: none):", os.environ.get("ETCDCTL_CACERT", ""),
                  _file_or_empty)
        cert = _ask(p, typed, "etcd_cert", "etcd client cert (empty: none):",
                    os.environ.get("ETCDCTL_CERT", ""), _file_or_empty)
        key = _ask(p, typed, "etcd_key", "etcd client key (empty: none):", os.environ.get("ETCDCTL_KEY", ""),
                   _file_or_empty)
        try:
            a.etcd = recovery.EtcdTarget(EtcdSettings.resolve(eps, ca or None, cert or None, key or None, timeout))
        except BadInput as e:
            p.say(f"  {e}")
            return _access(p, state, timeout, typed)
        a.readyz_urls = _optional_url(p, typed)
    elif how == "kubeconfig":
        path = _ask(p, typed, "kubeconfig", "kubeconfig:", os.environ.get("KUBECONFIG", "~/.kube/config"),
                    _file_or_empty)
        a.kubeconfig = os.path.expanduser(path) if path else None
        a.context = _pick_context(p, a.kubeconfig) or None
        a.wants_kubeconfig = True
    elif how == "talos":
        from breakglass.access.talos import Talos  # noqa: PLC0415

        cfg = _ask(p, typed, "talosconfig", "talosconfig:", os.environ.get("TALOSCONFIG", "~/.talos/config"),
                   _file_or_empty)
        contexts, nodes, endpoints = _talosconfig(cfg)
        context = p.select("talosconfig context:", [Choice(c, c) for c in contexts]) if len(contexts) > 1 else (
            contexts[0] if contexts else "")
        a.talos_nodes = _split(_ask(p, typed, "talos_nodes", "Control-plane nodes (a,b,c):",
                                    ",".join(nodes.get(context, [])), _nonempty))
        eps = _ask(p, typed, "talos_endpoints", "Talos endpoints (empty: context's):",
                   ",".join(endpoints.get(context, [])))
        talosctl = _ask(p, typed, "talosctl", "talosctl binary:", "talosctl", _on_path)
        a.talos = Talos(talosctl=talosctl, talosconfig=os.path.expanduser(cfg) if cfg else None,
                        context=context or None, endpoints=_split(eps))
        a.readyz_urls = list(a.talos_nodes)
    elif how == "talos-file":
        a.talos_files = _paths(_ask(p, typed, "talos_files", "Control-plane machine config(s):",
                                    "", _readable_required))
    elif how == "ssh":
        from breakglass.access.ssh import Node, SshOptions  # noqa: PLC0415

        hosts = _split(_ask(p, typed, "ssh_hosts", "Control-plane hosts (a,b,c):",
                            "", _hosts))
        user = _ask(p, typed, "ssh_user", "SSH user (empty: default):", "")
        key = _ask(p, typed, "ssh_key", "SSH key (empty: default):", "", _file_or_empty)
        port = _ask(p, typed, "ssh_port", "SSH port (empty: default):", "", _port_or_empty)
        p.say("SSH defaults come from ~/.ssh/config (IdentityFile, agent, User, Port), else $USER and 22. A "
              "host key that changed is always refused.")
        accept = p.confirm("Accept and record unknown host keys?", False)
        opts = SshOptions(user=user or None, key=os.path.expanduser(key) if key else None,
                          port=int(port) if port else None, accept_new=accept, timeout=timeout)
        a.ssh_nodes = {h: Node(h, opts) for h in hosts}
        a.readyz_urls = list(hosts)
    elif how == "k3s-file":
        default = next((f for f in K3S_CONFIGS if os.path.exists(f)), K3S_CONFIGS[0])
        a.k3s_files = [os.path.abspath(os.path.expanduser(_ask(p, typed, "k3s_config", "k3s or RKE2 config.yaml:",
                                                               default, _readable_required)))]
        # no /readyz to watch: nothing restarts until the engineer does it (and k3s answers an anonymous /readyz
        # with 401 only)
    else:
        a.manifest = os.path.abspath(os.path.expanduser(_ask(p, typed, "manifest", "kube-apiserver manifest:",
                                                             KUBEADM_MANIFEST,
                                                             _readable_required)))
        a.readyz_urls = _optional_url(p, typed, readiness.manifest_url(a.manifest))
    return a


def _url_problem(text: str) -> str | None:
    """An apiserver to watch: HOST, HOST:PORT or an http(s) URL; a typo such as htps//host is asked again."""
    import urllib.parse  # noqa: PLC0415

    t = text.strip()
    if not t:
        return None
    if "://" in t:
        u = urllib.parse.urlsplit(t)
        if u.scheme not in ("https", "http"):
            return f"{u.scheme!r} is not http or https"
    else:
        if "/" in t:
            return f"{t!r} is not a URL or host (write https://HOST:PORT)"
        u = urllib.parse.urlsplit("https://" + t)
    try:
        port = u.port
    except ValueError:
        return f"{t!r}: the port is not a number from 1 to 65535"
    if not u.hostname or any(c in u.hostname for c in " ;$`'\"<>|&"):
        return f"{t!r}: no host name in it"
    if port is not None and not 0 < port < 65536:
        return f"{t!r}: the port is not a number from 1 to 65535"
    return None


def _rehearsal_binary(p: Prompter) -> str:
    """Which kube-apiserver the sandbox runs: one built here (newest first), etcd only, or a path."""
    built = sandbox.built_apiservers()[::-1]
    choices = [Choice(b, f"kube-apiserver {os.path.basename(os.path.dirname(b))}: the real outage, for real")
               for b in built]
    choices += [Choice("", "etcd only: the webhook configurations as the apiserver stores them"),
                Choice("other", "another kube-apiserver binary (a release tarball's, or one taken from the image)")]
    pick = p.select("Rehearse on:", choices)
    if pick == "other":
        pick = os.path.expanduser(p.text("kube-apiserver binary:", validate=_executable).strip())
    return pick


def _ask(p: Prompter, typed: Typed, key: str, message: str, default: str = "", validate=None) -> str:
    """A question of a way in; ``<`` goes back to the list of ways in (what was typed before is kept)."""
    def check(text: str) -> str | None:
        return None if text.strip() == BACK or validate is None else validate(text)

    value = p.text(message, typed.get(key, default), validate=check).strip()
    if value == BACK:
        raise _Back()
    typed.values[key] = value
    return value


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _nonempty(text: str) -> str | None:
    return None if text.strip() else "at least one is needed"


def _hosts(text: str) -> str | None:
    """At least one host, each one SSH can take (a typo with a space or a ';' is asked again)."""
    from breakglass.access.ssh import host_problem  # noqa: PLC0415

    hosts = _split(text)
    if not hosts:
        return "at least one is needed"
    return next((problem for problem in map(host_problem, hosts) if problem), None)


def _file_or_empty(text: str) -> str | None:
    path = os.path.expanduser(text.strip())
    if not path:
        return None
    return None if os.path.isfile(path) else f"{path}: no such file"


def _readable_required(text: str) -> str | None:
    return _readable(text) if text.strip() else "a path is needed"


def _executable(text: str) -> str | None:
    path = os.path.expanduser(text.strip())
    return None if path and os.path.isfile(path) and os.access(path, os.X_OK) else f"{path or '(empty)'}: not an " \
                                                                                   f"executable file"


def _on_path(text: str) -> str | None:
    import shutil  # noqa: PLC0415

    name = os.path.expanduser(text.strip())
    if (os.sep in name and os.access(name, os.X_OK)) or shutil.which(name):
        return None
    return f"{name!r} is not installed here (type its full path)"


def _port_or_empty(text: str) -> str | None:
    return None if not text.strip() or (text.strip().isdigit() and 0 < int(text) < 65536) else "a port is 1-65535"


def _optional_url(p: Prompter, typed: Typed, default: str = "") -> list[str]:
    p.say("Which apiserver should breakglass watch for /readyz afterwards? A URL or host; Enter alone skips.")
    refused: set[str] = set()

    def check(text: str) -> str | None:
        """The URL's form, then whether anything listens there: a wrong port (:4980) is said at once instead of
        after a 5-minute wait; typed again, it is taken (an apiserver between restarts refuses too)."""
        problem = _url_problem(text)
        if problem or not text.strip() or text.strip() in refused:
            return problem
        why = _refused(text.strip())
        if why:
            refused.add(text.strip())
            return f"{why}; check the port (kubeadm, Talos: 6443), or type it again to watch it anyway"
        return None

    url = _ask(p, typed, "readyz", "Apiserver to watch:", default, check)
    return [url] if url else []


def _refused(text: str) -> str | None:
    """"nothing listens at HOST:PORT" when a TCP connection there is refused at once or the name does not
    resolve; None when it connects or only times out (a load balancer, a slow network: not a wrong port)."""
    import socket  # noqa: PLC0415
    import urllib.parse  # noqa: PLC0415

    u = urllib.parse.urlsplit(text if "://" in text else "https://" + text)
    host = u.hostname or ""
    if u.port:
        port = u.port
    elif "://" in text:
        port = 443 if u.scheme == "https" else 80
    else:
        port = 6443  # a bare host is watched at https://HOST:6443 (access.readyz.url_for)
    try:
        with socket.create_connection((host, port), timeout=1.5):
            return None
    except socket.gaierror:
        return f"{host}: no such host"
    except ConnectionRefusedError:
        return f"nothing listens at {host}:{port} (connection refused)"
    except OSError:
        return None


def _pick_context(p: Prompter, kubeconfig: str | None) -> str:
    import yaml  # noqa: PLC0415

    try:
        with open(os.path.expanduser(kubeconfig or "~/.kube/config"), encoding="utf-8") as f:
            cfg = yaml.safe_load(f) or {}
        names = [c["name"] for c in cfg.get("contexts") or [] if isinstance(c, dict) and c.get("name")]
        current = cfg.get("current-context") or ""
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
        return ""
    if len(names) <= 1:
        return ""
    ordered = sorted(names, key=lambda n: n != current)
    return p.select("kubeconfig context:", [Choice(n, n + (" (current)" if n == current else "")) for n in ordered])


def _talosconfig(path: str) -> tuple[list[str], dict, dict]:
    """(context names, nodes by context, endpoints by context) of a talosconfig; empty when unreadable."""
    import yaml  # noqa: PLC0415

    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            cfg = yaml.safe_load(f) or {}
        contexts = cfg.get("contexts") or {}
        names = sorted(contexts, key=lambda n: n != cfg.get("context"))
        return (names, {n: list((contexts[n] or {}).get("nodes") or []) for n in names},
                {n: list((contexts[n] or {}).get("endpoints") or []) for n in names})
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError):
        return [], {}, {}


# -- 3. the plan -----------------------------------------------------------------------------------------

def _short(reason: str | None) -> str | None:
    if not reason:
        return reason
    return reason if len(reason) <= 36 else reason[:35].rsplit(" ", 1)[0] + "…"


def _manual(targets: list[dict], access=None) -> str:
    """The ways out by hand; etcdctl with the endpoints and TLS files typed for the way in (ETCDCTL_* alike)."""
    name = targets[0]["configuration"] if targets else "NAME"
    key = targets[0].get("etcd_key") if targets else f"/registry/validatingwebhookconfigurations/{name}"
    settings = getattr(getattr(access, "etcd", None), "settings", None)
    etcdctl = "etcdctl"
    if settings is not None and not settings.route:
        etcdctl += f" --endpoints={shlex.quote(','.join(settings.endpoints))}" + "".join(
            f" --{flag}={shlex.quote(path)}" for flag, path in (("cacert", settings.cacert), ("cert", settings.cert),
                                                                ("key", settings.key)) if path)
    return "\n".join([
        f"  $ kubectl patch validatingwebhookconfiguration {shlex.quote(name)} --type=json "
        "-p '[{\"op\":\"replace\",\"path\":\"/webhooks/0/failurePolicy\",\"value\":\"Ignore\"}]'",
        "  $ talosctl -n NODE patch machineconfig --mode=no-reboot -p "
        "'{\"cluster\":{\"apiServer\":{\"extraArgs\":{\"disable-admission-plugins\":\"ValidatingAdmissionWebhook\"}}}}'",
        f"  # kubeadm: add - --disable-admission-plugins=ValidatingAdmissionWebhook to {KUBEADM_MANIFEST}",
        f"  $ {etcdctl} get {shlex.quote(key)} -w json > backup.json && {etcdctl} del {shlex.quote(key)}",
    ])


def _inventory(a: planner.Access, method: str):
    """Every admission configuration, read through the way in chosen (etcd, or the API)."""
    from breakglass.webhooks import sources  # noqa: PLC0415

    if method == "etcd":
        etcd = a.etcd.connect()
        try:
            return sources.load_etcd(etcd, a.etcd.prefix)
        finally:
            etcd.close()
    return sources.load_api(a.kubeconfig, a.context)


def _resolve_targets(p: Prompter, a: planner.Access, method: str, targets: list[dict]) -> list[dict]:
    """The culprits with the configuration each webhook is in, as the cluster says (a configuration the log named
    stays; a vendor convention's guess is replaced). A webhook in several configurations: the engineer picks."""
    from breakglass.webhooks import resolve  # noqa: PLC0415

    if all(t.get("configuration") and t.get("configuration_source") == "log" or not t.get("webhook")
           for t in targets):
        return targets
    source = "etcd" if method == "etcd" else "api"
    configs = _inventory(a, method).configs
    out: list[dict] = []
    for t in targets:
        if not t.get("webhook") or (t.get("configuration") and t.get("configuration_source") == "log"):
            out.append(t)
            continue
        found = resolve.find(configs, t["webhook"], source)
        if not found:
            p.say(f"No configuration here defines webhook {t['webhook']}"
                  + (f" (the vendor convention guessed {t['configuration']})." if t.get("configuration") else "."))
            continue
        if len(found) > 1:
            choices = [Choice(m.ref, f"{m.ref} ({m.backend})") for m in found]
            if len({m.backend for m in found}) == 1:
                choices.append(Choice("*", "all of them (they call the same backend)"))
            pick = p.select(f"Webhook {t['webhook']} is in {len(found)} configurations. Which?", choices)
            found = found if pick == "*" else [m for m in found if m.ref == pick]
        for m in found:
            p.say("  " + resolve.note(m, m.source))
            out.append({**t, "kind": m.kind, "configuration": m.configuration, "configuration_source": m.source,
                        "owner": m.owner, "etcd_key": None, "service": m.service or t.get("service")})
    return out


def _pick_configurations(p: Prompter, a: planner.Access, method: str, targets: list[dict]) -> list[dict]:
    """The diagnosis's culprits (their configurations read from the cluster), or a choice among the
    configurations breakglass can read there (as targets: kind, configuration, and each webhook, for the
    lasting fix)."""
    if targets:
        resolved = _resolve_targets(p, a, method, targets)
        if resolved:
            return resolved
    configs = [c for c in _inventory(a, method).configs if c.webhooks]
    if not configs:
        raise BadInput("no webhook configuration was found there")
    kinds = {"ValidatingWebhookConfiguration": "validating", "MutatingWebhookConfiguration": "mutating"}
    pick = p.select("Which configuration?", [
        Choice(f"{kinds.get(c.kind, 'validating')}/{c.name}", f"{c.name} ({c.kind})", None,
               ", ".join(f"{w.name}: failurePolicy {w.failure_policy}" for w in c.webhooks)) for c in configs]
        + [Choice("back", "back: another way out")])  # never a dead end (issue 37 §3)
    if pick == "back":
        raise _Back()
    chosen = next(c for c in configs if f"{kinds.get(c.kind, 'validating')}/{c.name}" == pick)
    return [{"kind": pick.split("/")[0], "configuration": chosen.name, "webhook": w.name} for w in chosen.webhooks]


def _plan(p: Prompter, method: str, variant: str, a: planner.Access, targets: list[dict], plugins: list[str],
          typed: Typed, try_for: str | None = None, answered: dict | None = None):
    """The way out's plan for this access, through the variant the registry chose for it (ways.registry).
    ``answered`` keeps the choices made here across the retries of a restart gap: asked once, not again with the
    earlier choice reset (issue 37 §3)."""
    answered = {} if answered is None else answered
    if method in ("etcd", "kubeapi"):
        if "targets" not in answered:
            answered["targets"] = _pick_configurations(p, a, method, targets)
        else:
            p.say("(the apiserver was between restarts: the same configuration and change as chosen)")
        targets[:] = answered["targets"]  # the lasting fix names what was chosen
        refs = list(dict.fromkeys(f"{t['kind']}/{t['configuration']}" for t in targets))
        policies = all(t.get("kind") in model.POLICY_KINDS for t in targets)
        if "action" not in answered and policies and method != "etcd":
            # a binding has no failurePolicy: "ignore" makes it audit instead of deny (a policy: failurePolicy
            # Ignore, which lets through what it cannot evaluate); an admission policy has no webhook to exclude
            answered["action"] = p.select("Which change?", [
                Choice("ignore", "the binding audits instead of denying; a policy named alone: failurePolicy Ignore "
                                 "(least invasive)"),
                Choice("delete", "delete it"),
                Choice("back", "back: another way out")])
        if "action" not in answered:
            answered["action"] = "" if method == "etcd" else p.select("Which change?", [
                Choice("ignore", "failurePolicy Ignore (least invasive)"),
                Choice("exclude", "add matchConditions that skip bootstrap objects"),
                Choice("delete", "delete the configuration"),
                Choice("back", "back: another way out")])
        action = answered["action"]
        if action == "back":
            raise _Back()

        def plan(refs):
            if method == "etcd":
                return recovery.plan_etcd(a.etcd, refs)
            return recovery.plan_kubeapi(a.kubeconfig, a.context, refs, None, action, [])

        try:
            remedy, steps = plan(refs)
        except BadInput as e:  # the log named it by convention, and it is not there: choose from what is
            p.say(f"{e}")
            targets[:] = _pick_configurations(p, a, method, [])
            refs = list(dict.fromkeys(f"{t['kind']}/{t['configuration']}" for t in targets))
            remedy, steps = plan(refs)
        return remedy, steps, ",".join(r.split("/", 1)[-1] for r in refs), refs
    if method == "static-manifests":
        names = sorted({t.get("webhook") or t["configuration"] for t in targets})
        remedy, steps = recovery.plan_static(a.ssh_nodes, names, [], KUBEADM_MANIFEST)
        return remedy, steps, ",".join(names), []
    if method == "talos":
        if variant == "file":
            remedy, steps = recovery.plan_talos(recovery.talos_store(files=True), a.talos_files, plugins)
        else:
            remedy, steps = recovery.plan_talos(recovery.talos_store(a.talos), a.talos_nodes, plugins, try_for)
        return remedy, steps, ",".join(plugins), []
    if method == "kubeadm":
        if variant == "local":
            from breakglass.access.local import LocalNode  # noqa: PLC0415

            remedy, steps = recovery.plan_kubeadm({"localhost": LocalNode()}, os.path.abspath(a.manifest), plugins,
                                                  180.0, local=True)
        else:
            remedy, steps = recovery.plan_kubeadm(a.ssh_nodes, KUBEADM_MANIFEST,
                                                  plugins, 180.0)
        return remedy, steps, ",".join(plugins), []
    if method in ("k3s", "rke2"):
        if variant == "file":  # a config.yaml here: its drop-in written beside it, nothing restarted
            from breakglass.access.local import LocalNode  # noqa: PLC0415

            remedy, steps = recovery.plan_k3s(method, {"localhost": LocalNode()}, a.k3s_files[0], None, plugins,
                                              180.0, local=True)
            return remedy, steps, ",".join(plugins), []
        if not a.ssh_nodes:  # never plan for no node at all
            raise BadInput(f"{method} needs SSH to its server nodes, or its config.yaml here")
        remedy, steps = recovery.plan_k3s(method, a.ssh_nodes, None, None, plugins, 180.0)
        return remedy, steps, ",".join(plugins), []
    raise BadInput(f"unknown method {method}")


TRY_FOR = ("10m", "30m")  # talosctl --mode=try deadlines offered: minutes for the apiserver to start and write


def _try_for(p: Prompter, family: str | None) -> str | None:
    """Whether the nodes take the plugin flag in talosctl's try mode (a dead man's switch: Talos puts the previous
    config back by itself at the deadline), and for how long; None: until `breakglass revert`. First offered for a
    bootstrap deadlock, whose block is one-time: once the apiserver has written its objects (the default
    ServiceCIDR, its IPAddress, new roles), re-arming does not block it again even with the engine still down."""
    rollback = [Choice(t, f"yes: Talos puts the previous config back {t} after the apply",
                       description="A dead man's switch: the webhooks are re-armed even if nobody reverts (the "
                                   "plugins are off meanwhile; revert earlier with its checks).") for t in TRY_FOR]
    keep = Choice("", "no: the plugins stay off until you run breakglass revert",
                  description="For a block that recurs (Leases, Nodes, the engine's own pods): a rollback before "
                              "the engine is back would lock the cluster again.")
    if family == BOOTSTRAP:
        p.say("This deadlock blocks the apiserver's start-up writes only once: a deadline fits it.")
    answer = p.select("Should Talos undo this by itself? (talosctl --mode=try)",
                      [*rollback, keep] if family == BOOTSTRAP else [keep, *rollback])
    return answer or None


def _typed_word(p: Prompter, word: str, intro: str, question: str = "") -> bool:
    """True only on the exact word; a typo is asked again; an empty answer is no."""
    def check(text: str) -> str | None:
        if not text.strip() or text.strip() == word:
            return None
        return f"that is not {word!r}; type it exactly, or Enter alone for no"

    p.say(intro)
    return p.text(question or f"Type {word}:", validate=check).strip() == word


def _confirm_typed(p: Prompter, word: str) -> bool:
    """The change goes ahead only on the exact word; Enter alone changes nothing (back to the ways out)."""
    return _typed_word(p, word, f"Type {word} to apply this change; Enter alone changes nothing and goes back to "
                                f"the ways out.", f"Type {word} to apply:")


# -- 4. afterwards ---------------------------------------------------------------------------------------

def _wait_ready(p: Prompter, a: planner.Access, when: str, remedy=None) -> list:
    """/readyz on every apiserver this access names, with a spinner and the time left; through each node's own
    admin kubeconfig when the remedy can (k3s and RKE2 answer an anonymous /readyz with 401 only)."""
    from breakglass.access import readyz  # noqa: PLC0415

    probes = remedy.readiness_probes() if hasattr(remedy, "readiness_probes") else []
    if probes:
        return _show_readiness(p, when, lambda tick: readyz.wait_for(probes, WAIT_SECONDS, on_tick=tick))
    urls = [readyz.url_for(u) for u in a.readyz_urls]
    if not urls and a.kubeconfig:
        try:
            from breakglass.access import kubeapi  # noqa: PLC0415

            urls = [readyz.url_for(kubeapi.connect(a.kubeconfig, a.context, 5.0).host)]
        except BreakglassError:
            urls = []
    if not urls:
        p.say(f"No apiserver address to check /readyz {when}; check it yourself: kubectl get --raw='/readyz?verbose'")
        return []
    return _show_readiness(p, when, lambda tick: readyz.wait(urls, WAIT_SECONDS, on_tick=tick))


def _show_readiness(p: Prompter, when: str, wait) -> list:
    """Run ``wait(on_tick)`` with a countdown, then say each apiserver's state. Ctrl-C stops the wait only: the
    flow goes on to its next question (a second Ctrl-C there leaves)."""
    from breakglass.access import readyz  # noqa: PLC0415

    p.say(f"Waiting for /readyz {when} (up to {WAIT_SECONDS / 60:.0f} minutes). Ctrl-C stops waiting and goes on "
          f"to the next question; the change stays.")
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        states = wait(lambda st: p.progress(f"{max(0, int(deadline - time.monotonic()))}s left: "
                                            f"{readyz.waiting_text(st)}"))
    except KeyboardInterrupt:
        p.say(f"Stopped waiting for /readyz {when}; the change stays. Going on (Ctrl-C again leaves).")
        return None
    for s in states:
        status = "ready" if s.ready else ("serving" if s.ready is None else "NOT READY")
        hooks = f"; post-start hooks still failing: {', '.join(s.failing_hooks)}" if s.failing_hooks else ""
        n = getattr(s, "restarts", 0)
        seen = f" (after {n} restart{'s' if n != 1 else ''} seen while waiting)" if n else ""
        p.say(f"  {s.url}: {status}{seen}{hooks}")
    return states


def _degraded(p: Prompter, diag) -> bool:
    """The webhook is down but blocks nothing the cluster needs to heal: it comes back when its backend does, so
    the backend is the first thing to fix; the ways out stay one answer away. True to go on to them."""
    services = sorted({f.service for f in diag.findings if f.service})
    urls = sorted({f.url for f in diag.findings if f.url and not f.service})
    p.say("Nothing the cluster needs to come back is blocked: this heals once the webhook's backend answers again. "
          "Fix the backend first:")
    p.say("\n".join(_backend_commands(services, urls)))
    if diag.verdict.prove:
        p.say(f"To check that no cycle holds the cluster: {diag.verdict.prove}")
    return p.confirm("Look for a way out anyway?", False)


def _backend_commands(services: list[str], urls: list[str]) -> list[str]:
    """What shows a webhook's backend, for the backends the log or the plan named: a Service's pods and endpoints;
    a url: webhook's server (no Service, no pods to list: the host in its URL); when none is known, the command
    that lists every webhook with its backend (never a NAMESPACE/SERVICE placeholder to fill in at 3 a.m.)."""
    out = []
    for svc in services:
        ns, name = (shlex.quote(x) for x in svc.split("/", 1))
        out.append(f"  $ kubectl -n {ns} get pods; kubectl -n {ns} get endpointslices "
                   f"-l kubernetes.io/service-name={name}")
    for url in urls:
        out.append(f"  the server at {printable(url)} (a url: webhook: no Service or pods in the cluster name it)")
    return out or ["  $ breakglass webhooks   # every webhook with its backend (add your way in: --kubeconfig, "
                   "--etcd-endpoints)"]


def _stuck(p: Prompter) -> bool:
    """The apiserver cannot finish starting, but no line ties it to a webhook (the verdict said what the lines point
    at): bypassing webhooks would change the cluster for nothing, so the ways out are only offered on request,
    after checking. True to go on to them."""
    p.say("No webhook is named in these logs, so no webhook way out is proposed. Check first:")
    p.say("  $ breakglass webhooks --etcd-endpoints https://127.0.0.1:2379   (what could intercept the hook's writes)")
    p.say("  $ etcdctl endpoint status --write-out=table                      (etcd's latency and leader)")
    return p.confirm("A webhook you know of is in it: look for a way out anyway?", False)


def _leaks(p: Prompter) -> bool:
    """Webhooks failed open and nothing is stuck: what got in matters more than a way out. True to go on."""
    from breakglass.leaks.audit import scan  # noqa: PLC0415

    p.say("Nothing is stuck: webhooks failed open, so requests they should have checked got in.")
    p.say("Which audit log lists them? A file, directory, .gz, gcloud JSON or globs; Enter alone skips.")
    path = p.text("Audit log:", validate=_readable).strip()
    if path:
        try:
            rep = scan(_paths(path))
            p.say(render.leak_report(rep))
            p.say("Re-check those objects (`breakglass leaks --audit-log ... -o recheck` writes the list as YAML), "
                  "and fix the webhook's reachability.")
        except BadInput as e:
            p.say(f"Could not read the audit log: {e}")
    return p.confirm("Look for a way out anyway?", False)


def _check_backends(p: Prompter, a: planner.Access, run_id: str, state: str | None) -> None:
    """What the revert guard reads now of the backends the revert of ``run_id`` would re-arm: the engine's own
    check (the apiserver's call, made from here), the same the revert question and `recover` show."""
    try:
        _, verdict = recovery.revert_check(run_id, state, a.etcd, kube=(a.kubeconfig, a.context))
    except BreakglassError as e:
        p.say(f"  could not check the backends yet ({e})")
        return
    nothing = "nothing this run's revert puts back refuses writes: no fail-closed webhook, no bound admission policy"
    for line in verdict.lines() or [nothing]:
        p.say("  " + line)


def _permanent_fix(targets: list[dict], objects: dict | None = None) -> str | None:
    """The matchConditions fix for each culprit: the same patch `audit` prints, as valid YAML, and where the
    configuration's owner keeps it (Kyverno's ConfigMap, Gatekeeper's Helm value, the release, the Git repository)
    when the object is known (``objects``: name -> the configuration as backed up or read): a direct patch of an
    owned configuration is undone by its owner."""
    if not targets:
        return None
    from breakglass.webhooks import audit  # noqa: PLC0415

    resources = {"validating": "validatingwebhookconfigurations", "mutating": "mutatingwebhookconfigurations"}
    policies = all(t.get("kind") in model.POLICY_KINDS for t in targets)
    lines = ["The lasting fix: keep the apiserver's own writes (and ServiceCIDR, IPAddress, Nodes, Leases) away from "
             f"the {'policy' if policies else 'webhook'} with matchConditions, set where its "
             f"{'owner' if policies else 'operator'} expects it (`breakglass audit` says where, for a policy "
             "Gatekeeper generated):" if policies else
             "The lasting fix: keep the apiserver's own writes (and ServiceCIDR, IPAddress, Nodes, Leases) away from "
             "the webhook with matchConditions, set where its operator expects it:"]
    for t in targets:
        kind = t.get("kind", "validating")
        if kind in model.POLICY_KINDS:
            # a policy's lasting fix is on the policy (its matchConditions), whichever object the way out removed
            resource = model.RESOURCE_OF[model.MAP if kind in (model.MAP, model.MAP_BINDING) else model.VAP]
            name = t.get("policy") or t["configuration"]
            fix = audit.fix_for(resource, name, None)
            lines.append(f"  {model.singular(resource)} {name}: strategic-merge patch")
            lines += ["    " + ln for ln in fix.patch_yaml.rstrip().splitlines()]
            lines.append(f"  $ {fix.command}")
            continue
        resource = resources.get(kind, "validatingwebhookconfigurations")
        cfg = None
        obj = (objects or {}).get(t["configuration"])
        if isinstance(obj, dict):
            try:
                cfg = model.from_json(obj, "backup")
            except BreakglassError:
                cfg = None
        fix = audit.fix_for(resource, t["configuration"], t.get("webhook"), cfg=cfg)
        if fix.lasting is not None:
            lines.append(f"  {model.singular(resource)} {t['configuration']}: not a patch, {fix.lasting.owner} would "
                         f"undo it")
            lines += render.lasting(fix.lasting, "  ")
            continue
        lines.append(f"  {model.singular(resource)} {t['configuration']}: strategic-merge patch")
        lines += ["    " + ln for ln in fix.patch_yaml.rstrip().splitlines()]
        lines.append(f"  $ {fix.command}")
        if fix.vendor_note:
            lines.append(f"  note: {fix.vendor_note}")
    lines.append("`breakglass audit` prints the same fix for every configuration it flags.")
    return "\n".join(lines)


def _configurations_of(run_id: str, state: str | None, access) -> dict:
    """The culprits' configuration objects, for the lasting fix's owner: the run's own backups (etcd, kubeapi),
    else as the kubeconfig's apiserver has them now (the flag ways back up no configuration)."""
    from breakglass.flows import rearm_check  # noqa: PLC0415
    from breakglass.ways import driver  # noqa: PLC0415

    try:
        run = recovery.journal.Run.open(run_id, state)
        out = {(o.get("metadata") or {}).get("name"): o for o in rearm_check.restored_configs(run, driver.replay(run))}
    except (BreakglassError, OSError):
        out = {}
    if out or not getattr(access, "kubeconfig", None):
        return out
    try:
        from breakglass.access import kubeapi  # noqa: PLC0415
        from breakglass.webhooks import sources  # noqa: PLC0415

        api = kubeapi.connect(access.kubeconfig, access.context, 10.0)
        return {c.name: c.raw for c in sources.load_api_with(api).configs if c.raw}
    except BreakglassError:
        return {}
