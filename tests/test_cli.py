"""The CLI contract: exit codes, one-line errors, the JSON envelope, help and docs for every command."""

from __future__ import annotations

import json
import os
import re

import pytest

from breakglass.core.errors import EXIT_CODE_MEANINGS
from tests import logbuild as lb
from tests.conftest import ROOT, run_cli

DEADLOCK = ("I0224 15:32:50.979280 1 default_servicecidr_controller.go:166] Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]\n"
            + lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "connection refused")) + "\n").encode()


def _one_line_error(proc):
    err = proc.stderr.decode()
    assert "Traceback" not in err and "Traceback" not in proc.stdout.decode()
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines and lines[0].startswith("breakglass: error: ")
    assert len(lines) <= 2 and all(not x.startswith(" ") for x in lines)
    return lines[0]


def test_deadlock_from_stdin_exits_3_and_json_envelope():
    p = run_cli("diagnose", "-", "-o", "json", stdin=DEADLOCK)
    assert p.returncode == 3
    doc = json.loads(p.stdout)
    assert doc["apiVersion"] == "breakglass/v1alpha1" and doc["kind"] == "Diagnosis" and doc["exitCode"] == 3
    f = doc["result"]["findings"][0]
    assert f["webhook"] == "validate.kyverno.svc-fail" and f["blocked"] == ['ServiceCIDR "kubernetes"']
    assert doc["result"]["verdict"]["state"] == "deadlocked"


def test_stdin_is_the_default_when_piped():
    assert run_cli("diagnose", stdin=DEADLOCK).returncode == 3


def test_nothing_found_exits_0(tmp_path):
    p = tmp_path / "ok.log"
    p.write_text("I0224 15:32:50.000000 1 x.go:1] all good\n")
    proc = run_cli("diagnose", str(p))
    assert proc.returncode == 0 and b"nothing found" in proc.stdout


@pytest.mark.parametrize("setup,match", [
    (lambda d: str(d / "missing.log"), "no such file"),
    (lambda d: (d / "bin").write_bytes(os.urandom(50_000)) and str(d / "bin"), "binary data"),
    (lambda d: ((d / "t.gz").write_bytes(__import__("gzip").compress(DEADLOCK * 50)[:-30]), str(d / "t.gz"))[1],
     "truncated gzip"),
    (lambda d: ((d / "empty").mkdir(), str(d / "empty"))[1], "no log files"),
])
def test_bad_input_one_line_exit_2(tmp_path, setup, match):
    path = setup(tmp_path)
    for out in ("text", "json"):
        p = run_cli("diagnose", path, "-o", out)
        assert p.returncode == 2, p.stderr
        assert match in _one_line_error(p)
        if out == "json":
            doc = json.loads(p.stdout)
            assert doc["kind"] == "Error" and doc["exitCode"] == 2 and match in doc["error"]["message"]


def test_no_logs_on_a_terminal_is_bad_usage():
    import pexpect
    child = pexpect.spawn(f"{__import__('sys').executable} -m breakglass diagnose", cwd=ROOT, timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert b"no logs given" in child.before


def test_unknown_option_is_usage_error():
    p = run_cli("diagnose", "--no-such-flag")
    assert p.returncode == 2 and b"Traceback" not in p.stderr


def _walk(group, prefix=()):
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from _walk(cmd, prefix + (name,))
        else:
            yield prefix + (name,), cmd


def _commands():
    from breakglass.cli import app
    import typer.main
    return [" ".join(path) for path, _ in _walk(typer.main.get_group(app))]


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_help_and_is_documented(command):
    p = run_cli(*command.split(), "--help")
    assert p.returncode == 0 and len(p.stdout) > 100
    assert b"Examples:" in p.stdout and b"breakglass " in p.stdout.split(b"Examples:")[1], "help without an example"
    from tests.conftest import manual

    assert f"breakglass {command}" in manual(), f"the manual does not document `breakglass {command}`"


def test_every_command_takes_output_json():
    from breakglass.cli import app
    import typer.main
    for path, cmd in _walk(typer.main.get_group(app)):
        assert any("--output" in p.opts for p in cmd.params), path


def test_the_exit_code_page_matches_the_code():
    from tests.conftest import manual

    readme = manual("exit-codes.md")
    rows = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|", readme, re.M))
    assert {int(k) for k in rows} == {int(c) for c in EXIT_CODE_MEANINGS}


def test_version_json():
    p = run_cli("version", "-o", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["result"]["breakglass"]


@pytest.mark.parametrize("argv", [["--version"], ["-V"], ["--version", "--help"]])
def test_dash_dash_version_is_one_line_from_the_fast_path_and_the_full_command_line(argv):
    """`--version` alone takes the fast path (no typer); with anything after it the full command line answers,
    eagerly, with the same line."""
    from breakglass import __version__

    p = run_cli(*argv)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode() == f"breakglass {__version__}\n"


def test_the_core_never_imports_the_ui_libraries():
    """typer only in breakglass/cli/; questionary only in the prompter behind prompts.Prompter; rich nowhere."""
    import ast
    import glob
    allowed = {"typer": ("cli/",), "questionary": ("cli/prompter.py",), "rich": ()}
    pkg = os.path.join(ROOT, "breakglass")
    checked = 0
    for path in glob.glob(os.path.join(pkg, "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, pkg)
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                if top in allowed:
                    assert rel.startswith(allowed[top]), f"breakglass/{rel} imports {name}"
                    checked += 1
    assert checked > 10  # the CLI's own imports were seen, so the walk works


def test_an_unknown_output_format_is_one_plain_line():
    """Typer passes pydantic's wording on for a bad choice ("Value error, 'yaml' is not one of ..."): the engineer
    reads what they typed and the choices, nothing of the parser's internals (issue 37 §9)."""
    p = run_cli("audit", "-o", "yaml")
    err = p.stderr.decode()
    assert p.returncode == 2 and err.splitlines()[0] == (
        "breakglass: error: invalid value for '--output' / '-o': 'yaml' is not one of 'text', 'json', 'junit', "
        "'sarif'"), err
    assert "Value error" not in err
