"""A loopback server answering an audit's reads with a real kube-apiserver's recorded answers, at scale.

tests/fixtures/real/v1.34.4/audit-reads.json is what a real kube-apiserver 1.34.4 (built from its Go module, on
this machine's etcd) answered to the audit's reads with examples/webhooks/kyverno-risky.yaml created through its
API (Kyverno's resource webhook: one fail-closed webhook with wildcard rules, one fail-open): /version, the four
admission lists and the Namespaces, as JSON (parsed and re-serialised, not byte for byte). For N configurations
its one ValidatingWebhookConfiguration is repeated N times, each renamed (name, uid, resourceVersion), as that
apiserver would list N of them; what it does not serve is its 404 Status. A real apiserver holding thousands of
configurations is minutes of setup per run; what the exporter and the fleet audit do with the answers is what
is measured. HTTPS with the sandbox's throwaway PKI, or plain HTTP; every request's headers are kept (a test
checks what was sent)."""

from __future__ import annotations

import copy
import json
import os
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADM = "/apis/admissionregistration.k8s.io/v1/"
RECORDED = os.path.join(ROOT, "tests", "fixtures", "real", "v1.34.4", "audit-reads.json")
VWC = ADM + "validatingwebhookconfigurations"


def recorded() -> dict[str, dict]:
    with open(RECORDED, encoding="utf-8") as f:
        return json.load(f)


def configurations(n: int, name: str = "kyverno-resource-validating-webhook-cfg-{i:05d}") -> list[dict]:
    """The recorded configuration, N times, each renamed as the apiserver would have named and numbered it."""
    item, = recorded()[VWC]["items"]
    out = []
    for i in range(n):
        o = copy.deepcopy(item)
        o["metadata"].update(name=name.format(i=i), uid=f"00000000-0000-0000-0000-{i:012d}",
                             resourceVersion=str(1000 + i))
        out.append(o)
    return out


def answers(configs: list[dict]) -> dict[str, bytes]:
    """path -> body: the recorded answers, the ValidatingWebhookConfiguration list holding ``configs``."""
    rec = recorded()
    rec[VWC] = {**rec[VWC], "items": configs}
    return {path: json.dumps(doc, separators=(",", ":")).encode() for path, doc in rec.items()}


NOT_FOUND = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}'


class Recorded:
    """The server, on 127.0.0.1, until ``close``. ``keys``: a ``sandbox.pki.Pki`` for HTTPS; None for plain HTTP."""

    def __init__(self, responses: dict[str, bytes], keys=None) -> None:
        self.responses = responses
        self.requests: list[tuple[str, dict[str, str]]] = []  # (path, headers, names lowercased) of every request
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver: one handshake per client
            # headers and body go in two writes: with Nagle's algorithm on, the body then waits for the client's
            # delayed ACK (40 ms a response), a stall of this server's, not of anything measured
            disable_nagle_algorithm = True

            def do_GET(self):  # noqa: N802 - http.server's name
                outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                body = outer.responses.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                body = body if body is not None else NOT_FOUND
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # a client gone mid-answer (a fleet audit abandons a cluster at its deadline) is no error of the recording
        self.server.handle_error = lambda request, client_address: None
        self.server.request_queue_size = 1024  # a fleet benchmark's thousands of clients connect at once
        if keys is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(keys.serving_cert, keys.serving_key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if keys is not None else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def kubeconfig(path: str, contexts: dict[str, str], ca: str | None = None, user: dict | None = None,
               current: str | None = None) -> str:
    """A kubeconfig with one context (and cluster) per ``name -> server``, all with ``user`` (a token by default)."""
    import yaml  # noqa: PLC0415

    servers = sorted(set(contexts.values()))
    cluster_of = {s: f"cluster-{i}" for i, s in enumerate(servers)}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current or next(iter(contexts)),
           "clusters": [{"name": cluster_of[s], "cluster": {"server": s, **({"certificate-authority": ca}
                                                                            if ca and s.startswith("https") else {})}}
                        for s in servers],
           "users": [{"name": "u", "user": user if user is not None else {"token": "recorded"}}],
           "contexts": [{"name": n, "context": {"cluster": cluster_of[s], "user": "u"}} for n, s in contexts.items()]}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f)
    os.chmod(path, 0o600)
    return path


def record(path: str = RECORDED) -> None:
    """Make the recording again: a real kube-apiserver (tests/real_apiserver_session.py's, on this machine's etcd),
    examples/webhooks/kyverno-risky.yaml created through its API, its answers to the audit's reads saved.
    ``python -m tests.recorded_apiserver``."""
    import tempfile  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    from tests.real_apiserver_session import VERSION, RealApiserver  # noqa: PLC0415
    from tests.real_control_plane import binary_for  # noqa: PLC0415

    _, binary = binary_for(VERSION)
    kube = RealApiserver(tempfile.mkdtemp(), binary).start()
    try:
        with open(os.path.join(ROOT, "examples", "webhooks", "kyverno-risky.yaml"), encoding="utf-8") as f:
            doc, = [d for d in yaml.safe_load_all(f) if d]
        kube.client.must("POST", VWC, doc)
        out = {}
        for p in ("/version", VWC, ADM + "mutatingwebhookconfigurations", ADM + "validatingadmissionpolicies",
                  ADM + "validatingadmissionpolicybindings", "/api/v1/namespaces"):
            out[p] = kube.client.must("GET", p)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    finally:
        kube.stop()


if __name__ == "__main__":
    record()
