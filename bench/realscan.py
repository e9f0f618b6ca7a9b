"""Issue 16 §3: the scan's speed on logs made from real kube-apiserver output, against exactly the issue's greps.

- `diagnose` on a log from ``bench/genlog_real.py`` (real captured lines, mix in its docstring) against
  ``grep -cE`` over seven signature phrases (``genlog_real.PHRASES``); goal <= 1.5x, peak RSS <= 100 MB;
- `leaks --audit-log` on an audit log from ``bench/genaudit_real.py`` (~266 MB) against ``grep -c failed-open``;
  goal <= 2x;
- start-up: `diagnose` on a one-line log (all of it is before and after the first byte) and on a 1 MB log;
  goal <= 0.12 s before the first byte.
Both scans use every usable core on a local file of 32 MiB or more (grep uses one), so the ratios depend on
the cores being idle: the load average is printed first.
Every command writes to a temporary file, not /dev/null (GNU grep stops at the first match there).
Usage: python bench/realscan.py [GiB of apiserver log, default 0.25] [repeats, default 3] [CHECKOUT...]
With CHECKOUTs (other working trees of this repository, e.g. `git worktree add /tmp/before COMMIT`), each
one's `python -m breakglass` is timed too, in the same run, against the same grep times.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, DATA, ROOT, generated, need, report, run  # noqa: E402
from bench.genaudit_real import generate as generate_audit  # noqa: E402
from bench.genlog_real import PHRASES, generate as generate_log  # noqa: E402


def main() -> int:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 0.25
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    trees = [("this tree", ROOT)] + [(os.path.basename(os.path.abspath(d)), os.path.abspath(d))
                                     for d in sys.argv[3:]]
    grep = need("grep")
    log = generated("apiserver-real", gib, generate_log)
    audit = generated("audit-real", 266e6 / (1 << 30), generate_audit)
    small = generated("apiserver-real", 1e6 / (1 << 30), generate_log)
    one = os.path.join(DATA, "one-line.log")
    if not os.path.exists(one):
        with open(small, "rb") as f, open(one, "wb") as out:
            out.write(f.readline())

    def ours(tree: str, args: list[str], n: int) -> tuple[float, int, int]:
        return run([*BREAKGLASS, *args], n, cwd=tree, env={**os.environ, "PYTHONPATH": tree})

    for p in (log, audit, small):
        run(["cat", p], repeat=1)  # page cache warm for both sides
    pattern = "|".join(PHRASES)
    size = os.path.getsize(log)
    # diagnose and leaks use every usable core on big files, grep one: a busy machine shows in the ratios
    print(f"usable cores: {len(os.sched_getaffinity(0))}; load average: {os.getloadavg()[0]:.2f}")
    print(f"apiserver log: {size / (1 << 20):.0f} MiB; grep -cE '{pattern}'")
    g_t, _, code = run([grep, "-cE", pattern, log], repeat)
    assert code == 0, f"grep exited {code}"
    for name, tree in trees:
        b_t, b_rss, code = ours(tree, ["diagnose", log, "-o", "json"], repeat)
        assert code == 3, f"breakglass exited {code}"
        report(f"diagnose [{name}]", b_t, g_t, "grep -cE", "goal: <= 1.5x")
        print(f"  peak RSS {b_rss / 1024:.0f} MB (goal: <= 100 MB); {size / b_t / (1 << 20):.0f} MiB/s, "
              f"grep {size / g_t / (1 << 20):.0f} MiB/s")

    print(f"audit log: {os.path.getsize(audit) / 1e6:.0f} MB")
    g_t, _, code = run([grep, "-c", "failed-open", audit], repeat)
    assert code == 0, f"grep exited {code}"
    for name, tree in trees:
        b_t, b_rss, code = ours(tree, ["leaks", "--audit-log", audit, "-o", "csv"], repeat)
        assert code == 3, f"breakglass exited {code}"
        report(f"leaks --audit-log [{name}]", b_t, g_t, "grep -c failed-open", "goal: <= 2x")
        print(f"  peak RSS {b_rss / 1024:.0f} MB")

    p_t, _, _ = run([sys.executable, "-c", "pass"], max(repeat, 5))
    print(f"python -c pass {p_t:.3f}s")
    for name, tree in trees:
        o_t, o_rss, _ = ours(tree, ["diagnose", one, "-o", "json"], max(repeat, 5))
        s_t, _, _ = ours(tree, ["diagnose", small, "-o", "json"], max(repeat, 5))
        print(f"start-up [{name}]: diagnose on one line {o_t:.3f}s (goal: <= 0.12 s), on 1 MB {s_t:.3f}s; "
              f"peak RSS {o_rss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
