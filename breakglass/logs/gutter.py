"""A paste's line-number gutter, taken off before it is read.

People paste logs with the line numbers their tools put in front: ``grep -n`` (``1234:E0416 …``, context lines
``1235-…``), ``cat -n`` and ``nl`` (``     7\t…``), ``less -N``, an editor's gutter. Left on, no line starts a record
(a record starts with klog's header, a timestamp, ``Error from server`` …), so every line is read as the wrapped
continuation of the one before, separate records are joined, and a record's klog header sits behind the previous
record's text.

A gutter is recognised only where nothing else explains the numbers: the first line has one, at least two lines
do and at least half of them, and the numbers strictly increase. Timestamps fail that test (a year repeats; a time
is kept out by its own shape), and a numbered list (``1. ``, ``2) ``) has no gutter's separator. Lines without a
number between numbered ones are a terminal's wrap of the line above, kept as they are.
"""

from __future__ import annotations

import re

# the number, then the separator: blanks, grep's ':' (a match) or '-' (a context line), a '|' or a box-drawing rule
# (U+2502); never a date's '-' (`2026-05-01`) or a time's ':' (`10:00:00`)
_GUTTER = re.compile(rb"^[ \t]*(\d{1,7})(?:[ \t]*(?:\||\xe2\x94\x82)[ \t]?|[ \t]+|-(?!\d)|:(?!\d:\d\d|\d\d:\d\d))")


def strip(data: bytes) -> bytes:
    """``data`` without its line-number gutter, or ``data`` itself when it has none."""
    lines = data.split(b"\n")
    cuts: list[int] = []  # per line: how many bytes of gutter (0: none)
    numbered = texts = 0
    last = -1
    for line in lines:
        if not line.strip():
            cuts.append(0)
            continue
        texts += 1
        m = _GUTTER.match(line)
        if m is None:
            if texts == 1:
                return data  # the first line has none: not a numbered paste
            cuts.append(0)
            continue
        n = int(m.group(1))
        if n <= last:
            return data
        last = n
        numbered += 1
        cuts.append(m.end())
    if numbered < 2 or numbered * 2 < texts:
        return data
    return b"\n".join(line[c:] if c else line for line, c in zip(lines, cuts))
