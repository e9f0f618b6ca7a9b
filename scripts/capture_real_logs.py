"""Capture what a real kube-apiserver logs for each way calling an admission webhook can fail, as test fixtures.

    python scripts/capture_real_logs.py [--versions 1.32.13,1.34.4] [--only CAUSE,...] [--formats text,json]
                                        [--out tests/fixtures/real] [--keep-workdir]

For every kube-apiserver version in go/versions whose binary is built (build/kube-apiserver/v<version>/), and for
klog text (the default) and --logging-format=json, it starts a fresh etcd and kube-apiserver on 127.0.0.1 (the
sandbox's launcher: breakglass.sandbox.apiserver), produces one failure at a time through the API, as an operator
would meet it, and keeps the window of log lines it caused, byte for byte, in
tests/fixtures/real/v<version>/<cause>.log (.json.log for JSON logging). Lines are only ever cut to a window,
never edited. tests/fixtures/real/README.md and v<version>/captures.json say what was made, when and how.
Issue 21's deadlock families (self-dependency, node-lease-refused, node-lease-denied, conversion-down) run on one
apiserver with endpoint routing and Leases audited; their audit log windows and what kubectl printed for the same
request (<cause>.kubectl.txt) are kept too.

Nothing leaves loopback: webhooks are called at a ``url:`` on 127.0.0.1 (a dead port, or a backend this script
runs in a thread), or through a ``service:`` reference that the apiserver cannot resolve to an address (the
Service is absent, headless or lacks the port; with --enable-aggregator-routing=true it has no endpoints), which
is checked before each such call. Every process started here (etcd, kube-apiserver) is stopped on the way out.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from breakglass.sandbox import builds, etcd_command, free_port, scenarios, wait_listening  # noqa: E402
from breakglass.sandbox import apiserver as api  # noqa: E402
from breakglass.sandbox import pki as pkimod  # noqa: E402
from breakglass.sandbox.apiserver import Client, Layout  # noqa: E402

LOOPBACK = "127.0.0.1"
NAMESPACE = "team-a"  # where the ordinary requests the webhooks block are made
ADMISSION = "/apis/admissionregistration.k8s.io/v1/"
PATHS = {"validating": ADMISSION + "validatingwebhookconfigurations",
         "mutating": ADMISSION + "mutatingwebhookconfigurations"}
MAX_LINES = 300  # a window never holds more lines than this
FORMATS = {"text": ".log", "json": ".json.log"}


def say(msg: str) -> None:
    print(f"capture: {msg}", file=sys.stderr, flush=True)


class Skip(Exception):
    """This cause cannot be produced here; the message says why."""


# -- the versions -------------------------------------------------------------------------------------------------

def built_versions() -> list[tuple[str, str]]:
    """(version, binary) for each kube-apiserver line of go/versions whose binary exists."""
    out = []
    for b in builds.listed():
        if b.component != "kube-apiserver":
            continue
        if os.access(b.binary, os.X_OK):
            out.append((b.version, b.binary))
        else:
            say(f"v{b.version}: {os.path.relpath(b.binary, ROOT)} is not built; skipped (scripts/gobuild.sh kube-apiserver)")
    return out


# -- processes ----------------------------------------------------------------------------------------------------

_PROCS: list[subprocess.Popen] = []  # everything this script started, stopped in stop_all()


def spawn(argv: list[str], log_path: str) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    _PROCS.append(p)
    return p


def stop(p: subprocess.Popen | None, seconds: float = 60) -> None:
    """SIGTERM the process group of ``p`` (one we started), then SIGKILL after ``seconds``."""
    if p is None:
        return
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(seconds)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)
    if p in _PROCS:
        _PROCS.remove(p)


def stop_all() -> None:
    for p in list(reversed(_PROCS)):
        stop(p, 20)


# -- certificates -------------------------------------------------------------------------------------------------

@dataclass
class Certs:
    """Serving certificates for the backends, besides the sandbox's own ``webhook`` one: a second CA the
    webhooks trust (``trusted_ca``) signs certificates with the wrong name, no IP SAN or an expired date; a third
    CA nobody trusts signs a certificate that is otherwise right."""

    trusted_ca: str
    leaves: dict[str, tuple[str, str]] = field(default_factory=dict)  # purpose -> (cert, key)


def make_certs(directory: str) -> Certs:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from breakglass.core.textfile import write_private

    os.makedirs(directory, mode=0o700, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)

    def ca(cn: str):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - day)
                .not_valid_after(now + 7 * day)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        return cert, key

    def save(fname: str, data: bytes) -> str:
        path = os.path.join(directory, fname)
        write_private(path, data)
        return path

    def leaf(purpose: str, signer, sans, not_before, not_after) -> None:
        ca_cert, ca_key = signer
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, purpose)]))
             .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(not_before).not_valid_after(not_after)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
             .add_extension(x509.SubjectAlternativeName(list(sans)), critical=False))
        cert = b.sign(ca_key, hashes.SHA256())
        certs.leaves[purpose] = (
            save(purpose + ".crt", cert.public_bytes(serialization.Encoding.PEM)),
            save(purpose + ".key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption())))

    trusted, stranger = ca("capture-trusted-ca"), ca("some-other-ca")
    certs = Certs(save("trusted-ca.crt", trusted[0].public_bytes(serialization.Encoding.PEM)))
    loop_ip = x509.IPAddress(ipaddress.ip_address(LOOPBACK))
    leaf("unknown-authority", stranger, [x509.DNSName("localhost"), loop_ip], now - day, now + 7 * day)
    # Names and addresses inside a certificate are only text: nothing dials them.
    leaf("name-mismatch", trusted, [x509.DNSName("kyverno-svc.kyverno.svc"),
                                    x509.IPAddress(ipaddress.ip_address("127.0.0.2"))], now - day, now + 7 * day)
    leaf("no-ip-san", trusted, [x509.DNSName("kyverno-svc.kyverno.svc")], now - day, now + 7 * day)
    leaf("expired", trusted, [x509.DNSName("localhost"), loop_ip], now - 30 * day, now - 2 * day)
    return certs


def pem_fragments(paths: list[str]) -> list[str]:
    """Pieces of every PEM made for a run (their base64 lines, and the base64 a caBundle carries), so a capture
    holding any of them is refused."""
    out = []
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        out += [ln.decode() for ln in data.splitlines() if len(ln) >= 40 and not ln.startswith(b"-----")]
        b64 = base64.b64encode(data).decode()
        out += [b64[i:i + 40] for i in range(0, len(b64) - 40, 40)]
    return out


# -- backends (threads of this process, on loopback) ----------------------------------------------------------------

class Backend:
    """A webhook backend on 127.0.0.1: ``mode`` is one of
    - ``admit`` / ``deny``: a real admission endpoint (allowed true / false with a message);
    - ``wrong-uid``: answers an AdmissionReview with another request's uid;
    - ``hang``: completes TLS, reads the request, never answers;
    - ``silent``: accepts TCP and never says a word (no TLS handshake);
    - ``close``: accepts TCP and closes at once;
    - ``plain``: a plain HTTP server (what Go's net/http answers to a TLS ClientHello: 400 Bad Request);
    - ``banner``: something else on the port (an SSH server's banner).
    A denial's ``message`` may name the object ({kind}, {namespace}, {name}), as policy engines do."""

    def __init__(self, mode: str, cert: tuple[str, str] | None = None, message: str = "") -> None:
        self.mode, self.message = mode, message
        self.port = free_port()
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self.server: ThreadingHTTPServer | None = None
        self.sock: socket.socket | None = None
        if mode in ("silent", "close", "plain", "banner"):
            self.sock = socket.socket()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((LOOPBACK, self.port))
            self.sock.listen(16)
            self._run(self._accept_loop)
            return
        self.server = ThreadingHTTPServer((LOOPBACK, self.port), self._handler())
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        assert cert is not None
        ctx.load_cert_chain(*cert)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self._run(self.server.serve_forever)

    def _run(self, fn) -> None:
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept_loop(self) -> None:
        assert self.sock is not None
        while not self.release.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "close":
                conn.close()
            elif self.mode in ("plain", "banner"):
                try:
                    if self.mode == "banner":
                        conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
                    conn.settimeout(2)
                    conn.recv(4096)
                    if self.mode == "plain":
                        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                     b"Connection: close\r\n\r\n400 Bad Request")
                except OSError:
                    pass
                conn.close()
            else:
                self.conns.append(conn)  # held open, never read or written

    def _handler(self):
        backend = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if backend.mode == "hang":
                    backend.release.wait(60)
                    self.close_connection = True
                    return
                try:
                    review = json.loads(body or b"{}")
                    req = review["request"]
                    uid = req["uid"]
                except (ValueError, KeyError, TypeError):
                    review, req, uid = {}, {}, ""
                response: dict = {"uid": uid, "allowed": True}
                if backend.mode == "deny":
                    message = backend.message.format(kind=(req.get("kind") or {}).get("kind", ""),
                                                     namespace=req.get("namespace") or "", name=req.get("name") or "")
                    response = {"uid": uid, "allowed": False, "status": {"code": 403, "message": message}}
                elif backend.mode == "wrong-uid":
                    response = {"uid": "00000000-0000-0000-0000-000000000000", "allowed": True}
                out = json.dumps({"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
                                  "kind": "AdmissionReview", "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *_args) -> None:
                pass

        return H

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def close(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.sock is not None:
            self.sock.close()
        for c in self.conns:
            c.close()


# -- webhook configurations ------------------------------------------------------------------------------------------

def ca_bundle(path: str) -> str:
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def webhook(name: str, client_config: dict, *, policy: str = "Fail", timeout: int = 10,
            resources=("configmaps",), operations=("CREATE",), groups=("",), mutating: bool = False) -> dict:
    """One webhook on the ordinary requests this script makes (CREATE in ``team-a`` by default), so each capture
    shows one cause; the apiserver's own traffic is not intercepted."""
    hook = {
        "name": name, "clientConfig": client_config,
        "rules": [{"operations": list(operations), "apiGroups": list(groups), "apiVersions": ["*"],
                   "resources": list(resources), "scope": "*"}],
        "failurePolicy": policy, "sideEffects": "None", "timeoutSeconds": timeout,
        "admissionReviewVersions": ["v1"], "matchPolicy": "Equivalent",
    }
    if resources == ("configmaps",):
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    if mutating:
        hook["reinvocationPolicy"] = "Never"
    return hook


def configuration(kind: str, name: str, hook: dict, labels: dict | None = None) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration" if kind == "validating" else "MutatingWebhookConfiguration",
            "metadata": {"name": name, "labels": labels or {}}, "webhooks": [hook]}


def url_config(url: str, ca_path: str | None) -> dict:
    cc: dict = {"url": url}
    if ca_path:
        cc["caBundle"] = ca_bundle(ca_path)
    return cc


def service_config(namespace: str, name: str, path: str, ca_path: str, port: int = 443) -> dict:
    return {"service": {"namespace": namespace, "name": name, "path": path, "port": port},
            "caBundle": ca_bundle(ca_path)}


KYVERNO_LABELS = {"webhook.kyverno.io/managed-by": "kyverno"}


# -- one apiserver on one etcd -------------------------------------------------------------------------------------

class Session:
    """A fresh etcd and kube-apiserver on loopback, in ``fmt`` (text | json), with ``extra`` flags."""

    def __init__(self, version: str, binary: str, workdir: str, fmt: str, extra: tuple[str, ...] = (),
                 audit_policy: str | None = None) -> None:
        self.version, self.binary, self.fmt, self.extra = version, binary, fmt, extra
        self.audit_policy = audit_policy  # instead of the launcher's (which drops Leases), when given
        self.dir = tempfile.mkdtemp(prefix=f"v{version}-{fmt}-", dir=workdir)
        self.layout = Layout(self.dir)
        self.keys = pkimod.make(self.layout.pki_dir)
        self.certs = make_certs(os.path.join(self.dir, "capture-pki"))
        self.etcd: subprocess.Popen | None = None
        self.proc: subprocess.Popen | None = None
        self.port = free_port()
        self.url = f"https://{LOOPBACK}:{self.port}"
        self.client = Client(self.url, self.keys, timeout=30)
        self.log = self.layout.log
        self.aggregator_routing = "--enable-aggregator-routing=true" in extra

    @property
    def minor(self) -> int:
        return api.minor("v" + self.version)

    def secret_fragments(self) -> list[str]:
        pems = [os.path.join(d, f) for d in (self.layout.pki_dir, os.path.join(self.dir, "capture-pki"))
                for f in sorted(os.listdir(d))]
        return pem_fragments(pems)

    def start_etcd(self) -> None:
        cport, pport = free_port(), free_port()
        self.etcd_url = f"http://{LOOPBACK}:{cport}"
        self.etcd = spawn(etcd_command(shutil.which("etcd") or "/usr/bin/etcd", "capture",
                                       os.path.join(self.dir, "etcd-data"), self.etcd_url, pport),
                          os.path.join(self.dir, "etcd.log"))
        why = wait_listening(self.etcd, cport, 30)
        if why:
            raise RuntimeError(f"etcd {why}; see {self.dir}/etcd.log")

    def command(self) -> list[str]:
        argv = [self.binary, *api.flags(self.layout, self.keys, self.etcd_url, self.port), *self.extra]
        if self.fmt == "json":
            argv.append("--logging-format=json")
        return argv

    def start_apiserver(self, log: str | None = None) -> subprocess.Popen:
        self.log = log or self.layout.log
        self.proc = spawn(self.command(), self.log)
        return self.proc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def up(self) -> None:
        self.start_etcd()
        api.write_files(self.layout, self.keys, self.url)
        if self.audit_policy is not None:
            from breakglass.core.textfile import write_private
            write_private(self.layout.audit_policy, self.audit_policy.encode())
        self.start_apiserver()
        api.wait_state(self.client, "ready", 180, alive=self.alive)
        self.client.must("POST", "/api/v1/namespaces",
                         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    def stop_apiserver(self) -> None:
        stop(self.proc)
        self.proc = None

    def down(self) -> None:
        self.stop_apiserver()
        stop(self.etcd)
        self.etcd = None

    def etcd_delete(self, prefixes: tuple[bytes, ...], names: tuple[bytes, ...] | None = None) -> list[str]:
        """Delete keys under ``prefixes`` (only those ending in ``names``, when given) while the apiserver is
        stopped, as the sandbox does for an upgraded cluster."""
        from breakglass.access.etcd import Etcd, EtcdSettings

        assert not self.alive()
        db = Etcd(EtcdSettings(endpoints=(self.etcd_url,)), prefixes)
        removed = []
        try:
            for prefix in prefixes:
                for kv in list(db.range_prefix(prefix, keys_only=True)):
                    if names is not None and kv.key[len(prefix):] not in names:
                        continue
                    if db.delete_if_mod_revision(kv.key, kv.mod_revision):
                        removed.append(kv.key.decode())
        finally:
            db.close()
        return removed

    # -- the log -----------------------------------------------------------------------------------------------
    def log_size(self) -> int:
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def log_since(self, offset: int) -> bytes:
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read()


def window(data: bytes, must: list[bytes], max_lines: int = MAX_LINES, before: int = 5) -> bytes:
    """Whole lines of ``data``, starting a few lines before the first that holds any of ``must``, at most
    ``max_lines`` of them. Never edits a line: only cuts."""
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines.pop()  # a line still being written
    first = next((i for i, ln in enumerate(lines) if any(m in ln for m in must)), 0)
    start = max(0, first - before)
    return b"".join(lines[start:start + max_lines])


# -- what the operator does ----------------------------------------------------------------------------------------

def configmap(name: str) -> tuple[str, dict]:
    return (f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": name + "-"}, "data": {"k": "v"}})


@dataclass
class Capture:
    cause: str
    webhook: str | None
    configuration: str | None
    webhook_type: str | None
    failure_policy: str | None
    client: dict | None  # what the request that met the webhook got back: HTTP status and message
    how: str
    files: dict = field(default_factory=dict)  # format -> file name


class Live:
    """One cause at a time on a running apiserver: install the configuration, make a request it intercepts until
    the apiserver has logged the call, keep those lines, remove the configuration."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.extras: list[tuple[str, str, bytes]] = []  # (cause, kind, bytes): what a client printed

    def run(self, cause: str, kind: str, config: dict, how: str, trigger=None, settle: float = 1.5,
            audit: bool = False, audit_marker: bytes = b"webhook.admission.k8s.io/", until: bytes | None = None,
            until_s: float = 0, after=None) -> tuple[Capture, bytes, bytes | None]:
        """``until``: after the first call is logged, wait up to ``until_s`` seconds more for a line holding it (the
        apiserver's own lease renewal, every 10 s). ``after``: called with the running configuration still in
        place, returns (kind, bytes) a client printed, kept with the capture, or None."""
        s = self.s
        hook = config["webhooks"][0]
        name, cfg = hook["name"], config["metadata"]["name"]
        check_loopback(s, hook)
        s.client.must("POST", PATHS[kind], config)
        offset, audit_offset = s.log_size(), _size(s.layout.audit_log)
        marker = name.encode()
        trigger = trigger or (lambda: s.client.call("POST", *configmap(cause)))
        response, deadline = None, time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                time.sleep(0.5)  # the configuration reaches the apiserver's informer within a moment
                status, body = trigger()
                response = {"status": status, "message": body.get("message")} if status else body
                if _wait_for(lambda: marker in s.log_since(offset), 3):
                    break
            else:
                raise RuntimeError(f"{cause}: the apiserver logged nothing about {name} in 30s")
            if until is not None:
                _wait_for(lambda: until in s.log_since(offset), until_s)
            if after is not None:
                printed = after()
                if printed is not None:
                    self.extras.append((cause, *printed))
            time.sleep(settle)  # the lines that follow a call (HandleError's) come a moment later
            data = window(s.log_since(offset), [marker], before=0)
            audit_data = window(_read_from(s.layout.audit_log, audit_offset), [audit_marker]) \
                if audit else None
        finally:
            s.client.must("DELETE", f"{PATHS[kind]}/{cfg}", ok=(200, 202, 404))
            time.sleep(0.5)
        return (Capture(cause, name, cfg, kind, hook["failurePolicy"], response, how), data, audit_data)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read_from(path: str, offset: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read()


def _wait_for(cond, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def check_loopback(s: Session, hook: dict) -> None:
    """Refuse a webhook whose call could leave loopback: a url must be https://127.0.0.1; a service reference
    must not resolve to an address (k8s.io/apiserver/pkg/util/proxy: ResolveCluster dials the cluster IP of a
    Service that has the port and is not headless; ResolveEndpoint, with endpoint routing, an endpoint's IP)."""
    cc = hook["clientConfig"]
    if "url" in cc:
        host = re.match(r"https://([^/:]+)", cc["url"])
        if not host or host[1] != LOOPBACK:
            raise RuntimeError(f"refusing webhook URL {cc['url']}: not on {LOOPBACK}")
        return
    ref = cc["service"]
    ns, name = ref["namespace"], ref["name"]
    status, svc = s.client.call("GET", f"/api/v1/namespaces/{ns}/services/{name}")
    if status == 404:
        return  # both resolvers stop at the lister: service "NAME" not found
    if status != 200:
        raise RuntimeError(f"cannot check Service {ns}/{name}: HTTP {status}")
    spec = svc.get("spec", {})
    if spec.get("type", "ClusterIP") != "ClusterIP":
        raise RuntimeError(f"refusing Service {ns}/{name} of type {spec.get('type')}: it would be dialled")
    if all(p.get("port") != ref.get("port", 443) for p in spec.get("ports", [])):
        return  # no service port NNN found for service "NAME"
    if not s.aggregator_routing:
        if spec.get("clusterIP") == "None":
            return  # cannot route to service with ClusterIP "None"
        raise RuntimeError(f"refusing Service {ns}/{name}: the apiserver would dial its cluster IP")
    slices = s.client.must("GET", f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices")
    eps = s.client.must("GET", f"/api/v1/namespaces/{ns}/endpoints")
    if any(sl.get("endpoints") for sl in slices.get("items", [])) or \
            any(e.get("subsets") for e in eps.get("items", [])):
        raise RuntimeError(f"refusing Service {ns}/{name}: it has endpoints the apiserver would dial")


# -- the causes ------------------------------------------------------------------------------------------------------

# Kyverno's denial message (policy <Kind>/<namespace>/<name> for resource violation, then rule: message).
KYVERNO_DENIAL = ("\n\npolicy {kind}/{namespace}/{name} for resource violation: \n\nrequire-labels:\n  "
                  "check-for-labels: 'validation error: label app.kubernetes.io/name is required. rule "
                  "check-for-labels failed at path /metadata/labels/app.kubernetes.io/name/'\n")

LIVE = ("connection-refused", "mutating-refused", "timeout", "timeout-no-response", "tls-handshake-timeout",
        "tls-unknown-authority", "tls-name-mismatch", "tls-no-ip-san", "tls-expired", "plain-http", "not-tls",
        "connection-closed", "bad-response", "service-not-found", "no-service-port", "headless-service", "denied",
        "fail-open", "canceled")
ROUTING = ("endpoints-not-found", "no-endpoints")
RESTART = ("deadlock", "deadlock-denied", "fatal-hook")  # "deadlock" is "restart-no-deadlock" before 1.33
FAMILY_CAUSES = ("self-dependency", "node-lease-refused", "node-lease-denied", "conversion-down")  # issue 21
CAUSES = LIVE + ROUTING + RESTART + FAMILY_CAUSES

Result = tuple[Capture, bytes, bytes | None]  # the capture, its apiserver log window, its audit log window


def live_causes(s: Session, want) -> list[Result]:
    """The causes one running apiserver (default service routing) produces in turn."""
    live = Live(s)
    ca, trusted = s.keys.ca, s.certs.trusted_ca
    sandbox_cert = (s.keys.webhook_cert, s.keys.webhook_key)
    out: list[Result] = []

    def behind(mode: str, cause: str, how: str, cert=sandbox_cert, bundle: str = ca, name: str | None = None,
               cfg_name: str | None = None, message: str = "", **hook_kw) -> None:
        """One validating webhook at a url: on a backend of ``mode`` (its own, started and stopped here)."""
        b = Backend(mode, cert, message)
        try:
            cfg = configuration("validating", cfg_name or f"capture-{cause}", webhook(
                name or f"{cause}.capture.breakglass.dev", url_config(b.url + "/validate", bundle), **hook_kw))
            out.append(live.run(cause, "validating", cfg, how))
        finally:
            b.close()

    if want("connection-refused"):
        cfg = configuration("validating", scenarios.KYVERNO_NAME, webhook(
            "validate.kyverno.svc-fail", url_config(f"https://{LOOPBACK}:{free_port()}/validate/fail", ca)),
            KYVERNO_LABELS)
        out.append(live.run("connection-refused", "validating", cfg,
                            "Kyverno-shaped validating webhook (failurePolicy Fail) at a url: on a loopback port "
                            "nothing listens on; a ConfigMap create"))
    if want("mutating-refused"):
        cfg = configuration("mutating", "kyverno-resource-mutating-webhook-cfg", webhook(
            "mutate.kyverno.svc-fail", url_config(f"https://{LOOPBACK}:{free_port()}/mutate/fail", ca),
            mutating=True), KYVERNO_LABELS)
        out.append(live.run("mutating-refused", "mutating", cfg,
                            "Kyverno-shaped mutating webhook (Fail) at a dead loopback port; a ConfigMap create "
                            "(the audit log's window is kept too: its mutation annotation names the configuration)",
                            audit=s.fmt == "text"))
    if want("timeout"):
        behind("silent", "timeout", "a backend that accepts TCP and never answers, not even the TLS handshake; "
                                    "timeoutSeconds 2", timeout=2)
    if want("timeout-no-response"):
        behind("hang", "timeout-no-response", "a backend that completes TLS, reads the request and never answers; "
                                              "timeoutSeconds 2", timeout=2)
    if want("tls-handshake-timeout"):
        behind("silent", "tls-handshake-timeout", "a backend that accepts TCP and never answers; timeoutSeconds 15, "
               "longer than the client's 10 s TLS handshake timeout", timeout=15)
    if want("tls-unknown-authority"):
        behind("admit", "tls-unknown-authority", "cert-manager-shaped webhook whose backend serves a certificate "
               "from a CA other than its caBundle", cert=s.certs.leaves["unknown-authority"],
               name="webhook.cert-manager.io", cfg_name="cert-manager-webhook")
    if want("tls-name-mismatch"):
        behind("admit", "tls-name-mismatch", "backend certificate signed by the caBundle's CA for "
               "kyverno-svc.kyverno.svc and 127.0.0.2, called at 127.0.0.1", cert=s.certs.leaves["name-mismatch"],
               bundle=trusted, name="name-mismatch.capture.breakglass.dev")
    if want("tls-no-ip-san"):
        behind("admit", "tls-no-ip-san", "backend certificate signed by the caBundle's CA with a DNS name only, "
               "called at an IP URL", cert=s.certs.leaves["no-ip-san"], bundle=trusted,
               name="no-ip-san.capture.breakglass.dev")
    if want("tls-expired"):
        behind("admit", "tls-expired", "backend certificate signed by the caBundle's CA, expired two days ago",
               cert=s.certs.leaves["expired"], bundle=trusted, name="expired.capture.breakglass.dev")
    if want("plain-http"):
        behind("plain", "plain-http", "a plain HTTP server on the https URL (answers the TLS ClientHello with "
                                      "400 Bad Request, as Go's net/http does)")
    if want("not-tls"):
        behind("banner", "not-tls", "something that is not TLS nor HTTP on the port (an SSH banner)")
    if want("connection-closed"):
        behind("close", "connection-closed", "a backend that accepts TCP and closes the connection at once")
    if want("bad-response"):
        behind("wrong-uid", "bad-response", "a backend that answers with another request's uid")
    if want("service-not-found"):
        cfg = configuration("validating", scenarios.KYVERNO_NAME, webhook(
            "validate.kyverno.svc-fail", service_config("kyverno", "kyverno-svc", "/validate/fail", ca)),
            KYVERNO_LABELS)
        out.append(live.run("service-not-found", "validating", cfg,
                            "Kyverno-shaped webhook by service: reference to kyverno/kyverno-svc, which does not "
                            "exist (the resolver fails before any dial)"))
    if want("no-service-port") or want("headless-service"):
        s.client.must("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "policy"}}, ok=(201, 409))
    if want("no-service-port"):
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "policy-webhook"},
               "spec": {"ports": [{"name": "https", "port": 9443, "targetPort": 9443}]}}
        s.client.must("POST", "/api/v1/namespaces/policy/services", svc, ok=(201, 409))
        cfg = configuration("validating", "capture-no-service-port", webhook(
            "no-service-port.capture.breakglass.dev", service_config("policy", "policy-webhook", "/validate", ca)))
        out.append(live.run("no-service-port", "validating", cfg,
                            "webhook by service: reference to port 443 of a Service that only has port 9443 "
                            "(the resolver fails before any dial)"))
    if want("headless-service"):
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "policy-headless"},
               "spec": {"clusterIP": "None", "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}
        s.client.must("POST", "/api/v1/namespaces/policy/services", svc, ok=(201, 409))
        cfg = configuration("validating", "capture-headless-service", webhook(
            "headless.capture.breakglass.dev", service_config("policy", "policy-headless", "/validate", ca)))
        out.append(live.run("headless-service", "validating", cfg,
                            "webhook by service: reference to a headless Service (clusterIP: None)"))
    if want("denied"):
        b = Backend("deny", sandbox_cert, KYVERNO_DENIAL)
        try:
            cfg = configuration("validating", scenarios.KYVERNO_NAME, webhook(
                "validate.kyverno.svc-fail", url_config(b.url + "/validate/fail", ca)), KYVERNO_LABELS)
            out.append(live.run("denied", "validating", cfg,
                                "Kyverno-shaped webhook whose backend answers allowed: false with a Kyverno-style "
                                "policy message; a ConfigMap create (an ordinary denial: the webhook doing its job)"))
        finally:
            b.close()
    if want("fail-open"):
        cfg = scenarios.gatekeeper(f"https://{LOOPBACK}:{free_port()}", ca)
        out.append(live.run("fail-open", "validating", cfg,
                            "Gatekeeper's validating webhook as its chart installs it (failurePolicy Ignore, every "
                            "resource), backend down (dead loopback port); a ConfigMap create is admitted"))
    if want("canceled"):
        b = Backend("hang", sandbox_cert)
        try:
            cfg = configuration("validating", "capture-canceled", webhook(
                "canceled.capture.breakglass.dev", url_config(b.url + "/validate", ca), policy="Ignore"))
            impatient = Client(s.url, s.keys, timeout=2)

            def trigger():
                try:
                    return impatient.call("POST", *configmap("canceled"))
                except Exception as e:  # noqa: BLE001 - the client giving up is the point
                    return None, {"client": f"gave up after 2 s: {e}"}

            out.append(live.run("canceled", "validating", cfg,
                                "fail-open webhook (timeoutSeconds 10) whose backend never answers; the client "
                                "disconnects after 2 s", trigger=trigger, settle=3))
        finally:
            b.close()
    return out


def routing_causes(s: Session, want) -> list[Result]:
    """With --enable-aggregator-routing=true: a Service that exists but has no endpoints. The endpoint resolver
    (k8s.io/apiserver/pkg/util/proxy.ResolveEndpoint) returns its error before there is any address to dial."""
    live = Live(s)
    out: list[Result] = []
    s.client.must("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "kyverno"}}, ok=(201, 409))
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kyverno-svc", "namespace": "kyverno"},
           "spec": {"selector": {"app": "kyverno"}, "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}
    s.client.must("POST", "/api/v1/namespaces/kyverno/services", svc)
    cfg = configuration("validating", scenarios.KYVERNO_NAME, webhook(
        "validate.kyverno.svc-fail", service_config("kyverno", "kyverno-svc", "/validate/fail", s.keys.ca)),
        KYVERNO_LABELS)
    if s.minor < 33 and want("endpoints-not-found"):
        # Here the resolver still reads the Endpoints object, which only kube-controller-manager creates (it
        # does not run): so first that is missing.
        out.append(live.run("endpoints-not-found", "validating", cfg,
                            "--enable-aggregator-routing=true; Kyverno-shaped webhook by service: reference to "
                            "kyverno/kyverno-svc, which exists, with no Endpoints object (no kube-controller-manager "
                            "made one)"))
    if want("no-endpoints"):
        if s.minor < 33:
            s.client.must("POST", "/api/v1/namespaces/kyverno/endpoints",
                          {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "kyverno-svc"},
                           "subsets": []})
        out.append(live.run("no-endpoints", "validating", cfg,
                            "--enable-aggregator-routing=true; Kyverno-shaped webhook by service: reference to "
                            "kyverno/kyverno-svc, which exists with no endpoints (its pods are gone)"))
    return out


# -- the deadlock families of issue 21 ---------------------------------------------------------------------------------

# The launcher's audit policy, with Leases kept at Metadata too: where the lease captures show which Lease failed.
AUDIT_WITH_LEASES = api.AUDIT_POLICY.replace(
    '- level: None\n  resources:\n  - group: coordination.k8s.io\n    resources: ["leases"]\n', '')
FREEZE_DENIAL = "cluster is frozen for the change window: {kind} {namespace}/{name} may not be changed"
BACKEND_NS, BACKEND_RS = "kyverno", "kyverno-admission-controller-5d9f8b7c4"
CRD_GROUP, CRD_PLURAL, CRD_KIND = "capture.breakglass.dev", "widgets", "Widget"
CRD_NAME = f"{CRD_PLURAL}.{CRD_GROUP}"


def kubectl(s: Session, *args: str, files: dict[str, dict] | None = None) -> tuple[str, bytes] | None:
    """What kubectl prints (stderr, then stdout) for ``args`` against this apiserver, run in the session's
    directory so the file names it prints are the ones given here; None when there is no kubectl."""
    binary = shutil.which("kubectl")
    if binary is None:
        return None
    for name, obj in (files or {}).items():
        with open(os.path.join(s.dir, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2)
    p = subprocess.run([binary, "--kubeconfig", s.layout.kubeconfig, "--cache-dir", os.path.join(s.dir, "kube-cache"),
                        *args], cwd=s.dir, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    if p.returncode == 0:
        return None  # nothing failed: nothing to keep
    return "kubectl", p.stderr + p.stdout


def _namespace(s: Session, name: str) -> None:
    s.client.must("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                  ok=(201, 409))


def _service_without_endpoints(s: Session, ns: str, name: str, app: str) -> None:
    """A ClusterIP Service whose pods are gone (no endpoints; under --enable-aggregator-routing=true nothing is
    dialled, which check_loopback verifies)."""
    _namespace(s, ns)
    s.client.must("POST", f"/api/v1/namespaces/{ns}/services",
                  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                   "spec": {"selector": {"app.kubernetes.io/name": app},
                            "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}, ok=(201, 409))
    if s.minor < 33:  # the resolver reads the Endpoints object there, which no kube-controller-manager made
        s.client.must("POST", f"/api/v1/namespaces/{ns}/endpoints",
                      {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name}, "subsets": []},
                      ok=(201, 409))


def _backend_pod(rs: dict) -> dict:
    """The pod a ReplicaSet controller would create for ``rs`` (there is no kube-controller-manager here)."""
    tmpl = rs["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": rs["metadata"]["name"] + "-", "namespace": BACKEND_NS,
                         "labels": tmpl["metadata"]["labels"],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": tmpl["spec"]}


def self_dependency(s: Session, live: Live) -> Result:
    """Kyverno's webhook (Fail) on pod creates everywhere, its own namespace included; its Service has no
    endpoints (its pods are gone); the ReplicaSet's replacement pod is created in kyverno as the ReplicaSet
    controller would: refused, so the backend can never come back."""
    _service_without_endpoints(s, BACKEND_NS, "kyverno-svc", "kyverno")
    s.client.must("POST", f"/api/v1/namespaces/{BACKEND_NS}/serviceaccounts",  # no controller-manager makes it
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, ok=(201, 409))
    labels = {"app.kubernetes.io/name": "kyverno", "app.kubernetes.io/component": "admission-controller",
              "pod-template-hash": "5d9f8b7c4"}
    rs = s.client.must("POST", f"/apis/apps/v1/namespaces/{BACKEND_NS}/replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": BACKEND_RS, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "kyverno", "image": "reg.kyverno.io/kyverno/kyverno:v1.13.4"}]}}}})
    pod = _backend_pod(rs)
    cfg = configuration("validating", scenarios.KYVERNO_NAME, webhook(
        "validate.kyverno.svc-fail", service_config("kyverno", "kyverno-svc", "/validate/fail", s.keys.ca),
        resources=("pods",)), KYVERNO_LABELS)
    return live.run(
        "self-dependency", "validating", cfg,
        "--enable-aggregator-routing=true; Kyverno-shaped webhook (Fail) on pod creates in every namespace, by "
        "service: reference to kyverno/kyverno-svc, which has no endpoints (its pods are gone); the pod its "
        "ReplicaSet kyverno/" + BACKEND_RS + " needs is created in kyverno as the ReplicaSet controller would "
        "(ownerReferences to it); the audit log's window is kept (it names the request's namespace), and what "
        "kubectl prints for the same pod",
        trigger=lambda: s.client.call("POST", f"/api/v1/namespaces/{BACKEND_NS}/pods", pod),
        audit=s.fmt == "text", audit_marker=b"validate.kyverno.svc-fail",
        after=(lambda: kubectl(s, "create", "-f", "kyverno-admission-controller-pod.yaml",
                               files={"kyverno-admission-controller-pod.yaml": pod}))
        if s.fmt == "text" else None)


def conversion_down(s: Session) -> tuple[Result, list[tuple[str, str, bytes]]]:
    """A CRD with two versions, objects stored in v1, then its conversion switched to a webhook whose Service
    has no endpoints: the apiserver's watch cache of v1beta1 cannot list, and reads in v1beta1 fail."""
    _service_without_endpoints(s, "widget-system", "widget-conversion", "widget-conversion")
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": CRD_NAME},
           "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                    "names": {"plural": CRD_PLURAL, "singular": "widget", "kind": CRD_KIND, "listKind": "WidgetList"},
                    "versions": [{"name": "v1beta1", "served": True, "storage": False, "schema": schema},
                                 {"name": "v1", "served": True, "storage": True, "schema": schema}],
                    "conversion": {"strategy": "None"}}}
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    s.client.must("POST", base, crd)
    if not _wait_for(lambda: any(c.get("type") == "Established" and c.get("status") == "True" for c in
                                 (s.client.must("GET", f"{base}/{CRD_NAME}").get("status") or {}).get("conditions")
                                 or ()),
                     30):
        raise RuntimeError(f"CRD {CRD_NAME} not established in 30 s")
    objs = f"/apis/{CRD_GROUP}/v1/namespaces/{NAMESPACE}/{CRD_PLURAL}"
    for name in ("blue", "green"):
        deadline = time.monotonic() + 20
        while True:
            status, body = s.client.call("POST", objs, {"apiVersion": f"{CRD_GROUP}/v1", "kind": CRD_KIND,
                                                        "metadata": {"name": name}, "spec": {"size": 3}})
            if status in (201, 409) or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # the new resource's storage is served a moment after Established
        if status not in (201, 409):
            raise RuntimeError(f"cannot create {CRD_KIND} {name}: HTTP {status}: {body.get('message')}")
    offset, audit_offset = s.log_size(), _size(s.layout.audit_log)
    current = s.client.must("GET", f"{base}/{CRD_NAME}")
    current["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "widget-system", "name": "widget-conversion", "path": "/convert",
                                     "port": 443}, "caBundle": ca_bundle(s.keys.ca)}}}
    check_loopback(s, {"clientConfig": current["spec"]["conversion"]["webhook"]["clientConfig"]})
    s.client.must("PUT", f"{base}/{CRD_NAME}", current)
    marker = b"conversion webhook for"
    response = None
    old = f"/apis/{CRD_GROUP}/v1beta1/namespaces/{NAMESPACE}/{CRD_PLURAL}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.5)
        status, body = s.client.call("GET", old + "/blue")
        if status != 200:
            response = {"status": status, "message": body.get("message")}
            if _wait_for(lambda: marker in s.log_since(offset), 3):
                break
    else:
        raise RuntimeError("conversion: the apiserver logged no conversion failure in 30 s")
    extras = []
    if s.fmt == "text":
        for args in (("get", f"{CRD_PLURAL}.v1beta1.{CRD_GROUP}", "-n", NAMESPACE),
                     ("get", f"{CRD_PLURAL}.v1beta1.{CRD_GROUP}", "blue", "-n", NAMESPACE, "-o", "yaml")):
            printed = kubectl(s, *args)
            if printed is not None:
                extras.append(("conversion-down", *printed))
    time.sleep(3)  # the watch cache retries its list: a few lines more
    data = window(s.log_since(offset), [marker], before=0)
    audit_data = window(_read_from(s.layout.audit_log, audit_offset), [marker]) if s.fmt == "text" else None
    current = s.client.must("GET", f"{base}/{CRD_NAME}")
    current["spec"]["conversion"] = {"strategy": "None"}
    s.client.must("PUT", f"{base}/{CRD_NAME}", current)
    how = (f"--enable-aggregator-routing=true; CRD {CRD_NAME} with versions v1beta1 and v1 (storage), two Widgets "
           f"stored in v1, then spec.conversion switched to Webhook by service: reference to "
           f"widget-system/widget-conversion (caBundle the sandbox CA), which has no endpoints; a GET of a Widget "
           f"in v1beta1 (and kubectl get in v1beta1)")
    cap = Capture("conversion-down", None, None, None, None, response, how)
    return (cap, data, audit_data), extras


def node_lease(s: Session, live: Live, denied: bool) -> Result:
    """A webhook (Fail) on Lease creates and updates, everywhere: down (a dead loopback port), or up and denying
    as a policy engine's freeze mode does. A kubelet's renewal of its Lease in kube-node-lease is refused, and
    so is the apiserver's own lease in kube-system (its lease controller, the kubelet's code, logs it)."""
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    node = "worker-1"

    def now() -> str:
        return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    s.client.must("POST", lease_path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                       "metadata": {"name": node},
                                       "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                                                "renewTime": now()}}, ok=(201, 409))

    def renew():
        lease = s.client.must("GET", f"{lease_path}/{node}")
        lease["spec"]["renewTime"] = now()
        return s.client.call("PUT", f"{lease_path}/{node}", lease)

    backend = Backend("deny", (s.keys.webhook_cert, s.keys.webhook_key), FREEZE_DENIAL) if denied else None
    try:
        url = (backend.url if backend else f"https://{LOOPBACK}:{free_port()}") + "/validate"
        name = "freeze.capture.breakglass.dev" if denied else "leases.capture.breakglass.dev"
        cfg = configuration("validating", "capture-freeze" if denied else "capture-lease-guard", webhook(
            name, url_config(url, s.keys.ca), resources=("leases",), operations=("CREATE", "UPDATE"),
            groups=("coordination.k8s.io",)))
        cause = "node-lease-denied" if denied else "node-lease-refused"
        how = ("a webhook (Fail) on Lease creates and updates in every namespace, " +
               ("whose backend answers allowed: false (a policy engine's freeze mode)" if denied
                else "at a dead loopback port") +
               f"; a kubelet's renewal (PUT) of Lease kube-node-lease/{node}, and the apiserver's own lease renewal "
               f"in kube-system, which its lease controller (the kubelet's) logs; the audit log (Leases at "
               f"Metadata in this run) names each Lease")
        return live.run(cause, "validating", cfg, how, trigger=renew, audit=s.fmt == "text",
                        audit_marker=name.encode(), until=b"ailed to update lease", until_s=25)
    finally:
        if backend:
            backend.close()


FAMILY = FAMILY_CAUSES


def family_causes(s: Session, want) -> tuple[list[Result], list[tuple[str, str, bytes]]]:
    """The deadlock families (issue 21) on one apiserver with --enable-aggregator-routing=true (Services resolve
    to their endpoints, of which there are none: nothing is dialled) and Leases audited."""
    live = Live(s)
    out: list[Result] = []
    extras: list[tuple[str, str, bytes]] = []
    if want("self-dependency"):
        out.append(self_dependency(s, live))
    if want("node-lease-refused"):
        out.append(node_lease(s, live, denied=False))
    if want("node-lease-denied"):
        out.append(node_lease(s, live, denied=True))
    if want("conversion-down"):  # last: the old watch cache keeps retrying a while after conversion is undone
        result, printed = conversion_down(s)
        out.append(result)
        extras += printed
    return out, extras + live.extras


def deadlock(s: Session, denied: bool = False) -> tuple[Result, str]:
    """The seed story: Kyverno's every-resource webhook, the default ServiceCIDR and IPAddress objects removed from
    etcd while the apiserver is stopped (a cluster upgraded from 1.32), restart. Its backend is down, or (denied)
    up and denying everything. Returns the capture and /readyz?verbose once settled."""
    backend = Backend("deny", (s.keys.webhook_cert, s.keys.webhook_key), KYVERNO_DENIAL) if denied else None
    try:
        url = backend.url if backend else f"https://{LOOPBACK}:{free_port()}"
        cfg = scenarios.kyverno(url, s.keys.ca)
        hook = cfg["webhooks"][0]
        check_loopback(s, hook)
        s.client.must("POST", scenarios.VWC_PATH, cfg)
        time.sleep(1)
        s.stop_apiserver()
        removed = s.etcd_delete(scenarios.UPGRADE_MISSING_PREFIXES)
        say(f"  removed {', '.join(removed) or 'nothing'}; restarting")
        s.start_apiserver(s.layout.path("restart.log"))
        stuck = s.minor >= 33
        api.wait_state(s.client, "stuck" if stuck else "ready", 180, alive=s.alive)
        time.sleep(3)
        status, body = s.client.readyz()
        s.stop_apiserver()
    finally:
        if backend:
            backend.close()
    data = window(s.log_since(0), [b"Creating default ServiceCIDR", hook["name"].encode()], before=20)
    state = "/readyz never passes" if stuck else f"/readyz answers {status}"
    if denied:
        cause = "deadlock-denied"
        how = (f"Kyverno-shaped webhook (every resource, Fail) whose backend denies everything with a Kyverno-style "
               f"message; apiserver stopped, {', '.join(removed)} deleted from etcd, apiserver restarted; {state}")
    else:
        cause = "deadlock" if stuck else "restart-no-deadlock"
        how = (f"Kyverno-shaped webhook (every resource, Fail) at a dead loopback port; apiserver stopped, "
               f"{', '.join(removed) or 'nothing'} deleted from etcd, apiserver restarted; {state}")
    cap = Capture(cause, hook["name"], cfg["metadata"]["name"], "validating", "Fail", {"readyz_status": status}, how)
    return (cap, data, None), body


def fatal_hook(s: Session) -> Result:
    """A post-start hook that fails for good: the system PriorityClasses deleted from etcd while the apiserver is
    stopped, a webhook (Fail, backend down) on PriorityClass creates; the restarted apiserver must recreate them."""
    hook = webhook("priorityclasses.capture.breakglass.dev",
                   url_config(f"https://{LOOPBACK}:{free_port()}/validate", s.keys.ca),
                   resources=("priorityclasses",), groups=("scheduling.k8s.io",))
    cfg = configuration("validating", "capture-priorityclass-guard", hook)
    check_loopback(s, hook)
    s.client.must("POST", PATHS["validating"], cfg)
    time.sleep(1)
    s.stop_apiserver()
    removed = s.etcd_delete((b"/registry/priorityclasses/",), (b"system-node-critical", b"system-cluster-critical"))
    say(f"  removed {', '.join(removed)}; restarting")
    proc = s.start_apiserver(s.layout.path("restart.log"))
    try:
        code = proc.wait(90)
    except subprocess.TimeoutExpired:
        status, _ = s.client.readyz()
        s.stop_apiserver()
        raise Skip(f"the apiserver did not exit within 90 s (/readyz {status}): no fatal post-start hook") from None
    data = window(s.log_since(0), [hook["name"].encode(), b"PostStartHook"], before=20)
    if b"PostStartHook" not in data:
        raise Skip(f"the apiserver exited {code} without a PostStartHook line")
    how = (f"webhook on PriorityClass CREATE (Fail) at a dead loopback port; apiserver stopped, {', '.join(removed)} "
           f"deleted from etcd, apiserver restarted; it exited with code {code}")
    return Capture("fatal-hook", hook["name"], cfg["metadata"]["name"], "validating", "Fail", {"exit_code": code},
                   how), data, None


# -- writing ---------------------------------------------------------------------------------------------------------

_DIAL = re.compile(rb"dial tcp (\[?[0-9a-fA-F.:]+\]?):\d+")


def check_clean(data: bytes, fragments: list[str], what: str) -> None:
    """Refuse a capture that holds key or certificate material, or shows a dial to anything but loopback."""
    text = data.decode("utf-8", "replace")
    for bad in ("-----BEGIN", "PRIVATE KEY", "LS0tLS1CRUdJT"):
        if bad in text:
            raise RuntimeError(f"{what}: the capture holds {bad!r}; not writing it")
    if any(frag in text for frag in fragments):
        raise RuntimeError(f"{what}: the capture holds a piece of a throwaway PEM; not writing it")
    for addr in _DIAL.findall(data):
        if not ipaddress.ip_address(addr.decode().strip("[]")).is_loopback:
            raise RuntimeError(f"{what}: the apiserver dialled {addr.decode()}, which is not loopback")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Output:
    """One version's fixture directory and its captures.json (merged with what an earlier run left, so a run
    with --only replaces just those causes)."""

    def __init__(self, root: str, version: str) -> None:
        self.dir = os.path.join(root, f"v{version}")
        self.manifest_path = os.path.join(self.dir, "captures.json")
        try:
            with open(self.manifest_path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
        self.captures: dict[str, dict] = {c["cause"]: c for c in old.get("captures", [])}
        self.skipped: dict[str, str] = dict(old.get("skipped", {}))
        self.version = version
        self.fresh: set[str] = set()  # causes captured in this run (their entries are new)

    def keep(self, cap: Capture, key: str, name: str, data: bytes, s: Session) -> None:
        check_clean(data, s.secret_fragments(), name)
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(data)
        if cap.cause not in self.fresh:
            self.fresh.add(cap.cause)
            self.captures[cap.cause] = {**vars(cap), "files": {}, "captured": _now()}
        entry = self.captures[cap.cause]
        entry["files"][key] = name
        if key == "text":  # the request's outcome as the text run saw it
            entry["client"] = cap.client
        self.skipped.pop(cap.cause, None)
        lines = data.count(b"\n")
        say(f"  v{self.version} {key}: {cap.cause} -> {name} ({lines} lines)")

    def skip(self, cause: str, why: str) -> None:
        if cause not in self.captures:
            self.skipped[cause] = why
        say(f"  v{self.version}: {cause} skipped: {why}")

    def save(self, binary: str) -> None:
        order = {c: i for i, c in enumerate(CAUSES + ("restart-no-deadlock",))}
        manifest = {
            "version": f"v{self.version}", "binary": os.path.relpath(binary, ROOT),
            "command": "python scripts/capture_real_logs.py",
            "captures": sorted(self.captures.values(), key=lambda c: order.get(c["cause"], 99)),
            "skipped": self.skipped,
        }
        os.makedirs(self.dir, exist_ok=True)
        with open(self.manifest_path, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")


def capture_version(version: str, binary: str, out_root: str, workdir: str, only: set[str] | None,
                    formats: tuple[str, ...]) -> None:
    out = Output(out_root, version)

    def want(cause: str) -> bool:
        return only is None or cause in only

    def session(fmt: str, extra: tuple[str, ...] = (), audit_policy: str | None = None) -> Session:
        s = Session(version, binary, workdir, fmt, extra, audit_policy)
        say(f"v{version} {fmt}{' ' + ' '.join(extra) if extra else ''}: a fresh etcd and kube-apiserver")
        try:
            s.up()
        except BaseException:
            s.down()
            raise
        return s

    def keep_all(results: list[Result], fmt: str, s: Session) -> None:
        for cap, data, audit in results:
            out.keep(cap, fmt, cap.cause + FORMATS[fmt], data, s)
            if audit is not None:
                out.keep(cap, "audit", cap.cause + ".audit.log", audit, s)

    minor = api.minor("v" + version)
    for fmt in formats:
        if any(want(c) for c in LIVE):
            s = session(fmt)
            try:
                keep_all(live_causes(s, want), fmt, s)
            finally:
                s.down()
        if any(want(c) for c in ROUTING):
            s = session(fmt, ("--enable-aggregator-routing=true",))
            try:
                keep_all(routing_causes(s, want), fmt, s)
            finally:
                s.down()
        if any(want(c) for c in FAMILY):
            s = session(fmt, ("--enable-aggregator-routing=true",), AUDIT_WITH_LEASES)
            try:
                results, printed = family_causes(s, want)
                keep_all(results, fmt, s)
                caps = {r[0].cause: r[0] for r in results}
                seen: dict[str, int] = {}
                for cause, kind, data in printed:
                    seen[cause] = seen.get(cause, 0) + 1
                    n = seen[cause]
                    out.keep(caps[cause], kind if n == 1 else f"{kind}-{n}",
                             f"{cause}.{kind}{'' if n == 1 else '-' + str(n)}.txt", data, s)
            finally:
                s.down()
        for cause in RESTART:
            if not want(cause):
                continue
            if cause == "deadlock-denied" and minor < 33:
                out.skip(cause, "before 1.33 nothing the apiserver must write at start is missing after the restart "
                                "(no default ServiceCIDR exists), so there is no bootstrap write to deny")
                continue
            s = session(fmt)
            try:
                if cause == "fatal-hook":
                    keep_all([fatal_hook(s)], fmt, s)
                    continue
                result, readyz = deadlock(s, denied=cause == "deadlock-denied")
                keep_all([result], fmt, s)
                if fmt == "text":
                    out.keep(result[0], "readyz", f"readyz-{result[0].cause}.txt", readyz.encode(), s)
            except Skip as e:
                out.skip(cause, str(e))
            finally:
                s.down()
    out.save(binary)


# -- the README --------------------------------------------------------------------------------------------------------

NOT_PRODUCED = {
    "dial errors to a Service's cluster IP or a pod IP (connection refused / i/o timeout / connection timed out / "
    "no route to host / operation not permitted on 10.x.x.x)":
        "they need the apiserver to dial an address other than 127.0.0.1, which this machine's network rules forbid; "
        "connection refused is captured on loopback instead (connection-refused.log), the others not at all",
    "no endpoints while the Service has some (a pod IP that does not answer)":
        "the same: the apiserver would dial the pod IP; only the zero-endpoint case is captured (no-endpoints.log)",
    "DNS lookup failure (no such host)": "the lookup would go to the machine's resolver, not loopback",
    "egress proxy / konnectivity errors": "no such component runs here",
    "webhook panic, dry-run unsupported": "neither can be caused from outside the apiserver by configuration",
    "not yet ready to handle request": "a race at start (the webhook informer not yet synced); it did not show "
                                       "in these runs",
}


def write_readme(out_root: str) -> None:
    manifests = []
    for d in sorted(os.listdir(out_root)):
        path = os.path.join(out_root, d, "captures.json")
        if d.startswith("v") and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                manifests.append(json.load(f))
    etcd = subprocess.run([shutil.which("etcd") or "etcd", "--version"], capture_output=True, text=True)
    etcd_version = (etcd.stdout.splitlines() or ["etcd (unknown version)"])[0]
    lines = [
        "# Real kube-apiserver logs",
        "",
        "Everything in `v<version>/` was written by a real kube-apiserver, built from the published Go modules",
        "(`scripts/gobuild.sh kube-apiserver`, versions in `go/versions`), running on this machine's "
        f"{etcd_version.replace('etcd Version:', 'etcd')}.",
        "They are its log lines **byte for byte**: a capture is only ever cut to a window of whole lines, never",
        "edited. Made with",
        "",
        "    python scripts/capture_real_logs.py",
        "",
        "(`--versions`, `--only CAUSE,...`, `--formats text,json` narrow a run; `v<version>/captures.json` records",
        "each capture's time, the webhook and configuration it installed, what the client got back, and how).",
        "",
        "How: for each built version, and for klog text (the default) and `--logging-format=json`, a fresh etcd",
        "and kube-apiserver on 127.0.0.1 with the sandbox's kubeadm-style flags (`breakglass/sandbox/apiserver.py`;",
        "`--enable-aggregator-routing=true` added for the endpoint cases). One webhook configuration at a time is",
        "installed through the API, a request it intercepts is made (a ConfigMap create in `team-a`) until the",
        "apiserver logs the call, the lines from there are kept, the configuration is deleted. The restart cases",
        "stop the apiserver, delete keys from etcd, and start it again: the window then starts shortly before the",
        "first line about the webhook or the default ServiceCIDR.",
        "",
        "Nothing was ever dialled but 127.0.0.1: webhooks are called at a `url:` on loopback (a dead port, or a",
        "backend the script runs), or through a `service:` reference the apiserver cannot resolve to an address",
        "(absent, headless, without the port, or with no endpoints under endpoint routing), checked before each",
        "call; the script refuses to keep a capture that shows a dial to any other address, or any piece of the",
        "throwaway certificates and keys it made.",
        "",
        "Lines that come from running on loopback, not from the webhooks: `Resetting endpoints for master service",
        '"kubernetes" to [127.0.0.1]` and `unable to sync kubernetes service: Endpoints "kubernetes" is invalid: ...',
        "may not be in the loopback range` every 10 s (the apiserver advertises 127.0.0.1), and grpc",
        "`addrConn.createTransport failed to connect` warnings while it first reaches etcd.",
        "",
    ]
    for m in manifests:
        dates = sorted({c.get("captured", "")[:10] for c in m["captures"]})
        lines += [f"## {m['version']}", "", f"Binary `{m['binary']}`; captured {', '.join(dates)}.", "",
                  "| cause | files | webhook (configuration) | how |", "|---|---|---|---|"]
        for c in m["captures"]:
            files = ", ".join(f"`{f}`" for f in c["files"].values())
            who = f"`{c['webhook']}` (`{c['configuration']}`)" if c.get("webhook") else ""
            lines.append(f"| {c['cause']} | {files} | {who} | {c['how']} |")
        if m.get("skipped"):
            lines += ["", "Not produced on this version:", ""]
            lines += [f"- {cause}: {why}" for cause, why in sorted(m["skipped"].items())]
        lines.append("")
    lines += ["## Causes no run here produces", ""]
    lines += [f"- {what}: {why}" for what, why in NOT_PRODUCED.items()]
    lines.append("")
    with open(os.path.join(out_root, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", help="comma-separated (default: every built one in go/versions)")
    ap.add_argument("--only", help=f"comma-separated causes (default: all): {', '.join(CAUSES)}")
    ap.add_argument("--formats", default="text,json", help="text, json or both (default)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "real"))
    ap.add_argument("--keep-workdir", action="store_true", help="keep the etcd data, logs and throwaway PKI")
    o = ap.parse_args(argv)
    versions = built_versions()
    if o.versions:
        wanted = set(o.versions.split(","))
        versions = [v for v in versions if v[0] in wanted]
    if not versions:
        say("no built kube-apiserver to capture from")
        return 1
    only = set(o.only.split(",")) if o.only else None
    if only and only - set(CAUSES):
        ap.error(f"unknown causes: {', '.join(sorted(only - set(CAUSES)))}")
    formats = tuple(o.formats.split(","))
    if set(formats) - set(FORMATS):
        ap.error("--formats: text and/or json")
    workdir = tempfile.mkdtemp(prefix="capture-real-logs-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for version, binary in versions:
            capture_version(version, binary, o.out, workdir, only, formats)
        write_readme(o.out)
    finally:
        stop_all()
        if o.keep_workdir:
            say(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
