from __future__ import annotations

from dataclasses import dataclass

# The most of one line any reader holds (README: "an endless line is cut at 4 MiB"). No apiserver record or audit
# event is near it; a longer line is a hostile or broken writer, and what lies past the cut is not read (each
# reader reports the lines it cut, by number or offset), so memory and time stay those of a 4 MiB line.
MAX_LINE = 4 << 20


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
    user: str | None = None  # who made the request, where the line says (an audit event's user.username)

    @property
    def location(self) -> str:
        if self.end_line != self.line:
            return f"{self.source}:{self.line}-{self.end_line}"
        return f"{self.source}:{self.line}"
