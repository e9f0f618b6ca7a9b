"""Memory does not grow with the log: 512 MiB through stdin stays under 100 MB peak RSS."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from tests import logbuild as lb
from tests.conftest import ROOT


def _stream(args: list[str], block: bytes, total: int) -> tuple[int, bytes, int]:
    """Feed `total` bytes of `block` repeated to breakglass on stdin; (exit code, stdout, peak RSS KiB)."""
    proc = subprocess.Popen([sys.executable, "-m", "breakglass", *args], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def feed():
        sent = 0
        try:
            while sent < total:
                proc.stdin.write(block)
                sent += len(block)
        finally:
            proc.stdin.close()

    # VmHWM of the running process, not wait4's ru_maxrss: that counts the pytest process the
    # child was forked from before it exec'd breakglass.
    peak = [0]

    def watch():
        while proc.poll() is None:
            try:
                for line in open(f"/proc/{proc.pid}/status"):
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
            except OSError:
                return
            time.sleep(0.02)

    threads = [threading.Thread(target=feed), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    out = proc.stdout.read()
    proc.stderr.read()
    for t in threads:
        t.join()
    return proc.wait(), out, peak[0]


def test_streaming_keeps_memory_flat():
    noise = "".join(f"I0224 15:32:50.{i:06d}       1 httplog.go:134] \"HTTP\" verb=\"GET\" URI=\"/api/v1/pods\" resp=200\n"
                    for i in range(5000))
    block = (noise + lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "connection refused")) + "\n").encode()
    code, out, peak = _stream(["diagnose", "-", "-o", "json"], block, 512 << 20)
    assert code == 3, out[-500:]
    assert 0 < peak < 100 * 1024, f"peak RSS {peak} KiB"
    assert b'"count": ' in out


def test_leaks_keep_memory_flat():
    from tests.test_leaks import event, fo
    noise = "\n".join(event(f"n{i}", "get" if i % 8 else "delete", name=f"p{i}", code=200) for i in range(2000))
    block = (noise + "\n" + event("leak-1", ann=fo()) + "\n").encode()
    code, out, peak = _stream(["leaks", "--audit-log", "-", "-o", "json"], block, 256 << 20)
    assert code == 3, out[-500:]
    assert 0 < peak < 100 * 1024, f"peak RSS {peak} KiB"
    assert out.count(b'"audit_id": "leak-1"') == 1  # the same event again and again is one leak


def test_apiserver_log_leaks_keep_memory_flat():
    """Request traces by the thousand (each header is kept only until 4,096 newer ones arrive) and one
    fail-open warning per block: memory holds the warnings found, not the log."""
    headers = "\n".join(lb.klog(lb.trace(i, "Update", lb.handler_fields(f"aid-{i}", f"/api/v1/namespaces/n/pods/p{i}",
                                                                          "PUT"), "24-Feb-2026 15:32:50.000", 700),
                                "I", "trace.go:236") for i in range(3000))
    warn = lb.klog(lb.fail_open("validation.gatekeeper.sh", "EOF"), "W", "dispatcher.go:205")
    block = (headers + "\n" + warn + "\n").encode()
    code, out, peak = _stream(["leaks", "--apiserver-log", "-", "-o", "csv"], block, 256 << 20)
    assert code == 3, out[-500:]
    assert 0 < peak < 100 * 1024, f"peak RSS {peak} KiB"
    assert out.count(b"validation.gatekeeper.sh") == -(-(256 << 20) // len(block))  # every block's warning, once
