"""Issue 34 §3: a plan file chose which program ran (`talosctl: ./evil.sh`, run as root by `--dry-run`), accepted any
SSH host key, and named the etcd CA, password and SSH key. Plans are shared in runbooks and repositories: they say
what to change and how long to wait. What breakglass runs or trusts (registry.Opt.trust) comes from the command line
or the environment only: a plan naming it is refused in one line, exit 2, naming the key, before anything runs."""

from __future__ import annotations

import os
import re
import stat

import pytest

from breakglass.flows import scripted
from breakglass.ways import registry
from tests.conftest import ROOT, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))


def _env(tmp_path) -> dict:
    return {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": "", "HOME": str(tmp_path),
            "ETCDCTL_ENDPOINTS": "", "ETCDCTL_CACERT": "", "ETCDCTL_CERT": "", "ETCDCTL_KEY": ""}


def _evil(tmp_path) -> tuple[str, str]:
    """A program that leaves a mark when it runs (and then behaves like a talosctl that cannot connect)."""
    mark = tmp_path / "it-ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {mark}\necho 'rpc error: connection refused' >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), str(mark)


def _refused(p, key: str) -> str:
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{key} is not set from a plan: pass it on the command line" in err, err
    return err


def test_a_plan_cannot_choose_talosctl_and_dry_run_runs_nothing_of_it(tmp_path):
    evil, mark = _evil(tmp_path)
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"method: talos\nnodes: [10.0.0.2]\ntalosctl: {evil}\n")
    for extra in (["--dry-run"], ["--dry-run", "-o", "json"], ["--yes"]):
        _refused(run_cli("recover", "--plan", str(plan), *extra, env=_env(tmp_path)), "talosctl")
        assert not os.path.exists(mark), "the plan's program ran"
    # the same program named on the command line is the engineer's own choice: it runs
    plan.write_text("method: talos\nnodes: [10.0.0.2]\n")
    p = run_cli("recover", "--plan", str(plan), "--talosctl", evil, "--dry-run", "--timeout", "2",
                env=_env(tmp_path))
    assert os.path.exists(mark) and p.returncode != 0, p.stderr


@pytest.mark.parametrize("content,key", [
    ("method: kubeadm\nssh: [127.0.0.1]\nssh_port: 1\nssh_accept_new: true\n", "ssh_accept_new"),
    ("method: kubeadm\nssh: [127.0.0.1]\nssh_port: 1\nknown_hosts: {tmp}/fresh_known_hosts\n", "known_hosts"),
    ("method: kubeadm\nssh: [127.0.0.1]\nssh_port: 1\nssh_key: {tmp}/id_ed25519\n", "ssh_key"),
    ("method: kubeadm\nssh: [127.0.0.1]\nssh_port: 1\nssh_config: {tmp}/ssh_config\n", "ssh_config"),
    ("method: etcd\nwebhook_config: [x]\netcd_endpoints: http://127.0.0.1:1\netcd_cacert: {tmp}/ca.crt\n",
     "etcd_cacert"),
    ("method: etcd\nwebhook_config: [x]\netcd_endpoints: http://127.0.0.1:1\netcd_user: root\n"
     "etcd_password: hunter2\n", "etcd_user"),
    ("method: etcd\nwebhook_config: [x]\netcd_endpoints: http://127.0.0.1:1\netcd-password: hunter2\n",
     "etcd-password"),
    ("method: etcd\nwebhook_config: [x]\netcd_endpoints: http://127.0.0.1:1\netcd_key: {tmp}/k.key\n", "etcd_key"),
    ("method: kubeapi\nwebhook_config: [x]\nkubeconfig: {tmp}/kubeconfig\n", "kubeconfig"),
    ("method: talos\nnodes: [10.0.0.2]\ntalosconfig: {tmp}/talosconfig\n", "talosconfig"),
])
def test_a_plan_cannot_set_keys_passwords_cas_or_the_host_key_policy(tmp_path, content, key):
    plan = tmp_path / "plan.yaml"
    plan.write_text(content.format(tmp=tmp_path))
    err = _refused(run_cli("recover", "--plan", str(plan), "--dry-run", "--timeout", "1", env=_env(tmp_path)), key)
    assert "hunter2" not in err


def test_an_ordinary_plan_still_works(tmp_path):
    cfg = tmp_path / "cp.yaml"
    cfg.write_bytes(open(os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml"), "rb").read())
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"method: talos\nconfig_file: [{cfg}]\nplugins: [ValidatingAdmissionWebhook]\n"
                    f"wait_timeout: 30\n")
    p = run_cli("recover", "--plan", str(plan), "--dry-run", env=_env(tmp_path))
    assert p.returncode == 0 and b"dry run: nothing was changed" in p.stdout, p.stderr
    for name in sorted(os.listdir(os.path.join(ROOT, "examples", "plans"))):  # none names what it trusts
        scripted.load_plan(os.path.join(ROOT, "examples", "plans", name))


# An option named like one of these chooses a program or a credential: it must say so (registry.Opt.trust), so a
# new one cannot slip into plans unnoticed.
_TRUST_BEARING = re.compile(r"(ctl|_key|password|cacert|_cert|known_hosts|ssh_config|accept_new|kubeconfig|"
                            r"talosconfig|etcd_user|_binary|_program|_command|_exec|_ca|_token|_secret)$")


def test_every_option_that_runs_or_trusts_something_says_so_in_the_registry():
    trusted = scripted.trusted_options()
    assert set(trusted) == {"talosctl", "talosconfig", "kubeconfig", "ssh_key", "ssh_accept_new", "ssh_config",
                            "known_hosts", "etcd_cacert", "etcd_cert", "etcd_key", "etcd_user", "etcd_password"}
    for way in registry.WAYS:
        for opt in way.options:
            if _TRUST_BEARING.search(opt.name):
                assert opt.trust, f"{way.name}: {opt.name} looks like a program or a credential: set Opt.trust"
    # the same option is trusted alike in every way that takes it (ways share them through groups)
    by_name: dict = {}
    for way in registry.WAYS:
        for opt in way.options:
            by_name.setdefault(opt.name, set()).add(opt.trust)
    assert all(len(v) == 1 for v in by_name.values()), by_name
