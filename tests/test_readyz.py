"""Waiting for /readyz: a restarting apiserver's brief 403 is not readiness (seen on a real 1.34, whose RBAC
caches are not synced yet), while one that always hides readiness behind auth is accepted after a while."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from breakglass.access import readyz


def _server(answers: list[int]):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            code = answers.pop(0) if len(answers) > 1 else answers[0]
            body = b"[+]ping ok\nreadyz check passed\n" if code == 200 else b"[-]poststarthook/x failed: not finished\n"
            self.send_response(code)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/readyz?verbose"


def test_a_brief_403_during_a_restart_is_waited_through(monkeypatch):
    srv, url = _server([500, 403, 403, 200])
    try:
        [st] = readyz.wait([url], timeout=30, interval=0.01)
    finally:
        srv.shutdown()
    assert st.ready is True and st.status == 200


def test_readiness_kept_behind_auth_is_accepted_once_it_lasts(monkeypatch):
    monkeypatch.setattr(readyz, "AUTH_SETTLE", 0.2)
    srv, url = _server([403])
    try:
        [st] = readyz.wait([url], timeout=30, interval=0.01)
    finally:
        srv.shutdown()
    assert st.ready is None and st.status == 403 and "authenticated callers" in st.detail


def test_not_ready_until_the_timeout_says_so():
    srv, url = _server([500])
    try:
        [st] = readyz.wait([url], timeout=0.3, interval=0.05)
    finally:
        srv.shutdown()
    assert st.ready is False and st.failing == ["poststarthook/x"]
