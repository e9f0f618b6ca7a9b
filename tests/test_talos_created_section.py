"""Issue 27 §7: a Talos machine config without ``cluster.apiServer``. Recover creates
``cluster.apiServer.extraArgs``; revert must accept exactly that section (it checks that the backup differs from
the file only in the admission keys) and put the file back byte for byte, with or without --force, and still
refuse a backup that differs in anything else. With Talos' own machinery built (go/talos-machinery), the configs
Talos' generator writes, less their apiServer section, go through recover and revert and are validated by
Talos at each step."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from breakglass.core.journal import JournalError
from breakglass.ways.talos_flags import _only_admission_keys_differ
from tests import fake_talosctl as standin
from tests.conftest import ROOT, run_cli

VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"
SINGLE = os.path.join(ROOT, "tests", "talos", "v1.10-single.yaml")


def _without_api_server(text: str) -> str:
    """The config with its ``cluster.apiServer`` block taken out, every other line as it was."""
    lines = text.splitlines(True)
    start = next(i for i, line in enumerate(lines) if line.strip() == "apiServer:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    out = "".join(lines[:start] + lines[end:])
    assert "apiServer" not in out.replace("# API server", "")
    return out


def _env(tmp_path) -> dict:
    # no kubeconfig of this machine's (issue 33): the file's cluster has no API to read here
    return {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}


def _recover_revert(tmp_path, text: str, *revert_args: str):
    """Recover, then revert: issue 33: nothing can read the cluster's webhooks, so a plain revert is a blind
    re-arm, refused (exit 4) with the file left as recover wrote it; the revert returned is with --re-arm (or
    --force), exit 8 (re-armed unseen, not verified)."""
    cfg = tmp_path / "cp.yaml"
    cfg.write_text(text)
    env = _env(tmp_path)
    p = run_cli("recover", "--method", "talos", "--config-file", str(cfg), "--yes", env=env)
    assert p.returncode == 8, p.stderr  # edited, not applied
    written = cfg.read_text()
    assert f"disable-admission-plugins: {VWH},{MWH}" in written and "apiServer:" in written
    blind = run_cli("revert", "--yes", env=env)
    assert blind.returncode == 4 and b"unseen" in blind.stderr and cfg.read_text() == written, blind.stderr
    r = run_cli("revert", "--yes", *(revert_args or ("--re-arm",)), env=env)
    return cfg, written, r


@pytest.mark.parametrize("force", [False, True])
def test_revert_takes_out_the_section_recover_created(tmp_path, force):
    original = _without_api_server(open(SINGLE).read())
    cfg, _, r = _recover_revert(tmp_path, original, *(["--force"] if force else []))
    assert r.returncode == 8, r.stderr  # issue 33: re-armed unseen, not verified
    assert cfg.read_text() == original
    assert b"byte for byte as it was before the run" in r.stdout


def test_revert_after_other_changes_takes_back_only_its_own_lines(tmp_path):
    original = _without_api_server(open(SINGLE).read())
    cfg = tmp_path / "cp.yaml"
    cfg.write_text(original)
    env = _env(tmp_path)
    assert run_cli("recover", "--method", "talos", "--config-file", str(cfg), "--yes", env=env).returncode == 8
    cfg.write_text("# reviewed by ops\n" + cfg.read_text())
    r = run_cli("revert", "--yes", "--re-arm", env=env)
    assert r.returncode == 8, r.stderr  # issue 33: re-armed unseen (nothing to read the cluster through)
    assert cfg.read_text() == "# reviewed by ops\n" + original


def test_the_backup_may_differ_only_by_that_section():
    original = _without_api_server(open(SINGLE).read())
    created = original.replace("  clusterName: prod\n", "  clusterName: prod\n  apiServer:\n    extraArgs:\n"
                               f"      disable-admission-plugins: {VWH}\n")
    _only_admission_keys_differ(original, created, "/cp.yaml")  # exactly what recover makes
    for at, more in (("  apiServer:\n", "    image: registry.k8s.io/kube-apiserver:v1.32.3\n"),
                     ("    extraArgs:\n", "      profiling: 'true'\n")):
        other = created.replace(at, at + more, 1)
        with pytest.raises(JournalError, match="differs from the file in more than the admission keys"):
            _only_admission_keys_differ(original, other, "/cp.yaml")


# -- with Talos' own machinery ---------------------------------------------------------------------------------

LEGACY_BUILDS = [v for v in standin.machinery_builds() if tuple(map(int, v.split("."))) < (1, 14)]


def _validate(version: str, text: str) -> dict:
    problem = standin.missing_machinery(version)
    if problem:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(problem)
    p = subprocess.run([standin.machinery_binary(version), "validate", "--json", "--config", "-", "--mode", "metal"],
                       input=text, capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("version", LEGACY_BUILDS)
def test_talos_generated_config_without_api_server_recovers_and_reverts(version, tmp_path):
    with open(os.path.join(ROOT, "tests", "talos", "generated", f"v{version}", "controlplane.yaml")) as f:
        original = _without_api_server(f.read())
    res = _validate(version, original)
    assert res["ok"], res  # Talos takes a config without an apiServer section
    cfg, written, r = _recover_revert(tmp_path, original)
    res = _validate(version, written)
    assert res["ok"], res  # and the section breakglass created
    assert r.returncode == 8, r.stderr  # issue 33: re-armed unseen, not verified
    assert cfg.read_text() == original
