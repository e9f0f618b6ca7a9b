"""Benchmark `breakglass --help` start-up against `kubectl version --client` (else `python -c pass`).

Goal (issue 2): at most 2.5x kubectl.
"""

from __future__ import annotations

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import report, run  # noqa: E402


def main() -> int:
    exe = os.path.join(os.path.dirname(sys.executable), "breakglass")
    ours_cmd = [exe, "--help"] if os.path.exists(exe) else [sys.executable, "-m", "breakglass", "--help"]
    kubectl = shutil.which("kubectl")
    other_cmd, other = ([kubectl, "version", "--client"], "kubectl version --client") if kubectl else \
        ([sys.executable, "-c", "pass"], "python -c pass")
    run(ours_cmd, repeat=2)
    run(other_cmd, repeat=2)
    ours, _, code = run(ours_cmd, repeat=21)
    assert code == 0
    theirs, _, _ = run(other_cmd, repeat=21)
    report("startup (--help)", ours, theirs, other, "goal: <= 2.5x kubectl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
