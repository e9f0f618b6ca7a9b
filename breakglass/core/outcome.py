"""One outcome model for every command: what was read, what changed, what was verified, what was not, and
what to do next.

At 3 a.m. the engineer acts on the last lines printed and scripts act on the JSON, so both come from this one
object: the JSON envelope carries it as ``outcome`` for every command (errors too), and ``render.outcome`` prints
it as text for recover, revert, runs, the wizard and report.md. Builders read a result in its JSON shape
(``envelope.to_plain``), so a command's outcome cannot say something its ``result`` does not.
"""

from __future__ import annotations

import shlex

from dataclasses import dataclass, field
from typing import Any, Callable

from breakglass.core import runstates


@dataclass
class Outcome:
    status: str  # one word: the result's own status (applied, reverted, deadlocked, ...) or the error's kind
    read: list[str] = field(default_factory=list)  # what the command read: sources, targets, runs
    changed: list[str] = field(default_factory=list)  # what it changed outside breakglass's own state directory
    verified: list[str] = field(default_factory=list)  # what it confirmed after changing or writing it
    not_verified: list[str] = field(default_factory=list)  # made, or expected, but not confirmed: check these
    next: list[str] = field(default_factory=list)  # what to do next, commands first
    run: str | None = None  # the run directory's name, when the command has one

    def to_json(self) -> dict:
        return {"status": self.status, "run": self.run, "read": list(self.read), "changed": list(self.changed),
                "verified": list(self.verified), "notVerified": list(self.not_verified), "next": list(self.next)}


FIELDS = ("status", "run", "read", "changed", "verified", "notVerified", "next")


def of(kind: str, result: Any, exit_code: int = 0) -> Outcome:
    """The outcome of a command whose envelope has this kind and result."""
    from breakglass.core.envelope import to_plain  # noqa: PLC0415 - envelope imports this module

    plain = to_plain(result)
    build = _BUILDERS.get(kind)
    try:
        out = build(plain, exit_code) if build else None
    except (AttributeError, KeyError, TypeError, IndexError):  # a result of another shape: still an outcome
        out = None
    return out or Outcome("ok" if exit_code == 0 else f"exit-{exit_code}")


def of_error(kind: str, message: str, hint: str | None = None) -> Outcome:
    """A command stopped by an error it names. Nothing changed unless the error carries its own outcome (a run
    that failed after a step: ``error.outcome``, from ``of_run_state``)."""
    return Outcome(kind, changed=[], next=[hint] if hint else [])


# -- runs ------------------------------------------------------------------------------------------------

_CHANGED = ("applying", "applied", "verified", "unverified", "edited")


def edited_line(files) -> str:
    """What an "edited" step left: the change is in these files here, and no node has it yet."""
    return f"{' and '.join(files) or 'the file'} edited here, not applied to any node"


def _apply_edited(edited: list[dict], run: str) -> list[str]:
    """The next of an edited run: what applies each file, then what checks it, then the revert."""
    apply = [c for e in edited for c in e.get("apply") or []]
    check = [c for e in edited for c in e.get("check") or []]
    return list(dict.fromkeys(apply)) + list(dict.fromkeys(check)) + [
        f"breakglass revert {run}   (puts the file back here; if you applied it, apply it again the same way)"]


def of_run_state(st) -> Outcome:
    """A run as its journal tells it (``driver.RunState``): what report.md ends with, and a failed run's error."""
    undone = [s for s in st.steps if s.reverts and s.reverts[-1] not in ("reverting", "conflict")]
    touched = [s for s in st.steps if s.last in _CHANGED]
    left = [s for s in touched if s not in undone]
    out = Outcome(st.status, read=[f"journal of run {st.run}"], run=st.run)
    out.changed = [f"{s.step.summary}" + (" (started, may not have happened)" if s.last == "applying" else "")
                   for s in left]
    out.changed += [f"{s.step.summary}: revert {s.reverts[-1]}" for s in undone]
    out.verified = [s.step.summary for s in left if s.last == "verified"]
    out.not_verified = [s.step.summary for s in left if s.last in ("applied", "unverified", "applying")]
    edited = [s.edited or {} for s in left if s.last == "edited"]
    out.not_verified += [edited_line(e.get("files") or []) for e in edited]
    if getattr(st, "readiness", None) and left:
        ok, bad = readiness_lines(st.readiness)
        out.verified += ok
        out.not_verified += bad
    if st.status == "reverted":
        out.next = []
    elif left:
        out.next = [f"breakglass revert {st.run}" + (" --force" if st.status == "revert-conflict" else "")]
        if edited and st.status == runstates.EDITED:  # what applies the file, then the revert
            out.next = _apply_edited(edited, st.run)
    return out


def readiness_lines(entry: dict) -> tuple[list[str], list[str]]:
    """(verified, not verified) lines of a journaled /readyz wait (flows.readiness): a 401/403 is serving, not
    ready; no apiserver to ask is said, never taken for ready."""
    ok, bad = [], []
    for c in entry.get("checks") or []:
        url = str(c.get("url", "")).split("/readyz")[0]
        n = c.get("restarts") or 0
        seen = (f" after {n} restart{'s' if n != 1 else ''} of the apiserver seen while waiting (its port closed "
                f"and opened again)") if n else ""
        if c.get("ready") is True:
            ok.append(f"{url}: /readyz ready{seen}")
        elif c.get("ready") is None:
            bad.append(f"{url}: serving, but /readyz is not shown to these credentials (not verified ready)")
        else:
            failing = c.get("failing") or []
            bad.append(f"{url}: /readyz NOT READY" + (f" ({', '.join(failing)} failing)" if failing else
                                                       f" ({c.get('detail', '')})") + seen)
    if entry.get("stopped"):
        bad.append("stopped waiting for /readyz before it was ready")
    if entry.get("unchecked"):
        bad.append(f"apiserver readiness not checked: {entry['unchecked']}")
    if entry.get("still_armed") and not entry.get("ready"):
        bad.append("still failing closed, and may be what blocks it: " + "; ".join(entry["still_armed"]))
    return ok, bad


def _recover(r: dict, code: int) -> Outcome:
    steps = r.get("steps") or []
    out = Outcome(r["status"], run=r.get("run"))
    out.read = [f"{r.get('method')}: {len(steps)} step(s) planned"]
    if r.get("dry_run") or r["status"] == "planned":
        out.changed = []
        out.next = ([f"rerun without --dry-run to make {len(steps)} change(s)"] if r.get("dry_run") and steps
                    else [])
        return out
    out.changed = [s["summary"] for s in steps if s.get("status") in ("verified", "unverified", "applied", "edited")]
    # an edited file (it reads back as written, the step says) is not a change in effect: not verified
    out.verified = [f"{s['summary']}: {s.get('verify', '')}" for s in steps if s.get("status") == "verified"]
    out.not_verified = [f"{s['summary']}: {s.get('verify', '')}" for s in steps if s.get("status") == "unverified"]
    edited = [s for s in steps if s.get("status") == "edited"]
    out.not_verified += [edited_line(s.get("files") or []) for s in edited]
    if r.get("snapshot"):
        snap = r["snapshot"]
        out.verified.insert(0, f"etcd snapshot {snap['path']} ({snap['size']} bytes, sha256 {snap['sha256']})")
    ok, bad = readiness_lines(r.get("ready_check") or {"checks": r.get("readiness") or []})
    out.verified += ok
    out.not_verified += bad
    if r.get("error"):
        out.not_verified.append(r["error"])
    if out.changed and r.get("run"):
        backends = r.get("backends") or {}
        down = [b for b in backends.get("backends") or [] if b.get("ready") is not True and not b.get("policy")]
        # what to repair first, as the guard sees it; the dry run asks the backend again the same way
        out.next = [f"breakglass revert {r['run']} --dry-run   (asks the backend again as the apiserver would)"] \
            if down else []
        # an admission policy has no backend to wait for: what makes a revert safe is the policy's own fix
        policies = all("AdmissionPolicy" in str(s.get("summary", "")) for s in steps if s.get("status"))
        if policies and not down:
            out.next.append(f"breakglass revert {r['run']}   (once the policy skips the apiserver's own writes: "
                            f"`breakglass audit --verbose` gives the fix; the revert asks the apiserver first)")
        else:
            out.next.append(f"breakglass revert {r['run']}   (once the webhook's backend "
                            + ("answers: " + "; ".join(b.get("detail", "") for b in down) + ")" if down else
                               "is healthy again)"))
    if edited and r.get("run"):  # apply the file, check /readyz; then, once the backend is healthy, revert
        out.next = _apply_edited(edited, r["run"])
    return out


def _said(canary: dict) -> str:
    """The canary's lines as one: each was indented under the summary line, which a join left as `;   passed`."""
    return "; ".join(x.strip() for x in canary.get("lines") or [] if x.strip())


def _canary(out: Outcome, guard: dict, whose: str, heals: bool) -> None:
    """What the dry-run canary through the apiserver said of the re-armed webhooks. ``heals``: the heal model
    allows the webhook armed with its backend down, so a failed call is the policy holding, not a failure."""
    canary = guard.get("canary") or {}
    said = _said(canary)
    if canary.get("ok") is True:
        out.verified.append(f"canary through the apiserver{whose}: {said}")
    elif canary.get("ok") is False and heals:
        # expected: the apiserver calls it and, its backend down, refuses what it intercepts (the policy holds)
        out.verified.append(f"canary through the apiserver{whose}: the re-armed webhook is called and fails closed "
                            f"until its backend is back: {said}")
    elif canary.get("ok") is False:
        # the apiserver itself could not call a re-armed webhook: writes it intercepts fail now
        out.not_verified.append(f"canary through the apiserver{whose} FAILED: {said}")
        if guard.get("redo"):
            why = ("an admission policy refuses the apiserver's own writes" if "refused by" in said and
                   "AdmissionPolicy" in said else "the webhook cannot answer the apiserver")
            out.next = [f"{guard['redo']}   (takes the change back: {why})"] + out.next
    elif canary.get("skipped") and guard.get("state") != "ready":
        out.not_verified.append(f"no canary through the apiserver: {canary['skipped']}")


def _revert(r: dict, code: int) -> Outcome:
    outcomes = r.get("outcomes") or []
    out = Outcome(r["status"], run=r.get("run"), read=[f"journal of run {r.get('run')}"])
    if r["status"] == "nothing-to-do":
        out.next = []
        return out
    if r.get("dry_run"):
        out.next = [f"breakglass revert {r['run']} --yes"] if outcomes else []
        return out
    out.changed = [f"{o['step']}: {o['outcome']}" for o in outcomes if o["outcome"] == "restored"]
    out.verified = [f"{o['step']}: {o['outcome']}: {o.get('detail', '')}".rstrip(": ") for o in outcomes
                    if o["outcome"] != "conflict"]
    out.not_verified = [f"{o['step']}: changed since the run, left alone" for o in outcomes
                        if o["outcome"] == "conflict"]
    guard = r.get("guard") or {}
    if (guard.get("off_for") or {}).get("line") and out.changed:
        out.read.append(guard["off_for"]["line"])
    if guard.get("rearms") and out.changed:  # what the webhooks this revert put back in the path can do now
        seen = "; ".join(guard.get("lines") or [])
        policies = bool(guard.get("backends")) and all(b.get("policy") for b in guard.get("backends") or [])
        if policies and guard.get("state") == "ready":  # no backend: the apiserver's own dry runs said so
            out.verified.append(f"the admission policies put back let the apiserver's writes through: {seen}")
        elif guard.get("state") == "ready" and guard.get("nothing_armed") and not guard.get("backends"):
            out.verified.append(guard["nothing_armed"])  # no backend to call: none is said to be "ready"
        elif guard.get("state") == "ready":
            out.verified.append(f"re-armed webhooks' backends ready: {seen}")
        elif guard.get("state") == "can-heal":
            out.verified.append(f"re-armed with its backend down, as the heal model allows: {seen}")
        elif guard.get("state") == "down":
            out.not_verified.append(f"re-armed while its backend is not ready (overridden): {seen}")
        else:
            out.not_verified.append(f"re-armed webhooks' backends not checked: {seen}")
        if guard.get("state") != "ready":
            out.next = [b["check"] for b in guard.get("backends") or [] if b.get("ready") is not True and b.get("check")]
        _canary(out, guard, "", heals=guard.get("state") == "can-heal")
    elif guard.get("owner_armed"):  # nothing put back here: the owner re-armed them first (recovery.revert)
        _canary(out, guard, " (re-armed by their owner, not by this revert)", heals=False)
    elif guard.get("nothing_armed") and out.changed:
        out.verified.append(guard["nothing_armed"])
    if any(o["outcome"] == "conflict" for o in outcomes):
        out.next = [f"breakglass revert {r['run']} --force   (overwrites what changed)"] + out.next
    return out


def _runs(items: list, code: int) -> Outcome:
    out = Outcome("ok", read=[f"{len(items)} run(s)"])
    for r in items:
        if r.get("status") in ("applied", "applied-unverified", runstates.EDITED, "revert-conflict",
                               "revert-failed") or (
                r.get("status") in ("failed", "interrupted") and r.get("changed")):
            out.next.append(f"breakglass revert {r['run']}")
        if r.get("status") == "applied-unverified":
            out.not_verified.append(f"run {r['run']}: applied, not verified")
        if r.get("status") == runstates.EDITED:
            out.not_verified.append(f"run {r['run']}: edited here, not applied to any node")
        if r.get("status") in runstates.TRANSIENT:
            out.not_verified.append(f"run {r['run']}: {r.get('label') or r['status']}")
            if "(process gone)" in (r.get("label") or ""):  # revert finishes it, or closes it if nothing changed
                out.next.append(f"breakglass revert {r['run']}")
    return out


# -- the other commands ------------------------------------------------------------------------------------

def _diagnosis(d: dict, code: int) -> Outcome:
    s = d.get("stats") or {}
    v = d.get("verdict") or {}
    out = Outcome(v.get("state") or ("found" if code == 3 else "nothing-found"),
                  read=[f"{s.get('lines', 0)} line(s) from {', '.join(s.get('sources') or []) or 'no source'}"])
    if v.get("state") == "leaking":
        out.next = ["breakglass leaks --audit-log AUDIT_LOG   (which requests got in)"]
    elif v.get("needs_action"):
        out.next = ["breakglass wizard   (or breakglass recover, least invasive way out first: "
                    + ", ".join(r["method"] for r in d.get("remedies") or []) + ")"]
    return out


def _webhooks(li: dict, code: int) -> Outcome:
    return Outcome("ok", read=[f"{len(li.get('rows') or [])} webhook(s) and policies from "
                               + ", ".join(li.get("sources") or [])],
                   next=["breakglass audit   (the same source: which of these can deadlock the apiserver)"])


def _audit(a: dict, code: int) -> Outcome:
    findings = a.get("findings") or []
    out = Outcome("found" if code == 3 else "nothing-found",
                  read=[f"{a.get('configurations', 0)} configuration(s), {a.get('webhooks', 0)} webhook(s)"])
    out.next = [f["fix"]["command"] for f in findings if f.get("fix") and f["severity"] in ("critical", "high")]
    return out


def _leaks(r: dict, code: int) -> Outcome:
    n = len(r.get("leaks") or [])
    out = Outcome("found" if n else "nothing-found", read=list(r.get("sources") or []))
    if n:
        out.next = [f"re-check {len(r.get('recheck') or [])} object(s): breakglass leaks ... -o recheck"]
    elif r.get("outside_window"):
        out.next = [f"widen --since/--until: {r['outside_window']} request(s) fell outside the window"]
    return out


def _notice(n: dict, code: int) -> Outcome:
    return Outcome(n.get("status") or "ok", next=[n["hint"]] if n.get("hint") else [])


def _snapshot(s: dict, code: int) -> Outcome:
    return Outcome("saved", read=["etcd"], changed=[f"wrote {s['path']} ({s['size']} bytes)"],
                   verified=[f"sha256 {s['sha256']}, etcd's integrity trailer checked"])


def _backup(b: dict, code: int) -> Outcome:
    steps = b.get("steps") or []
    return Outcome("backed-up", run=b.get("run"), read=[s["target"] for s in steps],
                   verified=[f"{len(steps)} backup(s) in {b.get('path')} read back against their sha256"],
                   next=[f"breakglass etcd restore {b['run']}   (puts them back where absent)"])


def _patch_files(p: dict, code: int) -> Outcome:
    return Outcome("written", changed=[f"wrote {p['patch']}", f"wrote {p['revert']}"],
                   next=[f"apply {p['patch']} with your own tooling; {p['revert']} undoes it"])


def _sandbox(s: dict, code: int) -> Outcome:
    out = Outcome("running" if s.get("running") else "stopped", read=[s.get("dir") or ""])
    if s.get("removed"):
        out.changed = [("stopped and removed " if s.get("stopped") else "removed ") + s["dir"]]
    elif s.get("running") is False and "removed" not in s and not s.get("untrusted"):
        # etcd is down but some of the sandbox's processes live on (a crash, a kill -9): `up` would reuse
        # nothing and start beside them; `down` stops them first.
        left = [p.get("what") or p.get("name") for p in s.get("processes") or []]
        where = f" --dir {shlex.quote(s['dir'])}" if s.get("dir") else ""
        out.next = ([f"breakglass sandbox down{where}   (stops what is left: {', '.join(map(str, left))})"]
                    if left else []) + [f"breakglass sandbox up{where}"]
    return out


def _simple(status: str) -> Callable[[Any, int], Outcome]:
    return lambda _r, _code: Outcome(status)


_BUILDERS: dict[str, Callable[[Any, int], Outcome]] = {
    "Diagnosis": _diagnosis, "WebhookList": _webhooks, "AuditReport": _audit, "LeakReport": _leaks,
    "RecoverResult": _recover, "RevertResult": _revert, "RunList": _runs, "PatchFiles": _patch_files,
    "Notice": _notice, "EtcdSnapshot": _snapshot, "EtcdBackup": _backup, "Sandbox": _sandbox,
    "EtcdObjects": lambda r, c: Outcome("ok", read=[o["key"] for o in r]),
    "EtcdKeys": lambda r, c: Outcome("ok", read=[f"{len(r)} admission key(s) in etcd"]),
    "Version": _simple("ok"), "Completion": _simple("ok"),
}
