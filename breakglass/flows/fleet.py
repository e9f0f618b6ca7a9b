"""`breakglass audit` across a fleet: every (kubeconfig, context) pair is one cluster, audited on the very path
a single `breakglass audit --kubeconfig K --context C` takes (``access.kubeapi.connect``, then
``webhooks.sources.load_api_with``, then ``webhooks.audit.audit``), so a cluster's findings are the same
verdicts, word for word, in both.

Clusters are audited a few at a time (``parallel``), each under its own deadline: a cluster that does not
answer in time is reported as ``timeout`` and no longer waited for, so one unreachable or slow cluster
neither stops nor hides the others. The worker threads are daemons: one stuck on a dead connection is
abandoned, never joined (the kubeconfig's per-request timeout ends it in the background). A credential plugin
(an exec plugin) runs in its own process group and is killed at its cluster's deadline; any still running when
the last cluster is reported is killed then (``access.kubeapi.Plugins``), so none outlives the audit.

Each kubeconfig is parsed once (``access.kubeapi.Kubeconfig``), however many contexts it holds, and each
context's client settings are built from that one parse.
"""

from __future__ import annotations

import os
import queue
import shlex
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from breakglass.core.errors import BadInput, BreakglassError
from breakglass.core.outcome import Outcome

# why a cluster has no audit, as the report and the exit reason say it
AUDITED, UNREACHABLE, UNAUTHORIZED, TIMEOUT, INVALID, FAILED = (
    "audited", "unreachable", "unauthorized", "timeout", "invalid", "failed")


@dataclass
class Cluster:
    """One (kubeconfig, context) pair. ``kubeconfig`` is as the client takes it: a file, or KUBECONFIG's
    ':'-separated list (merged as kubectl merges it: the first file naming a context wins)."""

    name: str
    kubeconfig: str
    context: str
    # the kubeconfig as read when the clusters were listed (access.kubeapi.Kubeconfig): not parsed again per context
    loaded: object | None = field(default=None, repr=False, compare=False)


@dataclass
class ClusterAudit:
    name: str
    kubeconfig: str
    context: str
    status: str = AUDITED
    error: str | None = None
    server: str | None = None
    version: str | None = None  # the apiserver's gitVersion, from /version
    target_version: str | None = None
    seconds: float = 0.0
    report: object | None = None  # webhooks.audit.AuditReport, exactly as `breakglass audit -o json` gives it
    # what was audited, findings or not (a CI report lists each as a test): every webhook as Kind/name/webhook,
    # every admission policy as Kind/name
    audited: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class FleetReport:
    clusters: list[ClusterAudit]
    fail_on: str
    target_version: str | None  # the fixed target for all, or None: each cluster's minor plus one
    parallel: int
    timeout: float
    seconds: float = 0.0


# -- which clusters ---------------------------------------------------------------------------------

def kubeconfig_sources(kubeconfigs: list[str] | None, environ=os.environ) -> list[str]:
    """The kubeconfigs to read: each --kubeconfig on its own; without one, $KUBECONFIG (one merged view, as
    kubectl reads it), else ~/.kube/config."""
    if kubeconfigs:
        return [os.path.expanduser(k) for k in kubeconfigs]
    env = environ.get("KUBECONFIG") or ""
    if any(p for p in env.split(":")):
        return [env]
    return [os.path.expanduser("~/.kube/config")]


def _contexts(source: str) -> tuple[list[str], str | None, object]:
    """(context names, the current context, the parsed kubeconfig every one of its clusters is connected from)."""
    from breakglass.access import kubeapi  # noqa: PLC0415

    try:
        from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
    except ImportError:
        raise BadInput("the kubernetes Python client is not installed here") from None
    files = [p for p in source.split(":") if p]
    if not any(os.path.exists(os.path.expanduser(p)) for p in files):
        raise BadInput(f"kubeconfig {source}: no such file")
    try:
        loaded = kubeapi.Kubeconfig(source)
    except ConfigException as e:
        raise BadInput(f"kubeconfig {source}: {str(e).splitlines()[0]}") from None
    except Exception as e:  # noqa: BLE001 - broken YAML raises many types
        raise BadInput(f"kubeconfig {source}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    names = [n for n in loaded.contexts if n]
    current = loaded.current if loaded.current in names else None
    return names, current, loaded


def split_contexts(values: list[str] | None) -> list[str]:
    """--context a,b --context c -> [a, b, c], each once, in order."""
    out: list[str] = []
    for v in values or []:
        for name in v.split(","):
            name = name.strip()
            if not name:
                raise BadInput(f"--context {v!r}: an empty context name")
            if name not in out:
                out.append(name)
    return out


def clusters(kubeconfigs: list[str] | None, contexts: list[str] | None, all_contexts: bool,
             environ=os.environ) -> list[Cluster]:
    """Every cluster asked for. A context named with --context that no kubeconfig holds is bad input (a typo
    must not pass as a cluster that could not be reached); with neither --context nor --all-contexts, each
    kubeconfig's current context."""
    wanted = split_contexts(contexts)
    if wanted and all_contexts:
        raise BadInput("--context and --all-contexts exclude each other")
    sources = kubeconfig_sources(kubeconfigs, environ)
    pairs: list[tuple[str, str]] = []
    found: set[str] = set()
    loaded: dict[str, object] = {}
    for src in sources:
        names, current, loaded[src] = _contexts(src)
        if all_contexts:
            chosen = names
        elif wanted:
            chosen = [n for n in wanted if n in names]
        else:
            if not current:
                raise BadInput(f"kubeconfig {src}: no current context", hint="name one with --context, or "
                                                                             "--all-contexts")
            chosen = [current]
        found |= set(chosen)
        pairs += [(src, n) for n in chosen]
    missing = [n for n in wanted if n not in found]
    if missing:
        raise BadInput(f"context {', '.join(missing)} is in no kubeconfig read ({', '.join(sources)})")
    if not pairs:
        raise BadInput(f"no contexts in {', '.join(sources)}: nothing to audit")
    dup = {n for _, n in pairs if sum(1 for _, m in pairs if m == n) > 1}
    return [Cluster(f"{n} ({src})" if n in dup else n, src, n, loaded[src]) for src, n in pairs]


# -- one cluster -------------------------------------------------------------------------------------

def next_minor(git_version: str) -> str | None:
    """The upgrade a wave takes next: 1.32.4 -> 1.33 (what the audit's rules are read for)."""
    from breakglass.webhooks.audit import parse_version  # noqa: PLC0415

    try:
        parsed = parse_version(git_version)
    except BadInput:
        return None
    return f"{parsed[0]}.{parsed[1] + 1}" if parsed else None


def _reason(err: BreakglassError) -> str:
    text = str(err)
    if " 401 " in text or " 403 " in text or "Unauthorized" in text or "Forbidden" in text:
        return UNAUTHORIZED
    if "timed out" in text:
        return TIMEOUT
    if isinstance(err, BadInput):
        return INVALID
    return UNREACHABLE


def audit_cluster(cluster: Cluster, target_version: str | None, timeout: float, plugins=None) -> ClusterAudit:
    """One cluster, as `breakglass audit --kubeconfig K --context C --target-version T` audits it. ``plugins``: the
    fleet's credential plugins (``access.kubeapi.Plugins``); each is killed at this cluster's deadline."""
    from breakglass.access import kubeapi  # noqa: PLC0415 - pulls in the kubernetes client
    from breakglass.webhooks import audit as _audit  # noqa: PLC0415
    from breakglass.webhooks import sources  # noqa: PLC0415

    out = ClusterAudit(cluster.name, cluster.kubeconfig, cluster.context)
    start = time.monotonic()
    try:
        # no terminal for a plugin: many run at once, and none may wait past the cluster's deadline for a person
        api = kubeapi.connect(cluster.kubeconfig, cluster.context, timeout, loaded=cluster.loaded, plugins=plugins,
                              deadline=start + timeout, interactive=False)
        out.server = api.host
        out.version = sources.server_version(api)
        out.target_version = target_version or (next_minor(out.version) if out.version else None)
        if not target_version and not out.target_version:
            out.warnings.append("its version could not be read (/version): audited with the newest rules")
        inv = sources.load_api_with(api)
        out.report = _audit.audit(inv.configs, out.target_version, inv.namespaces,
                                  running=_audit.running_minor(out.version))
        out.audited = [f"{c.kind_name}/{c.name}/{w.name}" for c in inv.configs for w in c.webhooks] + \
                      [f"{c.kind_name}/{c.name}" for c in inv.configs if not c.webhooks]
        out.warnings += inv.warnings + [f"encrypted, not audited: {k}" for k in inv.opaque]
    except BreakglassError as e:
        out.status, out.error = _reason(e), str(e)
    except Exception as e:  # noqa: BLE001 - a bug on one cluster must not hide the others; it is said so
        out.status, out.error = FAILED, f"unexpected {type(e).__name__}: {e}".splitlines()[0][:300]
    out.seconds = round(time.monotonic() - start, 3)
    return out


# -- the fleet ---------------------------------------------------------------------------------------

def audit_fleet(targets: list[Cluster], target_version: str | None = None, timeout: float = 10.0,
                parallel: int = 16, fail_on: str = "high",
                progress: Callable[[int, int, str], None] | None = None,
                audit_one: Callable[[Cluster, str | None, float], ClusterAudit] | None = None) -> FleetReport:
    """Audit every cluster, at most ``parallel`` at once, each given ``timeout`` seconds for its whole audit.
    ``progress(done, total, name)`` is called from this thread as each cluster ends. The report keeps the
    clusters' order, whatever order they finish in. Credential plugins still running when it returns (those of
    clusters reported as timeouts) are killed before it does."""
    from breakglass.access.kubeapi import Plugins  # noqa: PLC0415 - plain Python: the client is imported on connect

    if parallel < 1:
        raise BadInput("--parallel must be at least 1")
    if target_version:
        from breakglass.webhooks.audit import parse_version  # noqa: PLC0415

        parse_version(target_version)  # a bad version is bad input before any connection
    plugins = Plugins()
    if audit_one is None:
        def audit_one(c: Cluster, tv: str | None, seconds: float) -> ClusterAudit:
            return audit_cluster(c, tv, seconds, plugins)
    try:
        return _audit_all(targets, target_version, timeout, parallel, fail_on, progress, audit_one)
    finally:
        plugins.close()


def _audit_all(targets, target_version, timeout, parallel, fail_on, progress, audit_one) -> FleetReport:
    begun = time.monotonic()
    results: dict[int, ClusterAudit] = {}
    done: queue.Queue = queue.Queue()
    waiting = deque(enumerate(targets))
    running: dict[int, float] = {}  # index -> when it started

    def work(i: int, c: Cluster) -> None:
        done.put((i, audit_one(c, target_version, timeout)))

    def finish(i: int, res: ClusterAudit) -> None:
        results[i] = res
        running.pop(i, None)
        if progress:
            progress(len(results), len(targets), res.name)

    while waiting or running:
        while waiting and len(running) < parallel:
            i, c = waiting.popleft()
            running[i] = time.monotonic()
            threading.Thread(target=work, args=(i, c), name=f"audit {c.name}", daemon=True).start()
        first_deadline = min(running.values()) + timeout
        try:
            i, res = done.get(timeout=max(0.0, first_deadline - time.monotonic()))
            if i in running:  # else it ended after its deadline: already reported as a timeout
                finish(i, res)
        except queue.Empty:
            now = time.monotonic()
            for i, t0 in list(running.items()):
                if now - t0 >= timeout:
                    c = targets[i]
                    finish(i, ClusterAudit(c.name, c.kubeconfig, c.context, TIMEOUT,
                                           f"no complete answer within {timeout:g} s (--timeout)",
                                           target_version=target_version, seconds=round(now - t0, 3)))
    return FleetReport([results[i] for i in range(len(targets))], fail_on, target_version, parallel, timeout,
                       round(time.monotonic() - begun, 3))


# -- verdicts ----------------------------------------------------------------------------------------

def needs_action(c: ClusterAudit, fail_on: str) -> bool:
    from breakglass.webhooks.audit import RANK  # noqa: PLC0415

    return bool(c.report is not None and c.report.worst and RANK[c.report.worst] >= RANK[fail_on])


def exit_code(rep: FleetReport) -> int:
    """3 when any cluster has a finding at --fail-on or worse; else 1 when auditing one hit a bug; else 5 when
    any cluster could not be audited; else 0 (every cluster audited, none needs action)."""
    from breakglass.core.errors import ExitCode  # noqa: PLC0415

    if any(needs_action(c, rep.fail_on) for c in rep.clusters):
        return int(ExitCode.FOUND)
    if any(c.status == FAILED for c in rep.clusters):
        return int(ExitCode.FAILURE)
    if any(c.status != AUDITED for c in rep.clusters):
        return int(ExitCode.UNREACHABLE)
    return int(ExitCode.OK)


def _in_context(command: str, c: ClusterAudit) -> str:
    """A fix's kubectl command, aimed at its cluster (the same patch; kubectl's own --kubeconfig/--context)."""
    if not command.startswith("kubectl "):
        return command
    where = f"--kubeconfig {shlex.quote(c.kubeconfig)} " if ":" not in c.kubeconfig else ""
    return f"kubectl {where}--context {shlex.quote(c.context)} {command[len('kubectl '):]}"


def outcome(rep: FleetReport, code: int) -> Outcome:
    audited = [c for c in rep.clusters if c.status == AUDITED]
    status = "found" if code == 3 else "nothing-found" if code == 0 else "not-audited" if code == 5 else "failed"
    out = Outcome(status, read=[f"{c.name}: {c.report.configurations} configuration(s), {c.report.webhooks} "
                                f"webhook(s)" for c in audited])
    for c in audited:
        out.next += [_in_context(f.fix.command, c) for f in c.report.findings
                     if f.fix and f.severity in ("critical", "high")]
    out.next += [f"{c.name}: {c.status}: {c.error}" for c in rep.clusters if c.status != AUDITED]
    return out


# -- the command -------------------------------------------------------------------------------------

FORMATS = ("text", "json", "junit", "sarif")


def command(kubeconfigs: list[str] | None, contexts: list[str] | None, all_contexts: bool,
            target_version: str | None, timeout: float | None, parallel: int, fail_on: str, output: str,
            verbose: bool = False) -> tuple[int, str]:
    """`breakglass audit` over many clusters: (exit code, the document to print on stdout)."""
    from breakglass import __version__  # noqa: PLC0415
    from breakglass.core.envelope import dumps, envelope  # noqa: PLC0415
    from breakglass.present import fleet_report  # noqa: PLC0415

    if output not in FORMATS:
        raise BadInput(f"unknown output {output!r} (use {', '.join(FORMATS)})")
    targets = clusters(kubeconfigs, contexts, all_contexts)
    bar = fleet_report.Progress(len(targets))
    try:
        rep = audit_fleet(targets, target_version, timeout or 10.0, parallel, fail_on, bar)
    finally:
        bar.close()
    code = exit_code(rep)
    if output == "json":
        warnings = [f"{c.name}: {w}" for c in rep.clusters for w in c.warnings]
        return code, dumps(envelope("FleetAuditReport", rep, code, warnings, outcome(rep, code)))
    if output == "junit":
        return code, fleet_report.junit(rep)
    if output == "sarif":
        return code, fleet_report.sarif(rep, __version__)
    return code, fleet_report.text(rep, verbose)
