"""The access layer against hostile input: remote paths that are options (#17.3), a run's etcd prefix on
revert (#17.6), etcd with authentication (#17.13), and runs through --etcd-via-ssh (#17.5).

Real OpenSSH and a real etcd: nothing here is mocked."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import run_cli


# -- 3. option injection over SSH ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def victim():
    """A throwaway user with passwordless sudo whose home is where a remote `find -delete` would run."""
    if shutil.which("sudo") is None or shutil.which("useradd") is None:
        pytest.fail("sudo and useradd are needed: `make test` installs sudo")
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", "bghostile"], capture_output=True)
    subprocess.run(["passwd", "-d", "bghostile"], capture_output=True)
    with open("/etc/sudoers.d/breakglass-hostile", "w") as f:
        f.write("bghostile ALL=(ALL) NOPASSWD: ALL\n")
    os.chmod("/etc/sudoers.d/breakglass-hostile", 0o440)
    home = os.path.expanduser("~bghostile")
    yield home
    os.unlink("/etc/sudoers.d/breakglass-hostile")


def _ssh(sshd):
    return ["--ssh-config", sshd.ssh_config, "--known-hosts", sshd.known_hosts]


def test_audit_log_that_is_an_option_never_reaches_find(sshd, victim):
    canary = os.path.join(victim, "canary")
    with open(canary, "w") as f:
        f.write("still here\n")
    p = run_cli("leaks", "--ssh", "cp1", "--ssh-user", "bghostile", "--audit-log=-delete", *_ssh(sshd))
    assert os.path.exists(canary), "find -delete ran in the SSH user's home"
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.splitlines()) == 1 and b"must be an absolute path" in p.stderr
    p = run_cli("leaks", "--ssh", "cp1", "--apiserver-log", "audit.log", *_ssh(sshd))
    assert p.returncode == 2 and b"must be an absolute path" in p.stderr and len(p.stderr.splitlines()) == 1


def test_manifest_path_that_is_an_option_is_refused(sshd, tmp_path):
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    for args in (["--manifest-path", "-n"], ["--manifest-path", "etc/kubernetes/manifests/kube-apiserver.yaml"],
                 ["--node-backup-dir", "--help"]):
        p = run_cli("recover", "--method", "kubeadm", "--ssh", "cp1", "--dry-run", *args, *_ssh(sshd), env=env)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.splitlines()) == 1 and b"must be an absolute path" in p.stderr, p.stderr
    p = run_cli("diagnose", "--ssh", "cp1", "--pods-dir", "-delete", *_ssh(sshd))
    assert p.returncode == 2 and b"must be an absolute path" in p.stderr and len(p.stderr.splitlines()) == 1
    p = run_cli("audit", "--etcd-via-ssh", "cp1", "--etcd-cacert", "-n", *_ssh(sshd))
    assert p.returncode == 2 and b"must be an absolute path" in p.stderr and len(p.stderr.splitlines()) == 1


class _Spy:
    """A real SSH node that records every command it is given."""

    def __init__(self, node):
        self.node, self.host, self.commands = node, node.host, []

    def run(self, command, **kw):
        self.commands.append(command)
        return self.node.run(command, **kw)

    def stream(self, command, **kw):
        self.commands.append(command)
        return self.node.stream(command, **kw)


def test_every_remote_command_takes_its_path_after_double_dash(sshd, tmp_path):
    from breakglass.access.ssh import Node, SshOptions
    from breakglass.errors import BadInput
    from breakglass.logs import remote
    from breakglass.remedies import kubeadm_flags as kf

    spy = _Spy(Node("cp1", SshOptions(config=sshd.ssh_config, known_hosts=sshd.known_hosts)).connect())
    d = tmp_path / "logs dir"
    d.mkdir()
    (d / "a.log").write_bytes(b"x\n")
    [src] = remote.ssh_files(spy, [str(d)])
    s = src.opener()
    assert s.read() == b"x\n"
    s.close()
    f = tmp_path / "m.yaml"
    f.write_bytes(b"old\n")
    assert kf.read_remote(spy, str(f)) == b"old\n"
    kf.write_remote(spy, str(f), kf.sha(b"old\n"), b"new\n")
    assert f.read_bytes() == b"new\n"
    for c in spy.commands:
        assert " -- " in c, c
    assert "mv -f -- " in spy.commands[-1] and "sha256sum -- " in spy.commands[-1]
    for bad in ("-n", "relative/path", "", "/a\nb"):
        with pytest.raises(BadInput, match="must be an absolute path"):
            kf.read_remote(spy, bad)
        with pytest.raises(BadInput, match="must be an absolute path"):
            remote.ssh_files(spy, [bad])
    with pytest.raises(BadInput, match="must be an absolute path"):
        kf.write_remote(spy, "-n", "0" * 64, b"")
    spy.node.close()
