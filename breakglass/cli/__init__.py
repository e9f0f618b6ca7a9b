"""The command line: a thin typer layer over the core.

Commands parse options, call one core function, and hand its result object to ``render`` (text) or
``envelope`` (JSON). ``_base`` holds what they share, including ``_run``, the one place errors become
exit codes. Only this package imports typer. Each command module registers itself on ``app`` when
imported.
"""

import os
import sys

import typer

# Importing a command module registers its commands on ``app``, in the order of ``--help``.
from breakglass.cli import wizard, diagnose, inventory, guard, recover, etcd, sandbox, leaks, about  # isort: skip
from breakglass.cli._base import Output, _emit_error, app

COMMANDS = (wizard, diagnose, inventory, guard, recover, etcd, sandbox, leaks, about)


def _examples_verbatim(doc: str | None) -> str | None:
    """Help is rewrapped to the terminal, which split example commands inside names
    (`kyverno-resource-validating-webhook-` / `cfg`) and across lines, so they no longer pasted. Click prints a
    paragraph that starts with \\b as written: every example paragraph gets one."""
    if not doc or "Examples:" not in doc:
        return doc
    head, _, tail = doc.partition("Examples:")
    paragraphs = tail.split("\n\n")
    def mark(p: str) -> str:
        body = p.lstrip("\n")
        if not body.strip() or body.lstrip().startswith("\b"):
            return p
        indent = body[:len(body) - len(body.lstrip(" "))]  # the docstring's own, so cleandoc strips it alike
        return indent + "\b\n" + body

    return head + "Examples:" + "\n\n".join(mark(p) for p in paragraphs)


def _verbatim_examples_everywhere(t) -> None:
    for info in list(t.registered_commands) + [g.typer_instance for g in t.registered_groups]:
        if hasattr(info, "registered_commands"):
            _verbatim_examples_everywhere(info)
        elif info.callback is not None:
            info.callback.__doc__ = _examples_verbatim(info.callback.__doc__)


_verbatim_examples_everywhere(app)

__all__ = ["app", "main", "bundle_main", "kubectl_main", "kubectl_complete_main"]


def _signals_as_interrupts() -> None:
    """SIGTERM (a timeout, systemd, a closing terminal's SIGHUP) is handled as Ctrl-C: the journal says
    `interrupted`, temporary secrets and partial files are removed, exit 130, never a half-written state."""
    import signal  # noqa: PLC0415

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, interrupt)
        except (ValueError, OSError):  # not the main thread, or a platform without it
            pass


def _invoke(root: str, prog_name: str | None = None) -> None:
    """The app, with click's usage errors (an unknown option, a missing value) reported like every other error:
    one line, exit 2, a hint naming the command's --help, and the JSON error envelope under -o json."""
    from typer._click.exceptions import ClickException  # noqa: PLC0415 - typer's own click

    from breakglass.cli._base import usage_error  # noqa: PLC0415

    try:
        code = app(prog_name=prog_name, standalone_mode=False)
    except ClickException as e:
        words, ctx = [], getattr(e, "ctx", None)
        while ctx is not None and ctx.parent is not None:
            words.insert(0, ctx.info_name)
            ctx = ctx.parent
        argv = sys.argv[1:]
        if not words:  # some parser errors carry no context: the command is the leading words of argv
            cmd = typer.main.get_command(app)
            for a in argv:
                sub = getattr(cmd, "commands", {}).get(a)
                if sub is None:
                    break
                words.append(a)
                cmd = sub
        json_out = any(a in ("--output=json", "-ojson") or (a in ("-o", "--output") and argv[i + 1:i + 2] == ["json"])
                       for i, a in enumerate(argv))
        usage_error(e.format_message(), " ".join([root] + words), Output.json if json_out else Output.text)
        raise SystemExit(int(getattr(e, "exit_code", 2) or 2)) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def main() -> None:
    _signals_as_interrupts()
    _invoke("breakglass")


def bundle_main() -> None:
    """The offline bundle's entry: `kubectl breakglass` when linked as kubectl-breakglass, its completion as
    kubectl_complete-breakglass."""
    name = os.path.basename(sys.argv[0])
    try:
        if name.startswith("kubectl_complete-breakglass"):
            kubectl_complete_main()
        elif name.startswith("kubectl-breakglass"):
            kubectl_main()
        else:
            _invoke("breakglass", "breakglass")
    except ImportError as e:  # typer parses typed options with pydantic, whose core is compiled code
        from breakglass.core.capability import unsupported  # noqa: PLC0415

        err = unsupported("the command line", e.name or "a compiled module", e)
        _emit_error(err.kind, str(err), int(err.exit_code), Output.text, err.hint)
        raise SystemExit(int(err.exit_code)) from None


def kubectl_complete_main() -> None:
    """`kubectl breakglass <TAB>`: kubectl 1.26+ runs kubectl_complete-breakglass with the words typed so far
    and reads cobra's format: one candidate per line (value, tab, help), then ':<directive>'."""
    from typer._click.shell_completion import ShellComplete  # noqa: PLC0415 - typer's own completion engine

    class _Cobra(ShellComplete):
        name, source_template = "cobra", ""

        def source_vars(self) -> dict:
            return {}

        def get_completion_args(self) -> tuple[list[str], str]:
            args = sys.argv[1:]
            return args[:-1], args[-1] if args else ""

        def format_completion(self, item) -> str:
            return f"{item.value}\t{item.help.splitlines()[0]}" if item.help else item.value

    comp = _Cobra(typer.main.get_command(app), {}, "kubectl breakglass", "_BREAKGLASS_COMPLETE")
    items = comp.get_completions(*comp.get_completion_args())
    for item in items:
        print(comp.format_completion(item))
    print(":4" if items else ":0")  # 4: no file completion; 0: let the shell complete file names (log paths)


def kubectl_main() -> None:
    """`kubectl breakglass ...`: kubectl runs kubectl-breakglass from PATH; usage lines say what was typed."""
    _signals_as_interrupts()
    _invoke("kubectl breakglass", "kubectl breakglass")
