"""--try-for: the Talos way through talosctl's --mode=try, Talos' own dead man's switch (issue 35 §5).

Against the talosctl stand-in (tests/fake_talosctl.py: machined's try semantics; the patch itself is Talos' own
code): the change is applied in try mode with the deadline asked for, every dry run is made in try mode (one in
another mode would cancel a pending rollback), the outcome says when the node puts its config back, a revert
before the deadline applies the earlier keys in no-reboot mode (which also cancels the rollback), and one after
it finds the keys as they were and says Talos rolled the try back. Nothing is timed: the test moves the
stand-in's deadline instead of waiting for it.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from breakglass.text import admission_flags as flags
from tests.test_talos import FakeTalos, _api_args, _machinery, _revert_unseen


@pytest.fixture
def talos(tmp_path):
    _machinery("1.12")
    t = FakeTalos(tmp_path)
    t.node("cp1", "v1.12-multidoc-overlap.yaml")
    return t


def _calls(t) -> list[list[str]]:
    if not (t.dir / "calls.log").exists():  # talosctl never called
        return []
    with open(t.dir / "calls.log") as f:
        return [json.loads(line) for line in f]


def _patches(t) -> list[list[str]]:
    return [c for c in _calls(t) if "patch" in c]


def _fire_the_timer(t, node="cp1"):
    path = t.dir / "nodes" / f"{node}.try.json"
    held = json.loads(path.read_text())
    held["until"] = 0
    path.write_text(json.dumps(held))


def test_applied_in_try_mode_with_its_deadline_and_the_outcome_says_when_it_rolls_back(talos):
    p = talos.cli("recover", "--method", "talos", "-n", "cp1", "--try-for", "10m", "--yes", "--no-wait",
                  "-o", "json")
    assert p.returncode == 8, p.stderr  # --no-wait: applied, not verified (issue 33)
    assert flags.DISABLE in _api_args(talos.docs("cp1"))
    dry, real = _patches(talos)
    assert "--dry-run" in dry and "--mode=try" in dry  # a dry run in another mode would cancel a pending try
    assert "--dry-run" not in real and real[real.index("--mode=try") + 1:][:2] == ["--timeout", "10m"], real
    assert (talos.dir / "nodes" / "cp1.try.json").exists()
    said = p.stdout.decode() + p.stderr.decode()
    assert "puts its previous config back by itself 10m after the apply" in said, said
    assert "--try-for 10m" in p.stderr.decode()  # the note before the question
    run = json.loads(p.stdout)["result"]["run"]
    applied = [json.loads(ln) for ln in open(os.path.join(talos.env["BREAKGLASS_STATE_DIR"], "runs", run,
                                                             "journal.jsonl")) if '"applied"' in ln]
    until = dt.datetime.fromisoformat(applied[0]["result"]["try_until"])
    assert dt.timedelta(minutes=9) < until - dt.datetime.now(dt.timezone.utc) <= dt.timedelta(minutes=10)


def test_after_the_deadline_the_revert_finds_talos_rolled_it_back(talos):
    assert talos.cli("recover", "--method", "talos", "-n", "cp1", "--try-for", "5m", "--yes",
                     "--no-wait").returncode == 8
    _fire_the_timer(talos)
    p = _revert_unseen(talos)
    said = " ".join((p.stdout + p.stderr).decode().split())  # as one line, however it wrapped
    # (the journal's deadline is still ahead: the stand-in's timer was made to fire early)
    assert "the try was rolled back before its deadline" in said, said
    assert _api_args(talos.docs("cp1")) == _api_args(talos.initial["cp1"])
    assert not [c for c in _patches(talos) if "--dry-run" not in c and "--mode=no-reboot" in c]  # nothing written


def test_a_revert_before_the_deadline_restores_the_keys_and_cancels_the_rollback(talos):
    assert talos.cli("recover", "--method", "talos", "-n", "cp1", "--try-for", "1h30m", "--yes",
                     "--no-wait").returncode == 8
    p = _revert_unseen(talos)
    assert p.returncode == 8, p.stderr  # re-armed unseen: not verified (issue 33)
    assert _api_args(talos.docs("cp1")) == _api_args(talos.initial["cp1"])
    last = _patches(talos)[-1]
    assert "--mode=no-reboot" in last and "--dry-run" not in last  # persisted, not another try
    assert not (talos.dir / "nodes" / "cp1.try.json").exists()  # Talos' rollback cancelled by that apply


def test_the_plain_way_never_disarms_a_pending_try_with_its_dry_run(talos):
    """Someone applied a try by hand; a plain recover's dry run must not cancel its rollback."""
    assert talos.cli("recover", "--method", "talos", "-n", "cp1", "--try-for", "10m", "--yes",
                     "--no-wait").returncode == 8
    held = (talos.dir / "nodes" / "cp1.try.json").read_text()
    p = talos.cli("recover", "--method", "talos", "-n", "cp1", "--plugins", "ValidatingAdmissionPolicy",
                  "--dry-run")
    assert p.returncode in (0, 3), p.stderr
    assert (talos.dir / "nodes" / "cp1.try.json").read_text() == held


@pytest.mark.parametrize("value,said", [("10", "not a duration"), ("-5m", "not a duration"), ("1x", "not a duration"),
                                        ("30s", "at least 1m"), ("", "not a duration"), ("5m;reboot", "not a duration")])
def test_a_bad_duration_is_one_line_and_nothing_runs(talos, value, said):
    p = talos.cli("recover", "--method", "talos", "-n", "cp1", "--try-for", value, "--yes")
    err = p.stderr.decode()
    assert p.returncode == 2 and said in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2, err
    assert not _patches(talos) and talos.docs("cp1") == talos.initial["cp1"]


def test_a_config_file_gets_the_try_mode_apply_command(talos, tmp_path):
    cfg = tmp_path / "controlplane.yaml"
    cfg.write_text((talos.dir / "nodes" / "cp1.yaml").read_text())
    p = talos.cli("recover", "--method", "talos", "--config-file", str(cfg), "-n", "10.0.0.2", "--try-for", "15m",
                  "--yes", "-o", "json")
    assert p.returncode == 8, p.stderr  # edited, not applied
    nxt = json.loads(p.stdout)["outcome"]["next"]
    assert nxt[0] == f"talosctl apply-config -n 10.0.0.2 -f {cfg} --mode=try --timeout 15m", nxt


def _wizard_to_the_confirmation(talos, tmp_path, monkeypatch, log: str, try_answer: str):
    """The wizard through the Talos way in (talosctl, node cp1) to the typed confirmation, which is declined."""
    from breakglass.core.errors import Declined
    from breakglass.flows import wizard
    from breakglass.present.prompts import ScriptedPrompter

    for k, v in talos.env.items():
        monkeypatch.setenv(k, v)
    cfg = tmp_path / "talosconfig"
    cfg.write_text("context: prod\ncontexts:\n  prod:\n    endpoints: [127.0.0.1]\n    nodes: [cp1]\n")
    talosctl = str(tmp_path / "bin" / "talosctl")
    p = ScriptedPrompter([log, "talos", str(cfg), "cp1", "", talosctl, "talos", try_answer, "", "back", "quit"])
    with pytest.raises(Declined):
        wizard.run(p, talos.env["BREAKGLASS_STATE_DIR"])
    return "\n".join(p.transcript)


def test_the_wizard_offers_talos_try_mode_first_for_a_bootstrap_deadlock(talos, tmp_path, monkeypatch):
    from tests.test_wizard import LOG  # the seed's log: Kyverno blocking the default ServiceCIDR at start-up

    text = _wizard_to_the_confirmation(talos, tmp_path, monkeypatch, LOG, "10m")
    question = text.index("? Should Talos undo this by itself? (talosctl --mode=try)")
    offered = [ln for ln in text[:question].splitlines() if ln.startswith("  - ")][-3:]
    assert offered[0].startswith("  - yes: Talos puts the previous config back 10m"), offered
    assert "blocks the apiserver's start-up writes only once" in text
    assert "note: --try-for 10m: applied with talosctl's --mode=try" in text, text
    dry = _patches(talos)
    assert dry and all("--dry-run" in c and "--mode=try" in c for c in dry), dry  # planned, never applied
    assert talos.docs("cp1") == talos.initial["cp1"] and not (talos.dir / "nodes" / "cp1.try.json").exists()


def test_the_wizard_keeps_the_flag_until_revert_first_when_the_block_recurs(talos, tmp_path, monkeypatch):
    # Istio's webhook blocking node Leases: it blocks again whenever it is re-armed with its backend down
    log = os.path.join(os.path.dirname(__file__), "..", "examples", "logs", "k3s-journald-istio.log")
    text = _wizard_to_the_confirmation(talos, tmp_path, monkeypatch, log, "")
    question = text.index("? Should Talos undo this by itself? (talosctl --mode=try)")
    offered = [ln for ln in text[:question].splitlines() if ln.startswith("  - ")][-3:]
    assert offered[0].startswith("  - no: the plugins stay off until you run breakglass revert"), offered
    assert "--try-for" not in text and "--timeout 10m" not in text
    assert _patches(talos)  # planned (its dry run), never applied
    assert talos.docs("cp1") == talos.initial["cp1"]
