"""`breakglass wizard`, and `breakglass` alone on a terminal."""

import sys
from typing import Annotated

import typer

from breakglass.cli._base import (
    app,
    Output,
    OutputOpt,
    _run,
    StateDirOpt,
    VerboseOpt,
)
from breakglass.core.errors import BadInput


def _print_version(value: bool) -> None:
    if value:
        from breakglass import version_line  # noqa: PLC0415

        print(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(ctx: typer.Context, _version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_print_version,
        help="Print breakglass's version and exit (`breakglass version` lists its libraries and tools too).")] = False,
) -> None:
    # On a terminal, `breakglass` alone is the wizard; elsewhere (scripts, pipes) it is help.
    if ctx.invoked_subcommand is None:
        if sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty():
            wizard(state_dir=None, output=Output.text, verbose=False)
        print(ctx.get_help())
        raise typer.Exit(0)


@app.command()
def wizard(state_dir: StateDirOpt = None, output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Walk through diagnosis, the ways out, the change, and its revert, asking at each step.

    Needs a terminal; scripts use `recover` and `revert` with --yes instead.

    Examples:

      breakglass wizard

      breakglass sandbox up && breakglass wizard      # rehearse on the sandbox
    """

    def body() -> int:
        if sys.stdin is None or not sys.stdin.isatty():
            raise BadInput("the wizard needs a terminal", hint="use `breakglass recover ... --yes` in scripts")
        from breakglass.flows import wizard as _wizard  # noqa: PLC0415
        from breakglass.cli.prompter import QuestionaryPrompter  # noqa: PLC0415

        return _wizard.run(QuestionaryPrompter(), state_dir)

    _run(output, verbose, body)
