"""Worst case of every regex that reads log text an attacker can shape (issue 17, finding 10).

Each pattern is run (``search``, as the readers do) over near-miss lines built from its own literal words: the words
up to the last one, then filler that keeps a greedy or lazy part running (letters, spaces, quotes, dots, colons),
alone and repeated; and filler alone. A linear pattern takes about the same time per KB at 4 KB and at 64 KB; a
quadratic one takes 16 times as long per KB. Prints the worst input's microseconds per KB at both sizes for each
pattern, worst first. No assertions: tests/test_hostile_input.py checks the same inputs by growth, not by time.

Usage: python bench/regex_worst.py [--top N] [--only MODULE]   (MODULE: signatures, formats, ...)
"""

from __future__ import annotations

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULES = ("breakglass.diagnose.signatures", "breakglass.diagnose.causes", "breakglass.diagnose.engine",
           "breakglass.diagnose.correlate", "breakglass.diagnose.findings", "breakglass.logs.formats",
           "breakglass.logs.lines", "breakglass.logs.scanner", "breakglass.leaks.events", "breakglass.leaks.audit",
           "breakglass.leaks.apiserver", "breakglass.heal.bootstrap", "breakglass.webhooks.vendors")
FILLERS = ("a", " ", '"', "a ", "a.", "a:", "/", "-", "0", "a\"", "\\\"", "'", "[", "a/")


def patterns() -> list[tuple[str, re.Pattern]]:
    """Every compiled pattern at module level in the readers, and inside their tuples, lists and dicts."""
    import importlib  # noqa: PLC0415

    out, seen = [], set()

    def add(name, p):
        p = getattr(p, "regex", p)  # signatures.Guarded: the regex behind its words is what runs on long lines
        if isinstance(p, re.Pattern) and id(p) not in seen:
            seen.add(id(p))
            out.append((name, p))

    for mod in MODULES:
        m = importlib.import_module(mod)
        for k, v in vars(m).items():
            add(f"{mod.rsplit('.', 1)[1]}.{k}", v)
            items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, (tuple, list)) else ()
            for i, x in items:
                add(f"{mod.rsplit('.', 1)[1]}.{k}[{i}]", x)
                for j, y in (enumerate(x) if isinstance(x, (tuple, list)) else ()):
                    add(f"{mod.rsplit('.', 1)[1]}.{k}[{i}][{j}]", y)
    return out


def near_misses(p: re.Pattern, size: int, dedupe: bool = True) -> list[str]:
    """Lines of about ``size`` characters that start like a match of ``p`` and do not finish it."""
    src = p.pattern.decode("latin-1") if isinstance(p.pattern, bytes) else p.pattern
    out = []
    for alt in re.split(r"(?<!\\)\|", src) or [src]:
        words = re.findall(r"[A-Za-z]{2,}", re.sub(r"\(\?P<\w+>|\\[a-zA-Z]", " ", alt))
        for k in {len(words), max(len(words) - 1, 0)}:
            for sep in (" ", ""):  # \\s* between words also matches nothing: "unabletocreatePriorityClass"
                prefix = sep.join(words[:k])
                out.append(prefix * (size // max(len(prefix), 1) + 1))
                for f in FILLERS:
                    out.append(prefix + sep + f * (size // len(f)))
                    unit = prefix + sep + f * 3 + " "
                    out.append(unit * (size // len(unit) + 1))
    out += [f * (size // len(f)) for f in FILLERS]
    out = [s[:size] for s in out]
    return list(dict.fromkeys(out)) if dedupe else out


def worst(p: re.Pattern, size: int, budget: float = 2.0) -> tuple[float, str]:
    """(seconds of the slowest near miss at ``size``, that input's first 60 characters)."""
    top, which = 0.0, ""
    for s in near_misses(p, size):
        text = s.encode("latin-1", "replace") if isinstance(p.pattern, bytes) else s
        t0 = time.perf_counter()
        p.search(text)
        t = time.perf_counter() - t0
        if t > top:
            top, which = t, s[:60]
        if t > budget:
            break
    return top, which


def main(argv: list[str]) -> int:
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 0
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    rows = []
    for name, p in patterns():
        if not name.startswith(only):
            continue
        small, _ = worst(p, 4 << 10)
        big, which = worst(p, 64 << 10)
        rows.append((big / 64 * 1e6, small / 4 * 1e6, name, which))
    rows.sort(reverse=True)
    print(f"{len(rows)} patterns; microseconds per KB of the worst near miss at 4 KB and 64 KB")
    print(f"{'64KB us/KB':>11} {'4KB us/KB':>10}  {'growth':>6}  PATTERN  (worst input)")
    for big, small, name, which in rows[:top or None]:
        print(f"{big:11.1f} {small:10.1f}  {big / max(small, 0.01):6.1f}  {name}  ({which!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
