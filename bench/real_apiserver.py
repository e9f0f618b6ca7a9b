"""Benchmark breakglass against kubectl on a real kube-apiserver (built by `make kube-apiserver`), same run.

A sandbox runs the real apiserver (the "healthy" scenario) with N extra validating webhook configurations
(default 200) created through the API. Timed, each as a whole command:
  breakglass webhooks --kubeconfig K -o json     (list, decode, model every webhook)
  kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o json --kubeconfig K
  breakglass recover --method kubeapi -w NAME --action ignore --dry-run (plan one change: read + diff)
  kubectl get validatingwebhookconfiguration NAME -o yaml (what an engineer would look at first)
and, once, how long `sandbox up --apiserver` takes to reach the deadlock (no comparison: nothing else does it).
Usage: python bench/real_apiserver.py [configurations]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, need, report, run  # noqa: E402
from breakglass import sandbox  # noqa: E402
from breakglass.sandbox import apiserver, pki, scenarios  # noqa: E402


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    kubectl = need("kubectl")
    built = sandbox.built_apiservers()
    if not built:
        raise SystemExit("no kube-apiserver is built: make kube-apiserver (needs Go)")
    binary = built[-1]
    d = tempfile.mkdtemp(prefix="bench-apiserver-")
    sb_dir = os.path.join(d, "sandbox")
    try:
        t0 = time.perf_counter()
        sandbox.up(os.path.join(d, "deadlock"), apiserver=binary)
        up = time.perf_counter() - t0
        sandbox.down(os.path.join(d, "deadlock"))
        print(f"sandbox up --apiserver {os.path.basename(os.path.dirname(binary))} to the deadlock: {up:.1f}s")

        sb = sandbox.up(sb_dir, apiserver=binary, scenario="healthy")
        client = apiserver.Client(sb.apiserver["url"], pki.load(os.path.join(sb_dir, "pki")))
        base = scenarios.kyverno(sb.apiserver["webhook_url"], os.path.join(sb_dir, "pki", "ca.crt"))
        for i in range(n):
            obj = json.loads(json.dumps(base))
            obj["metadata"] = {"name": f"bench-{i:04d}"}
            obj["webhooks"][0]["rules"][0]["apiGroups"] = [f"bench{i}.example.com"]  # harmless to the apiserver
            client.must("POST", scenarios.VWC_PATH, obj)
        kc = sb.apiserver["kubeconfig"]
        env_state = os.path.join(d, "state")
        os.environ["BREAKGLASS_STATE_DIR"] = env_state

        ours, rss, code = run([*BREAKGLASS, "webhooks", "--kubeconfig", kc, "-o", "json"], repeat=5)
        assert code == 0, code
        theirs, _, code = run([kubectl, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations",
                               "-o", "json", "--kubeconfig", kc], repeat=5)
        assert code == 0, code
        report(f"webhooks through the API ({n + 1} configurations)", ours, theirs, "kubectl get -o json",
               "no goal; lower is better")
        print(f"peak RSS breakglass {rss / 1024:.0f} MB")

        ours, _, code = run([*BREAKGLASS, "recover", "--method", "kubeapi", "-w", scenarios.KYVERNO_NAME,
                             "--action", "ignore", "--kubeconfig", kc, "--dry-run"], repeat=5)
        assert code == 0, code
        theirs, _, code = run([kubectl, "get", "validatingwebhookconfiguration", scenarios.KYVERNO_NAME, "-o", "yaml",
                               "--kubeconfig", kc], repeat=5)
        assert code == 0, code
        report("plan a kubeapi change (dry run)", ours, theirs, "kubectl get -o yaml", "no goal; lower is better")
    finally:
        sandbox.down(sb_dir)
        subprocess.run(["rm", "-rf", d], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
