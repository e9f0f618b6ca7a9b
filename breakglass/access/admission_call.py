"""Call a webhook the way kube-apiserver does, from this machine: can its backend answer the apiserver?

One POST, all within the webhook's ``timeoutSeconds`` (the apiserver's own deadline for the call): a TCP
connection to the URL's host (or, for a Service's endpoint, to the endpoint's address while the name checked stays
``SERVICE.NAMESPACE.svc``), the TLS the apiserver speaks (``webhook_tls``), then an AdmissionReview
(``admission_review``) to the path with ``?timeout=Ns`` as client-go adds it, and an answer the apiserver would
accept. A 2xx status from 200 to 206 is what client-go takes as success; the answer's Content-Type is not
checked (the apiserver's webhook codec decodes any). Anything else is said in words, never raised: which stage
ended the call (``connect``, ``tls``, ``http``, ``review``, ``timeout``) and whether the backend was reached at
all, which is what tells "cannot answer" from "not callable from here".

Never sends credentials (no client certificate, no token: the apiserver may send its own), and reads at most
1 MiB of answer. A plain ``http://`` URL is not called: the apiserver refuses a webhook URL that is not https.
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from breakglass.access import admission_review, webhook_tls
from breakglass.core.safetext import printable

MAX_ANSWER = 1 << 20
CONNECT, TLS, HTTP, REVIEW, TIMEOUT = "connect", "tls", "http", "review", "timeout"


@dataclass(frozen=True)
class CallResult:
    ok: bool  # the apiserver would take the answer (an allow or a deny)
    stage: str  # where the call ended: connect | tls | http | review | timeout (review when it was answered)
    detail: str  # what was checked and what failed, in words
    reached: bool = False  # a TCP connection was made: a failure after it is the backend's own
    allowed: bool | None = None


def call(url: str, ca_bundle=None, server_name: str | None = None, address: tuple[str, int] | None = None,
         review_versions=("v1",), timeout: float = 10, mutating: bool = False,
         connect_timeout: float | None = None) -> CallResult:
    """POST a probe AdmissionReview to ``url`` as the apiserver would. ``server_name``: the name TLS checks
    (default: the URL's host); ``address``: connect there instead of the URL's host, as the apiserver dials a
    Service's endpoint for ``https://SERVICE.NAMESPACE.svc:PORT``; ``connect_timeout``: give up connecting
    sooner than ``timeout`` (an endpoint this machine cannot route to)."""
    try:
        u = urllib.parse.urlsplit(url)
        host, port = u.hostname, u.port or 443
    except ValueError:
        return CallResult(False, CONNECT, f"{url!r} is not a URL the apiserver could call")
    if u.scheme != "https":
        return CallResult(False, CONNECT, f"{url} is not https: the apiserver refuses a webhook URL of any other "
                                          f"scheme, so this webhook cannot be called")
    if not host:
        return CallResult(False, CONNECT, f"{url}: no host to call")
    version = admission_review.version_for(review_versions)
    if version is None:
        return CallResult(False, REVIEW, f"the webhook accepts no AdmissionReview version the apiserver sends "
                                         f"(admissionReviewVersions: {', '.join(review_versions or ()) or 'none'})")
    target = address or (host, port)
    dial = min(timeout, connect_timeout or timeout)
    try:
        ctx = webhook_tls.context(ca_bundle)
    except ValueError as e:
        # connected to all the same: an address this machine cannot reach says nothing of the caBundle's use
        try:
            socket.create_connection(target, timeout=dial).close()
        except OSError as err:
            return _connect_failure(err, target, dial)
        return CallResult(False, TLS, f"TLS: {e}", reached=True)
    # the URL's own query, if etcd holds one, is not sent: validation allows none, and client-go builds the request
    # from the URL's path alone
    path = (u.path or "/") + f"?timeout={_seconds(timeout)}s"
    return _Call(ctx, ca_bundle).run(target, server_name or host, u.netloc, path, version, mutating, timeout, dial)


def _seconds(timeout: float) -> int:
    whole = int(timeout)
    return whole if whole == timeout else whole + 1  # client-go rounds a part second up


class _Call:
    def __init__(self, ctx: ssl.SSLContext, ca_bundle) -> None:
        self.ctx, self.ca_bundle = ctx, ca_bundle
        self.expired = threading.Event()
        self.lock = threading.Lock()
        self.fd = -1

    def _abort(self) -> None:
        # the deadline: shutting the connection down ends any read or write blocked on it, however slowly the
        # other side trickles (a per-read timeout alone would restart with every byte). On a duplicate of the
        # descriptor, so whichever wrapper (plain, TLS) holds it now is cut off alike.
        with self.lock:
            self.expired.set()
            if self.fd < 0:
                return
            try:
                dup = socket.fromfd(self.fd, socket.AF_INET, socket.SOCK_STREAM)
            except OSError:
                return
            try:
                dup.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            finally:
                dup.close()

    def run(self, target, sni, host_header, path, version, mutating, timeout, dial) -> CallResult:
        deadline = time.monotonic() + timeout
        try:
            raw = socket.create_connection(target, timeout=dial)
        except OSError as e:
            return _connect_failure(e, target, dial)
        self.fd = raw.fileno()
        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), self._abort)
        watchdog.daemon = True
        watchdog.start()
        stage, conn = TLS, raw
        try:
            raw.settimeout(max(0.01, deadline - time.monotonic()))
            conn = self.ctx.wrap_socket(raw, server_hostname=sni)
            stage = HTTP
            uid, body = admission_review.request(version)
            conn.sendall(_request(path, host_header, body))
            resp = http.client.HTTPResponse(conn)
            resp.begin()
            data = resp.read(MAX_ANSWER + 1)
        except ssl.SSLCertVerificationError as e:
            names = self._names(target, sni, deadline)
            return CallResult(False, TLS, webhook_tls.verify_words(e, sni, self.ca_bundle, names), True)
        except (OSError, http.client.HTTPException, ValueError) as e:
            if self.expired.is_set() or isinstance(e, TimeoutError):
                return CallResult(False, TIMEOUT, f"no answer within {_seconds(timeout)}s (the webhook's "
                                                  f"timeoutSeconds)", True)
            return CallResult(False, stage, _words(e, stage), True)
        finally:
            watchdog.cancel()
            with self.lock:
                self.fd = -1
                conn.close()
        return self._judge(resp.status, data, version, uid, mutating, sni)

    def _judge(self, status, data, version, uid, mutating, sni) -> CallResult:
        if not 200 <= status <= 206:
            snippet = printable(data[:160].decode("utf-8", "replace")).strip()
            return CallResult(False, HTTP, f"HTTP {status}" + (f": {snippet}" if snippet else ""), True)
        if len(data) > MAX_ANSWER:
            return CallResult(False, REVIEW, "answer larger than 1 MiB: not read", True)
        allowed, why = admission_review.verify(data, version, uid, mutating)
        if why:
            return CallResult(False, REVIEW, why, True)
        said = "allowed the probe" if allowed else "denied the probe (a policy's answer: the backend answers)"
        return CallResult(True, REVIEW, f"AdmissionReview {version} answered, {said}; TLS verified against "
                                        f"{webhook_tls.trusted_by(self.ca_bundle)} as {sni}", True, allowed)

    def _names(self, target, sni, deadline) -> list[str]:
        """The certificate's names, for a name mismatch: one more handshake, verifying nothing and sending
        nothing after it."""
        left = deadline - time.monotonic()
        if left <= 0.05:
            return []
        peek = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        peek.check_hostname, peek.verify_mode = False, ssl.CERT_NONE
        try:
            with socket.create_connection(target, timeout=left) as s, peek.wrap_socket(s, server_hostname=sni) as t:
                return webhook_tls.cert_names(t.getpeercert(binary_form=True))
        except (OSError, ValueError):
            return []


def _request(path: str, host: str, body: bytes) -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: breakglass-readiness-probe\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, */*\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n")
    return head.encode("ascii", "replace") + body


def _connect_failure(e: OSError, target, waited: float) -> CallResult:
    where = f"{target[0]}:{target[1]}" if ":" not in str(target[0]) else f"[{target[0]}]:{target[1]}"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return CallResult(False, TIMEOUT, f"{where}: no connection within {waited:g}s")
    if isinstance(e, socket.gaierror):
        return CallResult(False, CONNECT, f"{target[0]}: the host name does not resolve here")
    if isinstance(e, ConnectionRefusedError):
        return CallResult(False, CONNECT, f"{where}: connection refused")
    words = {errno.ENETUNREACH: "network is unreachable", errno.EHOSTUNREACH: "no route to host",
             errno.EACCES: "connection not permitted", errno.EPERM: "connection not permitted"}
    return CallResult(False, CONNECT, f"{where}: {words.get(e.errno) or (e.strerror or type(e).__name__).lower()}")


def _words(e: Exception, stage: str) -> str:
    if isinstance(e, (ssl.SSLEOFError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                      http.client.IncompleteRead)) or (isinstance(e, ssl.SSLError) and "EOF" in str(e)):
        return "connection closed before an answer" + (" (during the TLS handshake)" if stage == TLS else "")
    if isinstance(e, ssl.SSLError):
        return f"TLS handshake failed: {e.reason or e}"
    if isinstance(e, http.client.BadStatusLine):
        return "answer is not HTTP"
    if isinstance(e, http.client.HTTPException):
        return f"answer is not valid HTTP ({type(e).__name__})"
    return f"{(getattr(e, 'strerror', None) or str(e) or type(e).__name__)}"
