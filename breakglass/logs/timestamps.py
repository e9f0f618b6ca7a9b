"""Timestamps to epoch seconds, in a module of their own: the leak scan needs them without the log formats
(whose regexes cost a tenth of its start-up)."""

from __future__ import annotations

import calendar
import re


def epoch(year: int, month: int, day: int, hms: str) -> float | None:
    try:
        h, m, s = hms.split(":")
        sec = float(s.replace(",", "."))
        return calendar.timegm((year, month, day, int(h), int(m), 0, 0, 0, 0)) + sec
    except (ValueError, OverflowError):
        return None


def parse_iso(ts: str) -> float | None:
    """RFC 3339 (with nanoseconds, which datetime cannot parse) to epoch seconds."""
    m = re.match(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d:\d\d:\d\d(?:[.,]\d+)?)(Z|[+-]\d\d:?\d\d)?$", ts)
    if not m:
        return None
    base = epoch(int(m[1]), int(m[2]), int(m[3]), m[4])
    if base is None:
        return None
    tz = m[5]
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        base -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return base
