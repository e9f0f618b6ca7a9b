"""The elements of a JSON array, read as the bytes arrive (gcloud's `--format=json`, other exports).

Memory holds one element and the chunk it arrived in, not the array.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from typing import Iterable, Iterator

from breakglass.core.errors import BadInput

MAX_ELEMENT = 64 << 20
# Kubernetes objects, audit events and log records nest a few dozen levels; json's C decoder raises RecursionError
# past about 1,000, and str()/json.dumps of a value a few hundred deep can too. Anything deeper is hostile.
MAX_DEPTH = 256


class TooDeep(ValueError):
    """A JSON value nested deeper than MAX_DEPTH: skipped (and counted) by its reader, never a RecursionError."""


# A JSON string (skipped whole, brackets inside it do not count) or a bracket. Linear: the two alternatives of
# the string's body cannot both match one character.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``text`` is JSON nested deeper than ``limit`` (broken JSON is not: its decoder refuses it). A count of
    opening brackets answers most lines; else the decoder says, stopping ~1,000 levels down, and the value's depth
    is walked (``deeper``). Linear: removing the innermost bracket pairs one level a pass, as this did before, took
    257 passes over the line, 3.8 s for one line 100,000 levels deep."""
    if _opens(text) <= limit:
        return False
    try:
        return deeper(json.loads(text), limit)
    except RecursionError:
        return True
    except ValueError:
        return False


def deeper(value, limit: int = MAX_DEPTH) -> bool:
    """Whether a decoded JSON value nests more than ``limit`` arrays and objects, walked without recursion."""
    todo = [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if depth > limit:
            return True
        inner = v.values() if isinstance(v, dict) else v
        todo.extend((x, depth + 1) for x in inner if isinstance(x, (dict, list)))
    return False


def _opens(text: str | bytes) -> int:
    return text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")


class _Skipped:
    """What json_array yields for an element nested too deep: no reader takes it for a record; scan counts it."""

    def __repr__(self) -> str:
        return "<JSON element nested too deep: skipped>"

    def __reduce__(self) -> str:
        return "TOO_DEEP"  # one object, also after a scan worker pickles it: readers test ``is TOO_DEEP``


TOO_DEEP = _Skipped()


def loads(text: str | bytes):
    """json.loads for one line or record an attacker may shape: TooDeep (a ValueError) past MAX_DEPTH. JSON that
    only looks deep (brackets counted, never closed or mismatched) is what the decoder says: broken."""
    try:
        value = json.loads(text)  # the C decoder stops ~1,000 levels down
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    if _opens(text) > MAX_DEPTH and deeper(value):
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def json_array(chunks: Iterable[bytes], name: str) -> Iterator:
    """The elements of one JSON array, parsed as they arrive: memory holds one element, not the array."""
    decoder = json.JSONDecoder()
    text = codecs.getincrementaldecoder("utf-8")("replace")
    buf, pos, opened = "", 0, False
    for chunk in itertools.chain(chunks, [None]):
        final = chunk is None
        buf = buf[pos:] + text.decode(chunk or b"", final=final)
        pos = 0
        while True:
            pos = _skip(buf, pos, " \t\r\n,")
            if pos >= len(buf):
                break
            if not opened:
                if buf[pos] != "[":
                    raise BadInput(f"{name}: not a JSON array")
                opened, pos = True, pos + 1
                continue
            if buf[pos] == "]":
                return
            obj, end = _element(decoder, buf, pos)
            if end < 0:
                if final:
                    raise BadInput(f"{name}: a JSON array that is cut off or broken")
                if len(buf) - pos > MAX_ELEMENT:
                    raise BadInput(f"{name}: an element of the JSON array is over 64 MiB")
                break  # the element continues in the next chunk
            yield obj
            pos = end
    if opened:
        raise BadInput(f"{name}: the JSON array is not closed (a cut-off file?)")


def _element(decoder: json.JSONDecoder, buf: str, pos: int) -> tuple:
    """(element, end) once it is complete, else (None, -1). Complete means a comma or the closing bracket
    follows it: "1" may be the start of "1.5", and the rest of an object may be in the next chunk."""
    try:
        obj, end = decoder.raw_decode(buf, pos)
    except ValueError:
        return None, -1
    except RecursionError:  # nested past ~1,000: find where it ends without decoding it
        obj, end = TOO_DEEP, _value_end(buf, pos)
        if end < 0:
            return None, -1
    after = _skip(buf, end, " \t\r\n")
    if not (after < len(buf) and buf[after] in ",]"):
        return None, -1
    if obj is not TOO_DEEP and _opens(buf[pos:end]) > MAX_DEPTH and deeper(obj):
        obj = TOO_DEEP
    return obj, end


def _value_end(buf: str, pos: int) -> int:
    """The end of the array or object starting at ``pos``, by its brackets; -1 when it is not complete yet."""
    depth = 0
    for m in _TOKENS.finditer(buf, pos):
        c = m[0][:1]
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return m.end()
    return -1


def _skip(buf: str, pos: int, chars: str) -> int:
    while pos < len(buf) and buf[pos] in chars:
        pos += 1
    return pos
