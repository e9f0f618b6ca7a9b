"""After a flag revert the apiserver restarts, and owners restart with it (the real Kyverno exits when its leader
lease lapses across the restart: tests/test_engine_kyverno_seed.py). The canary is sent again only while its
failures are webhooks the guard saw answering before the revert; any other failure is reported at once."""

from __future__ import annotations

from breakglass.flows import rearm_check
from breakglass.webhooks import canary


def _summary(*failed: str) -> canary.Summary:
    rs = [canary.Result(w, "validating/cfg", canary.FAILED, "the apiserver's call to it failed") for w in failed]
    return canary.Summary(rs or [canary.Result("a.example", "validating/cfg", canary.PASSED, "admitted")])


def _sent(monkeypatch, answers: list[canary.Summary]) -> list[int]:
    calls = []

    def run(api, configs):
        calls.append(1)
        return answers[min(len(calls), len(answers)) - 1]

    monkeypatch.setattr(canary, "run", run)
    monkeypatch.setattr(rearm_check, "SETTLE_STEP", 0.0)
    return calls


def test_a_backend_seen_answering_before_is_asked_again_until_it_is_back(monkeypatch):
    calls = _sent(monkeypatch, [_summary("a.example"), _summary()])
    summary, _, first = rearm_check._settle(None, [], _summary("a.example"), frozenset({"a.example"}))
    assert summary.ok and first == ["a.example"] and len(calls) == 2


def test_a_backend_the_guard_did_not_see_answering_fails_at_once(monkeypatch):
    calls = _sent(monkeypatch, [_summary()])
    summary, _, first = rearm_check._settle(None, [], _summary("a.example"), frozenset())
    assert not summary.ok and first == [] and calls == []
    # one failure among them that was not seen answering: no retry either
    summary, _, first = rearm_check._settle(None, [], _summary("a.example", "b.example"), frozenset({"a.example"}))
    assert not summary.ok and first == [] and calls == []


def test_it_gives_up_after_the_settle_window(monkeypatch):
    calls = _sent(monkeypatch, [_summary("a.example")])
    monkeypatch.setattr(rearm_check, "SETTLE_AFTER_RESTART", 0.0)
    summary, _, first = rearm_check._settle(None, [], _summary("a.example"), frozenset({"a.example"}))
    assert not summary.ok and first == ["a.example"] and calls == []
