"""`breakglass sandbox up|down|status`: the local rehearsal environment."""

from typing import Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    Output,
    OutputOpt,
    _run,
    _show,
    StateDirOpt,
    VerboseOpt,
)


sandbox_app = typer.Typer(name="sandbox", help="A local rehearsal environment: real etcd seeded like the "
                                                "Talos/Kyverno outage, plus logs and configs.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(sandbox_app, name="sandbox")
SandboxDirOpt = Annotated[Optional[str], typer.Option(
    "--dir", help="Sandbox directory (default: the state directory's sandbox/).", show_default=False)]


@sandbox_app.command("up")
def sandbox_up(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
               output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Start the sandbox (idempotent) and print the flags that point breakglass at it.

    Examples:

      breakglass sandbox up

      breakglass webhooks $(breakglass sandbox up -o json | jq -r .result.flags)
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        sb = sandbox.up(sandbox_dir or sandbox.default_dir(state_dir))
        st = sandbox.status(sb.dir)
        _show(output, "Sandbox", st, lambda: _render_sandbox(st))
        return 0

    _run(output, verbose, body)


@sandbox_app.command("down")
def sandbox_down(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                 output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Stop the sandbox and remove its directory.

    Examples:

      breakglass sandbox down
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        d = sandbox_dir or sandbox.default_dir(state_dir)
        was = sandbox.down(d)
        _show(output, "Sandbox", {"running": False, "dir": d, "stopped": was},
              lambda: f"sandbox {'stopped and ' if was else ''}removed ({d})")
        return 0

    _run(output, verbose, body)


@sandbox_app.command("status")
def sandbox_status(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                   output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Show whether the sandbox runs, and how to point breakglass at it.

    Examples:

      breakglass sandbox status -o json
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        st = sandbox.status(sandbox_dir or sandbox.default_dir(state_dir))
        _show(output, "Sandbox", st, lambda: _render_sandbox(st))
        return 0

    _run(output, verbose, body)


def _render_sandbox(st: dict) -> str:
    if not st.get("running"):
        return f"sandbox not running ({st['dir']})"
    out = [f"sandbox running in {st['dir']} (etcd pid {st['pid']})", f"  etcd: {st['flags']}"]
    out += [f"  {k}: {v}" for k, v in st["files"].items()]
    out.append("try: breakglass diagnose " + st["files"].get("apiserver_log", "") + "; breakglass audit " + st["flags"])
    return "\n".join(out)
