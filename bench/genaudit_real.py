"""Generate a large kube-apiserver audit log (JSON lines) in the shape a real kube-apiserver writes.

Shape source: the real audit events in ``tests/fixtures/real/*/mutating-refused.audit.log`` (written by real
kube-apiserver v1.32.13 and v1.34.4 at level Metadata): every event here is that event with its fields
changed, never rebuilt, so the key order, the ``user.extra`` credential id, ``sourceIPs``, the
``responseStatus`` and the annotations' shapes stay the apiserver's own. The failed-open annotation key is the
one kube-apiserver writes (``failed-open.validating.webhook.admission.k8s.io/round_0_index_N``, value the
webhook's name).

Mix of events (by line): requests get (40%), list (15%), watch (10%), update (12%), patch (10%), create (8%),
delete (5%) over pods, configmaps, leases, endpointslices, deployments, secrets and events in 200 namespaces;
each request is one RequestReceived and one ResponseComplete line (as the default policy writes), a failed
create/update keeps the real Failure ``responseStatus``; 1 request in 997 carries the mutating invocation
record (a decoy: it is not a failed-open key). ``leaks`` failed-open ResponseComplete events (default 3,000)
fall in two windows, a third and two thirds of the way through.
Usage: python bench/genaudit_real.py OUT [GiB]
"""

from __future__ import annotations

import copy
import glob
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERBS = ["get"] * 40 + ["list"] * 15 + ["watch"] * 10 + ["update"] * 12 + ["patch"] * 10 + ["create"] * 8 \
    + ["delete"] * 5
RESOURCES = ["pods", "configmaps", "leases", "endpointslices", "deployments", "secrets", "events"]
USERS = ["system:serviceaccount:kube-system:deployment-controller", "system:node:worker-7",
         "alice@example.com", "system:kube-scheduler", "system:kube-controller-manager"]
AGENTS = ["kube-controller-manager/v1.34.4 (linux/amd64) kubernetes/0b2f6f3/system:serviceaccount:kube-system:"
          "deployment-controller", "kubelet/v1.34.4 (linux/amd64) kubernetes/0b2f6f3", "kubectl/v1.34.4 "
          "(linux/amd64) kubernetes/0b2f6f3", "kube-scheduler/v1.34.4 (linux/amd64) kubernetes/0b2f6f3/scheduler"]


def real_events() -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "real", "*", "*.audit.log"))):
        with open(path, encoding="utf-8") as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def _pair(rnd: random.Random, real: dict, i: int, ts: str, leak: bool) -> list[str]:
    e = copy.deepcopy(real)
    verb = rnd.choice(["create", "update", "patch"]) if leak else rnd.choice(VERBS)
    resource = rnd.choice(RESOURCES)
    ns = f"ns-{rnd.randrange(200)}"
    name = f"{resource[:-1]}-{rnd.randrange(100000)}"
    e["auditID"] = f"{i:08x}-dc54-4b54-823a-{rnd.getrandbits(48):012x}"
    e["requestURI"] = f"/api/v1/namespaces/{ns}/{resource}" + ("" if verb in ("create", "list", "watch") else
                                                                f"/{name}")
    e["verb"] = verb
    e["user"]["username"] = rnd.choice(USERS)
    e["userAgent"] = rnd.choice(AGENTS)
    ref = {"resource": resource, "namespace": ns}
    if verb not in ("list", "watch"):
        ref["name"] = name
    ref["apiVersion"] = "v1"
    e["objectRef"] = ref
    failed = not leak and verb in ("create", "update") and i % 50 == 0
    if not failed:
        e["responseStatus"] = {"metadata": {}, "code": 201 if verb == "create" else 200}
    e["requestReceivedTimestamp"] = e["stageTimestamp"] = ts
    ann = dict(e["annotations"])
    for k in [k for k in ann if k.startswith("mutation.")]:
        if i % 997:
            del ann[k]
    if leak:
        ann["failed-open.validating.webhook.admission.k8s.io/round_0_index_0"] = "validation.gatekeeper.sh"
    e["annotations"] = ann
    received = {k: v for k, v in e.items() if k not in ("responseStatus", "annotations")}
    received["stage"] = "RequestReceived"
    return [json.dumps(received, separators=(",", ":")), json.dumps(e, separators=(",", ":"))]


def generate(path: str, size: int, leaks: int = 3000, seed: int = 13) -> None:
    rnd = random.Random(seed)
    reals = real_events()
    pool = [_pair(rnd, reals[i % len(reals)], i, "2026-11-30T03:00:00.000000Z", False) for i in range(5000)]
    avg = sum(len(a) + len(b) + 2 for a, b in pool) / len(pool)
    total = int(size / avg)
    at = set(rnd.sample(range(total // 3, total // 3 + 20000), leaks // 2)
             + rnd.sample(range(2 * total // 3, 2 * total // 3 + 20000), leaks - leaks // 2))
    with open(path, "w", encoding="utf-8") as f:
        buf: list[str] = []
        for i in range(total):
            if i in at:
                sec = i * 86400 // total
                buf += _pair(rnd, reals[i % len(reals)], i,
                             f"2026-11-30T{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.5Z", True)
            else:
                buf += pool[i % len(pool)]
            if len(buf) >= 20000:
                f.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            f.write("\n".join(buf) + "\n")


if __name__ == "__main__":
    generate(sys.argv[1], int(float(sys.argv[2]) * (1 << 30)) if len(sys.argv) > 2 else 266_000_000)
