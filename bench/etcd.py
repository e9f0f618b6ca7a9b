"""Benchmark the etcd remedy and snapshots against etcdctl, same etcd, same run.

A real etcd on loopback holds N unrelated keys (default 1,000,000) and 50 webhook configurations.
1. Back up and CAS-delete all 50: `breakglass recover --method etcd --yes -w …` (one process, journaled,
   verified backups) next to etcdctl doing the same gets and deletes (`etcdctl get KEY -w json > file`
   then `etcdctl del KEY`, for each key, as a user would script it). Restores between runs.
2. Full snapshot: `breakglass etcd snapshot` next to `etcdctl snapshot save`. Goal: >= 0.8x etcdctl's throughput.
Usage: python bench/etcd.py [unrelated-keys]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, need, report, seeded_etcd  # noqa: E402
from tests import etcd_server as es  # noqa: E402


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    etcdctl = need("etcdctl")
    with seeded_etcd(n) as (srv, c, blobs, tmp):
        names = [k.decode().rsplit("/", 1)[-1] for k in blobs]

        def restore():
            es.put_many(c, list(blobs.items()))

        env = {**os.environ, "ETCDCTL_API": "3"}

        times_bg, times_ctl = [], []
        for i in range(3):
            state = os.path.join(tmp, f"state{i}")
            cmd = [*BREAKGLASS, "recover", "--method", "etcd", "--yes", "--etcd-endpoints", srv.endpoint,
                   "--state-dir", state] + sum((["-w", f"validating/{x}"] for x in names), [])
            t = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            times_bg.append(time.perf_counter() - t)
            restore()
            script = " && ".join(
                f"{etcdctl} --endpoints {srv.endpoint} get {k.decode()} -w json > {tmp}/b{j}.json && "
                f"{etcdctl} --endpoints {srv.endpoint} del {k.decode()} >/dev/null" for j, k in enumerate(blobs))
            t = time.perf_counter()
            subprocess.run(["sh", "-c", script], check=True, env=env)
            times_ctl.append(time.perf_counter() - t)
            restore()
        times_bg.sort()
        times_ctl.sort()
        report("backup + CAS delete of 50 configurations", times_bg[1], times_ctl[1],
               "etcdctl get+del x50", "no goal; lower is better")

        snap_bg, snap_ctl, size = [], [], 0
        for i in range(3):
            path = os.path.join(tmp, f"bg{i}.db")
            t = time.perf_counter()
            subprocess.run([*BREAKGLASS, "etcd", "snapshot", path, "--etcd-endpoints", srv.endpoint],
                           check=True, stdout=subprocess.DEVNULL)
            snap_bg.append(time.perf_counter() - t)
            size = os.path.getsize(path)
            os.unlink(path)
            path = os.path.join(tmp, f"ctl{i}.db")
            t = time.perf_counter()
            subprocess.run([etcdctl, "--endpoints", srv.endpoint, "snapshot", "save", path], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            snap_ctl.append(time.perf_counter() - t)
            os.unlink(path)
        b, e = sorted(snap_bg)[1], sorted(snap_ctl)[1]
        mib = size / (1 << 20)
        print(f"snapshot ({mib:.0f} MiB): breakglass {b:.2f}s ({mib / b:.0f} MiB/s), etcdctl {e:.2f}s "
              f"({mib / e:.0f} MiB/s), throughput ratio {e / b:.2f}x of etcdctl (goal: >= 0.8x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
