"""Revert replays only what the remedy itself wrote (issue 27 §2, §4, §6): each test is an attack a red team ran
against real etcd and a real kube-apiserver by editing a run directory, or a manifest form kube-apiserver accepts
and breakglass misread. A tampered run gets one line and a documented exit code, and nothing is written."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil

import pytest

from breakglass.core import journal
from breakglass.core.errors import BadInput
from breakglass.core.journal import Run
from breakglass.webhooks import codec, sources
from tests.conftest import run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "kubeadm", "kube-apiserver.yaml")
VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"


def _edit_journal(run_dir: str, change) -> None:
    """Rewrite the journal as an attacker with write access to the run directory would: ``change(entry)`` for
    each entry."""
    path = os.path.join(run_dir, "journal.jsonl")
    with open(path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    for e in entries:
        change(e)
    with open(path, "w") as f:
        f.write("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))


def _replace_backup(run_dir: str, name: str, data: bytes) -> str:
    with open(os.path.join(run_dir, "backups", name), "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def _one_line(p) -> str:
    err = p.stderr.decode()
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err  # the line, and at most a hint
    return err


def _only_run(state) -> Run:
    [run] = journal.list_runs(str(state))
    return run


# -- etcd -------------------------------------------------------------------------------------------------------
from tests.test_etcd_remedy import NAMES, _cli as _etcd_cli, _obj, _recover, _seed, _snapshot  # noqa: E402
# issue 33: the seeded webhooks' real backend and an apiserver /readyz answering 200, so an untampered etcd run
# still verifies (exit 0); see tests/test_etcd_remedy.py
from tests.test_etcd_remedy import _live, live  # noqa: E402, F401 - the fixtures


def _planned_step(e: dict) -> dict | None:
    return e["steps"][0] if e.get("event") == "planned" else None


def test_etcd_revert_never_creates_a_new_mutating_configuration_from_a_moved_key(etcd_clean, tmp_path):
    """The red team's attack: the step's kind, name and key point at a new MutatingWebhookConfiguration (the
    output still named the original key); the real apiserver then called that webhook."""
    _seed(etcd_clean)
    assert _recover(etcd_clean, tmp_path, NAMES[0]).returncode == 0
    run = _only_run(tmp_path)
    evil = sources.etcd_key("mutating", "evil-hook")

    def move(e):
        s = _planned_step(e)
        if s:
            s["data"].update(kind="mutating", name="evil-hook", key_b64=base64.b64encode(evil).decode())
    _edit_journal(run.path, move)
    before = _snapshot(etcd_clean)
    p = _etcd_cli(etcd_clean, tmp_path, "revert", "--yes", "--force")
    assert p.returncode in (2, 4), p.stderr
    _one_line(p)
    assert _snapshot(etcd_clean) == before and evil not in before


@pytest.mark.parametrize("attack", ["other-name", "other-kind", "undecodable", "meta-disagrees"])
def test_etcd_revert_puts_back_only_a_value_of_the_steps_kind_and_name(etcd_clean, tmp_path, attack):
    """A consistent key, target and kind/name, but a backed-up value (its sha256 updated in the journal) that is
    not the object the step deleted."""
    _seed(etcd_clean)
    assert _recover(etcd_clean, tmp_path, NAMES[0]).returncode == 0
    run = _only_run(tmp_path)
    new_name = "evil-hook" if attack != "meta-disagrees" else NAMES[0]
    key = sources.etcd_key("validating", new_name)
    value = {"other-name": codec.encode_value(_obj(NAMES[0])),  # the original object, put under a new name
             "other-kind": codec.encode_value(_obj("evil-hook", "MutatingWebhookConfiguration")),
             "undecodable": b"not an object",
             "meta-disagrees": codec.encode_value({**_obj(NAMES[0]), "webhooks": []})}[attack]
    digest = _replace_backup(run.path, "s1.value", value)

    def tamper(e):
        s = _planned_step(e)
        if s:
            s["target"] = key.decode()
            s["data"].update(name=new_name, key_b64=base64.b64encode(key).decode())
        if e.get("event") == "backed-up":
            e["backup"]["value_sha256"] = digest
    _edit_journal(run.path, tamper)
    before = _snapshot(etcd_clean)
    p = _etcd_cli(etcd_clean, tmp_path, "revert", "--yes")
    assert p.returncode == 2, (p.stdout, p.stderr)
    _one_line(p)
    assert _snapshot(etcd_clean) == before


def test_etcd_revert_of_an_untampered_run_still_restores_the_bytes(etcd_clean, tmp_path):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    assert _recover(etcd_clean, tmp_path).returncode == 0
    p = _etcd_cli(etcd_clean, tmp_path, "revert", "--yes")
    assert p.returncode == 0, p.stderr
    assert _snapshot(etcd_clean) == before


# -- kubeadm ----------------------------------------------------------------------------------------------------
def _kubeadm_recover(tmp_path, text: str | None = None):
    path = tmp_path / "manifests" / "kube-apiserver.yaml"
    path.parent.mkdir(exist_ok=True)
    if text is None:
        shutil.copy(MANIFEST, path)
    else:
        path.write_text(text)
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    p = run_cli("recover", "--method", "kubeadm", "--manifest", str(path), "--yes", "--no-wait",
                "--verify-timeout", "0", env=env)
    # issue 33: --no-wait (no apiserver runs this manifest here): applied, not verified
    assert p.returncode == 8 and b"not waited for (--no-wait)" in p.stdout, (p.stdout, p.stderr)
    return path, env


def test_kubeadm_force_revert_never_writes_a_file_the_journal_names(tmp_path):
    """The red team's attack: the journal's manifest path names another file and the backup holds the bytes to
    put there; `revert --force` wrote them."""
    path, env = _kubeadm_recover(tmp_path)
    written = path.read_bytes()
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    run = _only_run(tmp_path / "state")
    digest = _replace_backup(run.path, "s1.kube-apiserver.yaml", b"attacker's bytes\n")

    def tamper(e):
        if e.get("event") == "planned":
            e["target"]["manifest"] = str(victim)
            e["steps"][0]["data"]["path"] = str(victim)
            e["steps"][0]["target"] = f"localhost:{victim}"
        if e.get("event") == "backed-up":
            e["backup"]["manifest_sha256"] = digest
    _edit_journal(run.path, tamper)
    for args in (["--force"], []):
        p = run_cli("revert", "--yes", *args, env=env)
        assert p.returncode in (2, 4), (p.stdout, p.stderr)
        _one_line(p)
        assert victim.read_text() == "keep\n" and path.read_bytes() == written


def test_kubeadm_revert_refuses_a_backup_that_differs_in_more_than_the_admission_flags(tmp_path):
    path, env = _kubeadm_recover(tmp_path)
    written = path.read_bytes()
    run = _only_run(tmp_path / "state")
    evil = open(MANIFEST).read().replace("--authorization-mode=Node,RBAC", "--authorization-mode=AlwaysAllow")
    digest = _replace_backup(run.path, "s1.kube-apiserver.yaml", evil.encode())

    def tamper(e):
        if e.get("event") == "backed-up":
            e["backup"]["manifest_sha256"] = digest
    _edit_journal(run.path, tamper)
    for args in ([], ["--force"]):
        p = run_cli("revert", "--yes", *args, env=env)
        assert p.returncode == 2, (p.stdout, p.stderr)
        _one_line(p)
        assert path.read_bytes() == written and b"AlwaysAllow" not in path.read_bytes()


def test_kubeadm_force_revert_takes_back_only_breakglass_own_change(tmp_path):
    """An operator changed the manifest since: --force takes back the admission flags breakglass changed, and
    keeps the operator's edit (it used to put the whole old file back)."""
    path, env = _kubeadm_recover(tmp_path)
    path.write_text(path.read_text().replace("--allow-privileged=true", "--allow-privileged=false"))
    # a conflict without --force, as before (--re-arm: the guard cannot read this cluster, see below)
    assert run_cli("revert", "--yes", "--re-arm", env=env).returncode == 4
    p = run_cli("revert", "--yes", "--force", env=env)
    # issue 33: --force also re-arms unseen (nothing to read the cluster's webhooks through): not verified
    assert p.returncode == 8 and b"backends not checked" in p.stdout, (p.stdout, p.stderr)
    assert path.read_text() == open(MANIFEST).read().replace("--allow-privileged=true", "--allow-privileged=false")
    assert b"only breakglass' change to the admission flags" in p.stdout + p.stderr


def _command(path) -> list:
    import yaml

    return yaml.safe_load(path.read_text())["spec"]["containers"][0]["command"]


BASE = open(MANIFEST).read()
ENABLE_LINE = "    - --enable-admission-plugins=NodeRestriction\n"


NEW = f"--disable-admission-plugins={VWH},{MWH}"


@pytest.mark.parametrize("form, now", [
    # a flag and its value as two list items (kube-apiserver reads `--flag value`)
    ("    - --enable-admission-plugins\n    - NodeRestriction,ValidatingAdmissionWebhook\n",
     [NEW, "--enable-admission-plugins", "NodeRestriction"]),
    # pflag reads "_" as "-" (component-base WordSepNormalizeFunc)
    ("    - --enable_admission_plugins=NodeRestriction,MutatingAdmissionWebhook\n",
     [NEW, "--enable_admission_plugins=NodeRestriction"]),
    # both, quoted, with a comment
    ("    - \"--enable_admission_plugins\"\n    - 'NodeRestriction,ValidatingAdmissionWebhook' # kept\n",
     [NEW, "--enable_admission_plugins", "NodeRestriction"]),
    # an existing disable list in the `--flag value` form and again with "_" (a string slice: they add up)
    ("    - --disable-admission-plugins\n    - DefaultStorageClass\n    - --disable_admission_plugins=AlwaysPullImages\n"
     + ENABLE_LINE, ["--disable-admission-plugins", f"DefaultStorageClass,AlwaysPullImages,{VWH},{MWH}",
                     "--enable-admission-plugins=NodeRestriction"]),
], ids=["split", "underscore", "quoted-split-underscore", "repeated-disable"])
def test_kubeadm_reads_every_flag_form_kube_apiserver_accepts_and_edits_it_in_place(tmp_path, form, now):
    text = BASE.replace(ENABLE_LINE, form)
    path, env = _kubeadm_recover(tmp_path, text)
    base = _command_from_text(BASE)
    at = base.index("--enable-admission-plugins=NodeRestriction")
    assert _command(path) == base[:at] + now + base[at + 1:]  # in place, in its own form; all else as it was
    assert "# kept" in path.read_text() or "kept" not in form
    # issue 33: nothing to read the cluster's webhooks through: refused (4) unless --re-arm, then not verified (8)
    assert run_cli("revert", "--yes", env=env).returncode == 4
    assert run_cli("revert", "--yes", "--re-arm", env=env).returncode == 8
    assert path.read_text() == text  # byte for byte


def _command_from_text(text: str) -> list:
    import yaml

    return yaml.safe_load(text)["spec"]["containers"][0]["command"]


def test_kubeadm_split_flags_on_a_real_apiserver_start_it(tmp_path):
    """The real kube-apiserver, run by the sandbox's kubelet stand-in from its manifest: with the enable list as
    `- --enable-admission-plugins` / `- NodeRestriction,ValidatingAdmissionWebhook` it refused to start
    ("overlapped") after recover, exit 8. Now it starts, past the seed's webhook."""
    import time

    from breakglass import sandbox
    from tests.real_control_plane import binary_for

    _, binary = binary_for("1.32")
    d = str(tmp_path / "sandbox")
    sb = sandbox.up(d, apiserver=binary)
    try:
        path = sb.apiserver["manifest"]
        text = open(path).read()
        lines = [ln for ln in text.split("\n") if "--enable-admission-plugins=" in ln]
        assert len(lines) == 1, text
        indent = lines[0].split("-")[0]
        value = lines[0].split("=", 1)[1]
        with open(path, "w") as f:
            f.write(text.replace(lines[0], f"{indent}- --enable-admission-plugins\n{indent}- {value},{VWH}"))
        # issue 33: waits for the manifest's own apiserver's /readyz (it was --no-wait, now exit 8): exit 0 is its 200
        p = run_cli("recover", "--method", "kubeadm", "--manifest", path, "--yes", "--verify-timeout", "120",
                    "--wait-timeout", "120", env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}, timeout=300)
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert b"/readyz ready" in p.stdout, p.stdout
        deadline = time.monotonic() + 120
        while not sandbox.status(d)["apiserver"]["ready"] and time.monotonic() < deadline:
            time.sleep(0.5)  # polling; the assertion below is on the state, not on the time
        assert sandbox.status(d)["apiserver"]["ready"]
    finally:
        sandbox.down(d)


# -- run directories: whose, and where ---------------------------------------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a run directory to another user")
@pytest.mark.parametrize("what", ["run", "journal", "backup"])
def test_a_run_another_user_owns_is_refused(tmp_path, what):
    path, env = _kubeadm_recover(tmp_path)
    written = path.read_bytes()
    run = _only_run(tmp_path / "state")
    os.chown({"run": run.path, "journal": run.journal_path,
              "backup": os.path.join(run.backups, "s1.kube-apiserver.yaml")}[what], 65534, 65534)
    with pytest.raises(BadInput, match="belongs to uid 65534"):
        Run.open(run.id, str(tmp_path / "state"))
    p = run_cli("revert", "--yes", env=env)  # the latest run, found by listing: refused all the same
    assert p.returncode == 2 and b"belongs to uid 65534" in p.stderr, p.stderr
    _one_line(p)
    assert path.read_bytes() == written


def test_a_run_others_can_write_is_refused(tmp_path):
    path, env = _kubeadm_recover(tmp_path)
    run = _only_run(tmp_path / "state")
    os.chmod(run.journal_path, 0o666)
    p = run_cli("revert", "--yes", run.id, env=env)
    assert p.returncode == 2 and b"can be written by others" in p.stderr, p.stderr
    assert path.read_text() != BASE  # not reverted


def test_a_run_directory_outside_the_state_directory_is_copied_in_not_worked_on_in_place(tmp_path):
    path, env = _kubeadm_recover(tmp_path)
    run = _only_run(tmp_path / "state")
    outside = tmp_path / "elsewhere" / run.id
    shutil.copytree(run.path, outside)
    journal_before = (outside / "journal.jsonl").read_bytes()
    other = {"BREAKGLASS_STATE_DIR": str(tmp_path / "other-state")}
    p = run_cli("revert", str(outside), "--yes", "--re-arm", env=other)
    assert p.returncode == 8, p.stderr  # issue 33: re-armed unseen (--re-arm: no cluster to read): not verified
    assert path.read_text() == BASE
    assert (outside / "journal.jsonl").read_bytes() == journal_before  # the copy outside is left as it was
    [imported] = journal.list_runs(str(tmp_path / "other-state"))
    assert imported.id == run.id and "run-reverted" in open(imported.journal_path).read()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a run directory to another user")
def test_a_run_directory_outside_the_state_directory_owned_by_another_user_is_refused(tmp_path):
    path, env = _kubeadm_recover(tmp_path)
    written = path.read_bytes()
    run = _only_run(tmp_path / "state")
    outside = tmp_path / "elsewhere" / run.id
    shutil.copytree(run.path, outside)
    for root, dirs, files in os.walk(outside):
        for n in [root, *[os.path.join(root, f) for f in files]]:
            os.chown(n, 65534, 65534)
    p = run_cli("revert", str(outside), "--yes", env={"BREAKGLASS_STATE_DIR": str(tmp_path / "other-state")})
    assert p.returncode == 2 and b"belongs to uid 65534" in p.stderr, p.stderr
    assert path.read_bytes() == written
    assert not os.path.exists(tmp_path / "other-state" / "runs" / run.id)


def test_run_open_by_exact_id(tmp_path):
    state = str(tmp_path / "state")
    run = Run.create(state, "recover", {})
    assert Run.open(run.id, state, exact=True).path == run.path
    with pytest.raises(BadInput, match="no run"):
        Run.open(run.id[:10], state, exact=True)
    assert Run.open(run.id[:10], state).path == run.path  # a prefix still works where asked for
