"""Text that fits the terminal: its width, prose folded at word boundaries, tables folded to fit.

Words are never split: a line breaks at white space (and, inside a table cell, after a comma or a
semicolon), and a word longer than the line stays whole on a line of its own, for the terminal to fold.
Diffs, commands and code are not prose: callers keep them whole (splitting one would change what it says).
Everything here escapes untrusted text first (``breakglass.core.safetext``), so widths are of what is shown.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata

from breakglass.core.safetext import printable

# A progress or spinner line written without its newline, still on the terminal's last line: the next message
# (an error after Ctrl-C) must begin on a line of its own, not after it (`^Cbreakglass: er|ror:`)
open_line = False

PIPED = 100  # stdout is a file or a pipe: the same text every time, whatever terminal started it
NARROWEST, WIDEST = 40, 200  # narrower is unusable; prose wider than this is hard to read


def width(stream=None) -> int:
    """Columns to fit: $COLUMNS when set (as shutil reads it), else the terminal ``stream`` (stdout) is on,
    else ``PIPED``."""
    cols = 0
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit():
        cols = int(env)
    if cols <= 0:
        stream = sys.stdout if stream is None else stream
        try:
            cols = os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
        except (AttributeError, OSError, ValueError):  # no fileno (a test's buffer), closed, not a terminal
            cols = 0
    return max(NARROWEST, min(cols or PIPED, WIDEST))


def cells(text: str) -> int:
    """Terminal columns ``text`` takes: East Asian wide characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


_SPACE_OR_WORD = re.compile(r"\s+|\S+")
_AFTER_PUNCT = re.compile(r"(?<=[,;])(?=.)")


def _pieces(text: str, punct: bool) -> list[tuple[str, str]]:
    """(separator, piece) pairs: a line may break at a separator; a separator of "" (after a comma) joins."""
    out, sep = [], ""
    for tok in _SPACE_OR_WORD.findall(text):
        if tok.isspace():  # only U+0020 is left: printable() escaped every other kind of space
            sep = tok
            continue
        parts = _AFTER_PUNCT.split(tok) if punct else [tok]
        out.append((sep if out else "", parts[0]))
        out += [("", p) for p in parts[1:]]
        sep = ""
    return out


def _split_long(pieces: list[tuple[str, str]], room: int) -> list[tuple[str, str]]:
    """A path, key or URL wider than a whole line broken after a / (the last that fits), the rest on the next
    line after ``CONTINUED``: the terminal would break it anywhere (``…-webho`` / ``ok-cfg``). A word with no /
    (a name) stays whole, for the terminal to fold."""
    out = []
    for sep, piece in pieces:
        mark = ""
        while cells(mark + piece) > room:
            at = piece[:max(0, room - cells(mark))].rfind("/") + 1
            if at <= 0 or at >= len(piece):
                break
            out.append((sep, mark + piece[:at]))
            sep, mark, piece = " ", CONTINUED, piece[at:]
        out.append((sep, mark + piece))
    return out


def fold(text: str, columns: int, indent: str = "", hang: str | None = None, punct: bool = False) -> list[str]:
    """``text`` (escaped) in lines of at most ``columns``, the first after ``indent``, the rest after ``hang``
    (default: ``indent``); breaks at white space, and after , and ; with ``punct``. Never an empty list."""
    hang = indent if hang is None else hang
    lines: list[str] = []
    line, used, empty = indent, cells(indent), True
    for sep, piece in _split_long(_pieces(printable(text), punct), columns - cells(hang)):
        w = cells(piece)
        if empty:
            line, used, empty = line + piece, used + w, False
        elif used + cells(sep) + w <= columns:
            line, used = line + sep + piece, used + cells(sep) + w
        else:
            lines.append(line.rstrip())
            line, used = hang + piece, cells(hang) + w
    lines.append(line.rstrip())
    return lines


def pair(key: str, value: str, columns: int, indent: str = "", key_cells: int = 0, punct: bool = False) -> list[str]:
    """``key: value``, the key padded to ``key_cells``, the value folded under itself."""
    head = f"{indent}{key + ':':<{key_cells}}"
    if not head.endswith(" "):
        head += " "
    return fold(value, columns, head, " " * cells(head), punct)


def _cell_lines(text: str, w: int) -> list[str]:
    return fold(text, w, punct=True)


def _longest_piece(text: str) -> int:
    return max((cells(p) for _, p in _pieces(text, True)), default=0)


def table(headers: list[str], rows: list[list[str]], columns: int, gap: int = 2, indent: str = "") -> list[str]:
    """Rows under headers, in columns as kubectl prints them when they fit in ``columns``. When they do not,
    the widest columns get narrower and their cells fold inside them (at spaces, after commas), never
    inside a word; when even that cannot fit (a column's longest word is too wide), one block per row,
    a ``HEADER: value`` line per column and a blank line between rows, as kubectl describe reads."""
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in r] for r in rows]
    room = columns - cells(indent) - gap * (len(headers) - 1)
    natural = [max([cells(h)] + [cells(r[i]) for r in rows]) for i, h in enumerate(headers)]
    if sum(natural) <= room:
        return [_row([[h] for h in headers], natural, gap, indent)[0]] + \
               [_row([[c] for c in r], natural, gap, indent)[0] for r in rows]
    least = [max([_longest_piece(h)] + [_longest_piece(r[i]) for r in rows]) for i, h in enumerate(headers)]
    if sum(least) > room:
        return blocks(headers, rows, columns, indent)
    widths = list(natural)
    while sum(widths) > room:  # narrow the widest column that can still lose a column
        i = max((j for j in range(len(widths)) if widths[j] > least[j]), key=lambda j: widths[j])
        widths[i] -= 1
    out = _row([_cell_lines(h, w) for h, w in zip(headers, widths)], widths, gap, indent)
    for r in rows:
        out += _row([_cell_lines(c, w) for c, w in zip(r, widths)], widths, gap, indent)
    return out


def _row(cell_lines: list[list[str]], widths: list[int], gap: int, indent: str) -> list[str]:
    height = max(len(c) for c in cell_lines)
    out = []
    for k in range(height):
        parts = [(c[k] if k < len(c) else "") for c in cell_lines]
        line = (" " * gap).join(p + " " * (w - cells(p)) for p, w in zip(parts, widths))
        out.append((indent + line).rstrip())
    return out


def blocks(headers: list[str], rows: list[list[str]], columns: int, indent: str = "") -> list[str]:
    """One block per row: ``HEADER: value`` lines, values folded under themselves, a blank line between."""
    key_cells = max(cells(h) for h in headers) + 2
    out: list[str] = []
    for n, r in enumerate(rows):
        if n:
            out.append("")
        for h, c in zip(headers, r):
            out += pair(h, c, columns, indent, key_cells, punct=True)
    return out


# -- whole lines: commands, diffs, code ------------------------------------------------------------------------
CONTINUED = "↪ "  # starts the rest of a diff or code line that did not fit: never part of what it says


def _break_at(text: str, room: int) -> int:
    """Where ``text`` (wider than ``room``) breaks, keeping as much as fits: after its last space, / , = or :
    within ``room``, else after a -; 0 when there is none (one word: it stays whole)."""
    best = max((text[:room + 1 if c == " " else room].rfind(c) + 1 for c in " /,=:"), default=0)
    return best or text[:room].rfind("-") + 1


def fold_line(line: str, columns: int, indent: str = "") -> list[str]:
    """A diff or code line (escaped) in lines of at most ``columns``: whole when it fits; else broken at a
    space or after a separator (never inside a word), the rest after ``indent`` and ``CONTINUED``."""
    line = printable(line)
    first, rest = indent, indent + " " + CONTINUED
    out, text, lead = [], line, first
    while cells(lead) + cells(text) > columns:
        at = _break_at(text, columns - cells(lead))
        if at <= 0:
            break  # one word wider than the line: whole, for the terminal to fold
        out.append((lead + text[:at]).rstrip())
        text, lead = text[at:].lstrip(" "), rest
    out.append(lead + text)
    return out


def _words(cmd: str) -> list[str]:
    """A shell command's words, split at spaces outside quotes (a quoted JSON patch stays one word)."""
    words, word, quote, i = [], "", "", 0
    while i < len(cmd):
        c = cmd[i]
        if quote:
            word += c
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and i + 1 < len(cmd):
                word, i = word + cmd[i + 1], i + 1
        elif c in "'\"":
            quote, word = c, word + c
        elif c == "\\" and i + 1 < len(cmd):
            word, i = word + c + cmd[i + 1], i + 1
        elif c == " ":
            if word:
                words.append(word)
            word = ""
        else:
            word += c
        i += 1
    return words + [word] if word else words


def fold_command(cmd: str, columns: int, indent: str = "", prompt: str = "$ ", first: str | None = None) -> list[str]:
    """A command (escaped) to paste, in lines of at most ``columns`` where its words allow: broken between words
    with `` \\`` (the shell joins the lines back), never inside one; a word wider than a line stays whole on a
    line of its own. Commands joined by && or | break before the operator."""
    cmd = printable(cmd)
    head = indent + prompt if first is None else first
    if cells(head) + cells(cmd) <= columns:
        return [head + cmd]
    hang = indent + " " * len(prompt) + "    "
    out, line = [], head
    for w in _words(cmd):
        if line in (head, hang):
            line += w
        elif cells(line) + 1 + cells(w) + 2 <= columns:
            line += " " + w
        else:
            out.append(line + " \\")
            line = hang + w
    return out + [line]


def yaml_lines(text: str, columns: int, indent: str = "") -> list[str]:
    """YAML shown at the terminal's width: emitted once at it (PyYAML folds long scalars at their spaces, which
    keeps their value), each line after ``indent``. YAML with comments, or that does not load, is shown as it is,
    its lines folded with ``fold_line``."""
    import yaml  # noqa: PLC0415

    docs = None
    if not any(ln.lstrip().startswith("#") for ln in text.splitlines()):
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            docs = None
    if docs is not None and len(docs) == 1:
        # PyYAML breaks at the first space past its width, so a line may run over by a word: the width leaves
        # room for the longest one
        longest = max((len(w) for w in text.split()), default=0)
        room = max(20, columns - cells(indent) - longest - 1)
        text = yaml.safe_dump(docs[0], sort_keys=False, width=room, allow_unicode=False)
    return [x for line in text.rstrip().splitlines() for x in fold_line(line, columns, indent)]
