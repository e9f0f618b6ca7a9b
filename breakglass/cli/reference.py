"""The command reference of the docs site, generated from the command line itself: every command, subcommand,
argument and option exactly as `--help` has them (their help, metavar and default), so the manual can neither
miss one nor keep a stale one. docs/hooks.py puts it in the pages (``<!-- reference: COMMAND -->``); a test checks
the built site names every command and option.

mkdocs-click cannot read this app: Typer 0.29 ships its own copy of click, whose classes are not the click
package's, so its isinstance checks see no options at all. This walks the same objects `--help` prints.
"""

from __future__ import annotations

import textwrap

import typer

PROG = "breakglass"


def root():
    """The app's click command (its groups and commands registered, as `breakglass --help` sees them)."""
    from breakglass.cli import app  # noqa: PLC0415 - importing the package registers every command

    return typer.main.get_command(app)


def _context(cmd, words: list[str], parent=None):
    from typer._click import Context  # noqa: PLC0415 - typer's own click, the one its commands are made of

    return Context(cmd, info_name=words[-1] if words else PROG, parent=parent)


def _subcommands(cmd, ctx) -> list:
    if not hasattr(cmd, "list_commands"):
        return []
    out = []
    for name in cmd.list_commands(ctx):
        sub = cmd.get_command(ctx, name)
        if sub is not None and not getattr(sub, "hidden", False):
            out.append((name, sub))
    return out


def walk(cmd=None, words: tuple = (), parent=None):
    """(words, command, context) for the command at ``words`` and everything under it, in `--help` order."""
    cmd = cmd if cmd is not None else root()
    ctx = _context(cmd, list(words), parent)
    yield words, cmd, ctx
    for name, sub in _subcommands(cmd, ctx):
        yield from walk(sub, (*words, name), ctx)


def find(words: list[str]):
    for w, cmd, ctx in walk():
        if list(w) == list(words):
            return cmd, ctx
    raise KeyError(" ".join(words))


def _help(text: str | None) -> str:
    """A command's help as Markdown: its paragraphs as text, the verbatim ones (click's ``\\b``: the examples)
    as shell blocks that paste."""
    if not text:
        return ""
    out = []
    for para in textwrap.dedent(text).split("\n\n"):
        body = para.strip("\n")
        if body.lstrip().startswith("\b"):
            lines = textwrap.dedent(body.lstrip().lstrip("\b").strip("\n")).splitlines()
            if out and out[-1].startswith("```sh"):  # one block for a run of examples
                out[-1] = out[-1][:-3] + "\n".join(lines) + "\n```"
            else:
                out.append("```sh\n" + "\n".join(lines) + "\n```")
        elif body.strip() == "Examples:":
            out.append("**Examples**")
        else:
            out.append(" ".join(line.strip() for line in body.splitlines()))
    return "\n\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _params(cmd, ctx) -> str:
    rows = []
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            continue
        record = p.get_help_record(ctx) if getattr(p, "param_type_name", "") == "option" else None
        if record is None:  # an argument: its name and metavar
            if getattr(p, "param_type_name", "") != "argument":
                continue
            record = (p.make_metavar(ctx) if hasattr(p, "make_metavar") else p.name.upper(),
                      getattr(p, "help", "") or "")
        flags, helptext = record
        rows.append(f"| `{_cell(flags)}` | {_cell(helptext)} |")
    if not rows:
        return ""
    return "| Option | Description |\n|---|---|\n" + "\n".join(rows)


def _usage(cmd, ctx, words) -> str:
    pieces = " ".join(cmd.collect_usage_pieces(ctx))
    return f"```\n{' '.join([PROG, *words])} {pieces}\n```"


def page(words: list[str], level: int = 2, recursive: bool = True) -> str:
    """The reference of the command at ``words`` and of each command under it (only its own with ``recursive``
    False: `breakglass` itself), headings from ``level``."""
    cmd, ctx = find(words)
    out = []
    for w, sub, sctx in walk(cmd, tuple(words), ctx.parent):
        if not recursive and list(w) != list(words):
            continue
        depth = level + len(w) - len(words)
        out.append(f"{'#' * min(depth, 6)} `{' '.join([PROG, *w])}`")
        out.append(_usage(sub, sctx, list(w)))
        out.append(_help(sub.help))
        params = _params(sub, sctx)
        if params:
            out.append(params)
    return "\n\n".join(x for x in out if x) + "\n"


def everything() -> list[tuple[str, list[str]]]:
    """Each command's full name and its options' flags (what the built site must name)."""
    out = []
    for w, cmd, ctx in walk():
        flags = []
        for p in cmd.get_params(ctx):
            if not getattr(p, "hidden", False) and getattr(p, "param_type_name", "") == "option":
                flags += [f for f in list(p.opts) + list(p.secondary_opts) if f.startswith("--")]
        out.append((" ".join([PROG, *w]), flags))
    return out


def top_level() -> list[tuple[str, str]]:
    """(name, one-line summary) of each top-level command, in `breakglass --help` order."""
    cmd = root()
    ctx = _context(cmd, [])
    return [(name, (sub.help or "").strip().split("\n\n")[0].replace("\n", " ")) for name, sub in _subcommands(cmd, ctx)]
