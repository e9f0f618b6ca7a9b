"""Name the cause of a failed webhook call from the text after ``Post "URL": ``.

Strings are Go's net/http, net and crypto/tls errors and the apiserver's service
resolver (shared reference §1.3). Order matters: the most specific text wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
TLS = "tls"
PROXY = "proxy"
BAD_RESPONSE = "bad-response"
MISCONFIGURED = "misconfigured"
CANCELED = "canceled"
OTHER = "other"


@dataclass(frozen=True)
class Cause:
    cls: str
    detail: str  # short, stable name of the specific cause
    service: str | None = None  # service named by the resolver, when it names one
    address: str | None = None  # the dialled IP:port


_DIAL = re.compile(r"dial tcp (?P<addr>\[?[0-9a-fA-F.:]+\]?:\d+)")
_RULES: tuple[tuple[re.Pattern, str, str], ...] = (
    (re.compile(r'no endpoints available for service "(?P<svc>[^"]+)"'), UNREACHABLE, "no endpoints"),
    # Endpoint routing before 1.33 reads the Endpoints object, which kube-controller-manager makes: missing while it
    # is down (or has not caught up with a new Service).
    (re.compile(r'endpoints "(?P<svc>[^"]+)" not found'), UNREACHABLE, "no endpoints (no Endpoints object)"),
    (re.compile(r'service "(?P<svc>[^"]+)" not found'), UNREACHABLE, "service not found"),
    (re.compile(r'no service port \d+ found for service "(?P<svc>[^"]+)"'), MISCONFIGURED, "no such service port"),
    (re.compile(r'cannot route to service with ClusterIP "None"|unsupported service type'), MISCONFIGURED,
     "service type cannot be routed"),
    # The egress path answered instead of the webhook. konnectivity's server with no agent to dial through; an old
    # SSH tunnel (its "Connection refused" is the far end's, not this host's); an HTTP(S) proxy refusing CONNECT,
    # which net/http reports as the bare status text after the URL (`Post "…": Forbidden`); the aggregation layer's
    # 503 text.
    (re.compile(r"No agent available|ssh: rejected|Address is not allowed|error dialing backend"), PROXY,
     "egress proxy (konnectivity) failed"),
    (re.compile(r"^[\s'\"`]*(?:Forbidden|Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout|"
                r"Proxy Authentication Required|Method Not Allowed|Too Many Requests)[\s'\"`.]*$"), PROXY,
     "an HTTP proxy refused the connection (check NO_PROXY for .svc)"),
    (re.compile(r"the server is currently unable to handle the request"), PROXY,
     "the egress path answered 503 (server currently unable to handle the request)"),
    (re.compile(r"connection refused"), UNREACHABLE, "connection refused"),
    (re.compile(r"no route to host"), UNREACHABLE, "no route to host"),
    (re.compile(r"network is unreachable"), UNREACHABLE, "network unreachable"),
    (re.compile(r"operation not permitted"), UNREACHABLE, "operation not permitted (local network policy)"),
    (re.compile(r"dial tcp[^:]{0,300}:\d+: i/o timeout|connect: connection timed out"), UNREACHABLE,
     "connect timed out (packets dropped)"),
    (re.compile(r"no such host|server misbehaving"), UNREACHABLE, "DNS lookup failed"),
    (re.compile(r"TLS handshake timeout"), TIMEOUT, "TLS handshake timed out"),
    (re.compile(r"server gave HTTP response to HTTPS client"), MISCONFIGURED, "webhook serves plain HTTP"),
    # crypto/tls' RecordHeaderError: what answered is not TLS, and not HTTP either (net/http says so for HTTP)
    (re.compile(r"first record does not look like a TLS handshake"), MISCONFIGURED, "webhook does not speak TLS"),
    (re.compile(r"x509: certificate signed by unknown authority|certificate is not trusted"), TLS,
     "certificate signed by unknown authority (caBundle)"),
    (re.compile(r"x509: certificate has expired or is not yet valid"), TLS, "certificate expired or not yet valid"),
    # x509.HostnameError: the name or IP called is not in the certificate (an IP URL and a certificate with no
    # IP SANs says so in its own words)
    (re.compile(r"x509: certificate is valid for|x509: cannot validate certificate for \S+ because it doesn't "
                r"contain any IP SANs"), TLS, "certificate name mismatch"),
    (re.compile(r"x509:|tls: |remote error: tls|PEM block|handshake"), TLS, "TLS handshake failed"),
    (re.compile(r"Client\.Timeout exceeded|context deadline exceeded|request canceled while waiting|"
                r"timeout awaiting response headers|i/o timeout|deadline exceeded"), TIMEOUT, "timed out"),
    (re.compile(r"Address is not allowed|ssh: rejected|konnectivity|proxy|Service Unavailable|"
                r"error dialing backend"), PROXY, "egress proxy (konnectivity) failed"),
    (re.compile(r"connection reset by peer|broken pipe|\bEOF\b|unexpected EOF|http2: "), PROXY,
     "connection dropped"),
    (re.compile(r"received invalid webhook response|undecodable patch|unsupported patch type|"
                r"expected response\.uid"), BAD_RESPONSE, "invalid webhook response"),
    (re.compile(r"must have either service or URL|Unparsable URL|could not get REST client|"
                r"could not create admission objects"), MISCONFIGURED, "webhook configuration error"),
    (re.compile(r"context canceled"), CANCELED, "request canceled by client"),
)


def classify(text: str) -> Cause:
    dial = _DIAL.search(text)
    addr = dial["addr"] if dial else None
    for pat, cls, detail in _RULES:
        m = pat.search(text)
        if m:
            svc = m.groupdict().get("svc")
            return Cause(cls, detail, svc, addr)
    if not text.strip():
        return Cause(OTHER, "no details in the log", None, addr)
    return Cause(OTHER, "other", None, addr)


FAMILY_BY_CLASS = {
    UNREACHABLE: "webhook-unreachable",
    PROXY: "webhook-unreachable",
    TIMEOUT: "webhook-timeout",
    TLS: "webhook-tls",
    BAD_RESPONSE: "webhook-error",
    MISCONFIGURED: "webhook-error",
    CANCELED: "webhook-error",
    OTHER: "webhook-error",
}

# What an engineer does about each class, one line each.
ADVICE = {
    UNREACHABLE: "the webhook's pods are down or unreachable from the apiserver; bring them back or bypass the webhook",
    PROXY: "the apiserver's egress path to the webhook (konnectivity / proxy) broke; check those agents",
    TIMEOUT: "the webhook did not answer within timeoutSeconds; check its pods' load and network path",
    TLS: "the apiserver does not trust the webhook's certificate; check caBundle and the serving certificate",
    BAD_RESPONSE: "the webhook answered with something the apiserver cannot use; check the webhook's version",
    MISCONFIGURED: "the webhook configuration points at something that cannot be called",
    CANCELED: "the caller went away while the webhook was being called",
    OTHER: "see the evidence lines",
}
