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


# Plans, manifests and machine configs are kilobytes; this only stops a wrong path (a disk image,
# /dev/zero) from being read into memory whole.
LIMIT = 64 << 20


def read(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(LIMIT + 1)
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    if len(data) > LIMIT:
        raise BadInput(f"{path}: larger than {LIMIT >> 20} MiB, not {what}")
    return decode(data, path, what)
