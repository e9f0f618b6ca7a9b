"""Issue 47 §3: a policy lockout's diagnosis names the policy's own admission plugin, and every file way that
switches plugins off (k3s, RKE2, a Talos machine config) switches that one off, not the webhook plugins, which
would leave the policy refusing the apiserver's writes. The kubeadm way is run on a real apiserver in
test_policy_lockout; these check the same plan reaches each other way's file, and comes back out on revert."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import ROOT, run_cli
from tests.test_policy_signatures import _audit

K3S = os.path.join(ROOT, "tests", "k3s")
TALOS = os.path.join(ROOT, "tests", "fixtures", "talos")


def _diagnosis(tmp_path, word: str) -> str:
    msg = (f'servicecidrs.networking.k8s.io "kubernetes" is forbidden: {word} \'require-owner\' with binding '
           f'\'require-owner-b\' denied request: every object needs an owner label')
    log = tmp_path / "audit.log"
    log.write_text(_audit("system:apiserver", "servicecidrs", "kubernetes", msg))
    d = run_cli("diagnose", str(log), "-o", "json")
    assert d.returncode == 3, d.stderr
    path = tmp_path / "diag.json"
    path.write_bytes(d.stdout)
    return str(path)


@pytest.mark.parametrize("word,plugin", [("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy"),
                                         ("policy", "MutatingAdmissionPolicy")])
@pytest.mark.parametrize("distro", ["k3s", "rke2"])
def test_the_k3s_and_rke2_config_ways_switch_the_policys_plugin_off_and_back(tmp_path, distro, word, plugin):
    cfg = tmp_path / "repo" / "config.yaml"
    cfg.parent.mkdir()
    shutil.copy(os.path.join(K3S, "rke2-hardened.yaml" if distro == "rke2" else "k3s-ansible.yaml"), cfg)
    original = cfg.read_bytes()
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    diag = _diagnosis(tmp_path, word)
    p = run_cli("recover", "--method", distro, "--config-file", str(cfg), "--diagnosis", diag, "--yes", env=env)
    assert p.returncode == 8, p.stderr  # edited, not applied: no server runs this file
    dropin = (tmp_path / "repo" / "config.yaml.d" / "99-breakglass.yaml").read_text()
    assert f"--disable-admission-plugins={plugin}" in dropin or f"disable-admission-plugins={plugin}" in dropin, dropin
    assert "AdmissionWebhook" not in dropin, dropin
    assert run_cli("revert", "--yes", "--re-arm", env=env).returncode == 8
    assert cfg.read_bytes() == original and os.listdir(tmp_path / "repo") == ["config.yaml"]


@pytest.mark.parametrize("version", ["v1.14.1"])
def test_the_talos_config_way_switches_the_policys_plugin_off_and_back(tmp_path, version):
    import yaml

    cfg = tmp_path / "cp.yaml"
    shutil.copy(os.path.join(ROOT, "tests", "talos", "generated", version, "controlplane.yaml"), cfg)
    original = cfg.read_bytes()
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    diag = _diagnosis(tmp_path, "ValidatingAdmissionPolicy")
    p = run_cli("recover", "--method", "talos", "--config-file", str(cfg), "--diagnosis", diag, "--yes", env=env)
    assert p.returncode == 8, p.stderr
    from tests.test_talos import _api_args

    args = _api_args([d for d in yaml.safe_load_all(cfg.read_text()) if d])
    assert args["disable-admission-plugins"] == "ValidatingAdmissionPolicy", args
    assert run_cli("revert", "--yes", "--re-arm", env=env).returncode == 8
    assert cfg.read_bytes() == original
