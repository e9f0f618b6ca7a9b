"""The versioned JSON envelope every command prints with ``--output json``.

Scripts depend on this shape, so it changes only with ``API_VERSION``:

    {"apiVersion": "breakglass/v1alpha1", "kind": "<Result kind>",
     "exitCode": <int>, "result": {...}, "warnings": [...], "outcome": {...}}

Errors use kind "Error" and carry {"type", "message", "hint"} under "error". Every envelope, errors too, has
the same ``outcome`` block (``breakglass.core.outcome``): status, run, read, changed, verified, notVerified, next.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Any

API_VERSION = "breakglass/v1alpha1"


def to_plain(obj: Any) -> Any:
    """Dataclasses, enums, tuples and sets to JSON-ready values (None fields kept)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.metadata.get("internal")}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(to_plain(v) for v in obj)
    return obj


def envelope(kind: str, result: Any, exit_code: int, warnings: list[str] | None = None, outcome=None) -> dict:
    """``outcome``: a ``breakglass.core.outcome.Outcome``; by default built from the result, so every caller (the fast
    path in ``__main__`` too) carries one."""
    from breakglass.core import outcome as _outcome  # noqa: PLC0415

    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "exitCode": int(exit_code),
        "result": to_plain(result),
        "warnings": list(warnings or []),
        "outcome": (outcome or _outcome.of(kind, result, exit_code)).to_json(),
    }


def error_envelope(error_type: str, message: str, exit_code: int, hint: str | None = None, outcome=None) -> dict:
    from breakglass.core import outcome as _outcome  # noqa: PLC0415

    return {
        "apiVersion": API_VERSION,
        "kind": "Error",
        "exitCode": int(exit_code),
        "error": {"type": error_type, "message": message, "hint": hint},
        "outcome": (outcome or _outcome.of_error(error_type, message, hint)).to_json(),
    }


# Characters JSON may carry raw that rewrite or hide what a person reads when the output is shown (a terminal, a CI
# log, a code review): DEL and the C1 controls, bidi embeddings, overrides, isolates and marks, zero-width and other
# invisible format characters, line and paragraph separators, the byte-order mark, tag characters, and lone
# surrogates (undecodable bytes in a name; also what a strict UTF-8 writer cannot encode at all). json.dumps escapes
# only C0 controls, quotes and backslashes; these are written as \uXXXX (a surrogate pair beyond the BMP) too, so
# the output is the same JSON, in ASCII wherever a character could deceive.
_UNSAFE = re.compile("[\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
                     "\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]")


def _escape(m: re.Match) -> str:
    n = ord(m.group())
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def escape_unsafe(text: str) -> str:
    """JSON text (json.dumps with ensure_ascii=False) with every character of ``_UNSAFE`` as its \\u escape. Outside
    strings JSON is ASCII, so only string contents change, and each parses back to the same string."""
    if text.isascii() and "\x7f" not in text:  # the common case, at C speed
        return text
    return _UNSAFE.sub(_escape, text)


def json_text(doc: Any, indent: int | None = 2) -> str:
    """The one way breakglass writes JSON for people and programs (envelopes, SARIF, the exporter's /findings):
    readable UTF-8, with what could deceive a reader escaped (``escape_unsafe``)."""
    return escape_unsafe(json.dumps(doc, indent=indent, ensure_ascii=False))


def json_bytes(doc: Any, indent: int | None = 2) -> bytes:
    """``json_text(doc) + "\\n"`` as UTF-8, written piece by piece: no whole str beside the bytes (the exporter's
    /findings of a large cluster is hundreds of MB of JSON)."""
    import io  # noqa: PLC0415

    buf = io.BytesIO()
    for chunk in json.JSONEncoder(indent=indent, ensure_ascii=False).iterencode(doc):
        buf.write(escape_unsafe(chunk).encode("utf-8"))
    buf.write(b"\n")
    return buf.getvalue()


def dumps(doc: dict) -> str:
    return json_text(doc)
