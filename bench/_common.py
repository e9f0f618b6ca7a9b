"""Shared helpers for the benchmarks: run a command N times, report median wall time and peak RSS."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", ".data")
BREAKGLASS = [sys.executable, "-m", "breakglass"]


def run(cmd: list[str], repeat: int = 3, stdin_path: str | None = None, cwd: str = ROOT,
        env: dict | None = None) -> tuple[float, int, int]:
    """(median seconds, max peak RSS in KiB, exit code of the last run)."""
    times, rss, code = [], 0, 0
    for _ in range(repeat):
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        # Not /dev/null: GNU grep notices it and stops at the first match.
        with tempfile.TemporaryFile() as out:
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
            _, status, usage = os.wait4(p.pid, 0)
            times.append(time.perf_counter() - t0)
        rss = max(rss, usage.ru_maxrss)
        code = os.waitstatus_to_exitcode(status)
        if stdin_path:
            stdin.close()
    return statistics.median(times), rss, code


def generated(name: str, gib: float, generate) -> str:
    """bench/.data/NAME-<gib>g.log, generated once (atomically) and reused by later runs."""
    os.makedirs(DATA, exist_ok=True)
    path = os.path.join(DATA, f"{name}-{gib:g}g.log")
    if not os.path.exists(path):
        print(f"generating {gib:g} GiB {name} log at {path} ...", flush=True)
        generate(path + ".tmp", int(gib * (1 << 30)))
        os.replace(path + ".tmp", path)
    return path


def need(tool: str) -> str:
    """The standard tool a benchmark compares against, or a one-line exit when it is missing."""
    path = shutil.which(tool)
    if not path:
        raise SystemExit(f"{tool} is needed for the comparison (`make test` installs it)")
    return path


def report(name: str, ours: float, theirs: float, other: str, goal: str) -> None:
    print(f"{name}: breakglass {ours:.3f}s, {other} {theirs:.3f}s, ratio {ours / theirs:.2f}x ({goal})")


@contextlib.contextmanager
def seeded_etcd(unrelated: int, configs: int = 50, value_size: int = 150, kinds=("validating",)):
    """A real etcd on loopback holding ``unrelated`` keys and ``configs`` webhook configurations, for the
    length of a ``with``: (server, raw client, {key: value} of the configurations, temp dir). It is
    stopped and its directory removed however the benchmark ends."""
    import json as _json  # noqa: PLC0415

    from breakglass.webhooks import codec, sources  # noqa: PLC0415
    from tests import etcd_server as es  # noqa: PLC0415
    from tests.test_codec import KYVERNO  # noqa: PLC0415

    tmp = tempfile.mkdtemp()
    srv = es.start(tmp)
    c = es.raw_client(srv)
    try:
        t0 = time.perf_counter()
        batch = []
        for i in range(unrelated):
            batch.append((f"/registry/pods/ns-{i % 100}/pod-{i}".encode(), os.urandom(value_size)))
            if len(batch) == 5000:
                es.put_many(c, batch)
                batch = []
        es.put_many(c, batch)
        blobs = {}
        for i in range(configs):
            o = _json.loads(_json.dumps(KYVERNO))
            o["metadata"]["name"] = f"cfg-{i:02d}"
            kind = kinds[i % len(kinds)]
            if kind == "mutating":
                o["kind"] = "MutatingWebhookConfiguration"
            blobs[sources.etcd_key(kind, o["metadata"]["name"])] = codec.encode_value(o)
        es.put_many(c, list(blobs.items()))
        print(f"seeded {unrelated} unrelated keys and {configs} configurations in {time.perf_counter() - t0:.0f}s",
              flush=True)
        yield srv, c, blobs, tmp
    finally:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - closing twice is fine; a benchmark may have closed it already
            pass
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
