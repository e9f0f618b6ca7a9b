"""The command line: a thin typer layer over the core.

Commands parse options, call one core function, and hand its result object to
``render`` (text) or ``envelope`` (JSON). Errors are mapped to exit codes in exactly
one place, ``_run``. Core modules are imported inside commands so ``--help`` stays fast.
"""

from __future__ import annotations

import enum
import sys
import traceback
from typing import Any, Callable, List, Optional

import typer
from typing_extensions import Annotated

from breakglass import __version__
from breakglass.errors import BadInput, BreakglassError, ExitCode


class Output(str, enum.Enum):
    text = "text"
    json = "json"


class Engine(str, enum.Enum):
    auto = "auto"
    hyperscan = "hyperscan"
    python = "python"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="text for people, json for scripts.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Full evidence lines; tracebacks on bugs.")]

app = typer.Typer(
    name="breakglass",
    help="Bring a Kubernetes control plane back when admission webhooks have locked it up.",
    epilog="Exit codes: 0 ok/nothing found, 1 bug, 2 bad input, 3 problem found, 4 target changed, "
           "5 unreachable, 130 interrupted.",
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _emit_error(err_type: str, message: str, code: int, output: Output, hint: str | None = None) -> None:
    if output is Output.json:
        from breakglass.envelope import dumps, error_envelope  # noqa: PLC0415

        print(dumps(error_envelope(err_type, message, code, hint)))
    print(f"breakglass: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)


def _run(output: Output, verbose: bool, body: Callable[[], int]) -> None:
    """Run one command body; map every outcome to an exit code, never a traceback."""
    try:
        code = body()
    except BreakglassError as e:
        _emit_error(e.kind, str(e), int(e.exit_code), output, e.hint)
        code = int(e.exit_code)
    except KeyboardInterrupt:
        _emit_error("interrupted", "interrupted", int(ExitCode.INTERRUPTED), output)
        code = int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        sys.stderr.close()  # reader went away (| head): not an error worth a message
        code = 0
    except Exception as e:  # noqa: BLE001 - the one place bugs become exit 1
        if verbose:
            traceback.print_exc()
        msg = f"unexpected {type(e).__name__}: {e}".splitlines()[0][:300]
        _emit_error("failure", msg, int(ExitCode.FAILURE), output,
                    None if verbose else "rerun with --verbose for the traceback, and please report it")
        code = int(ExitCode.FAILURE)
    raise typer.Exit(code)


def _progress_line(source: str, done: int) -> None:
    print(f"\rreading {source}: {done >> 20} MiB", end="", file=sys.stderr, flush=True)


def _print_json(kind: str, result: Any, code: int, warnings: list[str]) -> None:
    from breakglass.envelope import dumps, envelope  # noqa: PLC0415

    print(dumps(envelope(kind, result, code, warnings)))


@app.callback()
def _root(ctx: typer.Context) -> None:
    # The wizard (a later issue) takes this place on a terminal; until then, plain help and exit 0.
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit(0)


@app.command()
def diagnose(
    logs: Annotated[Optional[List[str]], typer.Argument(
        help="Log files, .gz files, directories (e.g. a copy of /var/log/pods/kube-system_kube-apiserver-*) "
             "or - for standard input. Default: standard input when it is not a terminal.",
        show_default=False)] = None,
    output: OutputOpt = Output.text,
    verbose: VerboseOpt = False,
    max_evidence: Annotated[int, typer.Option(min=1, max=100, help="Evidence lines kept per finding.")] = 5,
    year: Annotated[Optional[int], typer.Option(
        min=1970, max=9999, help="Year for klog timestamps, which carry none (default: this year).")] = None,
    scanner: Annotated[Engine, typer.Option(help="Line finder: hyperscan when installed, else python.")] = Engine.auto,
) -> None:
    """Name the admission deadlock in kube-apiserver logs.

    Reads klog text, structured klog, JSON logging, CRI (/var/log/pods), talosctl and
    kubectl prefixed output, journald exports and text pasted into tickets, detected
    line by line, and reports which webhook blocks what, why, and the ways out.

    Examples:

      breakglass diagnose /var/log/pods/kube-system_kube-apiserver-*/

      talosctl -n 10.0.0.2 logs -k POD:kube-apiserver | breakglass diagnose

      breakglass diagnose apiserver.log.gz ticket-paste.txt -o json

    Exit code 3 when something needs action, 0 when nothing was found.
    """

    def body() -> int:
        from breakglass.diagnose.engine import Options, diagnose_paths  # noqa: PLC0415

        paths = list(logs or [])
        if not paths:
            if sys.stdin is None or sys.stdin.isatty():
                raise BadInput("no logs given: name files or directories, or pipe a log into standard input",
                               hint="breakglass diagnose --help shows examples")
            paths = ["-"]
        progress = _progress_line if sys.stderr.isatty() else None
        try:
            diag, warnings = diagnose_paths(paths, Options(max_evidence=max_evidence, year=year,
                                                           engine=scanner.value, progress=progress))
        finally:
            if progress:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
        code = int(ExitCode.FOUND if diag.verdict.needs_action else ExitCode.OK)
        if output is Output.json:
            _print_json("Diagnosis", diag, code, warnings)
        else:
            from breakglass import render  # noqa: PLC0415

            print(render.diagnosis(diag, warnings, verbose))
        return code

    _run(output, verbose, body)


@app.command()
def version(output: OutputOpt = Output.text) -> None:
    """Print the version of breakglass."""

    def body() -> int:
        if output is Output.json:
            _print_json("Version", {"breakglass": __version__}, 0, [])
        else:
            print(f"breakglass {__version__}")
        return 0

    _run(output, False, body)


def main() -> None:
    app()
