"""Recover and revert as operations on run directories: what the CLI (and the wizard) drive.

``plan_*`` reads the target and returns the exact steps; ``execute`` backs up, applies
and verifies them inside a new run directory; ``revert_run`` undoes a run from its journal
alone; ``report`` writes the postmortem summary.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass, field

from breakglass.core import journal, outcome, runstates

from breakglass.present import render
from breakglass.flows import revert_guard
from breakglass.access.etcd import Etcd, EtcdSettings
from breakglass.core.errors import BadInput, BreakglassError, DiskFull, Interrupted, PreconditionFailed, is_disk_error
from breakglass.core.journal import Run
from breakglass.ways import driver
from breakglass.ways.base import ALREADY, RESTORED, Step
from breakglass.ways.etcd_delete import EtcdDelete
from breakglass.webhooks import sources


@dataclass
class EtcdTarget:
    settings: EtcdSettings
    prefix: str = sources.DEFAULT_ETCD_PREFIX

    def connect(self) -> Etcd:
        return Etcd(self.settings, tuple(sources.etcd_prefixes(self.prefix).values()))

    def backend(self, service: str):
        """Ready endpoints behind Service NAMESPACE/NAME, read from this etcd (the apiserver may be down)."""
        from breakglass.webhooks import backend  # noqa: PLC0415

        ns, name = service.split("/", 1)
        etcd = Etcd(self.settings, backend.etcd_prefixes(ns, self.prefix))
        try:
            return backend.from_etcd(etcd, ns, name, self.prefix)
        finally:
            etcd.close()


def plan_etcd(target: EtcdTarget, refs: list[str], kinds: list[str] | None = None,
              take_all: bool = False) -> tuple[EtcdDelete, list[Step]]:
    """``refs``: configurations (NAME, kind/NAME, etcd key) or webhooks (webhook:NAME, found in etcd)."""
    if not refs:
        raise BadInput("name at least one configuration with --webhook-config (or a webhook: -w webhook:NAME)")
    remedy = EtcdDelete(target.connect(), refs, kinds, target.prefix, take_all)
    return remedy, remedy.plan()


def execute(remedy, steps: list[Step], state: str | None, meta: dict, snapshot_path: str | None = None,
            progress=None, hook=None, retry: float = 0.0, on_retry=None) -> driver.RunResult:
    """Back up, apply and verify ``steps`` in a new run. ``retry``: seconds to wait out a restart gap at each step
    (flows.retry: reads on any unreachable target, writes only on a refused connection). ``meta["services"]``:
    the webhooks' Services the diagnosis named, journaled so a revert (even resumed elsewhere) checks them."""
    if snapshot_path and remedy.method != "etcd":
        raise BadInput("--snapshot goes with --method etcd")
    if retry > 0:
        from breakglass.flows.retry import Retrying  # noqa: PLC0415

        remedy = Retrying(remedy, retry, on_retry)
    run = Run.create(journal.state_dir(state), "recover", {"method": remedy.method, **meta})
    snap = None
    try:
        with run.locked("recovering"):  # from the snapshot on: a revert of this run waits for it to end
            if snapshot_path:
                snap = take_snapshot(remedy.etcd, run, snapshot_path, progress)
            result = driver.apply(remedy, steps, run, hook)
    except KeyboardInterrupt:
        _close(run, "interrupted", "interrupted", "interrupted")
        err = Interrupted(f"interrupted during run {run.id}; its journal says what was done",
                          hint=f"`breakglass revert {run.id}` undoes it" if _touched(run)
                          else f"nothing was changed; run {run.id} is closed as interrupted")
        err.outcome = outcome.of_run_state(driver.replay(run))  # type: ignore[attr-defined]
        raise err from None
    except BaseException as e:
        # every way out ends the run in a final state (driver.apply closes its own; a snapshot that could not
        # be taken, or a bug, is closed here), and the error says what was changed
        _close(run, "failed", str(e), getattr(e, "kind", "failure"))
        if isinstance(e, DiskFull) or is_disk_error(e):
            raise _disk_stop(run, e) from None
        if isinstance(e, BreakglassError):
            done = _touched(run)
            e.hint = (f"{e.hint}; " if e.hint else "") + (
                f"touched so far: {', '.join(done)}; `breakglass revert {run.id}` undoes it" if done
                else f"nothing was changed; run {run.id} is closed as failed")
            e.outcome = outcome.of_run_state(driver.replay(run))  # type: ignore[attr-defined]
        raise
    finally:
        report_error = _write_report(run)
    result.snapshot = snap
    if report_error:
        result.error = report_error  # the change is made and journaled: say so, with the way back
    return result


def record_readiness(run_id: str, state: str | None, entry: dict) -> None:
    """Journal a /readyz wait after the change (``flows.readiness.to_json``) and say it in report.md: the run is
    ``applied-unverified`` until an apiserver it names is seen ready."""
    run = Run.open(run_id, state, exact=True)
    try:
        run.append("readiness", **entry)
    except DiskFull as e:
        raise _disk_stop(run, e) from None
    _write_report(run)


def _disk_stop(run: Run, e: BaseException, reverting: bool = False) -> DiskFull:
    """One line for a disk that cannot take a write (full, over quota, read-only, failing) in the middle of a run:
    which run, what it has changed (its journal still reads, and every entry in it is whole), and the way back.
    Nothing more is changed after it: each step's backup was written before its change, so what is changed can
    be put back once there is space."""
    why = getattr(e, "reason", None) or (getattr(e, "strerror", None) or str(e)).lower()
    where = getattr(e, "where", None) or getattr(e, "filename", None)
    try:
        st = driver.replay(run)
        left = [s.step.target for s in (_still_changed(st) if reverting else st.steps)
                if reverting or s.last in CHANGED]
        at = next((s.step.target for s in st.steps if s.last in ("backing-up", "applying")), None)
    except (BreakglassError, OSError):
        st, left, at = None, [], None
    if isinstance(e, DiskFull):  # the run's own directory: its journal or a backup
        place = f"writing {where}" if where else "writing"
    else:  # a file a step edits (its temp file's name says less than the step's target)
        place = f"at {at}" if at else (f"writing {where}" if where else "writing")
    disk = os.path.dirname(where) if where and where != run.path else state_of(run)
    if not isinstance(e, DiskFull) and at and os.path.isabs(at):
        disk = os.path.dirname(at)  # the edited file's own disk
    host, _, on_node = (where or "").partition(":")
    if on_node.startswith("/") and not where.startswith("/"):  # a node's file (nodefile): HOST:PATH
        free = f"free space on {host}'s disk (`df -h {os.path.dirname(on_node)}` there)"
    else:
        free = f"free space on that disk (`df -h {disk}`)"
    head = f"{'revert of run' if reverting else 'run'} {run.id} stopped: {why} {place}"
    if left:
        err = DiskFull(f"{head}; nothing more was {'written' if reverting else 'changed'}; "
                       f"{'left to revert' if reverting else 'touched so far'}: {', '.join(left)}; {free}, then "
                       f"`breakglass revert {run.id}`{' again' if reverting else ''} puts it back")
    else:
        err = DiskFull(f"{head}; " + (f"nothing of it is left changed; {free}, then `breakglass revert {run.id}` "
                                      f"again closes it" if reverting else f"nothing was changed; {free}, then "
                                                                           f"run it again"))
    err.reason, err.where = why, where  # type: ignore[attr-defined]
    if st is not None:
        err.outcome = outcome.of_run_state(st)  # type: ignore[attr-defined]
    return err


def _touched(run: Run) -> list[str]:
    return [s.step.target for s in driver.replay(run).steps if s.last in CHANGED]


def _close(run: Run, event: str, error: str, kind: str) -> None:
    """End a run still in a transient state (started, planned, applying) as ``event``."""
    try:
        if driver.replay(run).status in runstates.TRANSIENT:
            run.append(event, step=None, error=error or event, kind=kind)
    except (OSError, BreakglassError):  # the journal itself is what failed: nothing more can be recorded
        pass


def _write_report(run: Run) -> str | None:
    """report.md, or why it could not be written (a full or read-only disk after the change must not hide the
    run id and the way to revert behind an error)."""
    try:
        run.write_file("report.md", report(run))
        return None
    except OSError as e:
        return (f"report.md could not be written ({(e.strerror or str(e)).lower()}); the journal in {run.path} "
                f"has the run, and `breakglass revert {run.id}` undoes it")


def take_snapshot(etcd: Etcd, run: Run, path: str, progress=None) -> dict:
    run.append("snapshot-started", path=os.path.abspath(path))
    info = etcd.save_snapshot(path, progress)
    run.append("snapshot-saved", **info)
    return info


def plan_talos(store, nodes: list[str], plugins: list[str], try_for: str | None = None):
    from breakglass.ways.talos_flags import TalosFlags  # noqa: PLC0415

    remedy = TalosFlags(store, nodes, plugins, try_for)
    return remedy, remedy.plan()


def plan_kubeadm(nodes: dict, manifest: str, plugins: list[str], verify_timeout: float, local: bool = False,
                 backup_dir: str | None = None):
    from breakglass.ways.kubeadm_flags import NODE_BACKUP_DIR, KubeadmFlags  # noqa: PLC0415

    remedy = KubeadmFlags(nodes, manifest, plugins, verify_timeout, local, backup_dir or NODE_BACKUP_DIR)
    return remedy, remedy.plan()


def plan_static(nodes: dict, names: list[str], dirs: list[str], kubeadm_manifest: str, local: bool = False,
                backup_dir: str | None = None):
    from breakglass.ways.static_webhooks import NODE_BACKUP_DIR, StaticWebhooks  # noqa: PLC0415

    remedy = StaticWebhooks(nodes, names, dirs, kubeadm_manifest, local, backup_dir or NODE_BACKUP_DIR)
    return remedy, remedy.plan()


def plan_k3s(distro: str, nodes: dict, config: str | None, dropin_dir: str | None, plugins: list[str],
             verify_timeout: float, local: bool = False, backup_dir: str | None = None):
    from breakglass.ways.k3s_flags import K3sFlags  # noqa: PLC0415

    remedy = K3sFlags(distro, nodes, config, dropin_dir, plugins, verify_timeout, restart=not local, local=local,
                      backup_dir=backup_dir)
    return remedy, remedy.plan()


def plan_kubeapi(kubeconfig: str | None, context: str | None, refs: list[str], kinds: list[str] | None,
                 action: str, webhooks: list[str], timeout: float = 10.0, take_all: bool = False):
    from breakglass.access import kubeapi  # noqa: PLC0415
    from breakglass.ways.kubeapi_patch import KubeapiPatch  # noqa: PLC0415
    from breakglass.ways.etcd_delete import kind_of  # noqa: PLC0415

    api = kubeapi.connect(kubeconfig, context, timeout)
    remedy = KubeapiPatch(api, refs, [kind_of(k) for k in kinds] if kinds else None, action, webhooks,
                          kubeconfig, context, take_all)
    return remedy, remedy.plan()


def talos_store(talos=None, files: bool = False):
    from breakglass.ways.talos_flags import FileStore, TalosctlStore  # noqa: PLC0415

    return FileStore() if files else TalosctlStore(talos)


def remedy_for(state: driver.RunState, etcd: EtcdTarget | None, talos=None, ssh=None, kube=None):
    if state.method == "kubeapi":
        from breakglass.access import kubeapi  # noqa: PLC0415
        from breakglass.ways.kubeapi_patch import KubeapiPatch  # noqa: PLC0415

        t = state.target
        kubeconfig, context = (kube or (None, None))
        kubeconfig, context = kubeconfig or t.get("kubeconfig"), context or t.get("context")
        return KubeapiPatch(kubeapi.connect(kubeconfig, context), action=t.get("action", "ignore"),
                            kubeconfig=kubeconfig, context=context)
    if state.method == "kubeadm":
        from breakglass.ways.kubeadm_flags import NODE_BACKUP_DIR, KubeadmFlags  # noqa: PLC0415

        t = state.target
        return KubeadmFlags(_run_nodes(t, ssh), t.get("manifest"), t.get("plugins") or [], 0, bool(t.get("local")),
                            t.get("backup_dir") or NODE_BACKUP_DIR)
    if state.method == "static-manifests":
        from breakglass.ways.static_webhooks import KUBEADM_MANIFEST, NODE_BACKUP_DIR, StaticWebhooks  # noqa: PLC0415

        t = state.target
        return StaticWebhooks(_run_nodes(t, ssh), list(t.get("webhooks") or []), list(t.get("dirs") or []),
                              t.get("manifest") or KUBEADM_MANIFEST, bool(t.get("local")),
                              t.get("backup_dir") or NODE_BACKUP_DIR)
    if state.method in ("k3s", "rke2"):
        from breakglass.ways.k3s_flags import K3sFlags  # noqa: PLC0415

        t = state.target
        nodes = _run_nodes(t, ssh)
        return K3sFlags(state.method, nodes, t.get("config"), t.get("dropin_dir"), t.get("plugins") or [], 0,
                        restart=bool(t.get("restart")), local=bool(t.get("local")), backup_dir=t.get("backup_dir"))
    if state.method == "talos":
        from breakglass.access.talos import Talos  # noqa: PLC0415
        from breakglass.ways.talos_flags import TalosFlags  # noqa: PLC0415

        t = state.target
        if t.get("store") == "file":
            return TalosFlags(talos_store(files=True))
        if talos is None:
            talos = Talos(talosconfig=t.get("talosconfig"), context=t.get("context"),
                          endpoints=list(t.get("endpoints") or []))
        return TalosFlags(talos_store(talos))
    if state.method == "etcd":
        # The keys are under the prefix the run used (k3s: /k3s), whatever reaches etcd now.
        prefix = state.target.get("etcd_prefix") or sources.DEFAULT_ETCD_PREFIX
        if not isinstance(prefix, str):
            raise BadInput(f"run {state.run}: its journal's etcd prefix is not a string")
        sources.etcd_prefixes(prefix)  # validates it
        if etcd is None:
            etcd = _run_etcd_target(state, ssh)
        else:
            etcd = EtcdTarget(etcd.settings, prefix)
        return EtcdDelete(etcd.connect(), prefix=prefix)
    raise BadInput(f"run {state.run}: method {state.method!r} cannot be reverted by this version")


# the ways whose revert re-arms exactly the webhooks in the run's own backups (objects or files); the flag ways turn
# every fail-closed webhook in the cluster back on
_REARMS_FROM_BACKUPS = ("etcd", "kubeapi", "static-manifests")


def _run_nodes(target: dict, ssh=None) -> dict:
    """The nodes a run edited: this machine, or its hosts over SSH with today's SSH options."""
    if target.get("local"):
        from breakglass.access.local import LocalNode  # noqa: PLC0415

        return {"localhost": LocalNode()}
    from breakglass.access.ssh import Node, SshOptions  # noqa: PLC0415

    return {h: Node(h, ssh or SshOptions()) for h in target.get("hosts") or []}


def _run_etcd_target(state: driver.RunState, ssh=None) -> EtcdTarget:
    """etcd as the run reached it (its endpoints, its user, its route through SSH), with today's SSH options."""
    prefix = state.target.get("etcd_prefix") or sources.DEFAULT_ETCD_PREFIX
    eps = ",".join(state.target.get("etcd_endpoints") or [])
    user = state.target.get("etcd_user")  # the run's user; its password is asked for again
    user = os.environ.get("ETCDCTL_USER") or (user if isinstance(user, str) else None)
    if state.target.get("etcd_via_ssh"):
        from breakglass.access import etcd_ssh  # noqa: PLC0415

        return EtcdTarget(etcd_ssh.reopen(state.target, ssh, user), prefix)
    return EtcdTarget(EtcdSettings.resolve(eps or None, user=user), prefix)


def latest_unreverted(state: str | None) -> Run:
    _check_state_dir(state)  # a file is bad input, not "nothing left to revert"
    for run in reversed(journal.list_runs(state)):
        st = _replay_or_none(run)
        if st is None:  # `runs` lists it as unreadable; `revert RUN` says why
            continue
        if st.status not in ("reverted",) and any(s.backup for s in st.steps):
            return run
        if st.status in runstates.TRANSIENT and st.label.endswith("(process gone)"):
            # killed before its first backup was whole (it may have left that backup's temp file, a copy of the
            # original and its secrets): nothing to undo, but revert closes it and removes that file
            return run
    from breakglass.core.errors import AlreadyDone  # noqa: PLC0415

    for run in journal.list_runs(state):  # a revert killed while writing its report left that file's temp copy
        run.tidy_temps()
    raise AlreadyDone(f"nothing left to revert in {journal.state_dir(state)}: every run is reverted or changed "
                      f"nothing", hint="`breakglass runs` lists them; name one to revert it again")


def revert_check(ref: str | None, state: str | None, etcd: EtcdTarget | None = None, ssh=None,
                 kube=None) -> tuple[str, revert_guard.Verdict]:
    """(the run's id, whether the webhooks its revert re-arms can answer): what a front end states before it asks."""
    run = Run.open(ref, state) if ref else latest_unreverted(state)
    st = driver.replay(run)
    return run.id, _guard_reading(run, st, etcd, ssh, kube, None, state).verdict


@dataclass
class GuardReading:
    verdict: revert_guard.Verdict
    api: object | None = None  # the apiserver the cluster was read through (the canary goes through it too)
    source: str = ""  # how it was found (flows.api_finder)
    cluster: list | None = None  # the flag ways: every configuration of the cluster, as read


def _guard_reading(run: Run, st: driver.RunState, etcd: EtcdTarget | None, ssh, kube, remedy,
                   state: str | None = None) -> GuardReading:
    """The backends of every webhook the revert re-arms, read through what this revert can reach: the etcd given
    or the run's own (etcd runs), and an apiserver: the run's own (kubeapi runs), else the first that answers of
    the flags, the node's admin kubeconfig, the sandbox's, $KUBECONFIG, ~/.kube/config (flows.api_finder). Nothing
    to read the cluster through is a blind re-arm: the verdict says so, and the revert refuses it."""
    from breakglass.flows import api_finder  # noqa: PLC0415

    prefix = st.target.get("etcd_prefix") or sources.DEFAULT_ETCD_PREFIX
    reader_etcd = etcd
    if reader_etcd is not None and st.method == "etcd":  # the keys are under the run's own prefix (k3s: /k3s)
        reader_etcd = EtcdTarget(reader_etcd.settings, prefix)
    if reader_etcd is None and st.method == "etcd":
        own = getattr(remedy, "etcd", None)
        if own is not None:
            reader_etcd = EtcdTarget(own.settings, prefix)
        else:
            try:
                reader_etcd = _run_etcd_target(st, ssh)
            except BreakglassError:
                reader_etcd = None
    api = getattr(remedy, "api", None) if st.method == "kubeapi" else None
    found = api_finder.Found(api, "the run's kubeconfig" if api is not None else "")
    if api is None:
        found = api_finder.find(api_finder.candidates(st.method, st.target, kube, state,
                                                      getattr(remedy, "nodes", None)))
    api = found.api
    # what the revert re-arms, as the run's own backups (etcd, kubeapi) or the cluster (the admission-plugin flag
    # turns every fail-closed webhook back on) say; the Services the diagnosis named only where neither can
    cluster = None
    unread: list = []  # backed-up steps whose object could not be read (etcd, kubeapi)
    if st.method in _REARMS_FROM_BACKUPS:
        hooks = revert_guard.hooks_from_backups(run, st, unread)
        read = True
    else:
        cluster, read = _cluster(api, reader_etcd)
        hooks = revert_guard.hooks_from_cluster_configs(cluster) if cluster is not None else []
    journaled = revert_guard.hooks_journaled(run)
    verdict = revert_guard.check(hooks or journaled, reader_etcd, api)
    # admission policies have no backend: the apiserver itself is asked whether what comes back refuses its writes
    policies = revert_guard.policies_from_backups(run, st) if st.method in _REARMS_FROM_BACKUPS else []
    trials = revert_guard.try_policies(policies, api)
    verdict.backends += trials
    if trials and not hooks:
        verdict.unchecked = ""
    verdict.read_through = found.source or ("etcd" if reader_etcd is not None else "")
    if not read:
        verdict.blind = True
        verdict.unchecked = ("nothing to read the cluster's webhooks through: " + found.describe_miss()
                             + "; give --kubeconfig (or --etcd-endpoints)")
    elif st.method not in _REARMS_FROM_BACKUPS and not hooks:
        verdict.nothing_armed = f"no fail-closed webhook in the cluster (read through {verdict.read_through})"
        verdict.unchecked = ""
    elif not hooks and not journaled and not unread and not trials:
        # every object this revert puts back was read from the run's backups, and none is a fail-closed webhook
        # (an admission policy binding, a configuration whose webhooks are all failurePolicy: Ignore): it re-arms
        # nothing a backend must answer for
        verdict.nothing_armed = ("nothing this revert puts back refuses writes on its own: no fail-closed webhook, no "
                                 "bound admission policy (read from the run's backups)")
        verdict.unchecked = ""
    if verdict.down and api is not None and not all(b.policy for b in verdict.down):
        verdict.heal = _heal_case(verdict, hooks, api)
    return GuardReading(verdict, api, found.source, cluster)


def _heal_case(verdict: revert_guard.Verdict, hooks: list, api) -> dict:
    """The heal model's case for re-arming the webhooks whose backends are down (webhooks.heal_safety), through
    the apiserver the cluster was read through: safe when nothing they intercept is on the cluster's way back."""
    from breakglass.webhooks import heal_safety  # noqa: PLC0415

    if any(not b.webhooks for b in verdict.down):  # a Service the diagnosis named: its webhook's rules are unknown
        return heal_safety.Case(False, blockers=["a backend the diagnosis named: its webhook's rules are not known "
                                                 "to this run"]).to_json()
    down = {w for b in verdict.down for w in b.webhooks}
    models = {h.webhook: h.source for h in hooks if h.webhook in down and h.source is not None}
    if set(models) != down:
        return heal_safety.Case(False, blockers=[f"{', '.join(sorted(down - set(models)))}: its configuration is "
                                                 f"not known to this run"]).to_json()
    return heal_safety.assess(list(models.values()), heal_safety.read_facts(api)).to_json()


def _cluster(api, etcd: EtcdTarget | None) -> tuple[list | None, bool]:
    """(the cluster's admission configurations, whether they could be read) through the API, else etcd."""
    for read in ((lambda: sources.load_api_with(api)) if api is not None else None,
                 (lambda: _etcd_inventory(etcd)) if etcd is not None else None):
        if read is None:
            continue
        try:
            return list(read().configs), True
        except BreakglassError:
            continue
    return None, False


def _etcd_inventory(etcd: EtcdTarget):
    conn = etcd.connect()
    try:
        return sources.load_etcd(conn, etcd.prefix)
    finally:
        conn.close()


def revert_run(ref: str | None, state: str | None, etcd: EtcdTarget | None, force: bool = False,
               dry_run: bool = False, talos=None, ssh=None, kube=None,
               override_backend: bool = False, force_guard: bool = True) -> driver.RevertResult:
    """Undo a run. Refused (PreconditionFailed, before anything is journaled or written) while a webhook the revert
    re-arms has a backend that cannot answer, or whose cluster cannot be read, unless ``override_backend`` (the
    wizard's typed word, `--re-arm`) or ``force`` (when ``force_guard``: `revert --force`; `etcd restore --force`
    only overwrites keys).
    The run is locked for the whole revert (another process applying or reverting it is refused)."""
    run = Run.open(ref, state) if ref else latest_unreverted(state)
    if dry_run:  # a dry run writes nothing and takes no lock
        return _revert_locked(run, etcd, force, True, talos, ssh, kube, override_backend or (force and force_guard))
    try:
        with run.locked("reverting"):
            run.tidy_backups()  # a backup write killed midway left its temp file: no writer holds it now
            return _revert_locked(run, etcd, force, False, talos, ssh, kube,
                                  override_backend or (force and force_guard))
    except Exception as e:
        if isinstance(e, DiskFull) or is_disk_error(e):
            # each step is compared before it is written, so a revert stopped here is simply run again
            raise _disk_stop(run, e, reverting=True) from None
        raise


def _revert_locked(run: Run, etcd, force, dry_run, talos, ssh, kube, override_backend) -> driver.RevertResult:
    st = driver.replay(run)
    if not any(s.backup for s in st.steps):  # stopped before anything was backed up, so before any change
        if st.status in runstates.TRANSIENT and not dry_run:
            if st.label.endswith("(running, pid " + str(st.pid) + ")"):
                raise PreconditionFailed(f"run {run.id} is still {st.status} in process {st.pid}",
                                         hint="let it finish (or stop it), then `breakglass runs` shows its state")
            run.append("run-closed", reason=f"nothing was changed; the run was left {st.label}")
            _write_report(run)
            return driver.RevertResult(run.id, dry_run, [], "closed")
        return driver.RevertResult(run.id, dry_run, [], "nothing-to-do")
    remedy = remedy_for(st, etcd, talos, ssh, kube)
    if hasattr(remedy, "guarded"):
        remedy.guarded = True  # the guard below decides whether re-arming is safe
    # the remedy's own checks of the journal and backups first (a tampered run is refused before the guard reads a
    # backup's webhooks, let alone connects to a URL one names)
    preview = driver.revert(remedy, run, force=force, dry_run=True)
    reading = _guard_reading(run, st, etcd, ssh, kube, remedy, state_of(run))
    verdict = reading.verdict
    overridden = override_backend
    # only a step the revert would actually put back re-arms anything: a target recreated since (a conflict,
    # left alone without --force) or already restored does not
    rearms = any(o.outcome == RESTORED for o in preview.outcomes)
    if not dry_run:
        run.append("guard-checked", **verdict.to_json(), overridden=overridden and verdict.state != "ready")
    if (verdict.state == "down" or verdict.blind) and rearms and not overridden:
        blind = verdict.state != "down"
        err = PreconditionFailed(f"run {run.id} not reverted yet: " + (
            f"re-enabling the webhook plugins would re-arm the cluster's fail-closed webhooks unseen: "
            f"{verdict.unchecked}" if blind else verdict.refusal()),
            hint=(f"check each backend ({'; '.join(revert_guard.CLUSTER_CHECKS)}), then `breakglass revert "
                  f"{run.id} --kubeconfig FILE`, or --re-arm to re-arm unseen" if blind else
                  f"fix the policy first: `breakglass audit --verbose` gives the matchConditions that skip the "
                  f"apiserver's own writes, in its owner's form; then `breakglass revert {run.id}` again (--re-arm reverts anyway)"
                  if all(b.policy for b in verdict.down) else
                  f"start the webhook's backend, then `breakglass revert {run.id}` again (--re-arm reverts anyway "
                  f"and re-arms it while it cannot answer)"))
        err.guard = verdict  # type: ignore[attr-defined]
        raise err
    guard = {**verdict.to_json(), "rearms": rearms, "overridden": overridden and verdict.state != "ready",
             "lines": verdict.lines()}
    if dry_run:
        preview.guard = guard
        return preview
    try:
        result = driver.revert(remedy, run, force=force, dry_run=False)
        restored = rearms and any(o.outcome == RESTORED for o in result.outcomes)
        # nothing put back here, the owner (Kyverno, Helm, a GitOps loop) re-armed the webhooks first: they are in
        # the apiserver's path all the same, so it is asked whether it can call them, as it would
        owner_armed = not restored and remedy.method in ("etcd", "kubeapi") and bool(result.outcomes) and all(
            o.outcome == ALREADY for o in result.outcomes)
        if reading.api is not None and (restored or owner_armed):
            from breakglass.flows import rearm_check  # noqa: PLC0415

            # the apiserver's own call: a dry-run write each re-armed webhook matches, through it
            if owner_armed:
                guard["canary"] = rearm_check.canary(reading.api, run, st, any_uid=True)
                guard["owner_armed"] = True
            else:
                answered = frozenset(w for b in verdict.backends if b.ready for w in b.webhooks)
                guard["canary"] = rearm_check.canary(reading.api, run, st, _fresh_cluster(reading, answered),
                                                     answered)
                guard["redo"] = rearm_check.redo_command(st)
            # admission policies back in force: a flag revert turned their plugin on, or their owner (Gatekeeper)
            # re-created what the run deleted; the live policies meet the apiserver's own writes
            if (restored and remedy.method not in ("etcd", "kubeapi") and _policy_plugins(st)) or (
                    owner_armed and revert_guard.policies_from_backups(run, st)):
                _policy_canary(guard, reading.api, st)
            run.append("canary", ok=guard["canary"]["ok"], skipped=guard["canary"].get("skipped", ""),
                       lines=guard["canary"]["lines"], **({"owner_armed": True} if owner_armed else {}))
        off = out_of_path(run, st)
        if off:
            guard["off_for"] = off
        result.guard = guard
        return result
    finally:
        _write_report(run)  # a full disk says so in the revert's own error, never instead of it


def _policy_plugins(st) -> list[str]:
    """The admission-policy plugins a flag run switched off (its revert turns them back on)."""
    return [p for p in st.target.get("plugins") or [] if str(p).endswith("AdmissionPolicy")]


def _policy_canary(guard: dict, api, st) -> None:
    """After a flag revert turned the policy plugins back on: the apiserver's own start-up writes, as dry runs, met
    by the live policies. A refusal fails the canary (exit 8, with the command that takes the revert back): the
    next start that must make those writes would be locked again."""
    from breakglass.flows import rearm_check  # noqa: PLC0415
    from breakglass.webhooks import policy_trial  # noqa: PLC0415

    rearm_check.wait_reachable(api)
    refused, lines = policy_trial.live(api)
    c = guard["canary"]
    c["lines"] = [*c.get("lines", []), *(f"admission policies: {ln}" for ln in lines)]
    if refused:
        c["ok"], c["skipped"] = False, ""
    elif refused is False and c.get("ok") is None:
        c["ok"], c["skipped"] = True, ""
    guard.setdefault("redo", rearm_check.redo_command(st))


def _fresh_cluster(reading: GuardReading, answered: frozenset = frozenset()):
    """The flag ways re-armed the whole cluster: its configurations as read again after the revert (None for the
    etcd and kubeapi ways, whose canary is the restored objects). An owner restarting with the apiserver may
    re-register its webhooks a moment later (the real Kyverno's configuration is empty until its policy cache is
    back), so the read is repeated, up to rearm_check.SETTLE_AFTER_RESTART, until every fail-closed webhook the
    guard saw answering (``answered``) is there again."""
    from breakglass.flows import rearm_check  # noqa: PLC0415

    if reading.cluster is None:
        return None
    rearm_check.wait_reachable(reading.api)  # the kubelet restarts kube-apiserver with the plugins back on
    deadline = time.monotonic() + rearm_check.SETTLE_AFTER_RESTART
    while True:
        configs, ok = _cluster(reading.api, None)
        armed = [c for c in configs if any(w.failure_policy == "Fail" for w in c.webhooks)] if ok else []
        seen = {w.name for c in armed for w in c.webhooks if w.failure_policy == "Fail"}
        if answered <= seen or time.monotonic() > deadline:
            return armed
        time.sleep(rearm_check.SETTLE_STEP)


def state_of(run: Run) -> str:
    """The state directory a run lives in (runs/<id> under it)."""
    return os.path.dirname(os.path.dirname(run.path))


@dataclass
class RunSummary:
    run: str
    path: str
    kind: str
    method: str | None
    status: str  # one of runstates.RUN_STATES, or "unreadable: why"
    started: str | None
    steps: list[str] = field(default_factory=list)
    label: str = ""  # the status as `runs` shows it: "started (process gone)" for a run whose process died
    changed: int = 0  # steps that changed something and are not undone


# What a journal can hold that replay cannot make sense of: it is data (copied, edited, cut by a full disk), so a
# run whose journal is beyond reading is listed as unreadable, never the end of the listing.
_UNREADABLE = (BreakglassError, OSError, KeyError, TypeError, ValueError, AttributeError)


def _replay_or_none(run: Run) -> driver.RunState | None:
    try:
        return driver.replay(run)
    except _UNREADABLE:
        return None


def list_runs(state: str | None) -> list[RunSummary]:
    _check_state_dir(state)
    out = []
    for run in journal.list_runs(state):
        try:
            st = driver.replay(run)
        except _UNREADABLE as e:
            why = str(e) if isinstance(e, (BreakglassError, OSError)) else f"its journal is not one breakglass " \
                                                                           f"wrote ({type(e).__name__})"
            out.append(RunSummary(run.id, run.path, "?", None, f"unreadable: {why}", None, label="unreadable"))
            continue
        out.append(RunSummary(run.id, run.path, st.kind, st.method, st.status, st.started,
                              [f"{s.step.summary} [{s.last}{', ' + s.reverts[-1] if s.reverts else ''}]"
                               for s in st.steps], st.label, len(_still_changed(st))))
    return out


def _still_changed(st: driver.RunState) -> list:
    return [s for s in st.steps if s.last in CHANGED and not (s.reverts and s.reverts[-1] not in ("reverting",
                                                                                                  "conflict"))]


def _check_state_dir(state: str | None) -> None:
    """A state directory that names a file is bad input, not "no runs" (one that does not exist yet is empty)."""
    path = journal.state_dir(state)
    runs = os.path.join(path, "runs")
    for p in (path, runs):
        if os.path.exists(p) and not os.path.isdir(p):
            raise BadInput(f"state directory {p} is a file, not a directory",
                           hint="choose another with --state-dir or $BREAKGLASS_STATE_DIR")
    if os.path.isdir(runs) and not os.access(runs, os.R_OK | os.X_OK):
        raise BadInput(f"state directory {runs}: permission denied")


CHANGED = ("applying", "applied", "verified", "unverified", "edited")  # edited: a file here, no node has it


def open_runs(state: str | None) -> list[RunSummary]:
    """Recover runs that changed something and are not reverted: what a restarted wizard offers to finish."""
    out = []
    for run in journal.list_runs(state):
        st = _replay_or_none(run)
        if st is None:
            continue
        changed = [s for s in st.steps if s.last in CHANGED and not (s.reverts and s.reverts[-1] != "reverting")]
        if st.kind == "recover" and st.status != "reverted" and changed:
            out.append(RunSummary(run.id, run.path, st.kind, st.method, st.status, st.started,
                                  [s.step.summary for s in changed]))
    return out


def applied_by(state: str | None, method: str, refs: list[str]) -> RunSummary | None:
    """The open run of ``method`` that already changed exactly one of ``refs`` (NAME, kind/NAME or an etcd key:
    the object its step targets, by its whole name), so a second `recover` of the same thing says so instead of
    failing on what the first one removed."""
    names = {r.rstrip("/").rsplit("/", 1)[-1] for r in refs if not r.startswith("webhook:")}
    for summary in reversed(open_runs(state)):
        if summary.method != method:
            continue
        st = driver.replay(Run.open(summary.run, state))
        changed = {s.step.target.rstrip("/").rsplit("/", 1)[-1] for s in _still_changed(st)}
        if names & changed:
            return summary
    return None


# what identifies a change in a run's target (describe_target): the same way, on the same nodes, files or objects,
# disabling the same plugins
_CHANGE_KEYS = ("hosts", "nodes", "manifest", "config", "plugins", "store", "distro", "local", "refs")


def applied_exactly(state: str | None, method: str, target: dict) -> RunSummary | None:
    """The open run (applied, not reverted) whose change is exactly ``target``'s: what lets an empty plan be called
    "already in place"; None when no run of breakglass made it."""
    want = {k: target.get(k) for k in _CHANGE_KEYS if k in target}
    if not want:
        return None
    for summary in reversed(open_runs(state)):
        if summary.method != method:
            continue
        st = driver.replay(Run.open(summary.run, state))
        if {k: st.target.get(k) for k in want} == want:
            return summary
    return None


def out_of_path(run: Run, st: driver.RunState | None = None) -> dict | None:
    """How long the run kept webhooks from enforcing anything: from its first applied change to its revert (or
    now, while it is not reverted). The flag ways turn every webhook off; etcd and kubeapi the ones they name."""
    import datetime as _dt  # noqa: PLC0415

    st = st or driver.replay(run)
    events = list(run.events())
    start = next((e.get("ts") for e in events if e.get("event") in ("applying", "applied-by-hand")), None)
    if not start:
        return None
    end = next((e.get("ts") for e in reversed(events) if e.get("event") == "run-reverted"), None)
    try:
        t0 = _dt.datetime.fromisoformat(start)
        t1 = _dt.datetime.fromisoformat(end) if end else _dt.datetime.now(_dt.timezone.utc)
    except (TypeError, ValueError):
        return None
    secs = max(0, int((t1 - t0).total_seconds()))
    flag = st.method in ("talos", "kubeadm", "k3s", "rke2")
    what = ("the webhook admission plugins were off: no admission webhook of the cluster enforced anything" if flag
            else "the configurations this run changed did not enforce")
    return {"from": start, "to": end, "seconds": secs, "what": what,
            "line": f"{what} for {_duration(secs)}" + (f" ({start} to {end})" if end else " (still, since "
                                                      f"{start})")}


def _duration(secs: int) -> str:
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return (f"{h} h {m} min" if h else f"{m} min {s} s" if m else f"{s} s")


def report(run: Run) -> str:
    """report.md: the run for the postmortem (timeline, changes, backups, revert status)."""
    st = driver.replay(run)
    lines = [f"# breakglass run {run.id}", "", f"- kind: {st.kind}", f"- method: {st.method or '-'}",
             f"- status: **{st.status}**", f"- started: {st.started}", ""]
    if st.target:
        # what was not given is left out ("context: None" reads as a context named None)
        lines += ["## Target", ""] + [f"- {k}: {', '.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                                      for k, v in st.target.items() if v not in (None, "", [], {})] + [""]
    lines += ["## Changes", ""]
    for s in st.steps:
        lines.append(f"### {s.step.id}: {s.step.summary}")
        lines += ["", "```diff", s.step.diff.rstrip(), "```", ""]
        lines.append(f"- last transition: {s.last}")
        if s.backup:
            for k, v in s.backup.items():
                if k.endswith("sha256"):
                    lines.append(f"- backup {k[:-7]}: `backups/{s.backup[k[:-7]]}` sha256 `{v}`")
        if s.reverts:
            done = [r for r in s.reverts if r != "reverting"]  # "reverting" is the journal's intent, not an outcome
            lines.append(f"- revert: {done[-1] if done else 'started, not finished'}")
        lines.append("")
    found = [e for e in run.events() if e.get("event") == "findings"]
    if found:
        lines += ["## Findings", "", f"**{found[-1].get('verdict', '')}**", ""]
        lines += [f"- {f}" for f in found[-1].get("findings") or []] + [""]
    off = out_of_path(run, st)
    if off:
        lines += ["## Time without enforcement", "", f"- {off['line']}", ""]
    fixes = [e.get("text", "") for e in run.events() if e.get("event") == "permanent-fix"]
    if fixes:
        lines += ["## Permanent fix", "", "```", fixes[-1], "```", ""]
    lines += ["## Timeline", ""]
    for e in run.events():
        extra = {k: v for k, v in e.items()
                 if k not in ("ts", "event", "steps", "backup", "target", "text", "findings", "verdict")}
        lines.append(f"- {e.get('ts')} {e.get('event')} {extra if extra else ''}".rstrip())
    told = outcome.of_run_state(st)  # the same outcome `recover`, `revert` and `runs` print
    lines += ["", "## Outcome", ""] + render.outcome(told, markdown=True)
    if st.status == "reverted":
        lines += ["", "Reverted: nothing of this run is left in the cluster."]
    elif told.next:
        lines += ["", "To undo: `breakglass revert " + run.id + "` (works from a copy of this directory too: "
                  "`breakglass revert /path/to/" + run.id + "`)."]
    else:
        lines += ["", "Nothing was changed by this run."]
    return "\n".join(lines) + "\n"


def key_of(step: Step) -> bytes:
    return base64.b64decode(step.data["key_b64"])
