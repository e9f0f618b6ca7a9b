"""Offsets of a few literals in a buffer: one SIMD pass with Hyperscan, else ``bytes.find`` per literal.

A module of its own so the leak scan, which needs only this, does not load the log formats' regexes.
"""

from __future__ import annotations

import re
from typing import Sequence


class Finder:
    """Offsets of every anchor occurrence in a buffer region."""

    def __init__(self, anchors: Sequence[bytes], engine: str = "auto") -> None:
        self.anchors = tuple(anchors)
        self.engine = "python"
        self._db = None
        if engine in ("auto", "hyperscan"):
            try:
                import hyperscan  # noqa: PLC0415 - optional accelerator, imported only when scanning

                db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                n = len(self.anchors)
                try:  # as literals: the same matches, a third faster than the same bytes as patterns (measured)
                    db.compile(expressions=list(self.anchors), ids=list(range(n)), elements=n, flags=[0] * n,
                               literal=True)
                except TypeError:  # a binding without hs_compile_lit_multi
                    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                    db.compile(expressions=[re.escape(a) for a in self.anchors], ids=list(range(n)),
                               elements=n, flags=[0] * n)
                self._db = db
                # what scan raises when a callback stops it (older bindings: their one error class)
                self._terminated = getattr(hyperscan, "ScanTerminated", hyperscan.error)
                self.engine = "hyperscan"
            except Exception:  # noqa: BLE001 - any failure (missing wheel, no SSSE3) means: use the fallback
                if engine == "hyperscan":
                    raise
                self._db = None

    def holds(self, buf: bytes, start: int, end: int) -> bool:
        """Whether buf[start:end] holds any anchor: the search stops at the first (a line that repeats one
        millions of times costs one callback, not millions)."""
        if self._db is not None:
            def stop(*_args) -> bool:
                return True

            with memoryview(buf) as whole, whole[start:end] as region:
                try:
                    self._db.scan(region, match_event_handler=stop)
                except self._terminated:
                    return True
            return False
        return any(buf.find(a, start, end) >= 0 for a in self.anchors)

    def find(self, buf: bytes, start: int, end: int, most: int | None = None) -> list[int] | None:
        """Sorted offsets of the last byte of every anchor in buf[start:end]; with ``most``, None as soon as there
        are more than that many (Hyperscan only: the fallback finds at most one of each anchor per line)."""
        if self._db is not None:
            hits: list[int] = []
            add = hits.append
            if most is None:
                def on_match(_id, _frm, to, _flags, _ctx):
                    add(start + to - 1)
            else:
                def on_match(_id, _frm, to, _flags, _ctx):
                    add(start + to - 1)
                    return len(hits) > most

            with memoryview(buf) as whole, whole[start:end] as region:  # released at once: buf may be resized
                try:
                    self._db.scan(region, match_event_handler=on_match)
                except self._terminated:
                    return None
            hits.sort()
            return hits
        hits = []
        find = buf.find
        for a in self.anchors:
            p = find(a, start, end)
            while p != -1:
                hits.append(p)
                nl = find(b"\n", p, end)
                if nl == -1:
                    break
                p = find(a, nl, end)
        hits.sort()
        return hits
