"""Questions to the engineer, behind one small interface, so flows run without a terminal in tests.

``QuestionaryPrompter`` asks on the terminal (questionary, imported only here); ``ScriptedPrompter``
answers from a list and keeps a transcript. Cancelling a prompt (Ctrl-C) raises KeyboardInterrupt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Choice:
    value: str
    title: str
    disabled: str | None = None  # why it cannot be chosen: shown greyed out


class Prompter(Protocol):
    def select(self, message: str, choices: list[Choice]) -> str: ...

    def text(self, message: str, default: str = "") -> str: ...

    def confirm(self, message: str, default: bool = False) -> bool: ...

    def say(self, text: str = "") -> None: ...

    def progress(self, text: str) -> None:
        """A status line that replaces the previous one (a spinner while waiting); say() ends it."""


SPIN = "|/-\\"


class QuestionaryPrompter:
    def __init__(self) -> None:
        import questionary  # noqa: PLC0415

        self.q = questionary

    def _ask(self, question):
        answer = question.ask()
        if answer is None:  # questionary returns None on Ctrl-C
            raise KeyboardInterrupt
        return answer

    def select(self, message: str, choices: list[Choice]) -> str:
        qs = [self.q.Choice(c.title, value=c.value, disabled=c.disabled) for c in choices]
        return self._ask(self.q.select(message, choices=qs))

    def text(self, message: str, default: str = "") -> str:
        return self._ask(self.q.text(message, default=default))

    def confirm(self, message: str, default: bool = False) -> bool:
        return self._ask(self.q.confirm(message, default=default))

    _spin = 0

    def say(self, text: str = "") -> None:
        if self._spin:
            print("\r\033[K", end="")
            self._spin = 0
        print(text, flush=True)

    def progress(self, text: str) -> None:
        self._spin += 1
        print(f"\r\033[K{SPIN[self._spin % 4]} {text}", end="", flush=True)


@dataclass
class ScriptedPrompter:
    """Answers in order; a select answer may be the value or the index of an enabled choice."""

    answers: list
    transcript: list[str] = field(default_factory=list)

    def _next(self, message: str):
        self.transcript.append(f"? {message}")
        if not self.answers:
            raise AssertionError(f"no scripted answer for: {message}")
        return self.answers.pop(0)

    def select(self, message: str, choices: list[Choice]) -> str:
        self.transcript += [f"  - {c.title}" + (f" ({c.disabled})" if c.disabled else "") for c in choices]
        answer = self._next(message)
        enabled = [c for c in choices if not c.disabled]
        if isinstance(answer, int):
            return enabled[answer].value
        if answer not in [c.value for c in enabled]:
            raise AssertionError(f"{answer!r} is not an enabled choice of {message!r}")
        return answer

    def text(self, message: str, default: str = "") -> str:
        answer = self._next(message)
        return default if answer is None else str(answer)

    def confirm(self, message: str, default: bool = False) -> bool:
        return bool(self._next(message))

    def say(self, text: str = "") -> None:
        self.transcript.append(text)

    def progress(self, text: str) -> None:
        self.transcript.append(f"~ {text}")
