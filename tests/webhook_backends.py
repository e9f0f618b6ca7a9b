"""Webhook backends on loopback for the readiness tests: certificates (a CA whose PEM goes into caBundle, leaf
certificates for any names), the real one (breakglass/sandbox/backend.py, an admit-everything HTTPS
AdmissionReview server, run as its own process), and backends that lie: they take the connection and then fail
the call in one of the ways the apiserver meets in clusters.

Every server listens on 127.0.0.1 only."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from breakglass.sandbox import free_port, wait_listening

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Ca:
    """A CA for webhook serving certificates."""

    def __init__(self, cn: str = "breakglass-test-webhook-ca") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM)
        self.bundle = base64.b64encode(self.pem).decode()  # as clientConfig.caBundle holds it

    def issue(self, directory: str, stem: str, dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> tuple[str, str]:
        """(certificate path, key path) of a serving certificate for ``dns`` and ``ips``."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)]))
                .issuer_name(self.name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .sign(self.key, hashes.SHA256()))
        os.makedirs(directory, exist_ok=True)
        crt, pem = os.path.join(directory, f"{stem}.crt"), os.path.join(directory, f"{stem}.key")
        with open(crt, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(pem, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        return crt, pem


class RealBackend:
    """breakglass/sandbox/backend.py as its own process on 127.0.0.1, serving ``cert``."""

    def __init__(self, cert: str, key: str, log: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self._log = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "breakglass.sandbox.backend", "--port", str(self.port),
                                      "--cert", cert, "--key", key], cwd=ROOT, stdout=self._log, stderr=self._log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        why = wait_listening(self.proc, self.port, 30)
        if why:
            self.stop()
            raise RuntimeError(f"the sandbox backend {why}; see {log}")

    def stop(self) -> None:
        from tests.real_control_plane import stop_group

        stop_group(self.proc)
        self._log.close()


class _Listener:
    """A thread accepting on 127.0.0.1 and handing each connection to ``serve``."""

    def __init__(self, serve, port: int = 0) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.serve = serve
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self.serve, args=(self, conn), daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.sock.close()
        for c in self.held:
            c.close()


def closes_at_once(port: int = 0) -> _Listener:
    """Takes the TCP connection and closes it before a byte is exchanged."""
    return _Listener(lambda _lst, conn: conn.close(), port)


def never_answers(port: int = 0) -> _Listener:
    """Takes the TCP connection and keeps it, silent, until stopped."""
    return _Listener(lambda lst, conn: lst.held.append(conn), port)


class HttpsBackend:
    """An HTTPS server on 127.0.0.1 answering every POST with ``answer(review) -> (status, body bytes)``."""

    def __init__(self, cert: str, key: str, answer, port: int = 0) -> None:
        outer = self
        self.seen: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    review = json.loads(data)
                except ValueError:
                    review = {}
                outer.seen.append({"path": self.path, "headers": dict(self.headers), "review": review})
                status, body = answer(review)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # a client refusing our certificate: expected here
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server = Server(("127.0.0.1", port), Handler)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


# the ways a backend takes the connection and still fails the apiserver's call, and (stage, words) of the reading
LIARS = {
    "closes": ("tls", "connection closed before an answer"),
    "silent": ("timeout", "no answer within 1s"),
    "foreign-ca": ("tls", "TLS: certificate signed by unknown authority (not the webhook's caBundle)"),
    "wrong-name": ("tls", "TLS: certificate is valid for other.example, not 127.0.0.1"),
    "not-a-review": ("review", "answer is not an AdmissionReview for this request"),
    "wrong-uid": ("review", 'expected response.uid="'),
    "http-500": ("http", "HTTP 500: internal error: policy cache not warm"),
}


def liar(kind: str, good: tuple[str, str], foreign: tuple[str, str], misnamed: tuple[str, str], port: int = 0):
    """A lying backend of ``kind`` (LIARS); ``good``: a certificate and key the caBundle trusts for 127.0.0.1,
    ``foreign``: one for 127.0.0.1 from a CA outside it, ``misnamed``: one it trusts for other.example only."""
    answers = {"not-a-review": lambda r: (200, b'{"status": "ok"}'),
               "wrong-uid": lambda r: (200, review_answer(r, uid="0000-not-yours")),
               "http-500": lambda r: (500, b"internal error: policy cache not warm")}
    if kind == "closes":
        return closes_at_once(port)
    if kind == "silent":
        return never_answers(port)
    if kind == "foreign-ca":
        return HttpsBackend(*foreign, lambda r: (200, review_answer(r)), port)
    if kind == "wrong-name":
        return HttpsBackend(*misnamed, lambda r: (200, review_answer(r)), port)
    return HttpsBackend(*good, answers[kind], port)


def review_answer(review: dict, uid: str | None = None, allowed: bool | None = True, api_version: str | None = None):
    """An AdmissionReview answer: the request's uid (or ``uid``), ``allowed`` (None: left out)."""
    resp = {"uid": uid if uid is not None else (review.get("request") or {}).get("uid", "")}
    if allowed is not None:
        resp["allowed"] = allowed
    return json.dumps({"apiVersion": api_version or review.get("apiVersion") or "admission.k8s.io/v1",
                       "kind": "AdmissionReview", "response": resp}).encode()


def with_ca_bundle(obj: dict, bundle: str) -> dict:
    """A copy of a webhook configuration whose every webhook trusts ``bundle``."""
    out = json.loads(json.dumps(obj))
    for w in out["webhooks"]:
        w["clientConfig"]["caBundle"] = bundle
    return out


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
