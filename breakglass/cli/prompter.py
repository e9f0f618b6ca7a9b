"""The terminal side of the wizard's questions: questionary, behind the Prompter interface of
``breakglass.present.prompts`` (the flows never import questionary)."""

from __future__ import annotations

from breakglass.present.prompts import SPIN, Choice, Validate, fit, no_choice, wrap, width


class QuestionaryPrompter:
    def __init__(self) -> None:
        import questionary  # noqa: PLC0415

        self.q = questionary
        self.banner = ""

    def _m(self, message: str) -> str:
        return f"[{self.banner}] {message}" if self.banner else message

    def _ask(self, question):
        answer = question.ask()
        if answer is None:  # questionary returns None on Ctrl-C
            raise KeyboardInterrupt
        return answer

    def select(self, message: str, choices: list[Choice]) -> str:
        if not any(c.disabled is None for c in choices):
            # questionary cannot point at nothing (it fails inside prompt_toolkit): callers offer another way
            raise no_choice(message, choices)
        cols = width()
        qs = [self.q.Choice(fit(c.title, cols, 4 + len(f" ({c.disabled})") if c.disabled else 4),
                            value=c.value, disabled=fit(c.disabled, 40, 0) if c.disabled else None,
                            # questionary prints "  Description: " before it, and cuts what passes the edge
                            description=wrap(c.description, cols - 17) if c.description else None)
              for c in choices]
        default = next(q for q, c in zip(qs, choices) if c.disabled is None)
        return self._ask(self.q.select(self._m(message), choices=qs, default=default))

    def text(self, message: str, default: str = "", validate: Validate = None) -> str:
        check = (lambda v: (validate(v) or True)) if validate else None
        return self._ask(self.q.text(self._m(message), default=default, validate=check))

    def confirm(self, message: str, default: bool = False) -> bool:
        return self._ask(self.q.confirm(self._m(message), default=default))

    _spin = 0

    def say(self, text: str = "") -> None:
        if self._spin:
            print("\r\033[K", end="")
            self._spin = 0
        print(wrap(f"[{self.banner}] {text}" if self.banner and text else text), flush=True)

    def progress(self, text: str) -> None:
        self._spin += 1
        line = fit(f"{SPIN[self._spin % 4]} {text}", reserve=1)
        print(f"\r\033[K{line}", end="", flush=True)
