"""Recall and false alarms of `diagnose` over the real excerpts pasted into public issue threads
(tests/fixtures/pastes: the excerpts, expected.yaml: what each should yield and where it was copied from).

Recall: expected findings found with the right webhook and cause class (or family, when no webhook is named).
False alarms: findings no expectation accounts for (every finding in an excerpt that holds no failure).
No timing: tests/test_pastes.py checks the same numbers; RESULTS.md keeps the history.
Usage: python bench/pastes.py [-v]   (-v lists every excerpt not read entirely right)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.test_pastes import evaluate_all, family_summary, summary  # noqa: E402


def main(argv: list[str]) -> int:
    outcomes = evaluate_all()
    if "-v" in argv:
        for o in outcomes:
            if not o.passed:
                mark = f" (known miss: {o.known_miss})" if o.known_miss else ""
                print(f"{o.name}{mark}")
                for p in o.problems:
                    print(f"    {p}")
    print(summary(outcomes))
    print(family_summary(outcomes))
    exp = sum(o.expected for o in outcomes)
    rec = sum(o.recalled for o in outcomes)
    fa = sum(o.false_alarms for o in outcomes)
    print(f"recall={rec}/{exp} false_alarms={fa}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
