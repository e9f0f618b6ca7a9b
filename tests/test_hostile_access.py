"""The access layer against hostile input: remote paths that are options (#17.3), a run's etcd prefix on
revert (#17.6), etcd with authentication (#17.13), and runs through --etcd-via-ssh (#17.5).

Real OpenSSH and a real etcd: nothing here is mocked."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import run_cli
# issue 33: the seeded webhooks' real backend (their caBundle trusts it) and an apiserver /readyz answering 200,
# for the runs here that recover and revert: an etcd run's exit 0 is /readyz 200 and a re-armed backend that
# answers the apiserver's call (tests/test_etcd_remedy.py)
from tests.test_etcd_remedy import live  # noqa: F401 - the fixture


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
    from breakglass.core.errors import BadInput
    from breakglass.logs import remote
    from breakglass.ways import kubeadm_flags as kf, nodefile

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
    nodefile.write_remote(spy, str(f), kf.sha(b"old\n"), b"new\n")
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
        nodefile.write_remote(spy, "-n", "0" * 64, b"")
    spy.node.close()


# -- 6. revert uses the run's --etcd-prefix ---------------------------------------------------------
def _seed_k3s(srv, name="policy-a", prefix="/k3s", port=9443):
    from breakglass.webhooks import codec, sources
    from tests import etcd_server as es
    from tests.test_etcd_remedy import _obj

    from tests import backend_seed

    key = sources.etcd_key("validating", name, prefix)
    c = es.raw_client(srv)
    c.put(key, codec.encode_value(_obj(name)))
    es.put_many(c, backend_seed.healthy(prefix=prefix, port=port))  # the webhook's backend is back for the revert
    c.close()
    return key


def _get(srv, key):
    from tests import etcd_server as es

    c = es.raw_client(srv)
    try:
        return c.get(key)[0]
    finally:
        c.close()


def test_revert_uses_the_etcd_prefix_of_the_run(etcd_clean, tmp_path, live):
    key = _seed_k3s(etcd_clean, port=live["port"])
    before = _get(etcd_clean, key)
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    ep = ["--etcd-endpoints", etcd_clean.endpoint]
    api = ["--apiserver", live["apiserver"]]  # issue 33: else no apiserver is known for this etcd (exit 8)
    p = run_cli("recover", "--method", "etcd", "--etcd-prefix", "/k3s", "-w", "policy-a", "--yes", *ep, *api,
                env=env)
    assert p.returncode == 0, p.stderr
    assert _get(etcd_clean, key) is None
    # revert is given the endpoints again (as after a reboot), but not the prefix: the journal has it
    r = run_cli("revert", "--yes", *ep, env=env)
    assert r.returncode == 0, r.stderr
    assert _get(etcd_clean, key) == before
    # and without any etcd option, from the journal alone (endpoints and prefix)
    key_b = _seed_k3s(etcd_clean, "policy-b", port=live["port"])
    assert run_cli("recover", "--method", "etcd", "--etcd-prefix", "/k3s/", "-w", "policy-b", "--yes", *ep, *api,
                   env=env).returncode == 0
    assert _get(etcd_clean, key_b) is None
    r = run_cli("revert", "--yes", env=env)
    assert r.returncode == 0, r.stderr
    assert _get(etcd_clean, key_b) is not None


def test_revert_refuses_a_journaled_key_outside_the_runs_prefix(etcd_clean, tmp_path, live):
    """A journal edited to name another key (or prefix) is refused in one line, never an unexpected error."""
    import glob
    import json

    key = _seed_k3s(etcd_clean, port=live["port"])
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    ep = ["--etcd-endpoints", etcd_clean.endpoint]
    assert run_cli("recover", "--method", "etcd", "--etcd-prefix", "/k3s", "-w", "policy-a", "--yes", *ep,
                   "--apiserver", live["apiserver"], env=env).returncode == 0  # issue 33: its /readyz
    [jpath] = glob.glob(str(tmp_path / "state" / "runs" / "*" / "journal.jsonl"))
    original = open(jpath).read()
    for old, new in (('"etcd_prefix": "/k3s"', '"etcd_prefix": "k3s"'),
                     ('"etcd_prefix": "/k3s"', '"etcd_prefix": "/registry"')):
        assert old in original
        with open(jpath, "w") as f:
            f.write(original.replace(old, new))
        r = run_cli("revert", "--yes", *ep, env=env)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.splitlines()) == 1 and b"unexpected" not in r.stderr, r.stderr
    assert _get(etcd_clean, key) is None
    with open(jpath, "w") as f:
        f.write(original)
    assert run_cli("revert", "--yes", *ep, env=env).returncode == 0
    assert json.loads(run_cli("runs", "-o", "json", env=env).stdout)["result"][0]["status"] == "reverted"


# -- 13. etcd with authentication -----------------------------------------------------------------
PASSWORD = "Zq7-hunter2-not-in-output"


@pytest.fixture(scope="module")
def etcd_auth(tmp_path_factory):
    """A real etcd with authentication enabled (root:PASSWORD), as etcdctl sets it up."""
    from tests import etcd_server as es

    srv = es.start(str(tmp_path_factory.mktemp("etcd-auth")))
    ctl = ["etcdctl", "--endpoints", srv.endpoint]
    env = dict(os.environ, ETCDCTL_API="3")
    for args in (["user", "add", f"root:{PASSWORD}"], ["auth", "enable"]):
        p = subprocess.run(ctl + args, capture_output=True, env=env, timeout=30)
        assert p.returncode == 0, p.stderr
    srv.ctl = ctl + ["--user", f"root:{PASSWORD}"]
    yield srv
    srv.stop()


def _put(srv, key, value, port=9443):
    from breakglass.webhooks import codec
    from tests.test_etcd_remedy import _obj

    from tests import backend_seed

    subprocess.run(srv.ctl + ["put", key], input=codec.encode_value(_obj(key.rsplit("/", 1)[1])),
                   capture_output=True, check=True, env=dict(os.environ, ETCDCTL_API="3"), timeout=30)
    for k, v in backend_seed.healthy(port=port):  # the webhook's backend is back for the revert
        subprocess.run(srv.ctl + ["put", k.decode()], input=v, capture_output=True, check=True,
                       env=dict(os.environ, ETCDCTL_API="3"), timeout=30)


def _exists(srv, key):
    p = subprocess.run(srv.ctl + ["get", key, "--keys-only"], capture_output=True, check=True,
                       env=dict(os.environ, ETCDCTL_API="3"), timeout=30)
    return key.encode() in p.stdout


def _no_etcdctl_env():
    return {k: "" for k in ("ETCDCTL_USER", "ETCDCTL_PASSWORD")}


def test_etcd_user_and_password_flags_env_and_refusals(etcd_auth, tmp_path):
    key = "/registry/validatingwebhookconfigurations/policy-auth"
    _put(etcd_auth, key, None)
    ep = ["--etcd-endpoints", etcd_auth.endpoint]
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), **_no_etcdctl_env()}
    # no user: etcd says so; breakglass says what to give
    p = run_cli("etcd", "list", *ep, env=env)
    assert p.returncode == 5 and b"user name is empty" in p.stderr and b"--etcd-user" in p.stderr, p.stderr
    # USER:PASSWORD like etcdctl, --etcd-user with --etcd-password, and ETCDCTL_USER / ETCDCTL_PASSWORD
    for args, extra in ((["--etcd-user", f"root:{PASSWORD}"], {}),
                        (["--etcd-user", "root", "--etcd-password", PASSWORD], {}),
                        ([], {"ETCDCTL_USER": "root", "ETCDCTL_PASSWORD": PASSWORD}),
                        ([], {"ETCDCTL_USER": f"root:{PASSWORD}"})):
        p = run_cli("etcd", "list", *ep, *args, "-o", "json", env={**env, **extra})
        assert p.returncode == 0, (args, extra, p.stderr)
        assert "policy-auth" in p.stdout.decode() and PASSWORD not in (p.stdout + p.stderr).decode()
    # a wrong password: exit 5, one line, the password not in it
    wrong = "wrong-" + PASSWORD
    for args in (["--etcd-user", f"root:{wrong}"], ["--etcd-user", "root", "--etcd-password", wrong]):
        p = run_cli("etcd", "list", *ep, *args, env=env)
        assert p.returncode == 5, p.stderr
        assert len(p.stderr.splitlines()) == 1 and b"authentication failed" in p.stderr, p.stderr
        assert wrong.encode() not in p.stdout + p.stderr and b"hunter2" not in p.stdout + p.stderr
    # a user and no password, and no terminal to ask on: one line, exit 2
    p = run_cli("etcd", "list", *ep, "--etcd-user", "root", env=env)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and b"ETCDCTL_PASSWORD" in p.stderr, p.stderr


def test_recover_and_revert_with_auth_keep_the_password_out_of_the_run(etcd_auth, tmp_path, live):
    key = "/registry/validatingwebhookconfigurations/policy-auth2"
    _put(etcd_auth, key, None, port=live["port"])
    ep = ["--etcd-endpoints", etcd_auth.endpoint]
    state = tmp_path / "state"
    env = {"BREAKGLASS_STATE_DIR": str(state), **_no_etcdctl_env()}
    p = run_cli("recover", "--method", "etcd", "-w", "policy-auth2", "--yes", *ep, "--etcd-user", "root",
                "--etcd-password", PASSWORD, "-v", "--apiserver", live["apiserver"], env=env)  # issue 33: /readyz
    assert p.returncode == 0, p.stderr
    assert not _exists(etcd_auth, key)
    assert PASSWORD not in (p.stdout + p.stderr).decode()
    # revert from the journal alone: the run's user is journaled, its password comes from the environment
    r = run_cli("revert", "--yes", "-v", env={**env, "ETCDCTL_PASSWORD": PASSWORD})
    assert r.returncode == 0, r.stderr
    assert _exists(etcd_auth, key)
    for root, _, files in os.walk(state):
        for f in files:
            data = open(os.path.join(root, f), "rb").read()
            assert PASSWORD.encode() not in data and b"hunter2" not in data, f
    assert b'"etcd_user": "root"' in open(next(state.glob("runs/*/journal.jsonl")), "rb").read()


# -- 5. runs through --etcd-via-ssh -------------------------------------------------------------------
def _seed_tls(srv, names, port=9443):
    from breakglass.webhooks import codec, sources
    from tests import etcd_server as es
    from tests.test_etcd_remedy import _obj

    from tests import backend_seed

    c = es.raw_client(srv)
    c.delete_prefix(b"/")
    for n in names:
        c.put(sources.etcd_key("validating", n), codec.encode_value(_obj(n)))
    es.put_many(c, backend_seed.healthy(port=port))  # the webhook's backend is back for the revert
    c.close()


def _tls_present(srv, name):
    from breakglass.webhooks import sources
    from tests import etcd_server as es

    c = es.raw_client(srv)
    try:
        return c.get(sources.etcd_key("validating", name))[0] is not None
    finally:
        c.close()


def _via_ssh(sshd, srv):
    port = srv.endpoint.rsplit(":", 1)[1]
    return ["--etcd-via-ssh", "cp1", "--etcd-endpoints", f"127.0.0.1:{port}", "--etcd-cacert", srv.cacert,
            "--etcd-cert", srv.cert, "--etcd-key", srv.key, *_ssh(sshd)]


def test_etcd_via_ssh_run_journals_the_route_and_reverts(sshd, etcd_tls, tmp_path, live):
    import json

    _seed_tls(etcd_tls, ["policy-a", "policy-b"], port=live["port"])
    state = tmp_path / "state"
    env = {"BREAKGLASS_STATE_DIR": str(state)}
    # issue 33: --apiserver, else the node's https://cp1:6443 (the SSH alias, no apiserver) is waited for until
    # --wait-timeout, then exit 8
    api = ["--apiserver", live["apiserver"]]
    p = run_cli("recover", "--method", "etcd", "-w", "policy-a", "--yes", *_via_ssh(sshd, etcd_tls), *api, env=env)
    assert p.returncode == 0, p.stderr
    assert not _tls_present(etcd_tls, "policy-a")
    [journal] = state.glob("runs/*/journal.jsonl")
    started = next(e for e in map(json.loads, open(journal)) if e["event"] == "planned")
    port = etcd_tls.endpoint.rsplit(":", 1)[1]
    assert started["target"]["etcd_via_ssh"] == "cp1", started
    assert started["target"]["etcd_endpoints"] == [f"https://127.0.0.1:{port}"]  # the node's view, no forward port
    assert started["target"]["etcd_node_certs"] == {"cacert": etcd_tls.cacert, "cert": etcd_tls.cert,
                                                    "key": etcd_tls.key}
    # revert with only the SSH options: the journal's route (as after a reboot of the bastion)
    r = run_cli("revert", "--yes", *_ssh(sshd), env=env)
    assert r.returncode == 0, r.stderr
    assert _tls_present(etcd_tls, "policy-a")
    # etcd restore and revert take --etcd-via-ssh and the SSH options
    p = run_cli("recover", "--method", "etcd", "-w", "policy-b", "--yes", *_via_ssh(sshd, etcd_tls), *api, env=env)
    assert p.returncode == 0, p.stderr
    run = sorted(state.glob("runs/*"))[-1].name
    r = run_cli("etcd", "restore", run, "--yes", *_via_ssh(sshd, etcd_tls), env=env)
    assert r.returncode == 0, r.stderr
    assert _tls_present(etcd_tls, "policy-b")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_signal_at_the_prompt_leaves_no_client_key_on_disk(sshd, etcd_tls, tmp_path, sig):
    import pty
    import select
    import signal
    import sys
    import time

    from tests.conftest import ROOT

    _seed_tls(etcd_tls, ["policy-a"])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    master, slave = pty.openpty()
    env = dict(os.environ, TMPDIR=str(tmp), BREAKGLASS_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, "-m", "breakglass", "recover", "--method", "etcd", "-w", "policy-a",
                             *_via_ssh(sshd, etcd_tls)], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                            env=env, start_new_session=True)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 60
    while b"Type policy-a to go on" not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
    assert b"Type policy-a to go on" in seen, seen
    # the kernel hands a process signal to any thread not blocking it: only the main thread may take it
    takers = []
    for status in os.listdir(f"/proc/{proc.pid}/task"):
        fields = dict(line.split(":\t", 1) for line in open(f"/proc/{proc.pid}/task/{status}/status").read()
                      .splitlines() if ":\t" in line)
        blocked = int(fields["SigBlk"], 16)
        if int(status) != proc.pid and not all(blocked & (1 << (s - 1)) for s in (signal.SIGTERM, signal.SIGHUP)):
            takers.append(fields["Name"])
    assert not takers, takers
    time.sleep(0.5)  # into input()'s read: a signal between the prompt and the read waits for the read (Python)
    proc.send_signal(getattr(signal, sig))
    try:
        # handled as Ctrl-C by the main thread: SSH's and gRPC's helper threads never take the signal, which
        # would leave the main thread asleep at the prompt
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    os.close(master)
    key = open(etcd_tls.key, "rb").read()
    left = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs]
    assert not [f for f in left if key in open(f, "rb").read()], left
    assert not os.listdir(tmp), os.listdir(tmp)
    assert _tls_present(etcd_tls, "policy-a")


def test_a_missing_etcd_password_is_asked_for_hidden_on_a_terminal(etcd_auth, tmp_path):
    import pty
    import select
    import sys
    import time

    from tests.conftest import ROOT

    _put(etcd_auth, "/registry/validatingwebhookconfigurations/policy-prompt", None)
    master, slave = pty.openpty()
    env = dict(os.environ, BREAKGLASS_STATE_DIR=str(tmp_path / "state"), **_no_etcdctl_env())
    proc = subprocess.Popen([sys.executable, "-m", "breakglass", "etcd", "list", "--etcd-endpoints",
                             etcd_auth.endpoint, "--etcd-user", "root"], stdin=slave, stdout=slave, stderr=slave,
                            cwd=ROOT, env=env, start_new_session=True)
    os.close(slave)

    def read_until(marker, seen=b""):
        deadline = time.monotonic() + 60
        while marker not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        return seen

    seen = read_until(b"etcd password for root: ")
    assert b"etcd password for root: " in seen, seen
    os.write(master, PASSWORD.encode() + b"\n")
    seen = read_until(b"policy-prompt", seen)
    assert proc.wait(30) == 0, seen
    os.close(master)
    assert b"policy-prompt" in seen and PASSWORD.encode() not in seen  # not echoed, not printed


def test_a_refused_ssh_connection_says_so_in_plain_words():
    import socket

    from breakglass.access.ssh import Node, SshOptions
    from breakglass.core.errors import Unreachable

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(Unreachable) as e:
        Node("127.0.0.1", SshOptions(port=port, timeout=2)).connect()
    assert str(e.value) == f"ssh 127.0.0.1:{port}: cannot connect (Connection refused)"


@pytest.mark.parametrize("host", ["cp1;rm -rf /", "cp1 cp2", "cp1\nid", "-oProxyCommand=touch PWNED", "$(id)",
                                  "cp1`id`", "a" * 300])
def test_a_host_that_is_not_a_name_is_refused_before_any_connection(host, tmp_path):
    # every command that takes --ssh builds its connections through access.ssh.Node: one line, exit 2
    host = host.replace("PWNED", str(tmp_path / "pwned"))
    for args in (["recover", "--method", "k3s", "--ssh", host, "--dry-run"],
                 ["diagnose", "--ssh", host],
                 ["leaks", "--ssh", host, "--audit-log", "/var/log/audit.log"]):
        p = run_cli(*args, env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
        assert p.returncode == 2, (args, p.stderr)
        assert b"is not a host name or address" in p.stderr and p.stderr.count(b"\n") <= 2, (args, p.stderr)
    assert not (tmp_path / "pwned").exists()


def test_ssh_hosts_and_addresses_people_type_are_taken():
    from breakglass.access.ssh import host_problem

    for host in ("cp1", "cp-1.prod.example.com", "10.0.0.11", "::1", "[fe80::1%eth0]", "bastion_2"):
        assert host_problem(host) is None, host


def test_the_wizard_asks_again_for_a_host_list_with_a_typo():
    from breakglass.flows import wizard

    assert wizard._hosts("cp1,cp2,cp3") is None
    assert "is not a host name" in wizard._hosts("cp1 cp2")
    assert wizard._hosts(" , ") == "at least one is needed"
