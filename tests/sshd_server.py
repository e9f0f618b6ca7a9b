"""A real OpenSSH server (Debian's openssh-server) on a free loopback port, for the tests.

Generated host and user keys, an authorized_keys file, and a client config and known_hosts
that breakglass is pointed at with --ssh-config/--known-hosts. It logs in as the user running
the tests, so the commands breakglass runs on "the node" run on this machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass

from breakglass.sandbox import free_port, wait_listening


@dataclass
class SshServer:
    proc: subprocess.Popen
    port: int
    dir: str
    user_key: str
    ssh_config: str
    known_hosts: str
    host_pub: str

    def session_pids(self) -> list[int]:
        """sshd processes serving connections (children of the listener)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill_sessions(self) -> None:
        for pid in self.session_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self.kill_sessions()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _keygen(path: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)


def start(tmp: str, extra_config: str = "") -> SshServer:
    """``extra_config``: more sshd_config lines (the k3s tests put their stand-ins on the sessions' PATH)."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        raise RuntimeError("sshd is not installed: run `make test`, which installs Debian's openssh-server")
    # Not under pytest's 0700 tmp tree: sshd reads authorized_keys as the logging-in user, and the
    # sudo test logs in as non-root users.
    d = tempfile.mkdtemp(prefix="breakglass-sshd-")
    os.chmod(d, 0o755)
    _keygen(os.path.join(d, "host"))
    _keygen(os.path.join(d, "user"))
    shutil.copy(os.path.join(d, "user.pub"), os.path.join(d, "authorized_keys"))
    os.chmod(os.path.join(d, "authorized_keys"), 0o644)
    os.makedirs("/run/sshd", exist_ok=True)  # privilege separation directory
    port = free_port()
    config = os.path.join(d, "sshd_config")
    with open(config, "w") as f:
        f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\n"
                f"AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                f"KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
                f"LogLevel ERROR\nMaxStartups 100\n{extra_config}")
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if wait_listening(proc, port, 15) == "exited":
        raise RuntimeError(f"sshd exited: {proc.stderr.read().decode()[-1000:]}")
    user = os.environ.get("USER") or "root"
    ssh_config = os.path.join(d, "ssh_config")
    with open(ssh_config, "w") as f:
        for alias in ("cp1", "cp2"):
            f.write(f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/user\n")
        # reached through a bastion (here the same server), as ProxyJump users have it
        f.write(f"Host behind-bastion\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/user\n"
                f"  ProxyJump cp1\n")
    host_pub = open(os.path.join(d, "host.pub")).read().split()
    known = os.path.join(d, "known_hosts")
    with open(known, "w") as f:
        f.write(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    return SshServer(proc, port, d, os.path.join(d, "user"), ssh_config, known, f"{host_pub[0]} {host_pub[1]}")
