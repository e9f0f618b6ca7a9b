"""Property-based: random and mutated lines never crash anything, and wrapping never loses the webhook."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakglass.diagnose import signatures
from breakglass.core.errors import BadInput
from breakglass.logs import formats
from breakglass.logs.scanner import Scanner
from tests import logbuild as lb
from tests.conftest import diagnose_text

REAL = [
    lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "dial tcp 10.96.0.50:443: connect: connection refused")),
    lb.json_line(lb.fail_open("validation.gatekeeper.sh", "Address is not allowed")),
    lb.cri(lb.klog('PostStartHook "scheduling/bootstrap-system-priority-classes" failed: x', level="F")),
    lb.structured("Unhandled Error", lb.call_error("h.x", "EOF")),
    "[-]poststarthook/start-kubernetes-service-cidr-controller failed: reason withheld",
]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.text(max_size=600))
def test_random_text_never_crashes(text):
    rec = formats.parse_record(text, "f", 1, 1, 2026)
    signatures.classify(rec)


@SETTINGS
@given(st.binary(max_size=4000))
def test_random_bytes_through_the_whole_pipeline(data):
    try:
        diagnose_text(data)
    except BadInput as e:  # the documented answer to binary or gzip junk; anything else is a bug
        assert "\n" not in str(e) and ("binary data" in str(e) or "gzip" in str(e))


@SETTINGS
@given(st.sampled_from(REAL), st.data())
def test_mutated_real_lines_never_crash(line, data):
    ops = data.draw(st.lists(st.tuples(st.integers(0, len(line)), st.integers(0, 20),
                                       st.sampled_from(['"', "\\", "\n", " ", "\u201c", "\x00", "{", ":", ""])),
                             max_size=6))
    for pos, cut, ins in ops:
        line = line[:pos] + ins + line[pos + cut:]
    try:
        diagnose_text(line + "\n")
    except BadInput as e:
        assert "binary data" in str(e)


@SETTINGS
@given(st.integers(60, 200), st.sampled_from(["hard", "quoted", "curly"]))
def test_wrapping_at_any_width_keeps_webhook_and_cause(width, style):
    line = lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "dial tcp 10.96.0.50:443: connect: connection refused"))
    if style == "curly":
        line = lb.curly_quotes(line)
    text = lb.hard_wrap(line, width)
    if style == "quoted":
        text = lb.ticket_quote(text)
    [f] = diagnose_text(text + "\n").findings
    assert f.webhook == "validate.kyverno.svc-fail" and f.cause == "connection refused"


@SETTINGS
@given(st.lists(st.sampled_from(REAL + ["noise line", "", "I0224 x.go:1] ok"]), max_size=40),
       st.integers(1, 300))
def test_engines_agree_on_any_stream(lines, chunk):
    data = ("\n".join(lines) + "\n").encode()
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    a = [(r.line, r.text) for r in Scanner(signatures.ANCHORS, "python").records(chunks)]
    b = [(r.line, r.text) for r in Scanner(signatures.ANCHORS, "auto").records([data])]
    assert a == b
