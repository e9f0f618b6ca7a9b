"""After a revert re-armed webhooks: the apiserver's own call, through a canary, and the command that takes it back.

A backend that answers breakglass from this machine may still fail the apiserver's call (another network path, a
konnectivity tunnel, a caBundle the owner rotated). So where an apiserver answers, a server-side dry-run write of an
object each re-armed webhook matches is sent through it (``webhooks.canary``): the apiserver itself calls the
webhook, and a ``failed calling webhook`` is the proof that the revert re-armed a webhook that cannot answer. Then the
outcome says so, the exit code is 8, and the one command that makes the run's change again is given
(``redo_command``), so the engineer is one paste from where they were.

The canary is sent only to the cluster whose configurations the revert put back: a configuration restored from a
backup must be found through that apiserver with the backup's uid (a kubeconfig that points at another cluster makes
no canary, rather than a vacuous pass).
"""

from __future__ import annotations

import json
import shlex
import time

from breakglass.core.errors import BreakglassError

# the apiserver picks a stored configuration up through its informer a moment after the write
LOAD_LAG = 1.0
VISIBLE_WAIT = 30.0  # how long a restored configuration may take to appear through the API (a restart gap)


def restored_configs(run, st) -> list[dict]:
    """The configuration objects an etcd or kubeapi revert put back (their backups)."""
    return backed_up(run, st, ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"))


def backed_up(run, st, kinds: tuple[str, ...]) -> list[dict]:
    """The objects of ``kinds`` a run's steps backed up (etcd values decoded, API objects read), verified by their
    checksums; a backup that cannot be read is left out."""
    from breakglass.webhooks import codec  # noqa: PLC0415

    out = []
    for s in st.steps:
        b = s.backup or {}
        try:
            if "value" in b and b.get("value_sha256"):
                obj = codec.decode_value(run.read_backup(b["value"], b["value_sha256"])).obj
            elif "object" in b and b.get("object_sha256"):
                obj = json.loads(run.read_backup(b["object"], b["object_sha256"]))
            else:
                continue
        except (BreakglassError, OSError, ValueError):
            continue
        if isinstance(obj, dict) and obj.get("kind") in kinds:
            out.append(obj)
    return out


def _live(api, obj: dict, written: set[str] = frozenset(), any_uid: bool = False) -> dict | None:
    """The object as the apiserver has it now, when it is the same object (uid) as the backup or the one the
    revert wrote in its place (``written``: the uids the journal's revert events name); ``any_uid``: whatever
    object holds that name (an owner's re-created copy)."""
    from breakglass.webhooks import model  # noqa: PLC0415

    meta = obj.get("metadata") or {}
    kind = model.KIND_OF.get(obj.get("kind"))
    if kind not in (model.VALIDATING, model.MUTATING) or not meta.get("name"):
        return None
    status, live = api.request("GET", f"/apis/admissionregistration.k8s.io/v1/{model.RESOURCE_OF[kind]}/"
                                      f"{meta['name']}")
    uid = (live.get("metadata") or {}).get("uid")
    if status != 200 or (uid != meta.get("uid") and uid not in written and not any_uid):
        return None
    return live


def wait_reachable(api, seconds: float = VISIBLE_WAIT * 3) -> bool:
    """Whether the apiserver answers (any /readyz status) within ``seconds``: a flag revert restarts it."""
    deadline = time.monotonic() + seconds
    while True:
        if api.readyz().reachable:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)


# A flag revert restarts the apiserver, and the webhooks' owners often restart with it: Kyverno's admission
# controller exits when it cannot renew its leader lease across the restart (its pod then comes back under the
# kubelet). So a canary whose calls fail only for webhooks the guard saw answering just before the revert is sent
# again for this long before it is called failed; one the guard did not see answering fails at once.
SETTLE_AFTER_RESTART = 90.0
SETTLE_STEP = 3.0


def canary(api, run, st, cluster_configs: list | None = None, answered_before: frozenset = frozenset(),
           any_uid: bool = False) -> dict:
    """Send the canary through ``api`` for what the revert re-armed: the restored configurations (etcd, kubeapi runs)
    as the apiserver has them, or ``cluster_configs`` (the flag ways: every fail-closed webhook of the cluster).
    ``answered_before``: the webhooks the guard called successfully before a flag revert (see
    SETTLE_AFTER_RESTART). ``any_uid``: the configurations by name, whoever made them (their owner put them
    back before the revert could). Returns ``{"ok": bool|None, "lines": [...], "results": [...], "skipped": why}``."""
    from breakglass.webhooks import canary as _canary, model  # noqa: PLC0415

    if not wait_reachable(api):
        return {"ok": None, "skipped": f"{api.host} did not answer after the revert", "lines": [], "results": []}
    try:
        if cluster_configs is None:
            wanted = restored_configs(run, st)
            if not wanted:
                return {"ok": None, "skipped": "no webhook configuration was restored", "lines": [], "results": []}
            written = {e["uid"] for e in run.events() if e.get("event") == "reverted" and isinstance(e.get("uid"), str)}
            deadline = time.monotonic() + VISIBLE_WAIT
            while True:
                live = [x for x in (_live(api, o, written, any_uid) for o in wanted) if x is not None]
                if len(live) == len(wanted) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            if not live:
                return {"ok": None, "lines": [], "results": [],
                        "skipped": "the restored configuration is not seen through this apiserver (another cluster?)"}
            configs = [model.from_json(o, "api") for o in live]
        else:
            configs = list(cluster_configs)
        # a flag revert restarts the apiserver (the kubelet, Talos, a k3s restart) a moment after the write: a
        # canary that lands in that gap is refused, so it is sent again once the apiserver answers, up to the
        # restart gap's length, rather than reported "not tried" (which says nothing in the outcome)
        deadline = time.monotonic() + VISIBLE_WAIT * 3
        while True:
            time.sleep(LOAD_LAG)
            summary = _canary.run(api, configs)
            if not _unanswered(summary) or time.monotonic() > deadline:
                break
            wait_reachable(api, max(1.0, deadline - time.monotonic()))
        settled = _settle(api, configs, summary, answered_before) if cluster_configs is not None else None
    except BreakglassError as e:
        return {"ok": None, "skipped": f"the canary could not be sent ({e})", "lines": [], "results": []}
    if settled is not None:
        summary, waited, first = settled
    doc = summary.to_json()
    tried = [r for r in doc["results"] if r.get("status") in ("passed", "failed")]
    lines = summary.lines()
    if settled is not None and first:
        lines.append(f"the first canary after the apiserver's restart failed ({', '.join(first)}); sent again, it "
                     + (f"passed {waited} s later (an owner restarting with the apiserver)" if summary.ok else
                        f"still failed {waited} s later"))
    return {"ok": summary.ok if tried else None, "lines": lines, "results": doc["results"],
            "skipped": "" if tried else "no re-armed webhook could be called by a dry-run canary",
            **({"settled_after": waited} if settled is not None and first else {})}


def _settle(api, configs, summary, answered_before: frozenset):
    """(the last summary, seconds waited, the webhooks whose calls failed first) for a flag revert's canary: sent
    again while its only failures are webhooks the guard saw answering (see SETTLE_AFTER_RESTART)."""
    from breakglass.webhooks import canary as _canary  # noqa: PLC0415

    def transient(s) -> list[str]:
        failed = sorted({r.webhook for r in s.results if r.status == _canary.FAILED})
        return failed if failed and set(failed) <= answered_before else []

    first = transient(summary)
    started = time.monotonic()
    while transient(summary) and time.monotonic() - started < SETTLE_AFTER_RESTART:
        time.sleep(SETTLE_STEP)
        summary = _canary.run(api, configs)
    return summary, int(time.monotonic() - started), first


def _unanswered(summary) -> bool:
    """Nothing was sent because the apiserver refused or did not answer (a restart gap), and nothing else was
    decided."""
    from breakglass.webhooks import canary as _canary  # noqa: PLC0415

    rs = summary.results
    return bool(rs) and all(r.status == _canary.NOT_TRIED for r in rs) and any(
        r.reason.startswith("not sent: the apiserver refused or did not answer") for r in rs)


def redo_command(st) -> str:
    """The `breakglass recover` command that makes the run's change again (what a failed canary offers)."""
    t = st.target or {}
    m = st.method or ""
    q = shlex.quote
    parts = ["breakglass", "recover", m]
    if m in ("etcd", "kubeapi"):
        for s in st.steps:
            d = s.step.data or {}
            kind, name = d.get("kind"), d.get("name")
            if isinstance(name, str):
                parts += ["-w", q(f"{kind}/{name}" if kind in ("validating", "mutating") else name)]
        if m == "etcd":
            if t.get("etcd_endpoints"):
                parts += ["--etcd-endpoints", q(",".join(t["etcd_endpoints"]))]
            if t.get("etcd_via_ssh"):
                parts += ["--etcd-via-ssh", q(str(t["etcd_via_ssh"]))]
            if t.get("etcd_prefix") and t["etcd_prefix"] != "/registry":
                parts += ["--etcd-prefix", q(t["etcd_prefix"])]
        else:
            parts += ["--action", q(str(t.get("action") or "ignore"))]
            if t.get("kubeconfig"):
                parts += ["--kubeconfig", q(t["kubeconfig"])]
            if t.get("context"):
                parts += ["--context", q(t["context"])]
    elif m == "talos":
        nodes = t.get("nodes") or []
        flag = "--config-file" if t.get("store") == "file" else "-n"
        parts += [x for n in nodes for x in (flag, q(str(n)))] if flag == "--config-file" else [flag, q(",".join(nodes))]
    elif m == "static-manifests":
        parts += [x for w in t.get("webhooks") or [] for x in ("--webhook", q(str(w)))]
        dirs = t.get("dirs") or []
        if t.get("local"):
            parts += ["--static-manifests", q(str(dirs[0] if dirs else ""))]
        else:
            parts += ["--ssh", q(",".join(t.get("hosts") or []))]
            parts += ["--static-manifests", q(str(dirs[0]))] if len(dirs) == 1 else []
    elif m in ("kubeadm", "k3s", "rke2"):
        if t.get("local"):
            path = t.get("manifest") if m == "kubeadm" else t.get("config")
            parts += ["--manifest" if m == "kubeadm" else "--config-file", q(str(path))]
        else:
            parts += ["--ssh", q(",".join(t.get("hosts") or []))]
    if t.get("plugins") and m in ("talos", "kubeadm", "k3s", "rke2"):
        parts += ["--plugins", q(",".join(t["plugins"]))]
    return " ".join(parts) + " --yes"
