from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class LogRecord:
    """One logical log line, after its wrappers (CRI, journald, JSON, ticket quoting) are peeled off.

    ``message`` is normalised for matching (quote escaping folded, wrapped lines joined);
    ``raw`` is what the file said, for evidence.
    """

    source: str
    line: int
    end_line: int
    raw: str
    message: str
    level: str | None = None  # I, W, E, F when the line says so
    ts: float | None = None  # seconds since the epoch; see year_known
    year_known: bool = False  # klog headers carry no year; one is assumed when no wrapper gives it
    caller: str | None = None  # "dispatcher.go:217", or "mutating/dispatcher.go:180" in JSON logs
    node: str | None = None  # talosctl / kubectl / journald host prefix
    fmt: str = "text"

    @property
    def location(self) -> str:
        if self.end_line != self.line:
            return f"{self.source}:{self.line}-{self.end_line}"
        return f"{self.source}:{self.line}"
