"""`make demo` ends by saying how to run breakglass yourself (issue 26 §6), and what it says works."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="runs from the virtual environment `make demo` makes")
def test_the_demo_ends_with_how_to_get_breakglass_on_path_and_that_advice_works():
    p = subprocess.run([sys.executable, "-c", "import demo; demo.on_path()"], cwd=ROOT, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "examples")}, check=True)
    lines = p.stdout.splitlines()
    activate = next(ln.split()[1] for ln in lines if ln.strip().startswith(". "))
    by_path = next(ln.split()[0] for ln in lines if ln.strip().endswith("without activating"))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # breakglass is not on it until the advice is followed
    assert subprocess.run(["sh", "-c", "command -v breakglass"], cwd=ROOT, env=env).returncode != 0
    followed = subprocess.run(["sh", "-c", f". {activate} && breakglass --help"], cwd=ROOT, env=env,
                              capture_output=True, text=True)
    assert followed.returncode == 0 and "sandbox" in followed.stdout, followed.stderr
    direct = subprocess.run([by_path, "--help"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert direct.returncode == 0 and "sandbox" in direct.stdout, direct.stderr
