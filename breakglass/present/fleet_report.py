"""A fleet audit (``flows.fleet.FleetReport``) as text, JUnit XML and SARIF 2.1.0, and its progress bar.

Text: a summary table, one row per cluster, then each cluster's findings exactly as `breakglass audit` prints
them (``render.audit_report``), so an engineer reads the same verdict in both. JUnit: one testsuite per
cluster, one testcase per webhook (and per policy), a failure per finding at --fail-on or worse, an error for
a cluster that could not be audited. SARIF: one run, one result per finding (ruleId = the audit rule), its
location naming cluster, configuration and webhook; a cluster not audited is a tool execution notification.
Rendering reads the report's attributes only (this layer sits below flows)."""

from __future__ import annotations

import re
import sys
import urllib.parse
import xml.etree.ElementTree as ET

from breakglass.core.envelope import escape_unsafe
from breakglass.core.safetext import printable as _safe
from breakglass.present import layout, render
from breakglass.webhooks.audit import RANK, SEVERITIES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "note", "info": "note"}


def _counts(c) -> dict[str, int]:
    out = {s: 0 for s in SEVERITIES}
    for f in c.report.findings if c.report is not None else []:
        out[f.severity] += 1
    return out


def _needs_action(c, fail_on: str) -> bool:
    return bool(c.report is not None and c.report.worst and RANK[c.report.worst] >= RANK[fail_on])


# -- text --------------------------------------------------------------------------------------------

def _result(c, fail_on: str) -> str:
    """A cluster's outcome in a few words: what needs action, or that nothing does, or why it was not audited."""
    if c.report is None:
        return f"{c.status}: {c.error or 'not audited'}"
    n = _counts(c)
    found = ", ".join(f"{n[s]} {s}" for s in reversed(SEVERITIES) if n[s]) or "no risks"
    return ("NEEDS ACTION: " if _needs_action(c, fail_on) else "ok: ") + found


def text(rep, verbose: bool = False) -> str:
    """One line per cluster (issue 37 §4); with --verbose each cluster's findings follow, as `audit` prints them."""
    audited = [c for c in rep.clusters if c.status == "audited"]
    act = sum(1 for c in audited if _needs_action(c, rep.fail_on))
    missed = len(rep.clusters) - len(audited)
    target = f"for Kubernetes {rep.target_version}" if rep.target_version else "each for its next minor version"
    out = render._wrap(f"fleet audit of {len(rep.clusters)} cluster(s), {target}, in {rep.seconds:g} s: "
                       f"{act} need action (--fail-on {rep.fail_on}), {len(audited) - act} without, "
                       f"{missed} not audited", "", "  ")
    out.append("")
    cols = layout.width()
    rows = [[c.name, f"{c.version or '-'} → {c.target_version or 'newest'}" if c.report is not None else
             (c.version or "-"), _result(c, rep.fail_on)] for c in rep.clusters]
    room = cols - 4 - max([7] + [layout.cells(_safe(r[0])) for r in rows]) - max(
        [7] + [layout.cells(_safe(r[1])) for r in rows])
    for r in rows:  # one line each: a long error is cut (-v and -o json carry it whole)
        r[2] = render.clip(r[2], max(room, 24))
    out += layout.table(["CLUSTER", "VERSION", "RESULT"], rows, cols)
    if not verbose:
        out += [""] + render._wrap("each cluster's findings and fixes: add -v, or `breakglass audit --context NAME`; "
                                   "-o json, junit or sarif for scripts", "")
        return "\n".join(_safe(x) for x in out)
    for c in rep.clusters:
        out.append("")
        out += render._wrap(f"== {c.name}" + (f"  ({c.server})" if c.server else "") + " ==", "")
        if c.report is None:
            out += render._wrap(f"breakglass: error: {c.name}: {c.status}: {c.error}", "")
            continue
        out += render.audit_report(c.report, c.warnings).splitlines()
    return "\n".join(_safe(x) for x in out)


# -- JUnit XML ---------------------------------------------------------------------------------------

# What XML 1.0 cannot hold at all (C0 controls but tab, LF and CR; lone surrogates; U+FFFE, U+FFFF): ElementTree
# writes them raw, and one context name holding ESC or NUL made the whole fleet's report ill-formed (a CI job
# parsing it fails on every cluster). They are written visibly instead, as `\u001b`, after what the JSON writer
# escapes too (bidi controls, invisible format characters: core.envelope.escape_unsafe), so a CI page shows the
# same text the JSON and SARIF reports carry escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", escape_unsafe(text))


def _xml_safe(root: ET.Element) -> None:
    for el in root.iter():
        for k, v in el.attrib.items():
            el.set(k, _xml_text(v))
        if el.text:
            el.text = _xml_text(el.text)
        if el.tail:
            el.tail = _xml_text(el.tail)

def _case_of(f) -> str:
    return f"{f.configuration}/{f.webhook}" if f.webhook else f.configuration


def junit(rep) -> str:
    root = ET.Element("testsuites", name="breakglass audit")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for c in rep.clusters:
        suite = ET.SubElement(root, "testsuite", name=c.name)
        props = ET.SubElement(suite, "properties")
        for k, v in (("kubeconfig", c.kubeconfig), ("context", c.context), ("server", c.server),
                     ("version", c.version), ("targetVersion", c.target_version), ("status", c.status)):
            if v:
                ET.SubElement(props, "property", name=k, value=str(v))
        tests = failures = errors = 0
        if c.report is None:
            case = ET.SubElement(suite, "testcase", classname=c.name, name="audit", time=f"{c.seconds:.3f}")
            err = ET.SubElement(case, "error", type=c.status, message=f"{c.status}: {c.error}")
            err.text = f"{c.name} could not be audited: {c.error}"
            tests, errors = 1, 1
        else:
            by_case: dict[str, list] = {}
            for f in c.report.findings:
                by_case.setdefault(_case_of(f), []).append(f)
            for name in list(dict.fromkeys(c.audited + list(by_case))):
                case = ET.SubElement(suite, "testcase", classname=f"{c.name}.{'/'.join(name.split('/')[:2])}",
                                     name=name, time="0")
                tests += 1
                bad = [f for f in by_case.get(name, []) if RANK[f.severity] >= RANK[rep.fail_on]]
                for f in bad:
                    fail = ET.SubElement(case, "failure", type=f.rule,
                                         message=f"{f.severity.upper()} {f.rule}: {f.title}")
                    fail.text = _finding_text(f)
                if bad:
                    failures += 1
                below = [f for f in by_case.get(name, []) if RANK[f.severity] < RANK[rep.fail_on]]
                if below:
                    ET.SubElement(case, "system-out").text = "\n\n".join(_finding_text(f) for f in below)
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", "0")
        suite.set("time", f"{c.seconds:.3f}")
        totals["tests"] += tests
        totals["failures"] += failures
        totals["errors"] += errors
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{rep.seconds:.3f}")
    _xml_safe(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _finding_text(f) -> str:
    """The finding as `breakglass audit` says it: title, explanation and the matchConditions fix."""
    lines = [f"[{f.severity.upper()}] {f.rule}: {f.title}", f"configuration: {f.configuration}  ({f.source})",
             f.explanation]
    if f.fix:
        lines += ["fix: add these matchConditions (strategic merge patch):", f.fix.patch_yaml.rstrip(), "or:",
                  f"$ {f.fix.command}"]
        if f.fix.vendor_note:
            lines.append("caveat: " + f.fix.vendor_note)
    return "\n".join(lines)


# -- SARIF 2.1.0 -------------------------------------------------------------------------------------

def _uri(*parts: str) -> str:
    return "kubernetes/" + "/".join(urllib.parse.quote(p, safe="") for p in parts if p)


def sarif(rep, tool_version: str) -> str:
    rules: dict[str, dict] = {}
    results = []
    notes = []
    for c in rep.clusters:
        if c.report is None:
            notes.append({"level": "error", "message": {"text": f"{c.name}: {c.status}: {c.error}"},
                          "descriptor": {"id": c.status},
                          "properties": {"cluster": c.name, "context": c.context, "kubeconfig": c.kubeconfig}})
            continue
        for f in c.report.findings:
            rules.setdefault(f.rule, {"id": f.rule, "name": f.rule, "shortDescription": {"text": f.title},
                                      "defaultConfiguration": {"level": SARIF_LEVEL[f.severity]}})
            kind, _, name = f.configuration.partition("/")
            logical = [{"name": c.name, "kind": "cluster", "fullyQualifiedName": c.name},
                       {"name": name, "kind": kind, "fullyQualifiedName": f"{c.name}/{f.configuration}"}]
            if f.webhook:
                logical.append({"name": f.webhook, "kind": "webhook",
                                "fullyQualifiedName": f"{c.name}/{f.configuration}/{f.webhook}"})
            result = {
                "ruleId": f.rule,
                "level": SARIF_LEVEL[f.severity],
                "message": {"text": f"{f.title}. {f.explanation}"},
                "locations": [{"physicalLocation": {"artifactLocation": {
                                   "uri": _uri(c.name, kind, name, f.webhook or "")}},
                               "logicalLocations": logical}],
                "partialFingerprints": {"breakglass/v1": "/".join([c.name, f.configuration, f.webhook or "",
                                                                   f.rule])},
                "properties": {"severity": f.severity, "cluster": c.name, "context": c.context,
                               "configuration": f.configuration, "webhook": f.webhook,
                               "targetVersion": c.target_version, "kinds": list(f.kinds)},
            }
            if f.fix:
                result["fixes"] = [{"description": {"text": f"add these matchConditions: $ {f.fix.command}"},
                                    "artifactChanges": [{
                                        "artifactLocation": {"uri": _uri(c.name, kind, name, f.webhook or "")},
                                        "replacements": [{"deletedRegion": {"startLine": 1, "startColumn": 1,
                                                                            "endColumn": 1},
                                                          "insertedContent": {"text": f.fix.patch_yaml}}]}]}]
            results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "breakglass", "version": tool_version,
                                "rules": list(rules.values())}},
            "invocations": [{"executionSuccessful": not notes, "toolExecutionNotifications": notes}],
            "results": results,
        }],
    }
    from breakglass.core.envelope import json_text  # noqa: PLC0415 - bidi controls and lone surrogates escaped

    return json_text(doc)


# -- progress ----------------------------------------------------------------------------------------

class Progress:
    """A bar on stderr while clusters are audited, only when stderr is a terminal (a pipe or a CI log gets none),
    erased when the audit ends."""

    def __init__(self, total: int, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.shown = bool(self.stream is not None and self.stream.isatty() and total > 0)
        if self.shown:
            self(0, total, "")

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.shown:
            return
        cols = max(20, layout.width(self.stream) - 1)
        head = f"auditing {done}/{total} cluster(s) "
        bar_w = max(10, min(30, cols - len(head) - 20))
        filled = bar_w * done // max(total, 1)
        line = f"{head}[{'#' * filled}{'.' * (bar_w - filled)}] {_safe(name)}"
        self.stream.write("\r" + line[:cols].ljust(cols))
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            cols = max(20, layout.width(self.stream) - 1)
            self.stream.write("\r" + " " * cols + "\r")
            self.stream.flush()
