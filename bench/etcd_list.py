"""Benchmark listing admission configurations from etcd against etcdctl, same etcd, same run.

A real etcd (Debian's etcd-server) on loopback holds N unrelated keys (default 100,000) plus 50
webhook configurations written by breakglass's encoder. Timed, each as a whole command:
  breakglass webhooks --etcd-endpoints E -o json   (read the six admission prefixes, decode, model, list)
  etcdctl get <prefix> --prefix -w json, for the same six prefixes (raw values, nothing decoded)
and placing a webhook by its name (issue 20), a plan only:
  breakglass recover --method etcd --webhook NAME --dry-run -o json   (read, decode, find the one defining NAME)
  etcdctl get of the two webhook prefixes | grep -c NAME               (what a person would do, by hand)
Usage: python bench/etcd_list.py [unrelated-keys]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, need, report, run, seeded_etcd  # noqa: E402
from breakglass.webhooks import codec, sources  # noqa: E402
from tests.test_codec import KYVERNO  # noqa: E402

HOOK = "validate.policy.corp.example.com"  # a webhook in one configuration, named by no convention


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    etcdctl = need("etcdctl")
    with seeded_etcd(n, 50, 200, kinds=("validating", "mutating")) as (srv, c, _, _tmp):
        import json as _json  # noqa: PLC0415

        own = _json.loads(_json.dumps(KYVERNO))
        own["metadata"]["name"] = "corp-policy-hooks"
        own["webhooks"][0]["name"] = HOOK
        c.put(sources.etcd_key("validating", "corp-policy-hooks"), codec.encode_value(own))
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

        with tempfile.TemporaryDirectory() as state:
            ours, _, code = run([*BREAKGLASS, "recover", "--method", "etcd", "--webhook", HOOK, "--dry-run", "-o",
                                 "json", "--etcd-endpoints", srv.endpoint], repeat=5,
                                env={**os.environ, "BREAKGLASS_STATE_DIR": state})
        assert code == 0, code
        script = " ; ".join(f"{etcdctl} --endpoints {srv.endpoint} get {p} --prefix" for p in prefixes[:2])
        theirs, _, code = run(["sh", "-c", f"({script}) | grep -c {HOOK}"], repeat=5)
        assert code == 0
        report("recover --webhook NAME --dry-run (place a webhook by name)", ours, theirs,
               "etcdctl get --prefix x2 | grep -c NAME", "no goal; lower is better")

        blob = codec.encode_value(KYVERNO)
        t0 = time.perf_counter()
        for _ in range(2000):
            codec.decode_value(blob)
        per = (time.perf_counter() - t0) / 2000
        print(f"decode: {per * 1e6:.0f} us per configuration ({len(blob)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
