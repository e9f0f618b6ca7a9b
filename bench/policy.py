"""Benchmark `breakglass diagnose` on an audit log that holds a policy lockout (issue 47), against grep (the
floor) and a jq filter (what users write to find who refused what), same file, same run.

The file: the leaks benchmark's ordinary audit traffic, with a few thousand refusals of the apiserver's own
ServiceCIDR create by a ValidatingAdmissionPolicy in two restart windows, and decoys (a user's ClusterRole refused
by the same policy, a webhook's ordinary denial). No goal is set by the issue; the leaks reader's goals (within
2x of grep, at least 10x faster than jq) are the yardstick.
Usage: python bench/policy.py [GiB]
"""

from __future__ import annotations

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, generated, need, report, run  # noqa: E402
from bench.leaks import day_time, sized_pool, write_lines  # noqa: E402

JQ = ('select((.responseStatus.message // "") | test("AdmissionPolicy \'[^\']+\'( with binding \'[^\']+\')? denied '
      'request")) | [.stageTimestamp, .user.username, .verb, .objectRef.resource, .objectRef.name, '
      '.responseStatus.message] | @csv')
DENIAL = ("servicecidrs.networking.k8s.io \"kubernetes\" is forbidden: ValidatingAdmissionPolicy 'require-owner-label'"
          " with binding 'require-owner-label' denied request: every cluster-scoped object needs an owner label")


def _refusal(i: int, ts: str, decoy: bool) -> str:
    user = "alice@example.com" if decoy else "system:apiserver"
    res, name, group = ("clusterroles", "team-a-view", "rbac.authorization.k8s.io") if decoy else (
        "servicecidrs", "kubernetes", "networking.k8s.io")
    e = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": f"{i:08x}-policy",
         "stage": "ResponseComplete", "requestURI": f"/apis/{group}/v1/{res}", "verb": "create",
         "user": {"username": user, "groups": ["system:authenticated", "system:masters"]},
         "objectRef": {"resource": res, "name": name, "apiGroup": group, "apiVersion": "v1"},
         "responseStatus": {"metadata": {}, "status": "Failure", "reason": "Invalid", "code": 422,
                            "message": DENIAL.replace("servicecidrs.networking.k8s.io \"kubernetes\"",
                                                      f"{res}.{group} \"{name}\"")},
         "requestReceivedTimestamp": ts, "stageTimestamp": ts}
    return json.dumps(e, separators=(",", ":"))


def generate(path: str, size: int, refusals: int = 3000, seed: int = 47) -> None:
    rnd = random.Random(seed)
    pool, total = sized_pool(rnd, size, "2026-12-06")
    at = set(rnd.sample(range(total // 3, total // 3 + 40000), refusals // 2)
             + rnd.sample(range(2 * total // 3, 2 * total // 3 + 40000), refusals - refusals // 2))
    write_lines(path, total, lambda i: _refusal(i, day_time("2026-12-06", i, total), decoy=i not in at)
                if i in at or i % 50021 == 0 else pool[i % len(pool)])


def main() -> int:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 0.25
    grep, jq = need("grep"), need("jq")
    path = generated("policy-audit", gib, generate)
    size = os.path.getsize(path)
    run(["cat", path], repeat=1)  # the page cache, for all three
    g_t, _, code = run([grep, "-c", "denied request", path])
    assert code == 0, f"grep exited {code}"
    b_t, b_rss, code = run([*BREAKGLASS, "diagnose", path, "-o", "json"])
    assert code == 3, f"breakglass exited {code}"
    j_t, _, code = run([jq, "-r", JQ, path], repeat=1)
    assert code == 0, f"jq exited {code}"
    print(f"file: {size / (1 << 30):.2f} GiB audit log")
    report("diagnose (policy lockout) vs grep", b_t, g_t, 'grep -c "denied request"', "yardstick: <= 2x")
    report("diagnose (policy lockout) vs jq", b_t, j_t, "jq select(test(...)) | @csv", "yardstick: <= 0.1x")
    print(f"peak RSS breakglass {b_rss / 1024:.0f} MB; throughput {size / b_t / (1 << 20):.0f} MiB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
