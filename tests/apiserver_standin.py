"""What is left of the kube-apiserver stand-ins: a scripted /readyz.

Everything the kubeconfig paths do is tested against a real kube-apiserver (tests/real_apiserver_session.py).
This stays for the readiness waits of the Talos remedy and the wizard (tests/test_talos.py,
tests/test_wizard.py): there the node is the talosctl stand-in, whose patch restarts no apiserver, so the
answers a restarting apiserver gives while it waits (500 naming a post-start hook, then 200) are played here,
in kube-apiserver's own verbose format. A real apiserver's /readyz?verbose, stuck on that hook, is read in
tests/test_kubeapi.py."""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serve_readyz(codes: list[int], failing_hook: str):
    """/readyz?verbose answering the given statuses in turn (then 200), with kube-apiserver's check
    lines: a 500 names `failing_hook` as failed, as an apiserver stuck on a post-start hook does."""
    answers = iter(codes)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            code = next(answers, 200)
            body = (f"[+]ping ok\n[-]poststarthook/{failing_hook} failed: reason withheld\nreadyz check failed\n"
                    if code == 500 else "[+]ping ok\nreadyz check passed\n").encode()
            self.send_response(code)
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
