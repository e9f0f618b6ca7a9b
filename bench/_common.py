"""Shared helpers for the benchmarks: run a command N times, report median wall time and peak RSS."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", ".data")
BREAKGLASS = [sys.executable, "-m", "breakglass"]


def run(cmd: list[str], repeat: int = 3, stdin_path: str | None = None) -> tuple[float, int, int]:
    """(median seconds, max peak RSS in KiB, exit code of the last run)."""
    times, rss, code = [], 0, 0
    for _ in range(repeat):
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        # Not /dev/null: GNU grep notices it and stops at the first match.
        with tempfile.TemporaryFile() as out:
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=subprocess.DEVNULL, cwd=ROOT)
            _, status, usage = os.wait4(p.pid, 0)
            times.append(time.perf_counter() - t0)
        rss = max(rss, usage.ru_maxrss)
        code = os.waitstatus_to_exitcode(status)
        if stdin_path:
            stdin.close()
    return statistics.median(times), rss, code


def report(name: str, ours: float, theirs: float, other: str, goal: str) -> None:
    print(f"{name}: breakglass {ours:.3f}s, {other} {theirs:.3f}s, ratio {ours / theirs:.2f}x ({goal})")
