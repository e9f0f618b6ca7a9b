"""The fast path (`breakglass/__main__.py`): `diagnose FILE...` and `leaks --audit-log FILE...` run without the
command line, and must print exactly what the command line prints, with the same exit code."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(HERE)
REAL = sorted(glob.glob(os.path.join(HERE, "fixtures", "real", "v1.34.4", "*.log")))[:6]
FULL = "import sys; from breakglass.cli import main; sys.argv[0] = 'breakglass'; main()"
# The fast path ends with os._exit (no finally runs after it): the marker is printed by a wrapper of its exit.
FAST = ("import sys; sys.argv[0] = 'breakglass'; import breakglass.__main__ as m\n"
        "def mark():\n    print('TYPER' if 'typer' in sys.modules else 'NO-TYPER', file=sys.stderr)\n"
        "end = m._exit\nm._exit = lambda code: (mark(), end(code))\n"
        "try:\n    m.entry()\nexcept SystemExit:\n    mark()\n    raise")


def _run(code: str, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


def _same(args: list[str], fast_expected: bool = True) -> tuple[subprocess.CompletedProcess, ...]:
    full, fast = _run(FULL, args), _run(FAST, args)
    assert fast.returncode == full.returncode, (fast.stderr, full.stderr)
    assert _norm(fast.stdout) == _norm(full.stdout)
    *said, marker = fast.stderr.rstrip("\n").split("\n")
    assert marker == ("NO-TYPER" if fast_expected else "TYPER"), fast.stderr
    assert "\n".join(said).strip() == full.stderr.strip()
    return full, fast


def _norm(out: str) -> str:
    return re.sub(r'"seconds": [0-9.]+', '"seconds": 0', re.sub(r"in [0-9.]+ ?s\b", "in Ns", out))


@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize("path", REAL, ids=os.path.basename)
def test_diagnose_prints_what_the_command_line_prints(path, output):
    full, _ = _same(["diagnose", path, "-o", output])
    assert full.returncode in (0, 3)


@pytest.mark.parametrize("output", ["text", "json", "csv", "recheck"])
def test_leaks_prints_what_the_command_line_prints(tmp_path, output):
    from tests.test_leaks import story

    log = tmp_path / "audit.log"
    log.write_text("\n".join(story()) + "\n")
    full, _ = _same(["leaks", "--audit-log", str(log), "-o", output])
    assert full.returncode == 3


def test_errors_and_other_commands_go_to_the_command_line(tmp_path):
    full, fast = _same(["diagnose", str(tmp_path / "missing.log")], fast_expected=False)  # errors: said by the CLI
    assert full.returncode == 2 and "no such file" in full.stderr
    _same(["diagnose", REAL[0], "--scanner", "python"], fast_expected=False)  # an option the fast path leaves
    _same(["version", "-o", "json"], fast_expected=False)


def test_the_installed_command_enters_through_the_fast_path():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["breakglass"] == "breakglass.__main__:entry"
    out = _run(FAST, ["diagnose", REAL[0], "-o", "json"])
    assert json.loads(out.stdout)["kind"] == "Diagnosis"
