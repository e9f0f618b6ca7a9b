"""The revert guard lives in the engine (recovery.revert_run): every front end that reverts (the CLI, the wizard on
resume and after a change) is refused while a webhook the revert re-arms has a backend that cannot answer, until the
backend is back or the override is given (--force, or the wizard's typed word). Against a real etcd.

"Back" is a backend that answers the apiserver's call (webhooks.readiness): Kyverno's configuration here trusts a CA
of the module's, and the real backend (breakglass/sandbox/backend.py) serves a certificate from it for
kyverno-svc.kyverno.svc on loopback, where the seeded endpoint points."""

from __future__ import annotations

import json
import shutil

import pytest

from breakglass.access.etcd import EtcdSettings
from breakglass.core import journal
from breakglass.core.errors import PreconditionFailed
from breakglass.flows import recovery, wizard
from breakglass.present.prompts import ScriptedPrompter
from breakglass.webhooks import codec, sources
from tests import backend_seed
from tests import etcd_server as es
from tests import webhook_backends as wb
from tests.conftest import ROOT, run_cli
from tests.test_codec import KYVERNO as KYVERNO_UNTRUSTED

CA = wb.Ca()
KYVERNO = wb.with_ca_bundle(KYVERNO_UNTRUSTED, CA.bundle)  # its test caBundle ("PEM") could verify no backend
CFG = KYVERNO["metadata"]["name"]
KEY = sources.etcd_key("validating", CFG)


@pytest.fixture(scope="module")
def kyverno_backend(tmp_path_factory):
    """The real backend, answering as kyverno-svc.kyverno.svc with a certificate CA signed."""
    d = str(tmp_path_factory.mktemp("kyverno-backend"))
    crt, key = CA.issue(d, "kyverno-svc", dns=("kyverno-svc.kyverno.svc",))
    b = wb.RealBackend(crt, key, f"{d}/backend.log")
    yield b
    b.stop()


def _put(srv, pairs):
    c = es.raw_client(srv)
    es.put_many(c, pairs)
    c.close()


def _get(srv, key):
    c = es.raw_client(srv)
    try:
        value, _ = c.get(key)
        return value
    finally:
        c.close()


def _target(srv):
    return recovery.EtcdTarget(EtcdSettings(endpoints=(srv.endpoint,)))


def _recover(srv, state, obj=KYVERNO):
    name = obj["metadata"]["name"]
    _put(srv, [(sources.etcd_key("validating", name), codec.encode_value(obj))])
    remedy, steps = recovery.plan_etcd(_target(srv), [name])
    return recovery.execute(remedy, steps, state, {"refs": [name]}).run


def _events(state, run_id):
    return [e for e in journal.Run.open(run_id, state).events() if e.get("event") == "guard-checked"]


def test_the_cli_refuses_while_the_service_has_no_endpoint_and_reverts_once_it_has(etcd_clean, tmp_path,
                                                                                  kyverno_backend):
    state = str(tmp_path / "state")
    run_id = _recover(etcd_clean, state)
    env = {"BREAKGLASS_STATE_DIR": state}
    r = run_cli("revert", "--yes", "--etcd-endpoints", etcd_clean.endpoint, env=env)
    assert r.returncode == 4, r.stderr
    err = r.stderr.decode()
    assert "backend kyverno/kyverno-svc: no such Service" in err and CFG.split("-")[0] in err
    assert len(err.strip().splitlines()) <= 2  # the error line and its hint
    assert _get(etcd_clean, KEY) is None  # nothing re-armed
    events = [e["event"] for e in journal.Run.open(run_id, state).events()]
    assert "reverting" not in events and events[-1] == "run-finished"  # refused before anything was journaled
    _put(etcd_clean, backend_seed.healthy(port=kyverno_backend.port))
    r = run_cli("revert", "--yes", "--etcd-endpoints", etcd_clean.endpoint, "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert _get(etcd_clean, KEY) == codec.encode_value(KYVERNO)
    assert _events(state, run_id)[-1]["state"] == "ready"
    told = json.loads(r.stdout)
    assert told["result"]["guard"]["state"] == "ready" and told["result"]["guard"]["overridden"] is False
    assert any(v.startswith("re-armed webhooks' backends ready:") and "kyverno/kyverno-svc" in v
               for v in told["outcome"]["verified"]), told["outcome"]
    assert not told["outcome"].get("notVerified")


def test_force_goes_ahead_and_the_journal_says_it_was_overridden(etcd_clean, tmp_path):
    state = str(tmp_path / "state")
    run_id = _recover(etcd_clean, state)
    r = run_cli("revert", "--yes", "--force", "--etcd-endpoints", etcd_clean.endpoint,
                env={"BREAKGLASS_STATE_DIR": state})
    assert r.returncode == 8, r.stderr  # reverted, but re-armed a webhook that cannot answer: not verified
    assert _get(etcd_clean, KEY) is not None
    last = _events(state, run_id)[-1]
    assert last["state"] == "down" and last["overridden"] is True
    # the outcome says so too: re-armed while the backend cannot answer, and how to check it
    text = r.stdout.decode()
    assert "re-armed while its backend is not ready (overridden)" in text, text


def test_a_resumed_run_is_checked_with_the_etcd_its_journal_names(etcd_clean, tmp_path):
    """No etcd option at revert time: the run's own endpoints are used to read the backend."""
    state = str(tmp_path / "state")
    run_id = _recover(etcd_clean, state)
    with pytest.raises(PreconditionFailed, match="not reverted yet"):
        recovery.revert_run(run_id, state, None)
    assert _get(etcd_clean, KEY) is None


def _url_hook(port, ca_bundle=None):
    obj = json.loads(json.dumps(KYVERNO))
    obj["metadata"]["name"] = "url-hook"
    for w in obj["webhooks"]:
        w["clientConfig"] = {"url": f"https://127.0.0.1:{port}/validate", **({"caBundle": ca_bundle} if ca_bundle
                                                                             else {})}
    return obj


def test_a_url_webhook_is_checked_by_calling_it(etcd_clean, tmp_path):
    """Until issue 33 a process that took the TCP connection was "ready"; now only an answer to the apiserver's call
    is (this test's middle step was a bare listener, reverted as ready)."""
    state = str(tmp_path / "state")
    port = wb.closed_port()  # nothing listens there
    run_id = _recover(etcd_clean, state, _url_hook(port, CA.bundle))
    with pytest.raises(PreconditionFailed) as e:
        recovery.revert_run(run_id, state, _target(etcd_clean))
    assert f"127.0.0.1:{port}" in str(e.value) and "refused" in str(e.value)
    liar = wb.closes_at_once(port)  # takes the connection, answers nothing
    try:
        with pytest.raises(PreconditionFailed, match="connection closed before an answer"):
            recovery.revert_run(run_id, state, _target(etcd_clean))
    finally:
        liar.stop()
    crt, key = CA.issue(str(tmp_path / "certs"), "loopback", ips=("127.0.0.1",))
    backend = wb.RealBackend(crt, key, str(tmp_path / "backend.log"), port)
    try:
        res = recovery.revert_run(run_id, state, _target(etcd_clean))
    finally:
        backend.stop()
    assert res.status == "reverted" and res.guard["state"] == "ready"
    assert any("AdmissionReview v1 answered" in line for line in res.guard["lines"]), res.guard


def test_services_the_diagnosis_named_are_checked_for_a_flag_run(etcd_clean, tmp_path):
    """The admission-plugin flag re-arms every webhook: the Services the wizard journaled are checked too."""
    from breakglass.access.local import LocalNode

    manifest = tmp_path / "kube-apiserver.yaml"
    shutil.copy(f"{ROOT}/tests/kubeadm/kube-apiserver.yaml", manifest)
    state = str(tmp_path / "state")
    remedy, steps = recovery.plan_kubeadm({"localhost": LocalNode()}, str(manifest),
                                          ["ValidatingAdmissionWebhook"], 0, local=True,
                                          backup_dir=str(tmp_path / "node-backup"))
    res = recovery.execute(remedy, steps, state, {"services": ["kyverno/kyverno-svc"]})
    changed = manifest.read_bytes()
    with pytest.raises(PreconditionFailed, match="kyverno/kyverno-svc"):
        recovery.revert_run(res.run, state, _target(etcd_clean))
    assert manifest.read_bytes() == changed
    _put(etcd_clean, backend_seed.healthy())
    assert recovery.revert_run(res.run, state, _target(etcd_clean)).status == "reverted"


# issue 33: declining the typed word is exit 7 (declined), and re-arming a webhook whose backend is down is a revert
# that could not be verified, exit 8 (both were 0)
@pytest.mark.parametrize("answer,reverted,code", [("", False, 7), ("re-arm", True, 8)])
def test_the_wizard_on_resume_states_the_risk_and_reverts_only_on_the_typed_word(etcd_clean, tmp_path, answer,
                                                                                 reverted, code):
    state = str(tmp_path / "state")
    _recover(etcd_clean, state)
    p = ScriptedPrompter(["revert", answer])
    assert wizard.run(p, state) == code, "\n".join(p.transcript)
    text = "\n".join(p.transcript)
    assert "no such Service" in text and "Not safe to revert yet" in text
    assert "revert it now (the webhook's backend is healthy again)" not in text  # no promise it did not check
    assert (_get(etcd_clean, KEY) is not None) is reverted


def test_the_wizard_reverts_at_once_when_the_backend_is_ready(etcd_clean, tmp_path, kyverno_backend):
    state = str(tmp_path / "state")
    _recover(etcd_clean, state)
    _put(etcd_clean, backend_seed.healthy(port=kyverno_backend.port))
    p = ScriptedPrompter(["revert"])  # no typed word asked for
    assert wizard.run(p, state) == 0
    assert _get(etcd_clean, KEY) == codec.encode_value(KYVERNO)


def test_revert_removes_a_backup_temp_file_a_killed_write_left(etcd_clean, tmp_path):
    """A backup's temp file (a copy of what was changed, which may hold a secret) left by a kill is removed by the
    revert of that run."""
    state = str(tmp_path / "state")
    run_id = _recover(etcd_clean, state)
    run = journal.Run.open(run_id, state)
    left = f"{run.backups}/s2.value.tmp"
    with open(left, "wb") as f:
        f.write(b"half a backup")
    _put(etcd_clean, backend_seed.healthy())
    assert recovery.revert_run(run_id, state, _target(etcd_clean)).status == "reverted"
    assert not __import__("os").path.exists(left)
