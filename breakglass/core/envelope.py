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


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)
