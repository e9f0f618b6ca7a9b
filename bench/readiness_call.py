"""Benchmark the revert guard's backend call against curl making the same call, same run.

The guard asks a `url:` webhook's backend what the apiserver asks: a TLS handshake verified against the webhook's
caBundle, then an AdmissionReview POSTed and answered. `curl --cacert CA -d @review.json URL` does the same
exchange. Both call the sandbox's admit-everything HTTPS backend on loopback N times: breakglass in one process
(access.admission_call.call, as the guard runs it once per distinct backend), curl as one process per call (how an
engineer checks by hand). The ratio is breakglass' total time over curl's.
Usage: python bench/readiness_call.py [calls]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import need, report  # noqa: E402


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    curl = need("curl")
    from breakglass.access import admission_call  # noqa: PLC0415
    from breakglass.sandbox import free_port, pki  # noqa: PLC0415

    tmp = tempfile.mkdtemp()
    keys = pki.make(os.path.join(tmp, "pki"))
    port = free_port()
    backend = subprocess.Popen([sys.executable, "-m", "breakglass.sandbox.backend", "--port", str(port),
                                "--cert", keys.webhook_cert, "--key", keys.webhook_key],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"https://127.0.0.1:{port}/validate/fail"
    try:
        with open(keys.ca, "rb") as f:
            ca = f.read()
        deadline = time.monotonic() + 20
        while not admission_call.call(url, ca, timeout=2).ok:
            if time.monotonic() > deadline:
                raise SystemExit("the sandbox backend did not start")
            time.sleep(0.2)
        review = os.path.join(tmp, "review.json")
        with open(review, "w", encoding="utf-8") as f:
            json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "bench", "operation": "CREATE", "dryRun": True,
                                   "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                                   "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                                   "namespace": "default", "name": "bench", "object": {}}}, f)
        t0 = time.perf_counter()
        for _ in range(calls):
            assert admission_call.call(url, ca, timeout=10).ok
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(calls):
            p = subprocess.run([curl, "-sS", "--fail", "--cacert", keys.ca, "-H", "Content-Type: application/json",
                                "--data-binary", f"@{review}", url], stdout=subprocess.PIPE, check=False)
            assert p.returncode == 0 and json.loads(p.stdout)["response"]["uid"] == "bench", p.stdout
        theirs = time.perf_counter() - t0
    finally:
        backend.terminate()
        backend.wait(10)
    report(f"backend readiness call x{calls} (TLS verified against the caBundle + AdmissionReview)", ours, theirs,
           "curl --cacert", "the guard's check costs no more than checking by hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
