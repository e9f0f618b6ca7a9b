"""The elements of a JSON array, read as the bytes arrive (gcloud's `--format=json`, other exports).

Memory holds one element and the chunk it arrived in, not the array.
"""

from __future__ import annotations

import codecs
import itertools
import json
from typing import Iterable, Iterator

from breakglass.errors import BadInput

MAX_ELEMENT = 64 << 20


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
    after = _skip(buf, end, " \t\r\n")
    return (obj, end) if after < len(buf) and buf[after] in ",]" else (None, -1)


def _skip(buf: str, pos: int, chars: str) -> int:
    while pos < len(buf) and buf[pos] in chars:
        pos += 1
    return pos
