"""A stand-in for the kubelet's restart of a policy engine's pod: run the engine, and start it again whenever it
exits, after a back-off, as a Deployment's pod is (restartPolicy Always). The real engines exit on their own in
ways that matter here: Kyverno's admission controller, for one, exits when it cannot renew its leader lease
while the apiserver restarts (a flag revert restarts it), and in a cluster its pod comes back.

  python -m breakglass.sandbox.supervise [--backoff S] -- PROGRAM [ARG...]

A signal that stops it (SIGTERM, SIGINT, SIGHUP: `sandbox down`, `sandbox backend stop`) is passed to the engine,
which it then waits for; the engine is also set to get SIGKILL should this process die first (PR_SET_PDEATHSIG),
so no engine outlives its record.
"""

from __future__ import annotations

import argparse
import signal
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
    state = {"child": None, "stopping": False}

    def stop(signum, _frame):
        state["stopping"] = True
        child = state["child"]
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    while not state["stopping"]:
        started = time.monotonic()
        state["child"] = subprocess.Popen(command, preexec_fn=_die_with_parent)
        code = state["child"].wait()
        ran, runs = time.monotonic() - started, runs + 1
        if state["stopping"]:
            return code
        if runs == 1 and ran < FIRST_RUN:
            return code or 1
        backoff = a.backoff if ran >= STEADY else backoff
        print(f"breakglass supervise: {command[0]} exited ({code}) after {ran:.0f} s; starting it again in "
              f"{backoff:g} s (a kubelet restarts an engine's pod)", file=sys.stderr, flush=True)
        deadline = time.monotonic() + backoff
        while not state["stopping"] and time.monotonic() < deadline:
            time.sleep(0.1)
        backoff = min(backoff * 2, MAX_BACKOFF)
    return 0


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when this supervisor dies (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes  # noqa: PLC0415

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
