"""How much of `diagnose`'s reading of a real paste survives what happens to pastes on their way into a ticket:
Markdown quoting and fences, CRLF, curly quotes, HTML entities, escaped JSON, no-break spaces, a terminal's hard
wrap at common widths, an e-mail's soft wrap, and prefixes put on every physical line (timestamps, journald,
docker's JSON, stern, line numbers).

Each incident of the corpora given (default: ../shared/corpus/incidents.jsonl beside the clone, and
bench/heldout/incidents.jsonl) is diagnosed as pasted and once per mangling, in this process; a mangling
"changes" an incident when the verdict's state or the set of webhook names differs from the paste's own. The
per-line prefixes are put on continuation lines too, which no tool does to a paste that was already wrapped: their
counts include those. No timing: RESULTS.md keeps the history.

Usage: python bench/mangled.py [-v] [FILE.jsonl ...]   (-v lists each change)
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from breakglass.core.errors import BreakglassError  # noqa: E402
from breakglass.diagnose.engine import Options, diagnose_sources  # noqa: E402
from breakglass.logs.sources import LogSource  # noqa: E402

CORPORA = (os.path.join(ROOT, "..", "shared", "corpus", "incidents.jsonl"),
           os.path.join(ROOT, "bench", "heldout", "incidents.jsonl"))


def reading(lines: list[str]) -> tuple[str, frozenset]:
    data = ("\n".join(lines) + "\n").encode()
    try:
        d = diagnose_sources([LogSource(name="paste.log", opener=lambda: io.BytesIO(data))], Options(year=2026))
    except BreakglassError:
        return "refused", frozenset()
    return d.verdict.state, frozenset(f.webhook for f in d.findings if f.webhook)


def hard(lines: list[str], width: int) -> list[str]:
    return [line[i:i + width] for line in lines for i in range(0, max(len(line), 1), width)]


def soft(lines: list[str], width: int) -> list[str]:
    return [x for line in lines for x in (textwrap.wrap(line, width, break_on_hyphens=False) or [""])]


def curly(line: str) -> str:
    n = iter(range(1 << 30))
    return re.sub('"', lambda m: "\u201c" if next(n) % 2 == 0 else "\u201d", line)


WHOLE = {  # what happens to a paste as a whole
    "> quoted": lambda ls: ["> " + x for x in ls],
    "indented 4": lambda ls: ["    " + x for x in ls],
    "fenced": lambda ls: ["```"] + ls + ["```"],
    "CRLF": lambda ls: [x + "\r" for x in ls],
    "curly quotes": lambda ls: [curly(x) for x in ls],
    "&quot;": lambda ls: [x.replace('"', "&quot;") for x in ls],
    "JSON-escaped": lambda ls: [x.replace("\\", "\\\\").replace('"', '\\"') for x in ls],
    "BOM": lambda ls: ["\ufeff" + ls[0]] + ls[1:] if ls else ls,
    "no-break spaces": lambda ls: [x.replace(" ", "\u00a0") for x in ls],
    **{f"hard wrap {w}": (lambda w: lambda ls: hard(ls, w))(w) for w in (60, 80, 100, 120, 132, 200)},
    **{f"soft wrap {w}": (lambda w: lambda ls: soft(ls, w))(w) for w in (72, 100)},
}
PER_LINE = {  # a prefix on every physical line, continuation lines included
    "kubectl --timestamps": lambda ls: ["2026-05-01T10:00:00.123456789Z " + x for x in ls],
    "journald": lambda ls: ["May 01 10:00:00 cp1 kube-apiserver[1234]: " + x for x in ls],
    "docker json-file": lambda ls: [json.dumps({"log": x + "\n", "stream": "stderr", "time": "2026-05-01T10:00:00Z"})
                                    for x in ls],
    "stern": lambda ls: ["kube-apiserver-cp1 kube-apiserver " + x for x in ls],
    "line numbers": lambda ls: [f"{i + 1:4d}  " + x for i, x in enumerate(ls)],
    "blank line between": lambda ls: [y for x in ls for y in (x, "")],
}


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    files = [a for a in argv if a != "-v"] or [p for p in CORPORA if os.path.exists(p)]
    incidents = [json.loads(line) for p in files for line in open(p, encoding="utf-8") if line.strip()]
    base = [reading(i["lines"]) for i in incidents]
    print(f"{len(incidents)} incidents from {', '.join(os.path.relpath(p) for p in files)}")
    for title, table in (("whole paste", WHOLE), ("every physical line", PER_LINE)):
        print(f"-- {title}")
        for name, mangle in table.items():
            changed = []
            for inc, b in zip(incidents, base):
                r = reading(mangle(inc["lines"]))
                if r != b:
                    changed.append((inc, b, r))
            print(f"{name:22s} changed {len(changed):3d}/{len(incidents)}")
            if verbose:
                for inc, b, r in changed:
                    print(f"    [{inc['kind']}] {inc['url']}: {b[0]} {sorted(b[1])} -> {r[0]} {sorted(r[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
