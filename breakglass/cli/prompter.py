"""The terminal side of the wizard's questions: questionary, behind the Prompter interface of
``breakglass.present.prompts`` (the flows never import questionary).

Two things questionary does not do at 80 columns, done here:
- a refused answer's reason is printed whole above the question, wrapped, while the question stays open
  with what was typed: questionary shows it only in a one-line bottom toolbar that cuts it at the
  terminal's edge, which is where the reason says how to back out;
- an answered question is echoed as "? question answer" on one line, which prompt_toolkit breaks at the
  terminal's edge, inside a word too: a choice that would not fit is put on the line below the question,
  and a typed answer that did not fit is drawn again there, folded at its words.
Everything shown is escaped first (``safetext.printable``): titles and questions carry names read from
the cluster and the logs."""

from __future__ import annotations

from breakglass.core.safetext import printable
from breakglass.present import layout
from breakglass.present.layout import cells, fold
from breakglass.present.prompts import SPIN, Choice, Validate, fit, no_choice, wrap, width

QMARK = "? "  # questionary's question mark and the space after it


def below(message: str, answer_cells: int, columns: int) -> str:
    """``message``, or ``message`` with the answer moved to the next line when "? message answer" would not
    fit in ``columns``: prompt_toolkit shows what follows the last newline of a question on the answer's
    line, and the rest above it."""
    if cells(QMARK + message + " ") + answer_cells >= columns:
        return message + "\n "
    return message


class QuestionaryPrompter:
    def __init__(self) -> None:
        import questionary  # noqa: PLC0415

        self.q = questionary
        self.banner = ""

    def _m(self, message: str) -> str:
        message = printable(message)
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
        longest = max(cells(q.title) for q, c in zip(qs, choices) if c.disabled is None)  # the echoed answer
        return self._ask(self.q.select(below(self._m(message), longest, cols), choices=qs, default=default))

    def text(self, message: str, default: str = "", validate: Validate = None) -> str:
        """Asked until ``validate`` takes the answer. Each refusal's reason is printed whole above the question,
        which stays open with what was typed (questionary's one-line toolbar shows it too, cut to fit): the
        same prompt, so nothing typed after Enter is lost between two prompts."""
        shown = self._m(message)
        cols = width()

        def check(value: str):
            why = validate(value)
            if not why:
                return True
            from prompt_toolkit.application import run_in_terminal  # noqa: PLC0415

            run_in_terminal(lambda: print(wrap(f"  ! {why}", cols), flush=True))  # above the open prompt
            return fit(why, cols, 1)

        # validated on Enter only: a reason printed at every keystroke would bury the question
        answer = self._ask(self.q.text(shown, default=default, validate=check if validate else None,
                                       validate_while_typing=False))
        self._echo_at_words(shown, answer)
        return answer

    def _echo_at_words(self, shown: str, answer: str) -> None:
        """prompt_toolkit leaves "? question answer" on the screen, broken at the terminal's edge wherever
        that falls, inside a word too: when it did not fit, draw it again with the answer under the question,
        folded at its words. prompt_toolkit ends the answered question with the cursor on the line below it,
        and its line holds one more cell (where the cursor could be), so it took this many rows."""
        import os  # noqa: PLC0415
        import sys  # noqa: PLC0415

        echo = f"{QMARK}{shown} {answer}"
        try:
            cols = os.get_terminal_size(sys.stdout.fileno()).columns  # what prompt_toolkit wrapped at
        except (AttributeError, OSError, ValueError):
            return
        if "\n" in echo or cols <= 0 or cells(echo) <= cols:
            return
        rows = -(-(cells(echo) + 1) // cols)
        from prompt_toolkit import print_formatted_text  # noqa: PLC0415
        from prompt_toolkit.formatted_text import FormattedText  # noqa: PLC0415
        from questionary.styles import merge_styles_default  # noqa: PLC0415

        parts = [("class:qmark", QMARK.rstrip()), ("class:question", f" {shown}")]
        for line in fold(answer, width(), "  "):
            parts += [("", "\n"), ("class:answer", line)]
        print(f"\x1b[{rows}A\r\x1b[J", end="", flush=True)  # up to the echo's first row, and erase from there
        print_formatted_text(FormattedText(parts), style=merge_styles_default([None]))

    def confirm(self, message: str, default: bool = False) -> bool:
        # y or n, then Enter: answered on the key alone, the Enter typed after it would answer the next question
        # (after "Revert now? y" it answered "Type re-arm" before it could be read)
        return self._ask(self.q.confirm(below(self._m(message), len("Yes"), width()), default=default,
                                        auto_enter=False))

    _spin = 0

    def say(self, text: str = "") -> None:
        if self._spin:
            print("\r\033[K", end="")
            self._spin = 0
            layout.open_line = False
        print(wrap(f"[{self.banner}] {text}" if self.banner and text else text), flush=True)

    def progress(self, text: str) -> None:
        self._spin += 1
        line = fit(f"{SPIN[self._spin % 4]} {text}", reserve=1)
        print(f"\r\033[K{line}", end="", flush=True)
        layout.open_line = True
