"""Every wrapper of §1.5 peels off to the same message."""

from __future__ import annotations

import pytest

from breakglass.logs import formats
from tests import logbuild as lb

MSG = lb.fail_closed("validate.kyverno.svc-fail", "dial tcp 10.96.0.50:443: connect: connection refused")


@pytest.mark.parametrize("wrapper", sorted(set(lb.WRAPPERS) - {"bare"}))
def test_every_wrapper_yields_the_plain_message(wrapper):
    text = lb.WRAPPERS[wrapper](MSG)
    lines = text.split("\n")
    rec = formats.parse_record(text, "f", 1, len(lines), 2026)
    assert rec.message == MSG
    if wrapper not in ("json", "json-in-cri"):
        assert rec.level == "W"
        assert rec.caller == "dispatcher.go:217"
    else:
        assert rec.caller == "validating/dispatcher.go:217"


def test_klog_without_year_takes_the_given_year():
    rec = formats.parse_record(lb.klog("x"), "f", 1, 1, 2025)
    assert not rec.year_known
    assert rec.ts == pytest.approx(1740411170.984784)  # 2025-02-24T15:32:50.984784Z


def test_cri_timestamp_wins_and_carries_the_year():
    rec = formats.parse_record(lb.cri(lb.klog("x"), ts="2024-02-24T15:32:51.5Z"), "f", 1, 1, 2026)
    assert rec.year_known
    assert rec.ts == pytest.approx(1708788771.5)
    assert rec.fmt == "cri+klog"


def test_json_ts_in_milliseconds_and_structured_fields_kept():
    rec = formats.parse_record(lb.json_line("Unhandled Error", err='failed calling webhook "a.b": EOF',
                                            ts=1692403836935.4392), "f", 1, 1, 2026)
    assert rec.ts == pytest.approx(1692403836.9354392)
    assert 'err=failed calling webhook "a.b": EOF' in rec.message


def test_structured_klog_unescapes_inner_quotes():
    rec = formats.parse_record(lb.structured("Unhandled Error", lb.call_error("h.x", "EOF")), "f", 1, 1, 2026)
    assert 'failed calling webhook "h.x": failed to call webhook: Post "' in rec.message
    assert rec.level == "E"


def test_cri_partial_lines_join_without_separator():
    line = lb.klog(MSG)
    text = lb.cri(line[:100], "P") + "\n" + lb.cri(line[100:], "F")
    rec = formats.parse_record(text, "f", 1, 2, 2026)
    assert rec.message == MSG


def test_soft_wrapped_lines_join_with_a_space():
    text = "failed calling webhook \"a.b\": failed to call webhook: Post \"https://x.y.svc:443/p\":\ndial tcp 1.2.3.4:443: connect: connection refused"
    rec = formats.parse_record(text, "f", 1, 2, 2026)
    assert '"https://x.y.svc:443/p": dial tcp' in rec.message


def test_audit_event_becomes_a_message_naming_the_object():
    import json
    ev = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "verb": "create", "stage": "ResponseComplete",
          "objectRef": {"resource": "servicecidrs", "name": "kubernetes", "apiGroup": "networking.k8s.io"},
          "user": {"username": "system:apiserver"},
          "responseStatus": {"code": 500, "message": "Internal error occurred: " + lb.call_error("h.x", "EOF")},
          "stageTimestamp": "2026-02-24T15:32:50.984784Z"}
    rec = formats.parse_record(json.dumps(ev), "a", 1, 1, 2026)
    assert rec.fmt == "audit"
    assert 'servicecidrs.networking.k8s.io "kubernetes"' in rec.message
    assert rec.year_known


@pytest.mark.parametrize("text,expect", [
    ('a \\\\\\"b\\\\\\" c', 'a "b" c'),  # escaped twice
    ("\u201cx\u201d", '"x"'),
    ('""x""', '"x"'),
])
def test_normalise_quote_variants(text, expect):
    assert formats.normalise(text) == expect


@pytest.mark.parametrize("text", [
    "2026-02-24T15:32:50.984784123Z " + lb.klog(MSG),  # kubectl logs --timestamps
    '{"textPayload": "' + lb.klog(MSG).replace('"', '\\"') + '", "timestamp": "2026-02-24T15:32:50.984784Z"}',
    '{"properties": {"log": "' + lb.klog(MSG).replace('"', '\\"') + '"}, "time": "2026-02-24T15:32:50Z"}',
    '{"message": "' + lb.klog(MSG).replace('"', '\\"') + '", "timestamp": "2026-02-24T15:32:50Z"}',
])
def test_timestamped_and_cloud_exports(text):
    rec = formats.parse_record(text, "f", 1, 1, 2026)
    assert rec.message == MSG and rec.level == "W"
    if "properties" not in text and "message" not in text[:12]:
        assert rec.year_known
