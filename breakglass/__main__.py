"""`python -m breakglass`.

The two scans people run on huge logs at 3 a.m., `diagnose FILE...` and `leaks --audit-log FILE...`, with at
most `-o/--output`, are run here without loading the command line (typer and pydantic: about 0.15 s of a
0.25 s start). Anything else, and any error, goes to the full command line, which parses, runs and reports
exactly as it always does (the scans only read, so running one again for its error message is harmless).
"""

import os
import sys


def _paths_and_output(args: list, outputs: tuple, repeated: str | None = None):
    """(paths, output) when ``args`` is only paths (no `-`) and at most one output option, else None."""
    paths, output, i = [], None, 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--output") and i + 1 < len(args) and output is None:
            output, i = args[i + 1], i + 2
            continue
        if a.startswith("--output=") and output is None:
            output, i = a[len("--output="):], i + 1
            continue
        if repeated is not None:
            if a == repeated and i + 1 < len(args) and args[i + 1] and not args[i + 1].startswith("-"):
                paths.append(args[i + 1])
                i += 2
                continue
            return None
        if not a or a.startswith("-"):
            return None
        paths.append(a)
        i += 1
    output = output or "text"
    return (paths, output) if paths and output in outputs else None


def _progress_line(source: str, done: int) -> None:  # the same line as breakglass.cli._base's
    from breakglass.core.safetext import printable

    print(f"\rreading {printable(source)}: {done >> 20} MiB", end="", file=sys.stderr, flush=True)


def _diagnose(paths: list, output: str) -> int:
    from breakglass.diagnose.engine import Options, diagnose_paths
    from breakglass.core.errors import ExitCode

    progress = _progress_line if sys.stderr.isatty() else None

    def load_output() -> None:  # while the scan's workers run (Options.meanwhile)
        if output == "json":
            import breakglass.core.envelope  # noqa: F401
        else:
            import breakglass.present.render  # noqa: F401

    try:
        diag, warnings = diagnose_paths(paths, Options(max_evidence=5, engine="auto", progress=progress,
                                                       meanwhile=load_output))
    finally:
        if progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    code = int(ExitCode.FOUND if diag.verdict.needs_action else ExitCode.OK)
    if output == "json":
        from breakglass.core.envelope import dumps, envelope

        text = dumps(envelope("Diagnosis", diag, code, warnings))
    else:
        from breakglass.present import render

        text = render.diagnosis(diag, warnings, False)
    print(text)
    return code


def _leaks(paths: list, output: str) -> int:
    from breakglass import leaks as _leaks
    from breakglass.core.errors import ExitCode
    from breakglass.leaks.audit import scan

    rep = scan(paths, None, None, None, 60.0, sources=None)
    code = int(ExitCode.FOUND if rep.leaks else ExitCode.OK)
    if output == "csv":
        _leaks.to_csv(rep, sys.stdout)
    elif output == "recheck":
        print(_leaks.recheck_yaml(rep), end="")
    elif output == "json":
        from breakglass.core.envelope import dumps, envelope

        print(dumps(envelope("LeakReport", rep.to_json(), code, [])))
    else:
        from breakglass.present import render

        print(render.leak_report(rep, False))
    return code


def _fast(argv: list) -> int | None:
    """The exit code of a fast scan, or None when the full command line should run."""
    if not argv:
        return None
    if argv in (["--version"], ["-V"]):  # what image builds and scripts ask first; the same line as the full CLI's
        from breakglass import version_line

        print(version_line())
        return 0
    if argv[0] == "diagnose":
        parsed, run = _paths_and_output(argv[1:], ("text", "json")), _diagnose
    elif argv[0] == "leaks":
        parsed, run = _paths_and_output(argv[1:], ("text", "json", "csv", "recheck"), "--audit-log"), _leaks
    else:
        return None
    if parsed is None:
        return None
    try:
        return run(*parsed)
    except KeyboardInterrupt:
        from breakglass.cli._base import Output, _emit_error
        from breakglass.core.errors import ExitCode

        _emit_error("interrupted", "interrupted", int(ExitCode.INTERRUPTED),
                    Output.json if parsed[1] == "json" else Output.text)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        sys.stderr.close()  # reader went away (| head), as the full command line treats it
        return 0
    except Exception:  # noqa: BLE001 - the full command line reports it, with its own exit code and message
        return None


def _exit(code: int) -> None:
    """End after a fast scan: its output is flushed here and nothing else needs tearing down (the interpreter's
    finalisation of the scan's objects took ~5 ms of a 0.2 s diagnose, measured)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = 0  # the reader went away (| head), as _fast treats it
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError):  # closed after a broken pipe
        pass
    os._exit(code)


def entry() -> None:
    """The installed `breakglass` command (pyproject's console script) and `python -m breakglass`: the fast
    scans first, so the command people type starts as fast as the module does."""
    code = _fast(sys.argv[1:])
    if code is not None:
        _exit(code)
    from breakglass.cli import main

    main()


if __name__ == "__main__":
    entry()
