"""The webhook's backend, for the sandbox: an HTTPS admission endpoint on loopback that admits everything,
so a rehearsal can play "the policy engine is back" after the apiserver recovered. It answers
``admission.k8s.io/v1`` AdmissionReviews as any webhook must (same uid, ``allowed: true``).

Run as ``python -m breakglass.sandbox.backend --port P --cert C --key K``.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Admit(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        try:
            review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            uid = review["request"]["uid"]
        except (ValueError, KeyError, TypeError):
            self.send_error(400, "not an AdmissionReview")
            return
        body = json.dumps({"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
                           "response": {"uid": uid, "allowed": True}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:  # one line per admission would drown the sandbox's logs
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="breakglass.sandbox.backend")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    o = ap.parse_args(argv)
    srv = ThreadingHTTPServer(("127.0.0.1", o.port), Admit)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(o.cert, o.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
