"""`breakglass version` and `breakglass completion`."""

import enum

import typer
from typing_extensions import Annotated

from breakglass import __version__
from breakglass.cli._base import (
    app,
    Output,
    OutputOpt,
    _render,
    _run,
    _show,
)


@app.command()
def version(
    output: OutputOpt = Output.text,
    short: Annotated[bool, typer.Option("--short", help="Only breakglass's own version.")] = False,
) -> None:
    """Print the versions of breakglass, its libraries, and the tools it found on PATH.

    Libraries with native code (grpcio for etcd, cryptography for SSH, hyperscan)
    are also imported, to say whether they load here; talosctl, kubectl, etcdctl
    and ssh are asked for their client version. Paste it into bug reports.

    Examples:

      breakglass version

      breakglass version -o json

      breakglass version --short
    """

    def body() -> int:
        if short:
            _show(output, "Version", {"breakglass": __version__}, lambda: f"breakglass {__version__}")
            return 0
        from breakglass.core.about import collect  # noqa: PLC0415

        about = collect()
        _show(output, "Version", about.to_json(), lambda: _render().about(about))
        return 0

    _run(output, False, body)


class Shell(str, enum.Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")],
               output: OutputOpt = Output.text) -> None:
    """Print the shell completion script for bash, zsh or fish.

    Commands, options and choices complete; the script asks breakglass itself,
    so it stays right after an upgrade.

    Examples:

      breakglass completion bash > ~/.local/share/bash-completion/completions/breakglass

      breakglass completion zsh > "${fpath[1]}/_breakglass"

      breakglass completion fish > ~/.config/fish/completions/breakglass.fish
    """

    def body() -> int:
        from typer._completion_shared import get_completion_script  # noqa: PLC0415

        script = get_completion_script(prog_name="breakglass", complete_var="_BREAKGLASS_COMPLETE", shell=shell.value)
        _show(output, "Completion", {"shell": shell.value, "script": script}, lambda: script)
        return 0

    _run(output, False, body)
