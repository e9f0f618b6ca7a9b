"""Run a remedy's steps with every transition journaled, and undo a run from its journal.

Transitions, each fsynced before the next action: planned → (per step) backing-up →
backed-up → applying → applied → verified (or unverified, or edited: a file here that no node has yet); then
run-finished. A crash between any two leaves a journal that says how far it got; revert then asks the target
itself whether the change happened (compare-before-write), so it neither misses nor repeats anything.

Apply and revert each hold the run's lock (``Run.locked``) from their first journal entry to their last, so a
revert started while a recover is still at work (or two reverts) is refused, naming the process that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from breakglass.core import runstates
from breakglass.core.errors import BreakglassError, PreconditionFailed
from breakglass.core.journal import Run
from breakglass.ways.base import CONFLICT, Edited, Remedy, RevertOutcome, Step, Unverified

Hook = Callable[[str, Step], None]  # (transition, step): lets tests act between transitions


@dataclass
class RunResult:
    run: str | None
    method: str
    dry_run: bool
    steps: list[dict]
    status: str  # planned (a dry run), or a run state: applied | applied-unverified | edited-not-applied (runstates)
    error: str | None = None
    snapshot: dict | None = None
    readiness: list = field(default_factory=list)  # /readyz after the change, when waited for
    ready_check: dict | None = None  # what was journaled of that wait (flows.readiness.to_json)
    backends: dict | None = None  # the revert guard's reading now (revert_guard.Verdict.to_json + its lines)


def apply(remedy: Remedy, steps: list[Step], run: Run, hook: Hook | None = None) -> RunResult:
    with run.locked("recovering"):
        return _apply(remedy, steps, run, hook)


def _apply(remedy: Remedy, steps: list[Step], run: Run, hook: Hook | None = None) -> RunResult:
    hook = hook or (lambda t, s: None)
    run.append("planned", method=remedy.method, target=remedy.describe_target(),
               steps=[s.to_json() for s in steps])
    done: list[dict] = []
    current: Step | None = None
    try:
        for step in steps:
            current = step
            run.append("backing-up", step=step.id)
            info = remedy.backup(step, run)
            run.append("backed-up", step=step.id, backup=info)
            hook("backed-up", step)
            run.append("applying", step=step.id)
            result = remedy.apply(step, info)
            run.append("applied", step=step.id, result=result or {})
            hook("applied", step)
            detail = remedy.verify(step)
            checked = "unverified" if isinstance(detail, Unverified) else "verified"
            # a file here holds the change and no node has it yet: "edited" (what applies it is journaled with it)
            edited = {"files": detail.files, "apply": detail.commands, "check": detail.checks} \
                if isinstance(detail, Edited) else {}
            checked = "edited" if edited else checked
            run.append(checked, step=step.id, detail=str(detail), **edited)
            done.append({**step.to_json(), "status": checked, "verify": str(detail), **edited})
        status = "applied-unverified" if any(d["status"] == "unverified" for d in done) else "applied"
        status = runstates.EDITED if any(d["status"] == "edited" for d in done) else status
        run.append("run-finished", status=status)
        return RunResult(run.id, remedy.method, False, done, status)
    except KeyboardInterrupt:
        run.append("interrupted", step=current.id if current else None)
        raise
    except BreakglassError as e:
        run.append("failed", step=current.id if current else None, error=str(e), kind=e.kind)
        raise
    except Exception as e:  # a bug: the run still ends failed, never left "applying"
        run.append("failed", step=current.id if current else None, error=f"{type(e).__name__}: {e}",
                   kind="failure")
        raise


@dataclass
class StepState:
    step: Step
    last: str
    backup: dict | None = None
    reverts: list[str] = field(default_factory=list)
    edited: dict | None = None  # an "edited" step (a file here, no node has it): its files and what applies it


@dataclass
class RunState:
    run: str
    kind: str
    method: str | None
    target: dict
    status: str
    started: str | None
    steps: list[StepState]
    pid: int | None = None  # of the process that last worked on the run (recover, then revert)
    host: str | None = None
    readiness: dict | None = None  # the last /readyz wait after the change (flows.readiness)

    @property
    def label(self) -> str:
        """The state as `runs` shows it: a transient one says whether its process is still there."""
        return runstates.label(self.status, self.pid, self.host)


def replay(run: Run) -> RunState:
    """What the journal says happened, step by step."""
    kind = method = None
    target: dict = {}
    started = None
    steps: dict[str, StepState] = {}
    status = "started"
    pid = host = None
    ready = None
    for e in run.events():
        ev = e.get("event")
        if "pid" in e:
            pid, host = e.get("pid"), e.get("host")
        if ev == "run-started":
            kind, started = e.get("kind"), e.get("ts")
            method = method or e.get("method")  # known before the plan: a run that stops earlier still says how
            status = "started"
        elif ev == "planned":
            method, target = e.get("method"), e.get("target") or {}
            for s in e.get("steps") or []:
                st = Step.from_json(s)
                steps[st.id] = StepState(st, "planned")
            status = "planned"
        elif ev in ("backing-up", "backed-up", "applying", "applied", "verified", "unverified", "edited") \
                and e.get("step") in steps:
            st = steps[e["step"]]
            st.last = ev
            if ev == "edited":
                st.edited = {k: list(e.get(k) or []) for k in ("files", "apply", "check")}
            if ev == "backed-up":
                st.backup = e.get("backup")
            elif ev == "applied" and e.get("result") and st.backup is not None:
                st.backup = {**st.backup, **e["result"]}  # what apply learned (e.g. the new resourceVersion)
            status = "applying"
        elif ev == "reverting" and e.get("step") in steps:
            steps[e["step"]].reverts.append("reverting")
            status = "reverting"
        elif ev == "reverted" and e.get("step") in steps:
            steps[e["step"]].reverts.append(e.get("outcome", "reverted"))
        elif ev == "revert-conflict" and e.get("step") in steps:
            steps[e["step"]].reverts.append(CONFLICT)
            status = "revert-conflict"
        elif ev == "run-finished":
            status = e.get("status", "applied")
        elif ev in ("interrupted", "failed", "revert-failed"):
            status = ev
        elif ev == "run-reverted":
            status = "reverted"
        elif ev == "revert-finished":  # a revert that ended with a conflict, whatever step came last
            status = e.get("status") or status
        elif ev == "run-closed":
            status = "closed"
        elif ev == "readiness":
            ready = e
    if ready is not None and status in ("applied", "applied-unverified"):
        # the apiservers' /readyz decides: made but not ready at the deadline is not verified, whatever the steps
        # said; ready afterwards (a later wait) is verified again unless a step itself was not
        step_unverified = any(s.last == "unverified" for s in steps.values())
        status = "applied" if ready.get("ready") is True and not step_unverified else "applied-unverified"
    return RunState(run.id, kind or "?", method, target, status, started, list(steps.values()), pid, host, ready)


@dataclass
class RevertResult:
    run: str
    dry_run: bool
    outcomes: list[RevertOutcome]
    status: str  # reverted | conflict | would-revert (dry run) | nothing-to-do | closed (a run left open, closed)
    # the revert guard's reading of the backends this revert re-arms (flows.revert_guard.Verdict.to_json, plus
    # whether it was overridden); None where no guard ran (nothing to revert)
    guard: dict | None = None


def revert(remedy: Remedy, run: Run, force: bool = False, dry_run: bool = False) -> RevertResult:
    """Undo a run. A dry run writes nothing and takes no lock; a real one holds the run's lock throughout, and the
    journal is read again under it (what a recover still at work adds is never missed)."""
    run.check_trusted()
    if dry_run:
        return _revert(remedy, run, force, dry_run)
    with run.locked("reverting"):
        return _revert(remedy, run, force, dry_run)


def _revert(remedy: Remedy, run: Run, force: bool, dry_run: bool) -> RevertResult:
    state = replay(run)
    todo = [s for s in reversed(state.steps) if s.backup is not None]
    outcomes: list[RevertOutcome] = []
    if not todo:
        return RevertResult(run.id, dry_run, [], "nothing-to-do")
    blocker = getattr(remedy, "revert_blocker", None)
    held = [why for st in todo for why in [blocker(st.step, st.backup, run) if blocker and not force else None]
            if why]
    if held:
        # a safety refusal, before anything is journaled: the run stays as it was, to be reverted later
        raise PreconditionFailed("not reverted yet: " + "; ".join(held),
                                 hint=f"run `breakglass revert {run.id}` again once it is ready (--force reverts "
                                      f"anyway and re-arms the webhook)")
    current = None
    try:
        for st in todo:
            if dry_run:
                outcomes.append(remedy.revert(st.step, st.backup, run, force=force, dry_run=True))
                continue
            current = st.step.id
            run.append("reverting", step=st.step.id, force=force, **runstates.owner())
            out = remedy.revert(st.step, st.backup, run, force=force)
            if out.outcome == CONFLICT:
                run.append("revert-conflict", step=st.step.id, detail=out.detail)
            else:
                run.append("reverted", step=st.step.id, outcome=out.outcome, detail=out.detail,
                           **({"uid": out.uid} if out.uid else {}))
            outcomes.append(out)
    except KeyboardInterrupt:
        if current is not None:
            run.append("interrupted", step=current)
        raise
    except Exception as e:  # unreachable mid-revert, or a bug: the run ends revert-failed, never "reverting"
        if current is not None:
            run.append("revert-failed", step=current, error=f"{e}" if isinstance(e, BreakglassError)
                       else f"{type(e).__name__}: {e}", kind=getattr(e, "kind", "failure"))
        raise
    conflicts = [o for o in outcomes if o.outcome == CONFLICT]
    if not dry_run and not conflicts:
        run.append("run-reverted")
    elif not dry_run:
        run.append("revert-finished", status="revert-conflict")
    status = "conflict" if conflicts else ("would-revert" if dry_run else "reverted")
    result = RevertResult(run.id, dry_run, outcomes, status)
    if conflicts and not dry_run:
        err = PreconditionFailed(
            f"{len(conflicts)} step(s) not reverted: the target changed since the run "
            f"({'; '.join(c.detail for c in conflicts)})",
            hint="that is often the desired end state (an operator recreated it); "
                 f"`breakglass revert {run.id} --force` overwrites it")
        err.result = result  # type: ignore[attr-defined]
        from breakglass.core import outcome  # noqa: PLC0415

        err.outcome = outcome.of("RevertResult", result)  # type: ignore[attr-defined]
        raise err
    return result
