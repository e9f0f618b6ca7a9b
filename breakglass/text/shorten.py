"""One rule for cutting a line short with an ellipsis, shared by the findings' prose and the terminal's titles."""

from __future__ import annotations

from typing import Callable


def at_word(cut: str, room: int, strip: str = "", cells: Callable[[str], int] = len) -> str:
    """``cut`` (a text already cut to ``room - 1`` cells) ended at its last whole word, with "…"; inside the last
    word instead when ending at a word would give up more than a third of ``room`` (one long name or URL: a
    spinner showed only "89s left…"). ``strip``: characters a cut line does not end on before the ellipsis."""
    word = cut.rsplit(" ", 1)[0]
    return (word if cells(word) * 3 >= room * 2 else cut).rstrip(strip) + "…"
