"""`make demo`: diagnose every bundled example log and show what breakglass says.

Exits non-zero only if an example's exit code is not the documented one.
"""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = [  # (path under examples/logs, expected exit code)
    ("talos-servicecidr-kyverno.log", 3),
    ("kubeadm-priorityclass-gatekeeper.log", 3),
    ("gke-gatekeeper-fail-open.jsonl", 3),
    ("pods", 3),
    ("ticket-paste.txt", 3),
    ("k3s-journald-istio.log", 3),
    ("ipaddress-not-ready.log", 3),
    ("healthy-apiserver.log", 0),
]


def main() -> int:
    bad = 0
    for name, want in EXAMPLES:
        path = os.path.join(HERE, "logs", name)
        print("=" * 100)
        print(f"$ breakglass diagnose examples/logs/{name}")
        print("=" * 100, flush=True)
        got = subprocess.run([sys.executable, "-m", "breakglass", "diagnose", path, "--year", "2026"]).returncode
        print(f"\n(exit code {got})\n", flush=True)
        bad += got != want
    print(f"{len(EXAMPLES) - bad} of {len(EXAMPLES)} examples gave the documented exit code")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
