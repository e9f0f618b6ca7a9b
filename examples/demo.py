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


def run(*args: str, state: str, check: int | None = 0, quiet: bool = False) -> subprocess.CompletedProcess:
    if not quiet:
        print(f"\n$ breakglass {' '.join(args)}", flush=True)
    p = subprocess.run([sys.executable, "-m", "breakglass", *args], env={**os.environ, "BREAKGLASS_STATE_DIR": state},
                       stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if "json" not in args:  # JSON is read by the demo itself, not shown
        print(p.stdout.rstrip())
    if p.stderr.strip():
        print(p.stderr.rstrip(), file=sys.stderr)
    if check is not None and p.returncode != check:
        raise SystemExit(f"demo: `breakglass {' '.join(args)}` exited {p.returncode}, expected {check}")
    return p


def etcd_dump(endpoint: str) -> dict:
    import pyetcd  # the demo reads etcd directly to prove the round trip; breakglass never ranges the whole keyspace

    host, port = endpoint.split("://")[1].split(":")
    c = pyetcd.client(host, int(port))
    try:
        return {m.key: v for v, m in c.get_all()}
    finally:
        c.close()


def story() -> None:
    """The Talos/Kyverno outage, end to end, on the rehearsal sandbox."""
    import json
    import tempfile

    print("=" * 100)
    print("The story: Kyverno's webhook blocks the ServiceCIDR; recover through etcd, then revert")
    print("=" * 100)
    state = tempfile.mkdtemp(prefix="breakglass-demo-")
    try:
        st = json.loads(run("sandbox", "up", "-o", "json", state=state).stdout)["result"]
        endpoint = st["endpoint"]
        before = etcd_dump(endpoint)
        diag = json.loads(run("diagnose", st["files"]["apiserver_log"], "-o", "json", state=state, check=3).stdout)
        target = next(t for r in diag["result"]["remedies"] if r["method"] == "etcd" for t in r["targets"])
        print(f"(the diagnosis names {target['kind']}/{target['configuration']}, key {target['etcd_key']})")
        run("audit", "--etcd-endpoints", endpoint, "--target-version", "1.34", state=state, check=3)
        run("recover", "--method", "etcd", "-w", f"{target['kind']}/{target['configuration']}",
            "--etcd-endpoints", endpoint, "--dry-run", state=state)
        # this sandbox is etcd alone: no apiserver's /readyz can say the delete did its job, so it is "applied, not
        # verified" (exit 8), and says so
        run("recover", "--method", "etcd", "-w", f"{target['kind']}/{target['configuration']}",
            "--etcd-endpoints", endpoint, "--yes", state=state, check=8)
        runs = json.loads(run("runs", "-o", "json", state=state).stdout)["result"]
        print(f"({len(runs)} run(s); the latest, {runs[-1]['run']}, is {runs[-1]['status']})")
        report = os.path.join(runs[-1]["path"], "report.md")
        print(f"\n$ head -12 {report}")
        print("".join(open(report).readlines()[:12]).rstrip())
        # the revert re-arms Kyverno's webhook: refused while its Service has no ready endpoint (exit 4)
        run("revert", "--yes", "--etcd-endpoints", endpoint, state=state, check=4)
        print("(Kyverno is back: its Service has a ready endpoint again)")
        run("sandbox", "backend", "start", state=state)
        # its endpoint is ready, but no backend answers from here and no apiserver can send a canary: reverted,
        # not verified (exit 8); the real-apiserver story below verifies both
        run("revert", "--yes", "--etcd-endpoints", endpoint, state=state, check=8)
        run("sandbox", "backend", "stop", state=state)  # the backend's own objects out again, for the comparison
        after = etcd_dump(endpoint)
        same = after == before
        print(f"\netcd after revert is byte-identical to the start: {same} ({len(after)} keys)")
        if not same:
            raise SystemExit("demo: etcd differs after revert")
    finally:
        run("sandbox", "down", state=state, check=None)


def real_story() -> None:
    """The seed's outage on a real kube-apiserver: the upgrade deadlock, diagnosed from the apiserver's own log,
    broken through etcd, the webhook's backend back, the bypass reverted, and the apiserver still ready."""
    import json
    import tempfile
    import time

    sys.path.insert(0, os.path.dirname(HERE))
    from breakglass import sandbox  # noqa: PLC0415

    built = sandbox.built_apiservers()
    print("=" * 100)
    if not built:
        print("The real-apiserver story is skipped: no kube-apiserver is built here (`make kube-apiserver`, needs Go)")
        print("=" * 100)
        return
    binary = built[-1]
    print(f"REHEARSAL on a real kube-apiserver ({os.path.relpath(binary, os.path.dirname(HERE))}): the upgrade "
          f"deadlock, end to end")
    print("=" * 100)
    state = tempfile.mkdtemp(prefix="breakglass-demo-")
    d = os.path.join(state, "sandbox")
    try:
        st = json.loads(run("sandbox", "up", "--dir", d, "--apiserver", binary, "-o", "json", state=state).stdout)
        api = st["result"]["apiserver"]
        print(f"(kube-apiserver {api['version']} at {api['url']}: ready={api['ready']}, failing: "
              f"{', '.join(api['failing'])})")
        diag = json.loads(run("diagnose", api["log"], "-o", "json", state=state, check=3).stdout)["result"]
        print(f"(diagnose: {diag['verdict']['headline']})")
        target = next(t for r in diag["remedies"] if r["method"] == "etcd" for t in r["targets"])
        run("recover", "--method", "etcd", "-w", f"{target['kind']}/{target['configuration']}",
            "--etcd-endpoints", st["result"]["endpoint"], "--yes", state=state)

        def ready() -> dict:
            return json.loads(run("sandbox", "status", "--dir", d, "-o", "json", state=state, quiet=True).stdout)[
                "result"]["apiserver"]

        deadline = time.monotonic() + 60
        while not ready()["ready"] and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"(after the etcd remedy: ready={ready()['ready']})")
        run("sandbox", "backend", "start", "--dir", d, state=state)
        run("revert", "--yes", "--etcd-endpoints", st["result"]["endpoint"], state=state)
        after = ready()
        print(f"(after the revert, webhook back in the path and its backend up: ready={after['ready']})")
        if not after["ready"]:
            raise SystemExit("demo: the real apiserver is not ready after the revert")
    finally:
        run("sandbox", "down", "--dir", d, state=state, check=None)


def leaks() -> None:
    """The Gatekeeper story: what got in while the webhook failed open, from the audit log and without it."""
    print("=" * 100)
    print("The fail-open story: Gatekeeper ignored during a konnectivity-agent rollout; what got in?")
    print("=" * 100)
    audit = os.path.join(HERE, "audit", "gke-gatekeeper-rollout.audit.log")
    state = os.devnull
    run("leaks", "--audit-log", audit, state=state, check=3)
    run("leaks", "--audit-log", audit, "-o", "recheck", state=state, check=3)
    run("leaks", "--apiserver-log", os.path.join(HERE, "logs", "gke-gatekeeper-fail-open.jsonl"), state=state,
        check=3)


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
    leaks()
    story()
    real_story()
    on_path()
    return 1 if bad else 0


def on_path() -> None:
    """The demo ran breakglass through this Python; say how to run it yourself, since `make demo` installs it
    into a virtual environment, not onto PATH."""
    def short(path: str) -> str:  # relative to where `make demo` ran, unless that climbs out of it
        rel = os.path.relpath(path)
        return path if rel.startswith("..") else rel

    print("=" * 100)
    bindir = short(os.path.dirname(sys.executable))
    exe = os.path.join(bindir, "breakglass")
    if sys.prefix != sys.base_prefix and os.path.exists(exe):
        print(f"breakglass is installed in the virtual environment {os.path.dirname(bindir)}, not on PATH. "
              f"To run it yourself:")
        print(f"  . {os.path.join(bindir, 'activate')}          # then: breakglass --help, breakglass sandbox up")
        print(f"  {exe} --help   # or by its path, without activating")
    else:
        print(f"run breakglass yourself with: {sys.executable} -m breakglass --help")

if __name__ == "__main__":
    sys.exit(main())
