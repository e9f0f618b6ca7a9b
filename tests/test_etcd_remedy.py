"""The etcd remedy against a real etcd: backups, compare-and-swap, revert, crashes and Ctrl-C."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time

import pytest

from breakglass.core import journal

from breakglass.flows import recovery
from breakglass.access.etcd import EtcdSettings
from breakglass.core.errors import PreconditionFailed
from breakglass.webhooks import codec, sources
from tests import backend_seed
from tests import etcd_server as es
from tests import webhook_backends as wb
from tests.apiserver_standin import serve_readyz
from tests.conftest import ROOT, run_cli
from tests.test_codec import KYVERNO as KYVERNO_UNTRUSTED

# issue 33: "done" is the apiserver's /readyz 200 and a re-armed backend that answers the apiserver's call. The
# configurations seeded here trust CA (their test caBundle "PEM" could verify no backend); with the ``live``
# fixture the seeded Service's endpoint is a real backend serving a certificate from CA for
# kyverno-svc.kyverno.svc, and `recover` is given --apiserver of a /readyz that answers 200 (the apiserver back),
# so these tests keep asserting a verified exit 0. Without it (tests/test_bundle.py) they behave as before.
CA = wb.Ca()
KYVERNO = wb.with_ca_bundle(KYVERNO_UNTRUSTED, CA.bundle)
LIVE: dict = {}  # "port": the real backend's, "apiserver": the /readyz URL; set by the ``live`` fixture

NAMES = ["kyverno-resource-validating-webhook-cfg", "gatekeeper-validating-webhook-configuration", "policy-a"]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The webhooks' real backend, and an apiserver /readyz answering 200, for the module's runs (see LIVE)."""
    d = str(tmp_path_factory.mktemp("kyverno-backend"))
    crt, key = CA.issue(d, "kyverno-svc", dns=("kyverno-svc.kyverno.svc",))
    backend = wb.RealBackend(crt, key, f"{d}/backend.log")
    try:
        with serve_readyz([], "none") as url:
            LIVE.update(port=backend.port, apiserver=url)
            yield LIVE
    finally:
        LIVE.clear()
        backend.stop()


@pytest.fixture(autouse=True)
def _live(live):
    return live


def _apiserver() -> list[str]:
    """`--apiserver URL` of the module's /readyz (issue 33: else an etcd run knows no apiserver and exits 8)."""
    return ["--apiserver", LIVE["apiserver"]] if LIVE else []


def _obj(name, kind="ValidatingWebhookConfiguration"):
    o = json.loads(json.dumps(KYVERNO))
    o["metadata"]["name"] = name
    o["kind"] = kind
    return o


def _seed(srv, names=NAMES, extra=()):
    c = es.raw_client(srv)
    es.put_many(c, [(sources.etcd_key("validating", n), codec.encode_value(_obj(n))) for n in names]
                + [(b"/registry/pods/default/p1", b"k8s\x00pod"), (b"/registry/validatingwebhookconfigurations-x", b"x")]
                + backend_seed.healthy(port=LIVE.get("port", 9443)) + list(extra))
    c.close()


def _snapshot(srv) -> dict[bytes, bytes]:
    """Every key and value in etcd."""
    c = es.raw_client(srv)
    out = {m.key: v for v, m in c.get_all()}
    c.close()
    return out


def _cli(srv, state, *args, env=None, stdin=None):
    e = {"BREAKGLASS_STATE_DIR": str(state), **(env or {})}
    return run_cli(*args, "--etcd-endpoints", srv.endpoint, env=e, stdin=stdin)


def _recover(srv, state, *names, env=None):
    args = ["recover", "--method", "etcd", "--yes", *_apiserver()]
    for n in names or NAMES:
        args += ["-w", n]
    return _cli(srv, state, *args, env=env)


def test_recover_backs_up_then_deletes_and_revert_restores_bytes(etcd_clean, tmp_path):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _recover(etcd_clean, tmp_path)
    assert p.returncode == 0, p.stderr
    after = _snapshot(etcd_clean)
    assert set(before) - set(after) == {sources.etcd_key("validating", n) for n in NAMES}
    assert all(after[k] == before[k] for k in after)  # nothing else touched
    [run] = journal.list_runs(str(tmp_path))
    assert stat.S_IMODE(os.stat(run.path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(run.backups).st_mode) == 0o700
    files = os.listdir(run.backups)
    assert {"s1.value", "s1.meta.json", "s1.yaml"} <= set(files)
    assert all(stat.S_IMODE(os.stat(os.path.join(run.backups, f)).st_mode) == 0o600 for f in files)
    assert open(os.path.join(run.backups, "s1.value"), "rb").read() == before[sources.etcd_key("validating", NAMES[0])]
    events = [e["event"] for e in run.events()]
    # issue 33: the /readyz wait after the change is journaled last, as its own `readiness` event (was: ends with
    # run-finished)
    assert events[:3] == ["run-started", "planned", "backing-up"] and events[-2:] == ["run-finished", "readiness"]
    assert next(e for e in run.events() if e["event"] == "readiness")["ready"] is True
    assert os.path.exists(os.path.join(run.path, "report.md"))
    r = _cli(etcd_clean, tmp_path, "revert", "--yes")
    assert r.returncode == 0, r.stderr
    assert _snapshot(etcd_clean) == before
    assert json.loads(run_cli("runs", "-o", "json", env={"BREAKGLASS_STATE_DIR": str(tmp_path)}).stdout)[
        "result"][0]["status"] == "reverted"


def test_dry_run_touches_nothing(etcd_clean, tmp_path):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _cli(etcd_clean, tmp_path, "recover", "--method", "etcd", "-w", NAMES[0], "--dry-run", "-o", "json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["result"]["steps"][0]["target"] == sources.etcd_key("validating", NAMES[0]).decode()
    assert _snapshot(etcd_clean) == before and not os.path.exists(tmp_path / "runs")


def test_no_yes_without_a_terminal_changes_nothing(etcd_clean, tmp_path):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _cli(etcd_clean, tmp_path, "recover", "--method", "etcd", "-w", NAMES[0])
    assert p.returncode == 2 and b"without --yes" in p.stderr
    assert _snapshot(etcd_clean) == before


@pytest.mark.parametrize("ref,match", [
    ("/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/kyverno-resource-validating-webhook-cfg",
     "the key is /registry/validatingwebhookconfigurations/kyverno-resource-validating-webhook-cfg"),
    ("kyverno", "no configuration named 'kyverno'"),
    ("Not_A_Name", "not a valid Kubernetes object name"),
    ("/registry/pods/default/p1", "not the etcd key of an admission configuration"),
    ("frobnicator/x", "unknown kind"),
])
def test_wrong_names_and_keys_are_explained_never_zero_deleted(etcd_clean, tmp_path, ref, match):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _cli(etcd_clean, tmp_path, "recover", "--method", "etcd", "--yes", "-w", ref)
    assert p.returncode == 2 and match in p.stderr.decode(), p.stderr
    assert _snapshot(etcd_clean) == before


def test_ambiguous_name_needs_a_kind(etcd_clean, tmp_path):
    _seed(etcd_clean, [], [(sources.etcd_key("validating", "cert-manager-webhook"), codec.encode_value(_obj("cert-manager-webhook"))),
                           (sources.etcd_key("mutating", "cert-manager-webhook"),
                            codec.encode_value(_obj("cert-manager-webhook", "MutatingWebhookConfiguration")))])
    p = _cli(etcd_clean, tmp_path, "recover", "--method", "etcd", "--yes", "-w", "cert-manager-webhook")
    assert p.returncode == 2 and b"names several" in p.stderr
    p = _cli(etcd_clean, tmp_path, "recover", "--method", "etcd", "--yes", "-w", "cert-manager-webhook", "--kind", "mutating",
             *_apiserver())
    assert p.returncode == 0
    assert sources.etcd_key("validating", "cert-manager-webhook") in _snapshot(etcd_clean)


def test_another_writer_between_backup_and_delete_deletes_nothing(etcd_clean, tmp_path):
    _seed(etcd_clean)
    target = recovery.EtcdTarget(EtcdSettings.resolve(etcd_clean.endpoint, env={}))
    remedy, steps = recovery.plan_etcd(target, [NAMES[0]])
    changed = codec.encode_value({**_obj(NAMES[0]), "metadata": {"name": NAMES[0], "uid": "new"}})

    def writer(transition, step):
        if transition == "backed-up":
            c = es.raw_client(etcd_clean)
            c.put(recovery.key_of(step), changed)
            c.close()

    with pytest.raises(PreconditionFailed, match="changed after it was backed up"):
        recovery.execute(remedy, steps, str(tmp_path), {}, hook=writer)
    assert _snapshot(etcd_clean)[sources.etcd_key("validating", NAMES[0])] == changed
    [run] = journal.list_runs(str(tmp_path))
    assert [e["event"] for e in run.events()][-1] == "failed"


def test_revert_leaves_a_recreated_configuration_unless_forced(etcd_clean, tmp_path):
    _seed(etcd_clean)
    original = _snapshot(etcd_clean)[sources.etcd_key("validating", NAMES[0])]
    assert _recover(etcd_clean, tmp_path, NAMES[0]).returncode == 0
    recreated = codec.encode_value({**_obj(NAMES[0]), "webhooks": []})
    c = es.raw_client(etcd_clean)
    c.put(sources.etcd_key("validating", NAMES[0]), recreated)
    c.close()
    p = _cli(etcd_clean, tmp_path, "revert", "--yes")
    assert p.returncode == 4 and b"recreated" in p.stdout + p.stderr
    assert b"--- backup" in p.stdout and b"+++ etcd now" in p.stdout  # the difference is shown
    assert _snapshot(etcd_clean)[sources.etcd_key("validating", NAMES[0])] == recreated
    p = _cli(etcd_clean, tmp_path, "revert", "--yes", "--force")
    assert p.returncode == 0, p.stderr
    assert _snapshot(etcd_clean)[sources.etcd_key("validating", NAMES[0])] == original


def test_a_copied_run_directory_reverts_elsewhere(etcd_clean, tmp_path):
    import shutil
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    assert _recover(etcd_clean, tmp_path / "a").returncode == 0
    [run] = journal.list_runs(str(tmp_path / "a"))
    copy = tmp_path / "elsewhere" / run.id
    shutil.copytree(run.path, copy)
    p = _cli(etcd_clean, tmp_path / "b", "revert", str(copy), "--yes")
    assert p.returncode == 0, p.stderr
    assert _snapshot(etcd_clean) == before


def test_damaged_backup_is_refused(etcd_clean, tmp_path):
    _seed(etcd_clean)
    assert _recover(etcd_clean, tmp_path, NAMES[0]).returncode == 0
    [run] = journal.list_runs(str(tmp_path))
    path = os.path.join(run.backups, "s1.value")
    data = bytearray(open(path, "rb").read())
    data[10] ^= 0xFF
    open(path, "wb").write(bytes(data))
    p = _cli(etcd_clean, tmp_path, "revert", "--yes")
    assert p.returncode == 1 and b"damaged" in p.stderr and b"Traceback" not in p.stderr
    assert sources.etcd_key("validating", NAMES[0]) not in _snapshot(etcd_clean)


def test_tls_recover_and_revert(etcd_tls, tmp_path):
    c = es.raw_client(etcd_tls)
    c.delete_prefix(b"/")
    c.close()
    _seed(etcd_tls, [NAMES[0]])
    before = _snapshot(etcd_tls)
    tls = ["--etcd-cacert", etcd_tls.cacert, "--etcd-cert", etcd_tls.cert, "--etcd-key", etcd_tls.key]
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path)}
    p = run_cli("recover", "--method", "etcd", "-w", NAMES[0], "--yes", "--etcd-endpoints", etcd_tls.endpoint, *tls,
                *_apiserver(), env=env)
    assert p.returncode == 0, p.stderr
    p = run_cli("revert", "--yes", "--etcd-endpoints", etcd_tls.endpoint, *tls, env=env)
    assert p.returncode == 0, p.stderr
    assert _snapshot(etcd_tls) == before


def test_snapshot_is_saved_and_checksummed(etcd_clean, tmp_path):
    _seed(etcd_clean)
    snap = tmp_path / "etcd.db"
    p = _cli(etcd_clean, tmp_path, "recover", "--method", "etcd", "-w", NAMES[0], "--yes", "--snapshot", str(snap),
             "-o", "json", *_apiserver())
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)["result"]["snapshot"]
    import hashlib
    data = snap.read_bytes()
    assert info["size"] == len(data)
    assert info["sha256"] == hashlib.sha256(data[:-32]).hexdigest() == data[-32:].hex()  # etcd's own trailer
    assert stat.S_IMODE(os.stat(snap).st_mode) == 0o600


def test_etcd_subcommands(etcd_clean, tmp_path):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _cli(etcd_clean, tmp_path, "etcd", "get", NAMES[0], "-o", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["result"][0]["object"]["webhooks"][0]["name"] == "validate.kyverno.svc-fail"
    p = _cli(etcd_clean, tmp_path, "etcd", "list", "-o", "json")
    assert sorted(o["name"] for o in json.loads(p.stdout)["result"]) == sorted(NAMES)
    p = _cli(etcd_clean, tmp_path, "etcd", "backup", NAMES[1], "-o", "json")
    assert p.returncode == 0
    backup_run = json.loads(p.stdout)["result"]["run"]
    c = es.raw_client(etcd_clean)
    c.delete(sources.etcd_key("validating", NAMES[1]))  # lost by other means
    c.close()
    p = _cli(etcd_clean, tmp_path, "etcd", "restore", backup_run, "--yes")
    assert p.returncode == 0, p.stderr
    assert _snapshot(etcd_clean)[sources.etcd_key("validating", NAMES[1])] == before[sources.etcd_key("validating", NAMES[1])]


# -- crashes: SIGKILL at every journal transition, then revert must restore the exact bytes ---------

APPLY_TRANSITIONS = ["run-started", "planned"] + [f"{t}@{n}" for n in (1, 2, 3) for t in
                                                  ("backing-up", "backed-up", "applying", "applied", "verified")] \
    + ["run-finished"]
REVERT_TRANSITIONS = [f"{t}@{n}" for n in (1, 2, 3) for t in ("reverting", "reverted")] + ["run-reverted"]


@pytest.mark.parametrize("transition", APPLY_TRANSITIONS)
def test_sigkill_during_apply_then_revert_restores_everything(etcd_clean, tmp_path, transition):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _recover(etcd_clean, tmp_path, env={"BREAKGLASS_FAULT_INJECT": transition})
    assert p.returncode == -signal.SIGKILL
    r = _cli(etcd_clean, tmp_path, "revert", "--yes")
    assert r.returncode in (0, 2), r.stderr  # 2: killed before anything was backed up, nothing to revert
    r2 = _cli(etcd_clean, tmp_path, "revert", [x.id for x in journal.list_runs(str(tmp_path))][0], "--yes")
    assert r2.returncode == 0, r2.stderr  # and reverting again is harmless
    assert _values(etcd_clean) == _values_of(before)


@pytest.mark.parametrize("transition", REVERT_TRANSITIONS)
def test_sigkill_during_revert_then_revert_again(etcd_clean, tmp_path, transition):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    assert _recover(etcd_clean, tmp_path).returncode == 0
    p = _cli(etcd_clean, tmp_path, "revert", "--yes", env={"BREAKGLASS_FAULT_INJECT": transition})
    assert p.returncode == -signal.SIGKILL
    run = journal.list_runs(str(tmp_path))[0].id
    r = _cli(etcd_clean, tmp_path, "revert", run, "--yes")
    assert r.returncode == 0, r.stderr
    assert _values(etcd_clean) == _values_of(before)


def test_sigkill_at_random_moments(etcd_clean, tmp_path):
    rnd = random.Random(7)
    trials = int(os.environ.get("BREAKGLASS_CRASH_TRIALS", "12"))
    for i in range(trials):
        c = es.raw_client(etcd_clean)
        c.delete_prefix(b"/")
        c.close()
        _seed(etcd_clean)
        before = _values(etcd_clean)
        state = tmp_path / f"t{i}"
        args = [sys.executable, "-m", "breakglass", "recover", "--method", "etcd", "--yes",
                "--etcd-endpoints", etcd_clean.endpoint] + sum((["-w", n] for n in NAMES), [])
        proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "BREAKGLASS_STATE_DIR": str(state)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0.05, 0.9))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        r = _cli(etcd_clean, state, "revert", "--yes")
        assert r.returncode in (0, 2), r.stderr
        assert _values(etcd_clean) == before, f"trial {i}"


def test_ctrl_c_during_apply_leaves_a_consistent_journal(etcd_clean, tmp_path):
    _seed(etcd_clean)
    before = _values(etcd_clean)
    p = _recover(etcd_clean, tmp_path, env={"BREAKGLASS_FAULT_INJECT": "applied@2:int"})
    assert p.returncode == 130, p.stderr
    assert b"breakglass revert" in p.stderr and b"Traceback" not in p.stderr
    [run] = journal.list_runs(str(tmp_path))
    assert [e["event"] for e in run.events()][-1] == "interrupted"
    assert _cli(etcd_clean, tmp_path, "revert", "--yes").returncode == 0
    assert _values(etcd_clean) == before


def _values(srv) -> dict[bytes, bytes]:
    return _values_of(_snapshot(srv))


def _values_of(snap) -> dict[bytes, bytes]:
    return dict(sorted(snap.items()))
