"""Untrusted text made safe to print on one line of a terminal.

Webhook names, file names and log lines come from people who may be hostile: a right-to-left override
(U+202E) or an isolate (U+2066) reorders what the engineer reads, an ANSI escape recolours or rewrites the
screen, a newline starts a line that looks like ours. ``printable`` writes every such character as the
escape ``repr`` would use, so it is seen, never obeyed. Only text output uses it: JSON keeps the real
strings (core.envelope.json_text writes the deceiving ones as \\uXXXX escapes) and files keep their bytes.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text) -> str:
    """``text`` on one line, every character ``str.isprintable`` refuses written as its escape: C0 and C1
    controls (newline, ESC, DEL ...), Unicode format characters (bidi embeddings, overrides, isolates and
    marks, zero-width characters), line and paragraph separators, spaces other than U+0020, unassigned and
    private-use code points, and the lone surrogates that stand for undecodable bytes in a file name.
    A backslash already in the text is left alone: the text stays readable, and the JSON output has the
    exact string when it matters which it was."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():  # the common case, at C speed
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)
