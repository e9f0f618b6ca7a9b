"""Benchmark one huge line: `breakglass diagnose` and `breakglass leaks` against `grep -c` on the same file, same run.

The file is one line of MiB (64 by default) of "failed calling webhook " repeated, then a newline: the shape of
issue 27 §10 (a hostile or broken writer). A record is cut at 4 MiB (logs.scanner.FORCE_CUT), so the rest of the
line is only searched for its end and each command should cost about what grep does on the line, plus the
interpreter's start. Usage: python bench/hugeline.py [MiB] [repeat]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, DATA, need, report, run  # noqa: E402

WORDS = b"failed calling webhook "


def generate(path: str, size: int) -> None:
    """One line of ``size`` bytes (give or take the last repetition) and its newline, written atomically."""
    block = WORDS * ((1 << 20) // len(WORDS))
    with open(path + ".tmp", "wb") as f:
        left = size
        while left > 0:
            part = block[:left] if left < len(block) else block
            f.write(part)
            left -= len(part)
        f.write(b"\n")
    os.replace(path + ".tmp", path)


def main() -> int:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    os.makedirs(DATA, exist_ok=True)
    path = os.path.join(DATA, f"hugeline-{mib}m.log")
    if not os.path.exists(path):
        generate(path, mib << 20)
    grep = need("grep")
    run(["cat", path], repeat=1)  # warm the page cache for every command
    g_t, g_rss, g_code = run([grep, "-c", "failed calling webhook", path], repeat=repeat)
    assert g_code == 0, f"grep exited {g_code}"
    print(f"file: one line of {os.path.getsize(path) / (1 << 20):.0f} MiB; grep -c: {g_t:.3f}s, {g_rss / 1024:.0f} MB")
    for name, args, ok in (("diagnose", ["diagnose", path, "-o", "json"], (0, 3)),
                           ("leaks --audit-log", ["leaks", "--audit-log", path, "-o", "json"], (0, 3)),
                           ("leaks --apiserver-log", ["leaks", "--apiserver-log", path, "-o", "json"], (0, 3))):
        t, rss, code = run([*BREAKGLASS, *args], repeat=repeat)
        assert code in ok, f"breakglass {name} exited {code}"
        report(name, t, g_t, "grep -c", "goal: about grep's cost plus the interpreter's start")
        print(f"  peak RSS {rss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
