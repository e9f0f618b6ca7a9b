"""etcd access: the only module that imports the etcd client.

The client is python-etcd3's API through its maintained fork, ``etcd-sdk-python``
(import name ``pyetcd``). Settings come from flags or the variables etcdctl users already
have (ETCDCTL_ENDPOINTS, ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY, ETCDCTL_DIAL_TIMEOUT,
ETCDCTL_COMMAND_TIMEOUT, ETCDCTL_USER, ETCDCTL_PASSWORD). A password is held in memory only: never
printed, logged or journaled. Reads are ranged over explicit prefixes only, page by page: this
module refuses a range that is not under one of the prefixes its caller allowed, so no
code path can list (or later delete) the whole keyspace.

Every request keeps to what kine (k3s' etcd shim over SQLite) also serves, the shapes kube-apiserver itself sends:
ranges without a sort order (etcd returns key order anyway), and only three transactions, each on one key: create
(mod_revision == 0, then put), update (mod_revision == R, then put, else get) and delete (mod_revision == R, then
delete, else get). An endpoint may be a unix socket, ``unix://PATH`` (k3s' kine: ``unix://kine.sock``).
"""

from __future__ import annotations

import os
import stat
import re
from dataclasses import dataclass, field
from typing import Iterator

from breakglass.core import textfile
from breakglass.core.capability import load
from breakglass.core.errors import BadInput, Unreachable

PAGE = 500

# gRPC's C core logs TLS failures to stderr itself ("Handshake failed…", "Corruption detected");
# breakglass reports them in one line. It reads this once, when grpc is first imported, which only
# this module does.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


@dataclass(frozen=True)
class EtcdSettings:
    endpoints: tuple[str, ...] = ("127.0.0.1:2379",)
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    timeout: float = 5.0
    user: str | None = None
    # never shown: not in repr (tracebacks, -v), not compared, never journaled
    password: str | None = field(default=None, repr=False, compare=False)
    # TLS files' contents held in memory (read from a node over SSH): never written to disk
    pem: dict | None = field(default=None, repr=False, compare=False)
    # how etcd is reached when not directly: {"ssh": host, "endpoint": as seen from the node, "cacert"/"cert"/
    # "key": paths on the node}; the local forward port in ``endpoints`` dies with this process
    route: dict | None = None

    def journal_target(self) -> dict:
        """What a run records about reaching etcd, to reach it again on revert: endpoints (for a route through
        SSH: the host, the endpoint as seen from it and the certificate paths there) and the user name;
        never a password, never a forward port."""
        out: dict = {"etcd_endpoints": list(self.endpoints)}
        if self.route:
            out["etcd_endpoints"] = [self.route["endpoint"]]
            out["etcd_via_ssh"] = self.route["ssh"]
            out["etcd_node_certs"] = {k: self.route[k] for k in ("cacert", "cert", "key") if self.route.get(k)}
            if self.route.get("found"):  # why this route: what the node has, in the order it was looked for
                out["etcd_node_found"] = {"summary": self.route["found"]["summary"],
                                          "evidence": list(self.route["found"]["evidence"])}
        if self.user:
            out["etcd_user"] = self.user
        return out

    @classmethod
    def resolve(cls, endpoints: str | None = None, cacert: str | None = None, cert: str | None = None,
                key: str | None = None, timeout: float | None = None, env: dict | None = None,
                user: str | None = None, password: str | None = None, prompt=None) -> EtcdSettings:
        """Flags win over ETCDCTL_* variables, which win over etcdctl's defaults."""
        env = os.environ if env is None else env
        eps = endpoints or env.get("ETCDCTL_ENDPOINTS") or "127.0.0.1:2379"
        t = timeout
        if t is None:
            t = _duration(env.get("ETCDCTL_COMMAND_TIMEOUT") or env.get("ETCDCTL_DIAL_TIMEOUT") or "5s")
        user, password = credentials(user, password, env, prompt)
        s = cls(endpoints=tuple(_absolute_unix(e.strip()) for e in eps.split(",") if e.strip()),
                cacert=cacert or env.get("ETCDCTL_CACERT") or None,
                cert=cert or env.get("ETCDCTL_CERT") or None,
                key=key or env.get("ETCDCTL_KEY") or None,
                timeout=t, user=user, password=password)
        s.validate()
        return s

    def validate(self) -> None:
        if not self.endpoints:
            raise BadInput("no etcd endpoints given")
        for e in self.endpoints:
            if _unix_path(e) is None:
                _parse_endpoint(e)
            elif self.cacert or self.cert or self.key:
                raise BadInput(f"{e}: TLS over a unix socket is not supported (k3s' kine.sock has none): "
                               f"leave out --etcd-cacert, --etcd-cert and --etcd-key")
        if bool(self.cert) != bool(self.key):
            raise BadInput("etcd client certificate and key go together: give both --etcd-cert and --etcd-key")
        for label, path in (("CA", self.cacert), ("client certificate", self.cert), ("client key", self.key)):
            if path and not os.path.isfile(path):
                raise BadInput(f"etcd {label} {path}: no such file")

    @property
    def secure(self) -> bool:
        return bool(self.cacert) or bool(self.pem and self.pem.get("cacert")) or any(
            e.startswith("https://") for e in self.endpoints)


def credentials(user: str | None, password: str | None, env=None, prompt=None) -> tuple[str | None, str | None]:
    """etcd user and password as etcdctl takes them: --user USER[:PASSWORD] (else $ETCDCTL_USER), --password
    (else $ETCDCTL_PASSWORD); a password still missing is asked for, hidden, when there is a terminal
    (``prompt``: a function of the user name, default getpass on /dev/tty)."""
    env = os.environ if env is None else env
    if user is None:
        user = env.get("ETCDCTL_USER") or None
    if password is None:
        password = env.get("ETCDCTL_PASSWORD") or None
    if user is None:
        if password is not None:
            raise BadInput("an etcd password without a user: give --etcd-user (or $ETCDCTL_USER) too")
        return None, None
    if password is None and ":" in user:  # USER:PASSWORD, as etcdctl --user takes it
        user, password = user.split(":", 1)
    if not user:
        raise BadInput("empty etcd user name (--etcd-user USER[:PASSWORD])")
    if password is None:
        password = (prompt or _ask_password)(user)
    return user, password


def _ask_password(user: str) -> str:
    import sys  # noqa: PLC0415

    if sys.stdin is None or not sys.stdin.isatty():
        raise BadInput(f"no password for etcd user {user!r}: give it in $ETCDCTL_PASSWORD, --etcd-password or "
                       f"--etcd-user {user}:PASSWORD (there is no terminal to ask on)")
    import getpass  # noqa: PLC0415

    try:
        return getpass.getpass(f"etcd password for {user}: ")
    except EOFError:
        raise BadInput(f"no password for etcd user {user!r}") from None


def _duration(text: str) -> float:
    from breakglass.text import durations  # noqa: PLC0415

    n = durations.seconds("".join(text.split()), bare_unit="s")  # etcdctl's env, as before: "5 s" too
    if n is None:
        raise BadInput(f"not a duration: {text!r} (use e.g. 5s)")
    return n


def _unix_path(ep: str) -> str | None:
    """The socket path of a ``unix://PATH`` or ``unix:PATH`` endpoint (relative paths as etcd's client takes them:
    from the working directory), else None."""
    if ep.startswith("unixs:"):
        raise BadInput(f"{ep}: TLS over a unix socket is not supported; k3s' kine.sock is plain unix://")
    if not ep.startswith("unix:"):
        return None
    path = ep[len("unix://"):] if ep.startswith("unix://") else ep[len("unix:"):]
    if not path or "\0" in path:
        raise BadInput(f"not an etcd endpoint: {ep!r} (a unix socket is unix:///path/to/socket)")
    return path


def endpoints_problem(text: str) -> str | None:
    """Why a typed list of etcd endpoints cannot be one (a wizard asks again at once), or None."""
    eps = [e.strip() for e in text.split(",") if e.strip()]
    if not eps:
        return "at least one endpoint is needed (https://127.0.0.1:2379)"
    for ep in eps:
        try:
            if _unix_path(ep) is not None:
                continue
            _host, port, _tls = _parse_endpoint(ep)
        except BadInput as e:
            return str(e)
        if not 0 < port < 65536:
            return f"{ep!r}: the port is not a number from 1 to 65535"
    return None


def _absolute_unix(ep: str) -> str:
    """A unix endpoint with its path made absolute (what a journal records, to reach it again from anywhere)."""
    path = _unix_path(ep)
    return ep if path is None else "unix://" + os.path.abspath(path)


def _parse_endpoint(ep: str) -> tuple[str, int, bool]:
    m = re.fullmatch(r"(?:(https?)://)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(?::(\d{1,5}))?/?", ep)
    if not m:
        raise BadInput(f"not an etcd endpoint: {ep!r} (use host:port or https://host:port)")
    host = m[2].strip("[]")
    return host, int(m[3] or 2379), m[1] == "https"


@dataclass
class KV:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int


@dataclass
class Etcd:
    """A connection limited to the key prefixes given at creation."""

    settings: EtcdSettings
    allowed_prefixes: tuple[bytes, ...]
    ranges: list[tuple[bytes, bytes]] = field(default_factory=list)  # every range asked for, for tests and -v

    def __post_init__(self) -> None:
        for p in self.allowed_prefixes:
            if len(p) < 12 or not p.endswith(b"/"):
                raise ValueError(f"refusing a short or open etcd prefix {p!r}")
        self._client = None

    def _connect(self):
        if self._client is not None:
            return self._client
        from breakglass.access.ssh import interrupts_to_main_thread  # noqa: PLC0415

        # gRPC starts its threads (timers, event engine) with its first credentials or channel: they must leave
        # SIGINT, SIGTERM and SIGHUP to the main thread, or a prompt waiting there is never interrupted.
        with interrupts_to_main_thread():
            return self._connect_now()

    def _connect_now(self):
        pyetcd = _pyetcd()
        creds = None
        if self.settings.secure:
            creds = _credentials(self.settings)
        eps = []
        for e in self.settings.endpoints:
            path = _unix_path(e)
            if path is not None:
                eps.append(_unix_endpoint(pyetcd, path))
                continue
            host, port, https = _parse_endpoint(e)
            secure = https or bool(self.settings.cacert or (self.settings.pem or {}).get("cacert"))
            eps.append(pyetcd.Endpoint(host, port, secure=secure, creds=creds if secure else None))
        # With a user, the client authenticates here (a token for every later call).
        self._client = pyetcd.MultiEndpointEtcd3Client(endpoints=eps, timeout=self.settings.timeout,
                                                      failover=len(eps) > 1, user=self.settings.user,
                                                      password=self.settings.password if self.settings.user else None)
        if not any(e.secure for e in eps):
            # gRPC sends call credentials over TLS only; without TLS the token goes as metadata, as etcdctl sends it
            self._client.call_credentials = None
        return self._client

    def range_prefix(self, prefix: bytes, keys_only: bool = False) -> Iterator[KV]:
        """Every key under ``prefix`` (which must lie under an allowed prefix), page by page."""
        if not any(prefix.startswith(p) for p in self.allowed_prefixes) or not prefix.endswith(b"/"):
            raise ValueError(f"range {prefix!r} is outside the allowed etcd prefixes")
        end = _prefix_end(prefix)
        start = prefix
        while True:
            # no sort order: etcd returns a range in key order by itself, and kine refuses any sort
            resp = self._call(lambda: self._connect().get_range_response(
                start, end, limit=PAGE, keys_only=keys_only))
            self.ranges.append((start, end))
            for kv in resp.kvs:
                yield KV(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version)
            if not resp.more or not resp.kvs:
                return
            start = resp.kvs[-1].key + b"\x00"

    def get(self, key: bytes) -> KV | None:
        if not any(key.startswith(p) for p in self.allowed_prefixes):
            raise ValueError(f"key {key!r} is outside the allowed etcd prefixes")
        resp = self._call(lambda: self._connect().get_response(key))
        self.ranges.append((key, b""))
        for kv in resp.kvs:
            return KV(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version)
        return None

    # -- compare-and-swap writes: the only writes there are; no prefix delete exists here ------
    def _check_key(self, key: bytes) -> None:
        if not any(key.startswith(p) and len(key) > len(p) for p in self.allowed_prefixes):
            raise ValueError(f"key {key!r} is outside the allowed etcd prefixes")

    # Each is one of the three transactions kube-apiserver sends (k8s.io/apiserver's etcd3 store), which are all
    # kine accepts: anything else it refuses ("unsupported operations in txn request").
    def _txn(self, key: bytes, mod_revision: int, op_fn, else_get: bool) -> bool:
        def go():
            c = self._connect()
            t = c.transactions
            ok, _ = c.transaction(compare=[t.mod(key) == mod_revision], success=[op_fn(t)],
                                  failure=[t.get(key)] if else_get else [])
            return ok
        return bool(self._call(go))

    def delete_if_mod_revision(self, key: bytes, mod_revision: int) -> bool:
        """Delete ``key`` only if it is still the version with ``mod_revision``."""
        self._check_key(key)
        if mod_revision <= 0:
            raise ValueError("a delete compares with the revision of an existing key")
        return self._txn(key, mod_revision, lambda t: t.delete(key), else_get=True)

    def put_if_absent(self, key: bytes, value: bytes) -> bool:
        """Create ``key``: only while it is absent (mod_revision 0, which etcd and kine both mean so)."""
        self._check_key(key)
        return self._txn(key, 0, lambda t: t.put(key, value), else_get=False)

    def put_if_mod_revision(self, key: bytes, value: bytes, mod_revision: int) -> bool:
        self._check_key(key)
        if mod_revision <= 0:
            raise ValueError("an update compares with the revision of an existing key")
        return self._txn(key, mod_revision, lambda t: t.put(key, value), else_get=True)

    def snapshot(self, out, progress=None) -> tuple[int, str]:
        """Stream a full snapshot into the binary file ``out``; returns (size, sha256 of the
        database). etcd ends the stream with the sha256 of what precedes it; that is checked
        while streaming, hashing each byte once and copying nothing."""
        import hashlib  # noqa: PLC0415

        from pyetcd import etcdrpc  # noqa: PLC0415

        def go():
            c = self._connect()
            stream = c.maintenancestub.Snapshot(etcdrpc.SnapshotRequest(), self.settings.timeout * 60,
                                                credentials=c.call_credentials, metadata=c.metadata)
            h = hashlib.sha256()
            held = b""  # the last 32 bytes seen: the trailer, unless more data follows
            size = 0
            write = out.write
            for resp in stream:
                blob = resp.blob
                write(blob)
                size += len(blob)
                if len(blob) >= 32:
                    h.update(held)
                    h.update(memoryview(blob)[:-32])
                    held = blob[-32:]
                else:
                    joined = held + blob
                    h.update(joined[:-32])
                    held = joined[-32:]
                if progress:
                    progress(size, size + resp.remaining_bytes)
            return size, h.digest(), held

        size, digest, trailer = self._call(go)
        if size < 32 or digest != trailer:
            from breakglass.core.journal import JournalError  # noqa: PLC0415

            raise JournalError("etcd snapshot failed its integrity check (sha256 trailer does not match)")
        return size, digest.hex()

    def save_snapshot(self, path: str, progress=None) -> dict:
        """Snapshot into a new file (mode 0600, fsynced); returns path, size and sha256. It is streamed into
        PATH.part and takes its name only once etcd's own sha256 trailer has checked out, so an interrupted or
        killed snapshot never sits at PATH looking whole (etcdctl panics on a truncated one)."""
        if os.path.lexists(path):
            raise BadInput(f"{path} exists; choose a new snapshot file")
        part = path + ".part"
        try:
            st = os.lstat(part)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(part)  # what an earlier, killed attempt left: ours, and never a whole snapshot
        except FileNotFoundError:
            pass
        except OSError as e:
            raise BadInput(f"snapshot {part}: {(e.strerror or str(e)).lower()}") from None
        try:
            fd = textfile.create_new(part)
        except OSError as e:
            raise BadInput(f"snapshot {part}: {(e.strerror or str(e)).lower()}",
                           hint="choose a path in an existing directory you can write") from None
        linked = False
        try:
            with os.fdopen(fd, "wb", buffering=1 << 20) as out:
                size, digest = self.snapshot(out, progress)
                out.flush()
                os.fsync(out.fileno())
            os.link(part, path)  # never over a file that appeared meanwhile
            linked = True
            os.unlink(part)
        except BaseException:
            # a partial snapshot must not pass for a good one; and an interrupt that lands after the link takes the
            # whole one back too, so exit 130 always means no snapshot at PATH
            textfile.remove_quietly(part)
            if linked:
                textfile.remove_quietly(path)
            raise
        # sha256 of the database as etcd computed it and as checked against its trailer
        return {"path": os.path.abspath(path), "size": size, "sha256": digest}

    def _call(self, fn):
        grpc, pyetcd = _grpc(), _pyetcd()

        where = ",".join(self.settings.endpoints)
        # With several endpoints the client marks a failed one and moves on: try each once.
        for _ in range(len(self.settings.endpoints) - 1):
            try:
                return fn()
            except (pyetcd.exceptions.ConnectionFailedError, pyetcd.exceptions.ConnectionTimeoutError):
                continue
        try:
            return fn()
        except pyetcd.exceptions.ConnectionFailedError:
            raise Unreachable(f"etcd at {where}: connection failed (refused, wrong port, or TLS/certificate "
                              f"mismatch)", hint=_tls_hint(self.settings)) from None
        except pyetcd.exceptions.ConnectionTimeoutError:
            raise Unreachable(f"etcd at {where}: timed out after {self.settings.timeout:g}s",
                              hint=_tls_hint(self.settings)) from None
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else None
            detail = (e.details() if hasattr(e, "details") else str(e)) or str(code)
            detail = detail.splitlines()[0][:200] if detail else str(code)
            if self.settings.password:
                detail = detail.replace(self.settings.password, "***")
            raise Unreachable(f"etcd at {where}: {detail}", hint=_auth_hint(self.settings, detail)) from None
        except pyetcd.exceptions.Etcd3Exception as e:
            raise Unreachable(f"etcd at {where}: {type(e).__name__} {e}".strip()) from None

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a broken channel must not mask the real error
                pass
            self._client = None


def _auth_hint(s: EtcdSettings, detail: str) -> str | None:
    if "user name is empty" in detail or ("permission denied" in detail and not s.user):
        return "etcd has authentication enabled: give --etcd-user USER (or $ETCDCTL_USER), and the password"
    if detail.startswith("snapshot is not supported"):
        return ("this is kine (k3s' SQLite datastore), which has no snapshot: with k3s stopped, copy "
                "/var/lib/rancher/k3s/server/db/ (state.db and its -wal and -shm files) instead")
    return None


def _unix_endpoint(pyetcd, path: str):
    """pyetcd's Endpoint on a unix socket: it only knows host:port, and gRPC dials ``unix:PATH`` targets itself."""

    class UnixEndpoint(pyetcd.Endpoint):
        def _mkchannel(self, opts):
            return _grpc().insecure_channel("unix:" + os.path.abspath(path), options=opts)

    ep = UnixEndpoint("localhost", 0, secure=False)
    ep.netloc = "unix://" + path
    return ep


def _tls_hint(s: EtcdSettings) -> str | None:
    found = (s.route or {}).get("found")
    if found:  # breakglass chose where etcd is from what the node has: say so, in case that was the wrong guess
        return (f"{found['summary']}; etcd was looked for at {s.route['endpoint']} on {s.route['ssh']}. If that "
                f"is not where this node's apiserver keeps its data, give --etcd-endpoints (and the certificate "
                f"paths) as the node sees them")
    if any(_unix_path(e) is not None for e in s.endpoints) or \
            str((s.route or {}).get("endpoint", "")).startswith("unix://"):
        return ("is kine or etcd listening on that socket, and may you open it? (k3s' kine: "
                "unix:///var/lib/rancher/k3s/server/kine.sock, mode 0600, owned by root)")
    if not s.secure:
        return "if etcd uses TLS (kubeadm and Talos do), pass --etcd-cacert, --etcd-cert and --etcd-key"
    return "check that the CA signed etcd's serving certificate and that etcd accepts the client certificate"


def _credentials(s: EtcdSettings):
    grpc = _grpc()

    def read(path: str | None) -> bytes | None:
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise BadInput(f"{path}: {e.strerror}") from None

    pem = s.pem or {}
    return grpc.ssl_channel_credentials(pem.get("cacert") or read(s.cacert), pem.get("key") or read(s.key),
                                        pem.get("cert") or read(s.cert))


def _prefix_end(prefix: bytes) -> bytes:
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    raise ValueError("no range end for an all-0xff prefix")


# gRPC has native code, which the offline bundle may not carry for this platform: say so in one line.
def _grpc():
    return load("grpc", "etcd access", "grpcio")


def _pyetcd():
    _grpc()
    return load("pyetcd", "etcd access", "etcd-sdk-python and grpcio")

