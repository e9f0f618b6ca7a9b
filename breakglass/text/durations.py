"""Durations as Go's time.ParseDuration writes them (what etcdctl's timeouts and talosctl's --timeout take):
one or more decimal numbers, each with a unit, "1h30m", "90s", "1.5s", "500ms"."""

from __future__ import annotations

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def seconds(text: str, bare_unit: str | None = None) -> float | None:
    """The duration in seconds, or None when ``text`` is not one. ``bare_unit``: the unit a plain number is in
    (etcdctl's environment takes "5" as seconds); without it a number needs its unit, as in Go."""
    text = (text or "").strip()
    if bare_unit is not None and re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text) * _UNITS[bare_unit]
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)
