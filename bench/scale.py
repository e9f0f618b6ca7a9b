"""Benchmark the exporter and the fleet audit as a cluster and a kubeconfig grow (issue 34 §4-5).

The apiserver is tests/recorded_apiserver.py: a loopback HTTPS server answering with a real kube-apiserver
1.34.4's recorded answers, its one Kyverno-shaped ValidatingWebhookConfiguration (examples/webhooks/
kyverno-risky.yaml: two webhooks, five findings) repeated N times.

  exporter, at 100, 1,000 and 5,000 configurations:
    audit     one audit's time (exporter.audit_once as the long-running exporter runs it: without /findings)
    RSS       the long-running exporter's resident memory after its first audit (VmRSS), and its peak (VmHWM):
              as the chart runs it (--no-findings), and with --findings
    /metrics  bytes of one scrape
  fleet, at 20, 500 and 2,000 contexts (every one at the same recorded server, one configuration each):
    `breakglass audit --all-contexts -o junit` (default --parallel 16, --timeout 10): the audit's own time (the
    JUnit report's), the whole command's, and how many clusters ended audited
Each as a ratio to the smallest size. `--baseline DIR` runs the same measurements, side by side, with the
breakglass package of another checkout (e.g. `git archive HEAD~1 | tar -x -C DIR`), where it finishes in time.

Usage: python bench/scale.py [--baseline DIR] [--exporter-sizes 100,1000,5000] [--fleet-sizes 20,500,2000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import ROOT  # noqa: E402
from breakglass.sandbox import pki  # noqa: E402
from tests.recorded_apiserver import Recorded, answers, configurations, kubeconfig  # noqa: E402

AUDIT_ONE = """
import sys, time
from breakglass.access import kubeapi
from breakglass.flows import exporter
api = kubeapi.connect(sys.argv[1], None, 600)
t0 = time.perf_counter()
kwargs = {"keep_report": False} if "keep_report" in exporter.audit_once.__code__.co_varnames else {}
snap = exporter.audit_once(api, **kwargs)
print(time.perf_counter() - t0)
"""


def _proc_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def audit_seconds(code_dir: str, kc: str) -> float:
    p = subprocess.run([sys.executable, "-c", AUDIT_ONE, kc], cwd=code_dir, capture_output=True, text=True,
                       env={**os.environ, "KUBECONFIG": ""}, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"audit failed: {p.stderr[-500:]}")
    return float(p.stdout.strip().splitlines()[-1])


def serving(code_dir: str, kc: str, *flags: str) -> dict:
    """The long-running exporter: started, its first audit done (the serving line), scraped once, stopped."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "breakglass", "exporter", "--listen", "127.0.0.1:0",
                                 "--interval", "3600", "--kubeconfig", kc, "--timeout", "600", *flags],
                                cwd=code_dir, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                env={**os.environ, "KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": ""})
        try:
            url = None
            while url is None:
                if proc.poll() is not None:
                    err.seek(0)
                    raise SystemExit(f"the exporter exited {proc.returncode}: {err.read()[-500:]!r}")
                err.seek(0)
                line = next((ln for ln in err.read().decode().splitlines() if "serving http://" in ln), None)
                url = line.split("serving ", 1)[1].split("/metrics", 1)[0] if line else None
                time.sleep(0.2)
            out = {"rss": _proc_kib(proc.pid, "VmRSS"), "peak": _proc_kib(proc.pid, "VmHWM")}
            with urllib.request.urlopen(url + "/metrics", timeout=600) as r:  # noqa: S310 - loopback
                out["metrics"] = len(r.read())
            out["after_scrape"] = _proc_kib(proc.pid, "VmRSS")
            return out
        finally:
            proc.kill()
            proc.wait()


def exporter_rows(code_dir: str, sizes: list[int], keys, tmp: str, label: str) -> None:
    print(f"\nexporter ({label}): recorded Kyverno-shaped configurations, 2 webhooks and 5 findings each")
    print(f"  {'configs':>7} {'audit s':>8} {'x':>5} {'/metrics MB':>11} {'x':>5} {'RSS MiB':>8} {'peak':>6} {'x':>5}"
          f" | {'--findings RSS':>14} {'peak':>6}")
    first = None
    for n in sizes:
        srv = Recorded(answers(configurations(n)), keys)
        try:
            kc = kubeconfig(os.path.join(tmp, f"exp-{n}.kubeconfig"), {"c": srv.url}, ca=keys.ca)
            secs = audit_seconds(code_dir, kc)
            chart = serving(code_dir, kc, "--no-findings") if label == "this tree" else serving(code_dir, kc)
            full = serving(code_dir, kc, "--findings") if label == "this tree" else chart
        finally:
            srv.close()
        row = (secs, chart["metrics"], chart["peak"])
        first = first or row
        print(f"  {n:>7} {secs:8.2f} {secs / first[0]:5.1f} {chart['metrics'] / 1e6:11.2f} "
              f"{chart['metrics'] / first[1]:5.1f} {chart['after_scrape'] / 1024:8.0f} {chart['peak'] / 1024:6.0f} "
              f"{chart['peak'] / first[2]:5.1f} | {full['after_scrape'] / 1024:14.0f} {full['peak'] / 1024:6.0f}",
              flush=True)


def fleet_rows(code_dir: str, sizes: list[int], keys, tmp: str, label: str, limit: float) -> None:
    print(f"\nfleet audit ({label}): `audit --all-contexts -o junit`, every context at one recorded server")
    print(f"  {'contexts':>8} {'audit s':>8} {'x':>6} {'per ctx ms':>10} {'wall s':>7} {'audited':>8}")
    srv = Recorded(answers(configurations(1)), keys)
    first = None
    try:
        for n in sizes:
            kc = kubeconfig(os.path.join(tmp, f"fleet-{n}.kubeconfig"),
                            {f"ctx-{i:04d}": srv.url for i in range(n)}, ca=keys.ca)
            t0 = time.perf_counter()
            try:
                p = subprocess.run([sys.executable, "-m", "breakglass", "audit", "--kubeconfig", kc, "--all-contexts",
                                    "-o", "junit"], cwd=code_dir, capture_output=True,
                                   env={**os.environ, "KUBECONFIG": ""}, timeout=limit)
            except subprocess.TimeoutExpired:
                print(f"  {n:>8} did not finish in {limit:g} s", flush=True)
                continue
            wall = time.perf_counter() - t0
            root = ET.fromstring(p.stdout)
            own = float(root.get("time"))
            audited = sum(1 for s in root.findall("testsuite")
                          if any(pr.get("name") == "status" and pr.get("value") == "audited"
                                 for pr in s.iter("property")))
            first = first or own
            print(f"  {n:>8} {own:8.2f} {own / first:6.1f} {own / n * 1000:10.1f} {wall:7.2f} {audited:>8}",
                  flush=True)
    finally:
        srv.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="another checkout's root, measured the same way")
    ap.add_argument("--exporter-sizes", default="100,1000,5000")
    ap.add_argument("--fleet-sizes", default="20,500,2000")
    ap.add_argument("--baseline-limit", type=float, default=900, help="seconds before a baseline run is given up")
    a = ap.parse_args()
    esizes = [int(x) for x in a.exporter_sizes.split(",") if x]
    fsizes = [int(x) for x in a.fleet_sizes.split(",") if x]
    with tempfile.TemporaryDirectory() as tmp:
        keys = pki.make(os.path.join(tmp, "pki"))
        exporter_rows(ROOT, esizes, keys, tmp, "this tree")
        fleet_rows(ROOT, fsizes, keys, tmp, "this tree", 3600)
        if a.baseline:
            exporter_rows(a.baseline, esizes, keys, tmp, f"baseline {a.baseline}")
            fleet_rows(a.baseline, fsizes, keys, tmp, f"baseline {a.baseline}", a.baseline_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
