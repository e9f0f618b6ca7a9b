"""Benchmark `breakglass diagnose` against `grep -cE` with the same signature words, same file, same run.

Goal (issue 2): within 1.5x of grep, peak RSS under 100 MB. Usage: python bench/diagnose.py [GiB]
"""

from __future__ import annotations

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, generated, report, run  # noqa: E402
from bench.genlog import generate  # noqa: E402
from breakglass.diagnose.signatures import ANCHORS  # noqa: E402


def main() -> int:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    path = generated("apiserver", gib, generate)
    size = os.path.getsize(path)
    pattern = "|".join(re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", a.decode()) for a in ANCHORS)
    grep = shutil.which("grep")
    assert grep, "grep is needed for the comparison"
    run(["cat", path], repeat=1)  # warm the page cache for both
    g_t, g_rss, g_code = run([grep, "-cE", pattern, path])
    assert g_code == 0, f"grep exited {g_code}"
    b_t, b_rss, code = run([*BREAKGLASS, "diagnose", path, "-o", "json"])
    assert code == 3, f"breakglass exited {code}"
    print(f"file: {size / (1 << 30):.2f} GiB, {len(ANCHORS)} signature words, locale {os.environ.get('LC_ALL') or os.environ.get('LANG') or 'C'}")
    report("diagnose", b_t, g_t, "grep -cE", "goal: <= 1.5x")
    print(f"peak RSS: breakglass {b_rss / 1024:.0f} MB, grep {g_rss / 1024:.0f} MB (goal: < 100 MB)")
    print(f"throughput: breakglass {size / b_t / (1 << 20):.0f} MiB/s, grep {size / g_t / (1 << 20):.0f} MiB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
