"""Benchmark `breakglass leaks` against grep (the floor) and a jq filter (what users write), same file, same run.

The file: a generated audit log of ordinary traffic (gets, lists, watches, updates, deletes; Metadata and
RequestResponse levels, RequestReceived and ResponseComplete stages) with a few thousand failed-open events
in two konnectivity-rollout windows, and decoy annotations that only look similar.
Goal (issue 9): within 2x of `grep -c failed-open`, and at least 10x faster than jq.
Then the fallback without audit logs, `leaks --apiserver-log`, on the diagnose benchmark's apiserver log
(an eighth of its lines are request traces), against `grep -c "failing open"`; the issue sets no goal for it.
Usage: python bench/leaks.py [GiB]
"""

from __future__ import annotations

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, generated, need, report, run  # noqa: E402
from bench.genlog import generate as generate_apiserver_log  # noqa: E402

JQ = ('select(.stage == "ResponseComplete" and ((.annotations // {}) | keys | any(startswith('
      '"failed-open.validating.webhook.admission.k8s.io/") or startswith("failed-open.mutation.webhook.admission.k8s.io/"))))'
      ' | [.stageTimestamp, .user.username, .verb, .objectRef.resource, .objectRef.namespace, .objectRef.name,'
      ' .responseStatus.code] | @csv')


def _event(rnd: random.Random, i: int, ts: str, leak: bool) -> str:
    verb = rnd.choice(["get", "get", "list", "watch", "update", "patch", "create", "delete"])
    resource = rnd.choice(["pods", "configmaps", "leases", "endpointslices", "deployments", "secrets"])
    ns = f"ns-{rnd.randrange(200)}"
    name = f"{resource[:-1]}-{rnd.randrange(100000)}"
    ann = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
    if leak:
        verb = rnd.choice(["create", "update", "patch"])
        ann["failed-open.validating.webhook.admission.k8s.io/round_0_index_0"] = "validation.gatekeeper.sh"
    elif i % 997 == 0:  # decoys: the mutating invocation record, and a webhook-supplied key
        ann["mutation.webhook.admission.k8s.io/round_0_index_0"] = (
            '{"configuration":"gatekeeper-mutating","webhook":"mutation.gatekeeper.sh","mutated":false}')
    e = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
         "auditID": f"{i:08x}-6c1f-4a5b-9d7e-{rnd.getrandbits(48):012x}",
         "stage": "ResponseComplete" if leak or i % 3 else "RequestReceived",
         "requestURI": f"/api/v1/namespaces/{ns}/{resource}/{name}", "verb": verb,
         "user": {"username": rnd.choice(["system:serviceaccount:kube-system:deployment-controller",
                                          "system:node:worker-7", "alice@example.com", "system:kube-scheduler"]),
                  "groups": ["system:authenticated"]},
         "sourceIPs": ["10.0.3.17"], "userAgent": "kube-controller-manager/v1.34.1 (linux/amd64) kubernetes/abcdef0",
         "objectRef": {"resource": resource, "namespace": ns, "name": name, "apiVersion": "v1"},
         "responseStatus": {"metadata": {}, "code": 200},
         "requestReceivedTimestamp": ts, "stageTimestamp": ts, "annotations": ann}
    return json.dumps(e, separators=(",", ":"))


def generate(path: str, size: int, leaks: int = 3000, seed: int = 9) -> None:
    rnd = random.Random(seed)
    pool, total = sized_pool(rnd, size)
    at = set(rnd.sample(range(total // 3, total // 3 + 40000), leaks // 2)
             + rnd.sample(range(2 * total // 3, 2 * total // 3 + 40000), leaks - leaks // 2))
    write_lines(path, total, lambda i: _event(rnd, i, day_time("2026-11-30", i, total), True) if i in at
                else pool[i % len(pool)])


def sized_pool(rnd: random.Random, size: int, day: str = "2026-11-30") -> tuple[list[str], int]:
    """5,000 ordinary events to repeat, and how many lines make ``size`` bytes of them."""
    pool = [_event(rnd, i, f"{day}T03:00:00.000000Z", False) for i in range(5000)]
    avg = sum(len(x) + 1 for x in pool) / len(pool)
    return pool, int(size / avg)


def day_time(day: str, i: int, total: int) -> str:
    """Line ``i`` of ``total``'s time of day, spread over the day."""
    sec = i * 86400 // total
    return f"{day}T{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.5Z"


def write_lines(path: str, total: int, line) -> None:
    """``total`` lines, ``line(i)`` each, written in batches."""
    with open(path, "w") as f:
        buf = []
        for i in range(total):
            buf.append(line(i))
            if len(buf) >= 20000:
                f.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            f.write("\n".join(buf) + "\n")


def main() -> int:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    grep, jq = need("grep"), need("jq")
    path = generated("audit", gib, generate)
    size = os.path.getsize(path)
    run(["cat", path], repeat=1)  # warm the page cache for all three
    g_t, _, code = run([grep, "-c", "failed-open", path])
    assert code == 0, f"grep exited {code}"
    b_t, b_rss, code = run([*BREAKGLASS, "leaks", "--audit-log", path, "-o", "csv"])
    assert code == 3, f"breakglass exited {code}"
    j_t, _, code = run([jq, "-r", JQ, path], repeat=1)
    assert code == 0, f"jq exited {code}"
    print(f"file: {size / (1 << 30):.2f} GiB")
    report("leaks vs grep", b_t, g_t, "grep -c failed-open", "goal: <= 2x")
    report("leaks vs jq", b_t, j_t, "jq select(...) | @csv", "goal: <= 0.1x")
    print(f"peak RSS breakglass {b_rss / 1024:.0f} MB; throughput {size / b_t / (1 << 20):.0f} MiB/s")

    path = generated("apiserver", gib, generate_apiserver_log)
    size = os.path.getsize(path)
    run(["cat", path], repeat=1)
    g_t, _, code = run([grep, "-c", "failing open", path])
    assert code == 0, f"grep exited {code}"
    b_t, b_rss, code = run([*BREAKGLASS, "leaks", "--apiserver-log", path, "-o", "csv"])
    assert code == 3, f"breakglass exited {code}"
    print(f"file: {size / (1 << 30):.2f} GiB apiserver log")
    report("leaks --apiserver-log vs grep", b_t, g_t, 'grep -c "failing open"', "no goal set")
    print(f"peak RSS breakglass {b_rss / 1024:.0f} MB; throughput {size / b_t / (1 << 20):.0f} MiB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
