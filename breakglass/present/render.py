"""Result objects to human text. Plain strings, no terminal library: the CLI prints them.

Text fits the terminal (``layout.width``: $COLUMNS, the terminal, else 100 when piped): prose folds at word
boundaries, tables fold their cells or become one block per row; diffs, commands and code lines stay whole.
Every name, path and log line in them is untrusted: it goes through ``safetext.printable`` (escaped, on
one line) before it is measured or printed. The JSON output is not made here and keeps the real strings."""

from __future__ import annotations

from breakglass.core.runstates import EDITED
from breakglass.core.safetext import printable as _safe
from breakglass.diagnose.model import Diagnosis, Finding
from breakglass.present import layout

_MARK = {"critical": "CRITICAL", "error": "ERROR", "warning": "WARNING", "info": "info"}


def _wrap(text: str, indent: str, hang: str | None = None) -> list[str]:
    """Prose (escaped) folded at words to the terminal's width."""
    return layout.fold(text, layout.width(), indent, hang)


def _pair(key: str, value: str, indent: str, key_cells: int) -> list[str]:
    return layout.pair(key, value, layout.width(), indent, key_cells)


def _code(indent: str, text: str) -> list[str]:
    """A diff or code block: each line whole when it fits, else broken at a space or after a separator with a
    marked continuation (layout.fold_line), never inside a word. The JSON output keeps it exact."""
    return [x for line in text.rstrip().splitlines() for x in layout.fold_line(line, layout.width(), indent)]


def _command(indent: str, cmd: str, prompt: str = "$ ") -> list[str]:
    """A command to paste: broken only between its words, with `` \\`` so that it pastes as one."""
    return layout.fold_command(cmd, layout.width(), indent, prompt)


def _join(lines: list[str]) -> str:
    # every line was escaped where it was made; this keeps a line from ever becoming two if one was not
    return "\n".join(_safe(x) for x in lines)


def clip(text: str, n: int) -> str:
    """``text`` (escaped) cut to ``n`` columns at a word, with an ellipsis."""
    text = _safe(text)
    if layout.cells(text) <= n:
        return text
    cut = text[:n - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def _clip(text: str, n: int = 220) -> str:
    """A log line for the report: a multi-line record's breaks as ⏎, escaped, at most ``n`` characters."""
    text = _safe(text.replace("\n", " ⏎ "))
    return text if len(text) <= n else text[: n - 1] + "…"


def finding(f: Finding, verbose: bool = False) -> list[str]:
    out = _wrap(f"[{f.id}] {_MARK[f.severity]}  {f.family}: {f.title}", "", "    ")
    rows: list[tuple[str, str | None]] = [
        ("configuration", f"{f.configuration} ({f.configuration_source})" if f.configuration else None),
        ("service", f.service),
        ("url", f.url),
        ("cause", f"{f.cause} [{f.cause_class}]" if f.cause else None),
        ("blocks", ", ".join(f.blocked) if f.blocked else None),
        ("hooks", ", ".join(f.hooks) if f.hooks else None),
        ("seen", f"{f.count}x, {f.first_seen or '?'} → {f.last_seen or '?'}"),
    ]
    for k, v in rows:
        if v:
            out += _pair(k, v, "    ", 15)
    out += _wrap(f.explanation, "    ")
    out += _wrap("what to do: " + f.advice, "    ")
    if f.operator_note:
        out += _wrap("note: " + f.operator_note, "    ")
    out.append("    evidence:")
    for e in f.evidence:
        tag = "" if e.role == "failure" else " (context)"
        out += _wrap(f"{e.location}{tag}", "      ")
        # a log line folds at its spaces, under itself and indented further: it reads as one quoted line
        out += _wrap(_safe(e.text.replace("\n", " ⏎ ")) if verbose else _clip(e.text), "        ", "          ")
    return out


def diagnosis(d: Diagnosis, warnings: list[str], verbose: bool = False) -> str:
    v = d.verdict
    out = _wrap(v.headline, "") + [""]
    out += _wrap(v.explanation, "")
    if d.findings:
        out += ["", f"Findings ({len(d.findings)})"]
        for f in d.findings:
            out.append("")
            out += finding(f, verbose)
    if d.notices:
        out += ["", f"Notices ({len(d.notices)}): ordinary denials, policy at work"]
        for n in d.notices:
            out.append("")
            out += finding(n, verbose)
    if d.remedies:
        out += ["", "Ways out, least invasive first"]
        for r in d.remedies:
            out.append("")
            out += _wrap(f"  {r.order}. {r.method} (applies: {r.applicable})", "", "     ")
            out += _wrap(r.summary, "     ")
            out += _wrap("cost: " + r.tradeoff, "     ")
            for line in r.manual:  # commands to paste, and their comments
                out += _wrap(line, "       ", "         ") if line.startswith("#") else _command("       ", line)
    s = d.stats
    out += [""] + _wrap(f"read {len(s.sources)} source(s), {s.lines} lines, {s.bytes} bytes in {s.seconds}s "
                        f"({s.candidates} candidate lines, {s.matched} events; scanner: {s.engine})", "")
    out += _warnings(warnings)
    return _join(out)


def _warnings(warnings: list[str]) -> list[str]:
    return [line for w in warnings for line in _wrap(f"warning: {w}", "", "  ")]


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns when they fit the terminal, else folded cells or one block per row (``layout.table``)."""
    return layout.table(headers, rows, layout.width())


def listing(li, warnings: list[str]) -> str:
    rows = []
    for r in li.rows:
        rows.append([
            r.kind, r.configuration, r.webhook or "-", r.failure_policy or "-",
            f"{r.timeout_seconds}s" if r.timeout_seconds else "-",
            "; ".join(r.intercepts) or "-", r.backend,  # whole: the table folds them to fit
            ",".join(r.bootstrap) or "-",
        ])
    out = _table(["KIND", "NAME", "WEBHOOK", "POLICY", "TIMEOUT", "INTERCEPTS", "BACKEND", "BOOTSTRAP KINDS"], rows)
    if not rows:
        out = ["no admission configurations found"]
    out.append("")
    out += _wrap(f"from {', '.join(li.sources)}: {len(li.rows)} webhook(s) and policies", "", "  ")
    for key in li.opaque:
        out += _wrap(f"encrypted, not readable: {key}", "", "  ")
    out += _warnings(warnings)
    return _join(out)


_PATCH_BY_FILE = 400  # characters of a one-line patch command: about five lines of an 80-column terminal


def lasting(place, indent: str) -> list[str]:
    """Where an owned configuration's fix lasts: why, the YAML the owner keeps, and the one command (both whole)."""
    out = _wrap(f"lasting fix, where {place.owner} keeps it ({place.form}): {place.note}", indent, indent + "  ")
    out.append(f"{indent}keep (YAML):")
    out += layout.yaml_lines(place.snippet, layout.width(), indent + "  ")
    cmd = place.command
    if len(cmd) > _PATCH_BY_FILE and cmd.startswith("helm upgrade ") and " --set-json " in cmd:
        # the values above are what --set-json sets: a file of them is the same upgrade, a line long
        out.append(f"{indent}by (the YAML above saved as values.yaml):")
        out += _command(indent + "  ", cmd.split(" --set-json ", 1)[0] + " -f values.yaml")
    elif len(cmd) > _PATCH_BY_FILE and place.patch_file and " -p " in cmd:
        name = f"{place.form}.yaml"
        out.append(f"{indent}by (this patch, saved as {name}):")
        out += layout.yaml_lines(place.patch_file, layout.width(), indent + "  ")
        out.append(f"{indent}then:")
        out += _command(indent + "  ", cmd.split(" -p ", 1)[0] + f" --patch-file={name}")
    else:
        out.append(f"{indent}by:")
        out += _command(indent + "  ", cmd)
    if getattr(place, "alternative", ""):
        out += _wrap(f"or, {place.alternative_why}:", indent, indent + "  ")
        out += _command(indent + "  ", place.alternative)
    return out


def audit_report(rep, warnings: list[str], verbose: bool = False) -> str:
    out = []
    counts: dict[str, int] = {}
    for f in rep.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda x: -_SEV.index(x[0]))) or "no risks"
    target = f" for Kubernetes {rep.target_version}" if rep.target_version else ""
    out += _wrap(f"audit of {rep.configurations} configuration(s), {rep.webhooks} webhook(s){target}: {summary}",
                 "", "  ")
    fixed: dict[str, str] = {}  # a fix's command -> the finding it was shown under
    for f in rep.findings:
        if f.severity in ("info", "low") and not verbose:
            continue
        out.append("")
        out += _wrap(f"[{f.id}] {f.severity.upper()}  {f.rule}: {f.title}", "", "    ")
        out += _pair("configuration", f"{f.configuration}  ({f.source})", "    ", 15)
        out += _wrap(f.explanation, "    ")
        if f.fix and f.fix.command in fixed:
            # one webhook's findings share one fix (its conditions cover every risk found): shown once, a
            # hundred lines of YAML each time at 80 columns otherwise (-o json gives it with every finding)
            out += _wrap(f"fix: the same as [{fixed[f.fix.command]}]'s (one patch for this webhook's findings)",
                         "    ", "      ")
        elif f.fix:
            fixed[f.fix.command] = f.id
            # a one-line patch of many conditions is pages of a terminal: the YAML shown once, saved, is the patch
            # (the same at every width: -o json keeps the one-line command)
            by_file = f.fix.command.startswith("kubectl patch ") and " -p " in f.fix.command \
                and len(f.fix.command) > _PATCH_BY_FILE
            out.append("    fix: add these matchConditions (strategic merge patch"
                       + (", saved as fix.yaml):" if by_file else "):"))
            out += layout.yaml_lines(f.fix.patch_yaml, layout.width(), "      ")  # emitted once, at the width
            out.append("    then:" if by_file else "    or:")
            out += _command("      ", f.fix.command.split(" -p ", 1)[0] + " --patch-file=fix.yaml" if by_file
                            else f.fix.command)
            if f.fix.lasting:
                out += lasting(f.fix.lasting, "    ")
            elif f.fix.vendor_note:
                out += _wrap("caveat: " + f.fix.vendor_note, "    ")
    hidden = sum(1 for f in rep.findings if f.severity in ("info", "low"))
    if hidden and not verbose:
        out.append("")
        out += _wrap(f"({hidden} low/info finding(s) not shown; --verbose shows them)", "")
    out += _warnings(warnings)
    return _join(out)


_SEV = ["info", "low", "medium", "high", "critical"]


def plan(steps, method: str) -> str:
    out = _wrap(f"plan ({method}): {len(steps)} change(s)", "")
    for st in steps:
        out.append("")
        out += _wrap(f"  {st.id}. {st.summary}", "", "     ")
        out += _code("     ", st.diff)  # the exact diff (folded only where it cannot fit, marked)
    return _join(out)


_OUTCOME_ROWS = (("read", "read"), ("changed", "changed"), ("verified", "verified"),
                 ("not_verified", "not verified"), ("next", "next"))


def outcome(o, markdown: bool = False) -> list[str]:
    """The outcome block (``breakglass.core.outcome.Outcome``) as text lines: the same five parts the JSON carries.
    "changed" is always shown, "nothing" when nothing was; the other parts only when they have something."""
    out = [] if markdown else _wrap(f"outcome: {o.status}" + (f" (run {o.run})" if o.run else ""), "")
    cols = layout.width()
    for attr, title in _OUTCOME_ROWS:
        items = [_safe(x) for x in getattr(o, attr)]
        if not items and attr != "changed":
            continue
        if markdown:
            out.append(f"- {title}: " + ("; ".join(f"`{x}`" if attr == "next" else x for x in items) or "nothing"))
            continue
        items = items or ["nothing"]
        head = f"  {title + ':':<14}"
        for n, x in enumerate(items):
            lead = head if n == 0 else " " * len(head)
            # "next" holds commands to paste: whole; the rest is prose, folded under itself
            out += layout.fold_command(x, cols, " " * len(head), "", lead) if attr == "next" else \
                layout.fold(x, cols, lead, " " * len(head))
    return out


def run_result(r) -> str:
    out = _wrap(f"run {r.run}: {r.status}", "")
    if r.snapshot:
        out += _wrap(f"  etcd snapshot: {r.snapshot['path']} ({r.snapshot['size']} bytes, "
                     f"sha256 {r.snapshot['sha256']})", "", "    ")
    for st in r.steps:
        out += _wrap(f"  {st['id']}. {st['summary']}: {st['status']} ({st.get('verify', '')})", "", "     ")
    for s in r.readiness:
        state = "ready" if s.ready else ("serving" if s.ready is None else "NOT READY")
        out += _wrap(f"  {s.url}: {state}: {s.detail}", "", "    ")
        if s.failing_hooks:
            out += _wrap(f"    post-start hooks still failing: {', '.join(s.failing_hooks)}", "", "      ")
    if r.error:
        out += _warnings([r.error])
    out += _outcome_of("RecoverResult", r)
    if r.status == EDITED:  # the last line says it: only the file has the change
        out += _wrap("edited, not applied: the change is only in the file here, no node has it yet; apply it with "
                     "the commands above, then check /readyz (exit 8)", "")
    return _join(out)


def _outcome_of(kind: str, result) -> list[str]:
    from breakglass.core import outcome as _outcome  # noqa: PLC0415

    return outcome(_outcome.of(kind, result))


def revert_result(r, preview: bool = False) -> str:
    """A revert's outcome; ``preview``: the plan shown before a real revert, which is not a dry run."""
    head = "plan (nothing changed yet): " if preview else ("dry run, nothing changed: " if r.dry_run else "")
    out = _wrap(f"{head}revert of run {r.run}: {r.status}", "")
    for o in r.outcomes:
        out += _wrap(f"  {o.step}: {o.outcome}: {o.detail}", "", "    ")
        if o.diff:
            out += _code("      ", o.diff)
    if r.status == "closed":
        out.append("  nothing was changed by this run; it is closed")
    guard = getattr(r, "guard", None) or {}
    if preview and guard.get("rearms") and guard.get("state") != "ready":
        # said before the question: what the revert puts back in the path, and what is known of its backend
        out += _wrap("  this revert re-arms fail-closed webhooks; their backends: "
                     + "; ".join(guard.get("lines") or ["not known"]), "", "    ")
    if not preview:
        out += _outcome_of("RevertResult", r)
    return _join(out)


def runs(items) -> str:
    if not items:
        return "no runs"
    rows = [[r.run, r.kind, r.method or "-", r.label or r.status, str(len(r.steps))] for r in items]
    out = _table(["RUN", "KIND", "METHOD", "STATUS", "STEPS"], rows)
    return _join(out + [""] + _outcome_of("RunList", items))


def leak_report(rep, verbose: bool = False) -> str:
    from_audit = rep.basis == "audit-log"
    if not rep.leaks:
        if not from_audit:
            return _join(_wrap(f"no webhook call failed open ({len(rep.sources)} source(s) read)", ""))
        outside = getattr(rep, "outside_window", 0)
        return _join(_wrap(
            (f"no request in the window carried a failed-open annotation, but {outside} outside it did "
             f"(widen --since/--until)" if outside else "no request carried a failed-open annotation")
            + f" ({len(rep.sources)} source(s) read)"
            + (f"; {rep.lines_skipped} line(s) mentioning failed-open were not audit events"
               if rep.lines_skipped else ""), ""))
    if from_audit:
        out = _wrap(f"{len(rep.leaks)} request(s) admitted while a webhook failed open", "") + [""]
        tables = (("WEBHOOK", rep.by_webhook), ("RESOURCE", rep.by_resource), ("USER", rep.by_user))
    else:
        out = _wrap(f"{len(rep.leaks)} webhook call(s) failed open; {rep.traced} tied to a resource by a "
                    f"slow-call trace", "") + _wrap(f"note: {rep.caveat}", "", "  ") + [""]
        tables = (("WEBHOOK", rep.by_webhook), ("CAUSE", rep.by_cause)) + (
            (("RESOURCE", rep.by_resource),) if rep.traced else ())
    unit = "REQUESTS" if from_audit else "CALLS"
    for title, d in tables:
        out += _table([title, unit], [[k or "-", str(v)] for k, v in list(d.items())[:10]]) + [""]
    out.append("Failing-open windows:")
    for w in rep.windows:
        out += _wrap(f"  {w.start} .. {w.end}  {w.requests} {unit.lower()}  {', '.join(w.webhooks)}", "", "    ")
    out.append("")
    shown = rep.leaks if verbose else rep.leaks[:20]
    if from_audit:
        rows = [[x.time, x.user, x.verb, x.resource, x.namespace or "-", x.name or "-", ",".join(x.webhooks),
                 str(x.code if x.code is not None else "-")] for x in shown]
        out += _table(["TIME", "USER", "VERB", "RESOURCE", "NAMESPACE", "NAME", "WEBHOOK", "CODE"], rows)
    else:
        rows = [[x.time or "-", x.verb or "?", x.resource or "?", x.namespace or "-", x.name or "-",
                 ",".join(x.webhooks), x.cause, x.source] for x in shown]
        out += _table(["TIME", "VERB", "RESOURCE", "NAMESPACE", "NAME", "WEBHOOK", "CAUSE", "LOG"], rows)
    if len(shown) < len(rep.leaks):
        out += _wrap(f"... {len(rep.leaks) - len(shown)} more (-v for all, -o json or -o csv for scripts)", "")
    if not from_audit and not rep.traced:
        out += [""] + _wrap("No call was slow enough to leave a trace: the audit log is the only record of which "
                            "objects got in.", "")
        return _join(out)
    out += [""] + _wrap(f"Re-check {len(rep.recheck)} object(s) written then and not deleted since "
                        "(-o recheck for a YAML list):" if from_audit else
                        f"Re-check {len(rep.recheck)} object(s) the traces name (-o recheck for a YAML list):", "")
    out += [x for r in rep.recheck[:50] for x in _command("  ", r.kubectl, "")]  # commands to paste
    if len(rep.recheck) > 50:
        out.append(f"  ... {len(rep.recheck) - 50} more")
    if rep.unnamed_writes:
        out += _wrap(f"  {rep.unnamed_writes} admitted write(s) have no object name "
                     + ("at this audit level (generateName creates logged at Metadata level): see -o json"
                        if from_audit else "in the log (creates): find their audit-id in -o json"), "", "    ")
    if rep.rechecked:
        out += [""] + _rechecked(rep.rechecked)
    return _join(out)


def _rechecked(verdicts) -> list[str]:
    """What the webhooks say now of each object that got in (leaks --recheck)."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.outcome] = counts.get(v.outcome, 0) + 1
    out = _wrap(f"Asked again (a dry-run update of each as it is now, through the apiserver): "
                + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), "")
    rows = [[v.outcome.upper(), v.resource, v.namespace or "-", v.name, _clip(v.reason, 120)]
            for v in sorted(verdicts, key=lambda v: (v.outcome != "rejected", v.resource, v.namespace, v.name))]
    return out + _table(["NOW", "RESOURCE", "NAMESPACE", "NAME", "WHY"], rows)


def about(a) -> str:
    out = _wrap(f"breakglass {a.breakglass}", "") + _wrap(f"python     {a.python} ({a.platform})", "", " " * 11)
    if a.bundle:
        out += _wrap(f"bundle     offline bundle, native code for {a.bundle}", "", " " * 11)
    out.append("")
    rows = [[x.name, x.version or "not installed", {True: "yes", False: "NO", None: ""}[x.loads], x.used_for]
            for x in a.libraries]
    out += _table(["LIBRARY", "VERSION", "LOADS", "FOR"], rows) + [""]
    out += _table(["TOOL", "VERSION", "PATH"], [[t.name, t.version or "-", t.path or "not on PATH"] for t in a.tools])
    return _join(out)

