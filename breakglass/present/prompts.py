"""Questions to the engineer, behind one small interface, so flows run without a terminal in tests.

``breakglass.cli.prompter.QuestionaryPrompter`` asks on the terminal (questionary lives in the front end); ``ScriptedPrompter``
answers from a list and keeps a transcript. Cancelling a prompt (Ctrl-C) raises KeyboardInterrupt.
A text question may carry a ``validate`` function (None when the answer is good, else why not): the
question is asked again with the reason, never ended. ``banner`` (e.g. "REHEARSAL") prefixes every
question and message once set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from breakglass.core.errors import BadInput
from breakglass.core.safetext import printable
from breakglass.present import layout
from breakglass.text import shorten

Validate = Optional[Callable[[str], Optional[str]]]


@dataclass
class Choice:
    value: str
    title: str  # short: it must fit an 80-column line with the pointer
    disabled: str | None = None  # why it cannot be chosen (short), shown greyed out
    description: str | None = None  # shown below the list while the choice is highlighted: the cost, the reason


def width() -> int:
    """The terminal's columns ($COLUMNS, the terminal, else 100): ``layout.width``."""
    return layout.width()


def wrap(text: str, columns: int | None = None) -> str:
    """Prose wrapped at word boundaries to the terminal; a line that starts like a diff, a command or a
    code block is left whole (the terminal folds it; splitting it would change what it says). Only "\n"
    breaks a line: every other control or format character (a name's ESC, U+202E, U+2028) is escaped."""
    columns = columns or width()
    out = []
    lines = text.split("\n")
    if len(lines) > 1 and not lines[-1]:  # a final newline ends the last line, as str.splitlines reads it
        lines.pop()
    for line in lines:
        line = printable(line)
        stripped = line.lstrip()
        if layout.cells(line) <= columns or stripped[:1] in ("+", "-", "@", "$", "#") or "  $ " in line:
            out.append(line)
            continue
        indent = line[:len(line) - len(stripped)]
        hang = indent + ("  " if indent or stripped.startswith(("[", "*")) else "")
        out += layout.fold(stripped, columns, indent, hang)
    return "\n".join(out)


def fit(title: str, columns: int | None = None, reserve: int = 6) -> str:
    """A choice title (escaped) cut to one line (at a word, with an ellipsis) so the list never wraps."""
    title = printable(title)
    room = (columns or width()) - reserve
    if layout.cells(title) <= room:
        return title
    cut = title[:room - 1]
    while layout.cells(cut) > room - 1:  # wide characters take two columns
        cut = cut[:-1]
    return shorten.at_word(cut, room, ",;:", layout.cells)


class Prompter(Protocol):
    banner: str

    def select(self, message: str, choices: list[Choice]) -> str: ...

    def text(self, message: str, default: str = "", validate: Validate = None) -> str: ...

    def confirm(self, message: str, default: bool = False) -> bool: ...

    def say(self, text: str = "") -> None: ...

    def progress(self, text: str) -> None:
        """A status line that replaces the previous one (a spinner while waiting); say() ends it."""


SPIN = "|/-\\"


def no_choice(message: str, choices: list[Choice]) -> BadInput:
    reasons = "; ".join(f"{c.value}: {c.disabled}" for c in choices)
    return BadInput(f"{message} none can be chosen ({reasons})")


@dataclass
class ScriptedPrompter:
    """Answers in order; a select answer may be the value or the index of an enabled choice. A text answer
    that fails its validation is recorded with the reason, and the next answer is taken, as a terminal asks
    again."""

    answers: list
    transcript: list[str] = field(default_factory=list)
    banner: str = ""

    def _next(self, message: str):
        self.transcript.append(f"? [{self.banner}] {message}" if self.banner else f"? {message}")
        if not self.answers:
            raise AssertionError(f"no scripted answer for: {message}")
        return self.answers.pop(0)

    def select(self, message: str, choices: list[Choice]) -> str:
        if not any(c.disabled is None for c in choices):
            raise no_choice(message, choices)
        self.transcript += [f"  - {c.title}" + (f" ({c.disabled})" if c.disabled else "") for c in choices]
        answer = self._next(message)
        enabled = [c for c in choices if not c.disabled]
        if isinstance(answer, int):
            return enabled[answer].value
        if answer not in [c.value for c in enabled]:
            raise AssertionError(f"{answer!r} is not an enabled choice of {message!r}")
        return answer

    def text(self, message: str, default: str = "", validate: Validate = None) -> str:
        while True:
            answer = self._next(message)
            value = default if answer is None else str(answer)
            why = validate(value) if validate else None
            if not why:
                return value
            self.transcript.append(f"! {why}")

    def confirm(self, message: str, default: bool = False) -> bool:
        return bool(self._next(message))

    def say(self, text: str = "") -> None:
        self.transcript.append(f"[{self.banner}] {text}" if self.banner and text else text)

    def progress(self, text: str) -> None:
        self.transcript.append(f"~ {text}")
