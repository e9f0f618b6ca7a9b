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
                self.engine = "hyperscan"
            except Exception:  # noqa: BLE001 - any failure (missing wheel, no SSSE3) means: use the fallback
                if engine == "hyperscan":
                    raise
                self._db = None

    def find(self, buf: bytes, start: int, end: int) -> list[int]:
        if self._db is not None:
            hits: list[int] = []
            add = hits.append

            def on_match(_id, _frm, to, _flags, _ctx):
                add(start + to - 1)

            with memoryview(buf) as whole, whole[start:end] as region:  # released at once: buf may be resized
                self._db.scan(region, match_event_handler=on_match)
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
