"""SSH to control-plane nodes with paramiko, the way an engineer's OpenSSH would connect.

Honours ``~/.ssh/config`` (Host, HostName, User, Port, IdentityFile, ProxyJump through a
bastion) and ``~/.ssh/known_hosts``. An unknown host key is refused, with its fingerprint,
unless ``accept_new`` (OpenSSH's ``StrictHostKeyChecking=accept-new``), which records it; a
changed key is always refused. Commands for a non-root user run through ``sudo -n``, and a
sudo that wants a password is said so in one line.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import re
import shlex
import signal
import socket
import threading
from dataclasses import dataclass, field

from breakglass.core.capability import load
from breakglass.core.errors import BadInput, Unreachable


@dataclass
class SshOptions:
    user: str | None = None
    port: int | None = None
    key: str | None = None
    accept_new: bool = False
    config: str = "~/.ssh/config"
    known_hosts: str = "~/.ssh/known_hosts"
    timeout: float = 10.0


_INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_to_main_thread():
    """Threads started inside (paramiko's transport, port forwards, gRPC's) never take SIGINT, SIGTERM or
    SIGHUP: the kernel gives a process signal to any thread that does not block it, and one taken by a
    helper thread leaves the main thread asleep at a prompt (`Type yes`), never interrupted, its secrets
    never cleaned up. Threads inherit the mask they are created with; the main thread's is restored."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    except (AttributeError, ValueError, OSError):  # not POSIX
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def remote_path(path: str, what: str = "remote path") -> str:
    """``path``, checked to be absolute: the only kind of path breakglass sends to a node.

    A path starting with ``-`` would reach the remote command as an option (``find -delete``,
    ``cat -n``); commands also take paths after ``--``, but ``find`` reads an expression
    there anyway, so absolute is what holds. A newline would split ``find``'s output."""
    if not isinstance(path, str) or not path.startswith("/") or any(c in path for c in "\0\n\r"):
        raise BadInput(f"{what} {path!r} must be an absolute path on the node (starting with /)")
    return path


def quoted_path(path: str, what: str = "remote path") -> str:
    """An absolute remote path, shell-quoted, to put after ``--`` in a command line."""
    return shlex.quote(remote_path(path, what))


def fingerprint(key) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass
class Result:
    rc: int
    out: bytes
    err: bytes


# A host as --ssh takes it: a DNS name, an ~/.ssh/config alias, an IPv4 or (bracketed, zoned) IPv6 address.
_HOST = re.compile(r"[A-Za-z0-9_.:%\[\]-]{1,255}")


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be an SSH host (for the wizard's prompt), or None."""
    if not _HOST.fullmatch(host) or host.startswith("-"):
        return f"{host[:80]!r} is not a host name or address (letters, digits, '.', '-', '_'; IPv6 in brackets)"
    return None


@dataclass
class Node:
    """One SSH connection to one host."""

    host: str
    options: SshOptions
    _client: object = field(default=None, repr=False)
    _jump: object = field(default=None, repr=False)
    user: str = ""

    def __post_init__(self) -> None:
        # a name with shell characters, spaces or a leading '-' is a typo or an attack: refused before any lookup
        problem = host_problem(self.host)
        if problem:
            raise BadInput(problem)

    # -- connecting ----------------------------------------------------------------------------
    def _lookup(self, host: str) -> dict:
        paramiko = load("paramiko", "SSH", "paramiko and cryptography")

        path = os.path.expanduser(self.options.config)
        cfg = paramiko.SSHConfig()
        if os.path.exists(path):
            try:
                cfg = paramiko.SSHConfig.from_path(path)
            except Exception as e:  # noqa: BLE001 - a broken ~/.ssh/config is the user's input
                raise BadInput(f"{path}: {e}") from None
        return cfg.lookup(host)

    def connect(self) -> Node:
        paramiko = load("paramiko", "SSH", "paramiko and cryptography")
        # paramiko logs a refused channel ("Secsh channel 1 open FAILED") through logging's last-resort handler,
        # onto stderr; breakglass says it in its own one line
        logging.getLogger("paramiko").addHandler(logging.NullHandler())

        conf = self._lookup(self.host)
        hostname = conf.get("hostname", self.host)
        port = int(self.options.port or conf.get("port", 22))
        self.user = self.options.user or conf.get("user") or os.environ.get("USER") or "root"
        keys = [self.options.key] if self.options.key else [os.path.expanduser(p) for p in conf.get("identityfile", [])]
        sock = None
        if conf.get("proxyjump") and conf["proxyjump"].lower() != "none":
            sock = self._jump_channel(conf["proxyjump"], hostname, port)
        client = paramiko.SSHClient()
        self._load_known_hosts(client)
        client.set_missing_host_key_policy(_Policy(self.options, self.host))
        try:
            with interrupts_to_main_thread():
                client.connect(hostname, port=port, username=self.user, key_filename=[k for k in keys if k] or None,
                               timeout=self.options.timeout, banner_timeout=self.options.timeout,
                               auth_timeout=self.options.timeout, sock=sock, look_for_keys=not keys,
                               allow_agent=True)
        except paramiko.BadHostKeyException as e:
            raise Unreachable(f"ssh {self.host}: HOST KEY MISMATCH: the server offers {fingerprint(e.key)}, "
                              f"known_hosts has {fingerprint(e.expected_key)}; refusing (possible man in the middle)",
                              hint=f"if the host was reinstalled: ssh-keygen -R {hostname}") from None
        except _UnknownHost as e:
            raise Unreachable(str(e), hint="check the fingerprint out of band, then rerun with --ssh-accept-new") from None
        except paramiko.AuthenticationException:
            raise Unreachable(f"ssh {self.user}@{self.host}: authentication failed (key refused)",
                              hint="--ssh-key, --ssh-user, or IdentityFile in ~/.ssh/config") from None
        except (paramiko.SSHException, OSError) as e:
            raise Unreachable(f"ssh {self.host}:{port}: {_reason(e)}") from None
        self._client = client
        return self

    def _load_known_hosts(self, client) -> None:
        path = os.path.expanduser(self.options.known_hosts)
        try:
            client.load_system_host_keys()
        except OSError:
            pass
        if os.path.exists(path):
            try:
                client.load_host_keys(path)
            except Exception as e:  # noqa: BLE001
                raise BadInput(f"{path}: unreadable known_hosts ({e})") from None

    def _jump_channel(self, spec: str, host: str, port: int):
        """ProxyJump [user@]bastion[:port]: connect there, then open a TCP channel to the target."""
        first = spec.split(",")[0]
        user, _, hostport = first.rpartition("@")
        bhost, _, bport = hostport.partition(":")
        jump = Node(bhost, SshOptions(user=user or None, port=int(bport) if bport else None,
                                      accept_new=self.options.accept_new, config=self.options.config,
                                      known_hosts=self.options.known_hosts, timeout=self.options.timeout)).connect()
        self._jump = jump
        try:
            return jump._client.get_transport().open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0),
                                                             timeout=self.options.timeout)
        except Exception as e:  # noqa: BLE001
            raise Unreachable(f"ssh {self.host} via {bhost}: {_reason(e)}") from None

    # -- running -------------------------------------------------------------------------------
    def run(self, command: str, stdin: bytes | None = None, sudo: bool = True, timeout: float | None = None) -> Result:
        """Run a shell command on the node (through ``sudo -n`` when not root)."""
        if self._client is None:
            self.connect()
        if sudo and self.user != "root":
            command = "sudo -n -- sh -c " + shlex.quote(command)
        try:
            chan = self._client.get_transport().open_session(timeout=self.options.timeout)
            chan.settimeout(timeout or 300)
            chan.exec_command(command)
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            while True:
                if chan.recv_ready():
                    out += chan.recv(1 << 16)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 16)
                elif chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                else:
                    chan.status_event.wait(0.05)
            rc = chan.recv_exit_status()
        except (OSError, EOFError, socket.timeout) as e:
            raise Unreachable(f"ssh {self.host}: connection lost ({_reason(e)})") from None
        except Exception as e:  # noqa: BLE001 - paramiko raises SSHException subclasses and more
            raise Unreachable(f"ssh {self.host}: {_reason(e)}") from None
        if rc != 0 and b"a password is required" in err:
            raise Unreachable(f"ssh {self.user}@{self.host}: sudo wants a password; breakglass runs `sudo -n`",
                              hint="log in as root, or allow NOPASSWD sudo for this user") from None
        return Result(rc, bytes(out), bytes(err))

    def stream(self, command: str, sudo: bool = True):
        """A command's stdout as a file-like stream (for logs); Unreachable on close if it failed."""
        if self._client is None:
            self.connect()
        if sudo and self.user != "root":
            command = "sudo -n -- sh -c " + shlex.quote(command)
        chan = self._client.get_transport().open_session(timeout=self.options.timeout)
        chan.exec_command(command)
        return _ChannelStream(chan, self.host)

    def forward(self, remote_host: str, remote_port: int) -> tuple[str, int, "Forward"]:
        """A local TCP port that reaches remote_host:remote_port from the node (like ssh -L)."""
        if self._client is None:
            self.connect()
        fwd = Forward(self._client.get_transport(), remote_host, remote_port)
        return "127.0.0.1", fwd.port, fwd

    def forward_socket(self, path: str) -> tuple[str, int, "Forward"]:
        """A local TCP port that reaches the unix socket ``path`` on the node (like ssh -L PORT:/path), through
        OpenSSH's direct-streamlocal channel: sshd connects to the socket as the logged-in user (no sudo)."""
        if self._client is None:
            self.connect()
        transport = self._client.get_transport()
        timeout = self.options.timeout
        fwd = Forward(transport, path, 0, opener=lambda _addr: open_streamlocal(transport, path, timeout))
        return "127.0.0.1", fwd.port, fwd

    def check_socket(self, path: str) -> None:
        """Open and close one channel to the socket, so a refusal (no socket, not allowed) is said before use."""
        if self._client is None:
            self.connect()
        try:
            open_streamlocal(self._client.get_transport(), path, self.options.timeout).close()
        except Exception as e:  # noqa: BLE001 - paramiko's ChannelException and SSHException
            why = getattr(e, "text", None) or _reason(e)  # ChannelException's own text: "Connect failed"
            raise Unreachable(f"ssh {self.host}: cannot connect to the unix socket {path} ({why})",
                              hint=f"sshd connects as {self.user}: the socket must be there and that user may "
                                   f"open it (k3s' kine.sock is root's, mode 0600: log in as root), and sshd must "
                                   f"allow it (AllowStreamLocalForwarding, on by default)") from None

    def close(self) -> None:
        for c in (self._client, self._jump and self._jump._client):
            try:
                if c is not None:
                    c.close()
            except Exception:  # noqa: BLE001
                pass


class _UnknownHost(Exception):
    pass


class _Policy:
    """Reject unknown host keys (showing the fingerprint) unless accept-new; then record them."""

    def __init__(self, options: SshOptions, alias: str) -> None:
        self.options, self.alias = options, alias

    def missing_host_key(self, client, hostname, key) -> None:
        if not self.options.accept_new:
            raise _UnknownHost(f"ssh {self.alias}: unknown host key {key.get_name()} {fingerprint(key)}; "
                               f"refusing to connect")
        client.get_host_keys().add(hostname, key.get_name(), key)
        path = os.path.expanduser(self.options.known_hosts)
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class _ChannelStream:
    def __init__(self, chan, host: str) -> None:
        self.chan, self.host = chan, host

    def read(self, n: int = -1) -> bytes:
        n = n if n > 0 else 1 << 20
        out = bytearray()
        while len(out) < n:
            data = self.chan.recv(n - len(out))
            if not data:
                break
            out += data
        return bytes(out)

    def close(self) -> None:
        rc = self.chan.recv_exit_status()
        err = b""
        while self.chan.recv_stderr_ready():
            err += self.chan.recv_stderr(1 << 16)
        self.chan.close()
        if rc != 0:
            first = next((ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()), f"exit {rc}")
            raise Unreachable(f"ssh {self.host}: {first[:300]}")


def open_streamlocal(transport, path: str, timeout: float):
    """A channel to the unix socket ``path`` on the server: OpenSSH's direct-streamlocal@openssh.com (PROTOCOL 2.4:
    string socket path, string reserved, uint32 reserved). paramiko's open_channel writes a destination only for
    direct-tcpip and forwarded-tcpip, so the open message is sent here the way open_channel sends its own."""
    from paramiko.channel import Channel  # noqa: PLC0415
    from paramiko.common import cMSG_CHANNEL_OPEN  # noqa: PLC0415
    from paramiko.message import Message  # noqa: PLC0415
    from paramiko.ssh_exception import SSHException  # noqa: PLC0415

    with transport.lock:
        window = transport._sanitize_window_size(None)
        packet = transport._sanitize_packet_size(None)
        chanid = transport._next_channel()
        m = Message()
        m.add_byte(cMSG_CHANNEL_OPEN)
        m.add_string("direct-streamlocal@openssh.com")
        m.add_int(chanid)
        m.add_int(window)
        m.add_int(packet)
        m.add_string(path)
        m.add_string("")
        m.add_int(0)
        chan = Channel(chanid)
        transport._channels.put(chanid, chan)
        transport.channel_events[chanid] = event = threading.Event()
        transport.channels_seen[chanid] = True
        chan._set_transport(transport)
        chan._set_window(window, packet)
    transport._send_user_message(m)
    if not event.wait(timeout) or not transport.active:
        raise transport.get_exception() or SSHException("timed out opening a channel to the socket")
    chan = transport._channels.get(chanid)
    if chan is None:
        raise transport.get_exception() or SSHException("the server refused the channel")
    return chan


class Forward:
    """A listening socket on 127.0.0.1 whose connections are tunnelled through SSH (to a TCP port the node reaches,
    or through ``opener``, given the client's address, to anything else: a unix socket)."""

    def __init__(self, transport, host: str, port: int, opener=None) -> None:
        self.transport, self.host, self.rport = transport, host, port
        self.opener = opener or (lambda addr: transport.open_channel("direct-tcpip", (host, port), addr))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        with interrupts_to_main_thread():  # and the pipes' threads it starts inherit the mask
            threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            try:
                chan = self.opener(addr)
            except Exception:  # noqa: BLE001
                conn.close()
                continue
            for a, b in ((conn, chan), (chan, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def _pipe(src, dst) -> None:
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except Exception:  # noqa: BLE001 - either side closing ends the pipe
        pass
    finally:
        for s in (src, dst):
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass


def _reason(e: BaseException) -> str:
    errors = getattr(e, "errors", None)  # paramiko's NoValidConnectionsError: {(addr, port): OSError}
    if isinstance(errors, dict) and errors:
        first = next(iter(errors.values()))
        text = getattr(first, "strerror", None) or str(first)
        return f"cannot connect ({text})"[:200]
    text = str(e) or type(e).__name__
    return text.splitlines()[0][:200]
