"""The two per-byte shortcuts of the scan: the compiled newline count and the record gate.

Both must give the answers of the slow, obvious code they replace: ``bytes.count`` for newlines, and for the gate,
every text the signatures' phrases (words joined by ``\\s*``, any case) would match must pass.
"""

from __future__ import annotations

import importlib
import re
import shutil
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakglass.diagnose import signatures
from breakglass.logs import newlines


# --- newlines -------------------------------------------------------------------------------------------------------

def test_the_compiled_counter_is_built_where_a_compiler_is():
    # make test installs with a C compiler present: a silently failed build would leave the slow path in use
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the fallback is in use, as documented")
    assert newlines.COMPILED, "breakglass.logs._newlines was not built (pip install -e . should build it)"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000).map(lambda b: b.replace(b"a", b"\n")),
       start=st.integers(-2500, 2500), end=st.one_of(st.none(), st.integers(-2500, 2500)))
def test_counts_like_bytes_count(data, start, end):
    want = data.count(b"\n", start, end) if end is not None else data.count(b"\n", start)
    assert newlines.count(data, start, end) == want
    assert newlines.count(bytearray(data), start, end) == want
    assert newlines.count(memoryview(data), start, end) == want
    assert newlines._fallback(data, start, end) == want


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 255 * 16 - 1, 255 * 16, 255 * 16 + 1, 70000])
def test_block_edges(size):
    # the compiled loop sums 8-bit counters every 255 blocks of 16 bytes: all newlines stress that
    data = b"\n" * size
    assert newlines.count(data) == size
    assert newlines.count(data, 3, size - 3) == max(0, size - 6)
    mixed = bytes((i * 7) % 256 for i in range(size))
    assert newlines.count(mixed) == mixed.count(b"\n")


def test_refuses_what_is_not_a_buffer():
    with pytest.raises(TypeError):
        newlines.count("text\n")


def test_the_fallback_is_used_without_the_extension(monkeypatch):
    monkeypatch.setitem(sys.modules, "breakglass.logs._newlines", None)  # as if it was never built
    fresh = importlib.reload(newlines)
    try:
        assert not fresh.COMPILED
        assert fresh.count(b"a\nb\n\n", 1) == 3
    finally:
        monkeypatch.delitem(sys.modules, "breakglass.logs._newlines")
        importlib.reload(newlines)


# --- the record gate ------------------------------------------------------------------------------------------------

_SPACES = st.text(alphabet=" \t\n\r\f\v", max_size=3)


@st.composite
def _phrase_as_pasted(draw):
    """A gate phrase as a log or a paste may hold it: any case, words split by any whitespace or none."""
    words = draw(st.sampled_from(signatures.GATE_PHRASES)).split(" ")
    text = words[0]
    for w in words[1:]:
        text += draw(_SPACES) + w
    text = "".join(c.upper() if draw(st.booleans()) else c for c in text)
    return draw(st.text(max_size=40)) + text + draw(st.text(max_size=40))


def _slow_gate(text: bytes) -> bool:
    """The gate written as the regex it stands for: each phrase's words joined by \\s*, any case."""
    alternatives = "|".join(r"\s*".join(re.escape(w) for w in p.split(" ")) for p in signatures.GATE_PHRASES)
    return re.search(("(?i:" + alternatives + ")").encode(), text) is not None


@settings(max_examples=400, deadline=None)
@given(_phrase_as_pasted())
def test_the_gate_lets_every_phrase_through_however_it_was_wrapped(text):
    raw = text.encode("utf-8", "surrogatepass")
    assert _slow_gate(raw)
    assert signatures.record_gate(raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(alphabet="failngcoedbyrqustwhk. \n", max_size=120).map(str.encode))
def test_the_gate_passes_at_least_what_the_regex_passes(raw):
    if _slow_gate(raw):
        assert signatures.record_gate(raw)


def test_the_gate_stops_lines_that_only_mention_a_webhook():
    line = (b'I1130 00:00:01.000 1 httplog.go:132] "HTTP" verb="GET" '
            b'URI="/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?limit=500" resp=200')
    assert not signatures.record_gate(line)
    assert signatures.record_gate(b'E1130 dispatcher.go:217] Failed calling webhook, failing\n  closed x: y')


# --- the words in front of each signature's regex --------------------------------------------------------------------

def _guarded():
    found = {name: g for name, g in vars(signatures).items() if isinstance(g, signatures.Guarded)}
    found.update({f"_BOOT[{i}]": g for i, (g, _, _) in enumerate(signatures._BOOT)})
    return found


def test_every_signature_that_classify_searches_first_is_guarded():
    names = set(_guarded())
    assert {"FAIL_MODE", "CALL_FAILED", "DENIED", "REJECTED", "LEADER", "_OBJ_IN_TEXT", "_BOOT[12]"} <= names
    assert all(g.words for g in _guarded().values())


@pytest.mark.parametrize("name", sorted(_guarded()))
def test_every_match_holds_one_of_the_words(name):
    g = _guarded()[name]

    @settings(max_examples=150, deadline=None)
    @given(st.from_regex(g.regex, fullmatch=False))
    def check(text):
        assert g.regex.search(text)
        assert any(w in text for w in g.words), (name, text)
        assert g.search(text) is not None

    check()


def test_a_line_without_the_words_is_not_searched():
    class Boom:
        def search(self, *_):
            raise AssertionError("searched")

    g = signatures.Guarded(Boom(), "needle")
    assert g.search("a haystack") is None and list(g.finditer("a haystack")) == []
