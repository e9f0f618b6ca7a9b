"""Generate a large kube-apiserver log from lines a real kube-apiserver wrote, not from the signatures.

Source: every klog text capture in ``tests/fixtures/real/*/*.log`` (JSON captures and audit windows left out),
written by real kube-apiserver v1.32.13 and v1.34.4 builds (``scripts/capture_real_logs.py``). Each capture is
cut into records: a header line plus any klog multi-line value lines that follow it (tab-indented, `` >``).

Line mix of the output, by record:
- steady records (about 99.75%): the captured records a running apiserver repeats (cache and informer waits,
  APF workers, "Error getting keys", lease retries, post-timeout and writer errors, quota evaluators, policy
  refreshes), drawn uniformly with replacement;
- occasional records (1 in ``OCCASIONAL_EVERY`` = 500): records a real apiserver writes once per start or stop
  (``Starting``/``Shutting down``/``Ending`` controllers, ensurers "exiting", "Stopped listening",
  "created successfully", "Caches are synced", "unable to sync",
  system namespaces, priority classes) and webhook lines that are not one of the seven phrases (a canceled
  call), drawn uniformly;
- failure records (1 in ``FAIL_EVERY`` = 2,000): records holding one of the seven phrases ``bench/diagnose.py``
  greps for (the real webhook-call failures of every captured cause, fail-open warnings, ServiceCIDR event dumps
  and post-start-hook errors, multi-line values included), drawn in turn.
Only the header's time and thread id are rewritten (time advancing, thread ids from the captures); every other
byte is as the apiserver wrote it. Nothing here consults ``breakglass``'s signatures or anchors.
Usage: python bench/genlog_real.py OUT [GiB]
"""

from __future__ import annotations

import glob
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The seven phrases of the grep the diagnose benchmark compares against (bench/diagnose.py uses this list).
PHRASES = ("failed calling webhook", "failing open", "failing closed", "denied the request",
           "ServiceCIDR", "PostStartHook", "not yet ready to handle")
FAIL_EVERY = 2000
OCCASIONAL_EVERY = 500
_OCCASIONAL = re.compile(r"(?i)webhook|Starting|Shutting down|successfully|Caches are synced|unable to sync|"
                         r"system namespace|priority class|is exiting|Stopped listening|Ending ")
_HEADER = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +(\d+) ")


def real_records() -> tuple[list[str], list[str], list[str]]:
    """(steady, occasional, failure records), each a str of one or more lines without the final newline."""
    steady, occasional, failures = [], [], []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "real", "*", "*.log"))):
        if path.endswith((".json.log", ".audit.log")):
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        recs: list[list[str]] = []
        for line in lines:
            if recs and (line.startswith("\t") or line.startswith(" >")):
                recs[-1].append(line)
            elif _HEADER.match(line):
                recs.append([line])
        for r in recs:
            text = "\n".join(r)
            if any(p in text for p in PHRASES):
                failures.append(text)
            else:
                (occasional if _OCCASIONAL.search(text) else steady).append(text)
    return steady, occasional, failures


def generate(path: str, size: int, seed: int = 11) -> None:
    rnd = random.Random(seed)
    steady, occasional, failures = real_records()
    heads = {r: _HEADER.match(r) for r in steady + occasional + failures}
    written = i = nf = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size:
            buf = []
            for _ in range(20000):
                i += 1
                s = i // 2000
                t = "%02d:%02d:%02d.%06d" % (s // 3600 % 24, s // 60 % 60, s % 60, (i % 2000) * 500)
                if i % FAIL_EVERY == 0:
                    rec = failures[nf % len(failures)]
                    nf += 1
                elif i % OCCASIONAL_EVERY == 0:
                    rec = occasional[rnd.randrange(len(occasional))]
                else:
                    rec = steady[rnd.randrange(len(steady))]
                m = heads[rec]
                buf.append(f"{m[1]}1130 {t} {m[2]:>7} {rec[m.end():]}")
            chunk = "\n".join(buf) + "\n"
            out.write(chunk)
            written += len(chunk.encode())


if __name__ == "__main__":
    st, oc, fa = real_records()
    print(f"{len(st)} steady, {len(oc)} occasional, {len(fa)} failure records from the real captures", file=sys.stderr)
    generate(sys.argv[1], int(float(sys.argv[2]) * (1 << 30)) if len(sys.argv) > 2 else 1 << 28)
