"""logs.gutter: the line numbers a tool put before a paste's lines come off, and nothing else does."""

from __future__ import annotations

import pytest

from breakglass.logs import gutter


@pytest.mark.parametrize("numbered, plain", [
    (b"     1\tE0412 a\n     2\t\n     3\tI0412 b\n", b"E0412 a\n\nI0412 b\n"),  # cat -n numbers blank lines
    (b"1012:E0412 a\n1013-I0412 b\n1052:W0412 c\n", b"E0412 a\nI0412 b\nW0412 c\n"),  # grep -n, with context
    (b"1012:2026-05-01T10:00:00Z a\n1052:2026-05-01T10:00:01Z b\n",
     b"2026-05-01T10:00:00Z a\n2026-05-01T10:00:01Z b\n"),
    (b"  1 \xe2\x94\x82 a\n  2 \xe2\x94\x82 b\n", b"a\nb\n"),
    (b"1 | a\n2 | b\n", b"a\nb\n"),
    (b"   7  Error from server: a long line\nthe terminal's wrap of it\n   8  E0412 b\n",
     b"Error from server: a long line\nthe terminal's wrap of it\nE0412 b\n"),
])
def test_a_gutter_comes_off(numbered, plain):
    assert gutter.strip(numbered) == plain


@pytest.mark.parametrize("text", [
    b"2025-12-31 10:00:00 a\n2026-01-01 10:00:00 b\n",  # a date: '-' then a digit
    b"10:00:01 a\n11:00:02 b\n",  # a time: ':' then a time's digits
    b"1. apply\n2. wait\n",  # a numbered list
    b"5 a\n3 b\n",  # numbers that do not increase
    b"E0412 a\n1 b\n2 c\n",  # the first line has none
    b"1 a\n",  # one line
    b"1 a\nb\nc\n2 d\ne\nf\n",  # fewer than half the lines numbered
    b"",
])
def test_text_without_a_gutter_is_left_as_it_is(text):
    assert gutter.strip(text) is text
