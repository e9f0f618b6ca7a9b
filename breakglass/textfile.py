"""Text files the engineer hands us (plans, manifests, machine configs): read them or say in one
line why not, so a wrong path or a binary file is bad input, never a traceback."""

from __future__ import annotations

from breakglass.errors import BadInput


def decode(data: bytes, path: str, what: str) -> str:
    if b"\x00" in data[:8192]:
        raise BadInput(f"{path}: binary data, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start}), not {what}") from None


def read(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    return decode(data, path, what)
