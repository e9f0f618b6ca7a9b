"""Runbooks cannot rot: every breakglass command in them must parse with today's CLI, and the ones
that can run on the sandbox run there."""

from __future__ import annotations

import glob
import os
import shlex

import pytest

from tests.conftest import ROOT


def _commands():
    out = []
    for md in sorted(glob.glob(os.path.join(ROOT, "runbooks", "*.md"))):
        in_block = False
        pending = ""
        for line in open(md, encoding="utf-8"):
            if line.startswith("```"):
                in_block = not in_block
                continue
            if not in_block:
                continue
            line = pending + line.rstrip("\n")
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            for part in line.replace("&&", ";").replace("|", ";").split(";"):
                part = part.split("#")[0].strip()
                if part.startswith("sudo "):
                    part = part[5:]
                if part.startswith("breakglass "):
                    out.append((os.path.basename(md), part))
    return out


COMMANDS = _commands()


def test_runbooks_have_commands():
    assert len(COMMANDS) > 20


def test_a_stale_flag_is_caught():
    with pytest.raises(Exception, match="No such option"):
        test_every_runbook_command_parses("x.md", "breakglass recover --method etcd --no-such-flag")


@pytest.mark.parametrize("runbook,command", COMMANDS, ids=[f"{r}:{c[:50]}" for r, c in COMMANDS])
def test_every_runbook_command_parses(runbook, command):
    import typer.main

    from breakglass.cli import app
    command = command.split(" > ")[0]  # shell redirection is not breakglass's
    tokens = shlex.split(command)[1:]
    group = typer.main.get_group(app)
    cmd, name = group, "breakglass"
    while tokens and hasattr(cmd, "commands") and tokens[0] in cmd.commands:
        name = tokens.pop(0)
        cmd = cmd.commands[name]
    assert not hasattr(cmd, "commands"), f"{runbook}: `{command}` names no command"
    flags = {o for p in cmd.params if getattr(p, "is_flag", False) for o in p.opts}
    args = []
    for a in tokens:
        if a == "…" and not (args and args[-1].startswith("-") and args[-1] not in flags):
            continue  # "…" for "your other flags": nothing to parse
        args.append("VALUE" if "…" in a or "$" in a else a)
    cmd.make_context(name, list(args))  # raises a usage error for an unknown option or a bad value
