"""Ctrl-C during the wait for the kubelet (or k3s) to restart kube-apiserver stops the wait, not the run: the
change is made and journaled, and the step is 'applied, not verified' with what to check; a SIGTERM still ends
the run (issue 37 §5)."""

from __future__ import annotations

import pytest

from breakglass.ways import nodefile
from breakglass.ways.base import Unverified


class _Node:
    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        self.calls, self.interrupt = 0, interrupt

    def run(self, _script: str):
        self.calls += 1
        if self.calls == 2:  # Ctrl-C while the kubelet has not restarted it yet
            raise self.interrupt

        class R:
            out = b""

        return R()


def _wait(node):
    return nodefile.wait_until(node, "true", 60, None, "waiting", "check crictl ps", "done")


def test_ctrl_c_stops_the_wait_and_the_step_is_applied_not_verified(monkeypatch):
    monkeypatch.setattr(nodefile.time, "sleep", lambda _s: None)
    out = _wait(_Node(KeyboardInterrupt()))
    assert isinstance(out, Unverified) and "the wait was stopped (Ctrl-C); check crictl ps" in out


def test_a_sigterm_still_ends_the_run(monkeypatch):
    monkeypatch.setattr(nodefile.time, "sleep", lambda _s: None)
    with pytest.raises(KeyboardInterrupt):
        _wait(_Node(KeyboardInterrupt("signal 15")))
