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
from breakglass.logs.record import MAX_LINE

MAX_ELEMENT = MAX_LINE  # an element longer than this is skipped unread (TOO_LONG), as a line is
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


class _TooLong:
    """What json_array yields for an element over MAX_ELEMENT: skipped unread, its end found without holding it."""

    def __repr__(self) -> str:
        return "<JSON element over MAX_ELEMENT: skipped>"

    def __reduce__(self) -> str:
        return "TOO_LONG"


TOO_LONG = _TooLong()


class _ValueEnd:
    """Finds where one JSON value ends in text fed piece by piece, keeping only its depth and whether it is inside a
    string (a skipped element's bytes are not held). Linear, at ``str.find`` speed: each step jumps to the nearest
    quote, backslash or bracket, each character's next place found once (a regex character class ran at 25 MB/s)."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False  # a backslash ended the last piece: the next character is taken by it
        self.scalar = False
        self.started = False

    def feed(self, s: str, i: int) -> int:
        """The offset just past the value's end in ``s``, or -1 when it goes on in the next piece."""
        if self.escaped:
            if i >= len(s):
                return -1
            self.escaped, i = False, i + 1
        if not self.started:  # what the value is: a container, a string, or a number or word
            i = _skip(s, i, " \t\r\n")
            if i >= len(s):
                return -1
            self.started, self.scalar = True, s[i] not in '[{"'
        near = _Nearest(s)
        if self.scalar:  # it ends where the array goes on
            return near.first(",] \t\r\n", i)
        while True:
            if self.in_string:
                j = near.first('"\\', i)
                if j < 0:
                    return -1
                if s[j] == "\\":
                    if j + 1 >= len(s):
                        self.escaped = True
                        return -1
                    i = j + 2
                    continue
                self.in_string, i = False, j + 1
                if self.depth == 0:
                    return i
                continue
            j = near.first('"[]{}', i)
            if j < 0:
                return -1
            c, i = s[j], j + 1
            if c == '"':
                self.in_string = True
            elif c in "[{":
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth <= 0:
                    return i


class _Nearest:
    """The nearest of some characters at or after an offset of one text, offsets only moving forwards: each
    character's next place is looked for again only once the offset has passed it."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.next: dict[str, int] = {}

    def first(self, chars: str, i: int) -> int:
        best = -1
        for c in chars:
            p = self.next.get(c, -2)
            if p == -1:
                continue  # none left in the text
            if p < i:
                p = self.next[c] = self.s.find(c, i)
                if p < 0:
                    continue
            if best < 0 or p < best:
                best = p
        return best


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
    skipping: _ValueEnd | None = None  # an element over MAX_ELEMENT whose end is still ahead
    for chunk in itertools.chain(chunks, [None]):
        final = chunk is None
        new = text.decode(chunk or b"", final=final)
        if skipping is not None:
            end = skipping.feed(new, 0)
            if end < 0:
                if final:
                    raise BadInput(f"{name}: a JSON array that is cut off or broken")
                continue
            skipping = None
            yield TOO_LONG
            buf, pos = new[end:], 0
        else:
            buf, pos = buf[pos:] + new, 0
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
            if end - pos > MAX_ELEMENT:  # read whole from one large chunk: skipped all the same, whatever the reads
                obj = TOO_LONG
            if end < 0:
                if final:
                    raise BadInput(f"{name}: a JSON array that is cut off or broken")
                if len(buf) - pos > MAX_ELEMENT:  # not held any longer: its end is looked for, and it is skipped
                    skipping = _ValueEnd()
                    end = skipping.feed(buf, pos)
                    if end >= 0:
                        skipping = None
                        yield TOO_LONG
                        pos = end
                        continue
                    buf, pos = "", 0
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
