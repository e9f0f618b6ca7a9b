"""A minimal stand-in for kube-apiserver's read path: GET of lists, bearer-token auth, 404
for unserved API versions. No kube-apiserver can run here (see README, Testing)."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serve(lists: dict[str, dict], token: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.headers.get("Authorization") != f"Bearer {token}":
                return self._send(401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401})
            path = self.path.split("?")[0]
            if path in lists:
                return self._send(200, lists[path])
            if path.startswith("/apis/admissionregistration.k8s.io/v1/"):
                kind = path.rsplit("/", 1)[-1]
                return self._send(200, {"kind": "List", "apiVersion": "admissionregistration.k8s.io/v1", "items": [],
                                        "metadata": {"resource": kind}})
            return self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})

        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
