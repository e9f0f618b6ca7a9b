"""Issue 47 §6: a wait for /readyz counts the restarts it sees (answering, then not, then answering again), so recover
can say how many starts a way out took. Probes are functions here; the real apiserver's restarts are in the
sandbox tests."""

from __future__ import annotations

from breakglass.access import readyz
from breakglass.core import outcome


def _probe(script):
    seq = iter(script)

    def probe():
        reachable, ready = next(seq)
        return readyz.Readiness("https://127.0.0.1:6443/readyz", reachable, ready, 200 if ready else None)
    return probe


def test_a_wait_counts_each_gap_between_answers_as_a_restart():
    # answering (not ready), gone, answering, gone, gone, ready
    script = [(True, False), (False, False), (True, False), (False, False), (False, False), (True, True)]
    [state] = readyz.wait_for([_probe(script)], timeout=60, interval=0)
    assert state.ready is True and state.restarts == 2


def test_not_answering_from_the_start_is_no_restart_and_the_outcome_says_the_count():
    [state] = readyz.wait_for([_probe([(False, False), (True, True)])], timeout=60, interval=0)
    assert state.restarts == 0
    ok, _ = outcome.readiness_lines({"checks": [{"url": state.url, "ready": True, "restarts": 3}]})
    assert ok == ["https://127.0.0.1:6443: /readyz ready after 3 restarts of the apiserver seen while waiting "
                  "(its port closed and opened again)"]
