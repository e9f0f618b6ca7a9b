"""Help examples paste as printed, at any terminal width: never rewrapped inside a name or across lines."""

from __future__ import annotations

import inspect

import pytest

from tests.conftest import run_cli


def _commands():
    import typer.main

    from breakglass.cli import app

    group = typer.main.get_group(app)
    out = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, path + [name])
        else:
            out.append((path, inspect.cleandoc(cmd.callback.__doc__ or "")))

    walk(group, [])
    return out


COMMANDS = _commands()


@pytest.mark.parametrize("path,doc", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_example_line_is_printed_whole_at_60_columns(path, doc):
    examples = [ln.strip() for ln in doc.partition("Examples:")[2].splitlines() if ln.strip()]
    if not examples:
        pytest.skip("no examples")
    p = run_cli(*path, "--help", env={"COLUMNS": "60"})
    assert p.returncode == 0, p.stderr
    printed = {ln.strip() for ln in p.stdout.decode().partition("Examples:")[2].splitlines()}
    for line in examples:
        if line != "\x08":  # click's \b marker (a backspace) is not printed
            assert line in printed, f"`{' '.join(path)} --help` at 60 columns split: {line}"
