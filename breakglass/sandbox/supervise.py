"""A stand-in for the kubelet's restart of a policy engine's pod: run the engine, and start it again whenever it
exits, after a back-off, as a Deployment's pod is (restartPolicy Always). The real engines exit on their own in
ways that matter here: Kyverno's admission controller, for one, exits when it cannot renew its leader lease
while the apiserver restarts (a flag revert restarts it), and in a cluster its pod comes back.

  python -m breakglass.sandbox.supervise [--backoff S] -- PROGRAM [ARG...]

It runs in the engine's process group (sandbox.procs spawns it detached), so stopping the group stops both.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

# the kubelet's CrashLoopBackOff starts at 10 s and doubles to 5 min; a rehearsal waits less, doubling the same way
FIRST_BACKOFF, MAX_BACKOFF = 2.0, 60.0
# a run this long resets the back-off, as the kubelet resets it after a pod ran for 10 min
STEADY = 120.0
# a first run shorter than this is a start that failed (a bad flag, a port taken): its exit ends supervision, so
# whoever waits for the engine to come up sees it at once, with its code, instead of a restart loop
FIRST_RUN = 10.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="breakglass.sandbox.supervise")
    ap.add_argument("--backoff", type=float, default=FIRST_BACKOFF)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no program to run")
    backoff, runs = a.backoff, 0
    while True:
        started = time.monotonic()
        code = subprocess.call(command)
        ran, runs = time.monotonic() - started, runs + 1
        if runs == 1 and ran < FIRST_RUN:
            return code or 1
        backoff = a.backoff if ran >= STEADY else backoff
        print(f"breakglass supervise: {command[0]} exited ({code}) after {ran:.0f} s; starting it again in "
              f"{backoff:g} s (a kubelet restarts an engine's pod)", file=sys.stderr, flush=True)
        time.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF)


if __name__ == "__main__":
    sys.exit(main())
