"""Memory does not grow with the log: 512 MiB through stdin stays under 100 MB peak RSS."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from tests import logbuild as lb
from tests.conftest import ROOT


def test_streaming_keeps_memory_flat():
    noise = "".join(f"I0224 15:32:50.{i:06d}       1 httplog.go:134] \"HTTP\" verb=\"GET\" URI=\"/api/v1/pods\" resp=200\n"
                    for i in range(5000))
    block = (noise + lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "connection refused")) + "\n").encode()
    total = 512 << 20
    proc = subprocess.Popen([sys.executable, "-m", "breakglass", "diagnose", "-", "-o", "json"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def feed():
        sent = 0
        try:
            while sent < total:
                proc.stdin.write(block)
                sent += len(block)
        finally:
            proc.stdin.close()

    t = threading.Thread(target=feed)
    t.start()
    out = proc.stdout.read()
    proc.stderr.read()
    t.join()
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3, out[-500:]
    assert usage.ru_maxrss < 100 * 1024, f"peak RSS {usage.ru_maxrss} KiB"
    assert b'"count": ' in out
