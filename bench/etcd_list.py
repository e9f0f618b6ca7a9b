"""Benchmark listing admission configurations from etcd against etcdctl, same etcd, same run.

A real etcd (Debian's etcd-server) on loopback holds N unrelated keys (default 100,000) plus 50
webhook configurations written by breakglass's encoder. Timed, each as a whole command:
  breakglass webhooks --etcd-endpoints E -o json   (read the six admission prefixes, decode, model, list)
  etcdctl get <prefix> --prefix -w json, for the same six prefixes (raw values, nothing decoded)
Usage: python bench/etcd_list.py [unrelated-keys]
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, need, report, run, seeded_etcd  # noqa: E402
from breakglass.webhooks import codec, sources  # noqa: E402
from tests.test_codec import KYVERNO  # noqa: E402


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    etcdctl = need("etcdctl")
    with seeded_etcd(n, 50, 200, kinds=("validating", "mutating")) as (srv, c, _, _tmp):
        c.close()

        ours, rss, code = run([*BREAKGLASS, "webhooks", "--etcd-endpoints", srv.endpoint, "-o", "json"], repeat=5)
        assert code == 0
        prefixes = [p.decode() for p in sources.etcd_prefixes().values()]
        script = " && ".join(f"{etcdctl} --endpoints {srv.endpoint} get {p} --prefix -w json >/dev/null"
                             for p in prefixes)
        theirs, _, code = run(["sh", "-c", script], repeat=5)
        assert code == 0
        report("webhooks from etcd", ours, theirs, "etcdctl get --prefix x6", "no goal; lower is better")
        print(f"peak RSS breakglass {rss / 1024:.0f} MB")

        blob = codec.encode_value(KYVERNO)
        t0 = time.perf_counter()
        for _ in range(2000):
            codec.decode_value(blob)
        per = (time.perf_counter() - t0) / 2000
        print(f"decode: {per * 1e6:.0f} us per configuration ({len(blob)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
