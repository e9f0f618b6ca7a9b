"""Transient failures while planning, applying or verifying: retried with backoff up to a deadline.

A deadlocked kube-apiserver exits every minute or so and the kubelet starts it again; a confirmation typed in that
gap met "connection refused" and the whole recovery ended. What is retried, and why it is safe:
- reads (planning, the backup read, verification): any failure to reach the target (``Unreachable``);
- a write (``apply``): only a refused connection, where the request never reached the server, so it cannot have
  been applied; a reset or a timeout after sending is not retried (the write may have happened: the journal and
  compare-before-write decide, not a guess).
"""

from __future__ import annotations

import time
from typing import Callable

from breakglass.core.errors import Unreachable

# what a refused connection looks like in the messages of every access module (kubeapi, etcd, ssh, talosctl)
_REFUSED = ("connection refused", "refused", "cannot connect", "unavailable", "failed to connect")


# failures that waiting does not mend: credentials, certificates, a kubeconfig without the context, a missing client
_FINAL = ("401", "403", "unauthorized", "forbidden", "kubeconfig", "certificate", "not installed",
          "permission denied", "authentication", "host key")


def transient(err: BaseException, writing: bool = False) -> bool:
    if not isinstance(err, Unreachable):
        return False
    text = str(err).lower()
    if any(w in text for w in _FINAL):
        return False
    return not writing or any(w in text for w in _REFUSED)


def call(fn: Callable, deadline: float, on_wait: Callable[[str], None] | None = None, writing: bool = False,
         what: str = "the target"):
    """``fn()``, again after each transient failure until ``deadline`` (time.monotonic()); then the last error."""
    delay = 0.5
    while True:
        try:
            return fn()
        except Unreachable as e:
            left = deadline - time.monotonic()
            if not transient(e, writing) or left <= 0:
                raise
            if on_wait:
                # the time and the reason first: a spinner line is cut at the terminal's width, and a long
                # target name ahead of them left only "89s left…" at 80 columns
                on_wait(f"{int(left)}s left: no answer: {e} ({what})")
            time.sleep(min(delay, max(0.05, left)))
            delay = min(delay * 2, 5.0)


class Retrying:
    """A remedy whose backup, apply and verify are retried as above; everything else is the remedy's own."""

    def __init__(self, remedy, seconds: float, on_wait: Callable[[str], None] | None = None):
        self._remedy = remedy
        self._seconds = seconds
        self._on_wait = on_wait

    def __getattr__(self, name):
        return getattr(self._remedy, name)

    def _deadline(self) -> float:
        return time.monotonic() + self._seconds

    def backup(self, step, run):
        return call(lambda: self._remedy.backup(step, run), self._deadline(), self._on_wait, what=step.target)

    def apply(self, step, backup):
        return call(lambda: self._remedy.apply(step, backup), self._deadline(), self._on_wait, writing=True,
                    what=step.target)

    def verify(self, step):
        return call(lambda: self._remedy.verify(step), self._deadline(), self._on_wait, what=step.target)
