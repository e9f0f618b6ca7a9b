"""`breakglass recover WAY`: the typer commands of the ways out, generated from ``ways.registry``.

Each way's options are its ``Way.options`` (``Opt`` specs) plus the common ones; the CLI, plan files and the wizard
read the same table, so they cannot disagree about what a way takes. ``RecoverGroup`` is the `recover` command
group: the ways in rank order with their cost in `recover --help`, and `--method WAY` kept as a hidden alias of
`recover WAY` (rewritten before the arguments are parsed, so scripts, plans and runbooks keep working).
"""

import enum
import inspect
import textwrap
from typing import List, Optional

import typer
from typer._click.core import ParameterSource
from typer._click.exceptions import UsageError
from typer._click.shell_completion import CompletionItem
from typer.core import TyperGroup
from typing_extensions import Annotated

from breakglass.cli._base import DryRunOpt, Output, OutputOpt, StateDirOpt, VerboseOpt, YesOpt
from breakglass.ways import registry

# every way takes these; the front end, not the way, owns them
COMMON = (("state_dir", StateDirOpt, None), ("dry_run", DryRunOpt, False), ("yes", YesOpt, False),
          ("output", OutputOpt, Output.text), ("verbose", VerboseOpt, False))
COMMON_NAMES = tuple(name for name, _, _ in COMMON)
_TYPES = {"str": str, "list": List[str], "bool": bool, "float": float, "int": int}
_ENUMS: dict = {}


def choice_enum(opt: registry.Opt) -> type:
    """The Enum typer needs for a choice; one class per option, so a value parsed by `recover` and by `recover WAY`
    is the same member."""
    key = (opt.name, opt.choices)
    if key not in _ENUMS:
        _ENUMS[key] = enum.Enum(opt.name.title().replace("_", ""), {c: c for c in opt.choices}, type=str)
    return _ENUMS[key]


def annotation(opt: registry.Opt, hidden: bool = False):
    """``Annotated[T, typer.Option(...)]`` for one Opt, as typer reads it from a signature."""
    base = choice_enum(opt) if opt.kind == "choice" else _TYPES[opt.kind]
    kind = Optional[base] if opt.default is None and opt.kind != "bool" else base
    extra = {"min": opt.minimum} if opt.minimum is not None else {}
    if opt.metavar:
        extra["metavar"] = opt.metavar
    return Annotated[kind, typer.Option(*opt.flags, help=opt.help, hidden=hidden,
                                        show_default=opt.default is not None, **extra)]


def default(opt: registry.Opt):
    return choice_enum(opt)(opt.default) if opt.kind == "choice" and opt.default is not None else opt.default


def union_options() -> list:
    """Every option of any way, once (the first way's help wins): what `recover --plan` and `--auto` take."""
    seen: dict = {}
    for way in registry.WAYS:
        for opt in way.options:
            if opt.name in seen and (seen[opt.name].kind, seen[opt.name].flag) != (opt.kind, opt.flag):
                raise AssertionError(f"ways.registry: {opt.name} differs between ways")  # a bug in the table
            seen.setdefault(opt.name, opt)
    return list(seen.values())


def own_options(way: registry.Way) -> list:
    """A way's options once each (a way may list one twice through shared groups, e.g. --diagnosis)."""
    return list({o.name: o for o in reversed(way.options)}.values())[::-1]


def parameter(opt: registry.Opt, hidden: bool = False) -> inspect.Parameter:
    return inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(opt, hidden),
                             default=default(opt))


def signature(opts, hidden: bool = False, first=()) -> inspect.Signature:
    """A callback signature typer reads: ``ctx``, then ``first`` (parameters of the command itself), one keyword
    parameter per Opt (``hidden``: parsed, not shown in --help), then the common options."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    params += list(first) + [parameter(o, hidden) for o in opts]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d) for n, a, d in COMMON]
    return inspect.Signature(params)


def with_signature(fn, sig: inspect.Signature):
    """Give ``fn(ctx, **values)`` the signature typer generates the command from."""
    fn.__signature__ = sig
    fn.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
    return fn


def typed(ctx) -> dict:
    """The values given on the command line (or the environment), not defaults: what wins over a plan."""
    return {k: v for k, v in ctx.params.items()
            if ctx.get_parameter_source(k) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)}


def help_text(way: registry.Way, details: str) -> str:
    """A way's help: what it does, what it costs, how (``details``), and its examples (kept verbatim)."""
    same = way.cost.lower().rstrip(".") == way.tradeoff.lower().rstrip(".")
    parts = [way.summary, way.tradeoff if same else f"{way.tradeoff} Cost: {way.cost}.", inspect.cleandoc(details or ""),
             "Every step is journaled in a run directory; `breakglass revert` undoes it exactly.", "Examples:"]
    parts += [f"  {ex}" for ex in way.examples]
    return "\n\n".join(p for p in parts if p)


def alias_argv(args: list, strict: bool = True) -> list:
    """`recover ... --method WAY ...` (or `--method=WAY`) as `recover WAY ...`. With --plan or --auto the way is
    theirs to choose, so --method stays the hidden option it was there (typed, it wins over the plan's)."""
    if any(a in ("--plan", "--auto") or a.startswith("--plan=") for a in args):
        return args
    out, way, i = [], None, 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out += args[i:]
            break
        if a == "--method" and i + 1 < len(args):
            value, i = args[i + 1], i + 2
        elif a.startswith("--method="):
            value, i = a.partition("=")[2], i + 1
        else:
            out.append(a)
            i += 1
            continue
        if value not in registry.NAMES or (way and value != way):
            if not strict:
                continue
            raise UsageError(f"unknown way out {value!r} (use {', '.join(registry.NAMES)})" if value not in
                             registry.NAMES else f"--method given twice ({way}, {value})")
        way = value
    return [way, *out] if way else out


class RecoverGroup(TyperGroup):
    """`recover`: one subcommand per way out, listed least invasive first with its cost."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self.expand_alias(args, strict=not ctx.resilient_parsing))

    @staticmethod
    def expand_alias(args, strict: bool = True) -> list:
        """What `recover` makes of its arguments before parsing them (for whoever walks the commands by hand)."""
        return alias_argv(list(args), strict)

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-") and not ctx.resilient_parsing:
            raise UsageError(f"unknown way out {args[0]!r} (use {', '.join(registry.NAMES)})", ctx)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx) -> list:
        rank = {w.name: w.rank for w in registry.WAYS}
        return sorted(self.commands, key=lambda n: rank.get(n, len(rank) + 1))

    def format_commands(self, ctx, formatter) -> None:
        ways = [w for w in sorted(registry.WAYS, key=lambda w: w.rank) if w.name in self.commands]
        name_width = max(len(w.name) for w in ways) + 2
        with formatter.section("Ways out (least invasive first; `breakglass recover WAY --help` for each)"):
            indent = " " * formatter.current_indent
            room = max(formatter.width - len(indent) - name_width, 20)
            for w in ways:  # wrapped at spaces only: "kube-apiserver" stays one word
                lines = textwrap.wrap(w.cost, room, break_on_hyphens=False) or [""]
                formatter.write(f"{indent}{w.name:<{name_width}}{lines[0]}\n")
                formatter.write("".join(f"{indent}{'':<{name_width}}{ln}\n" for ln in lines[1:]))

    def shell_complete(self, ctx, incomplete: str) -> list:
        # the alias is hidden from --help, not from the fingers of those who typed it for years
        items = super().shell_complete(ctx, incomplete)
        if incomplete.startswith("-") and "--method".startswith(incomplete):
            items.append(CompletionItem("--method", help="the same as `recover WAY`"))
        return items
