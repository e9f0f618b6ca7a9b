"""Shell completion for bash, zsh and fish, and `kubectl breakglass` from the installed entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_cli

BIN = os.path.dirname(sys.executable)  # the virtual environment's bin: breakglass, kubectl-breakglass


def _complete(env: dict) -> str:
    p = subprocess.run([os.path.join(BIN, "breakglass")], env={**os.environ, **env}, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_bash_completes_commands_and_options():
    assert _complete({"_BREAKGLASS_COMPLETE": "complete_bash", "COMP_WORDS": "breakglass dia", "COMP_CWORD": "1"}) \
        .split() == ["diagnose"]
    got = _complete({"_BREAKGLASS_COMPLETE": "complete_bash", "COMP_WORDS": "breakglass recover --meth",
                     "COMP_CWORD": "2"})
    assert got.split() == ["--method"]


def test_zsh_and_fish_complete_subcommands():
    zsh = _complete({"_BREAKGLASS_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "breakglass etcd sn"})
    assert "snapshot" in zsh and "restore" not in zsh
    fish = _complete({"_BREAKGLASS_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "breakglass sandbox ",
                      "_TYPER_COMPLETE_FISH_ACTION": "get-args"})
    assert {line.split("\t")[0] for line in fish.splitlines()} == {"up", "down", "status", "backend", "engine", "tunnel"}


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o default -F _breakglass_completion breakglass"),
                                          ("zsh", "#compdef breakglass"), ("fish", "complete --command breakglass")])
def test_completion_prints_each_shells_script(shell, marker):
    p = run_cli("completion", shell)
    assert p.returncode == 0 and marker in p.stdout.decode()
    assert f"_BREAKGLASS_COMPLETE=complete_{shell}" in p.stdout.decode()
    assert run_cli("completion", "tcsh").returncode == 2


def test_kubectl_runs_the_installed_plugin():
    kubectl = shutil.which("kubectl")
    assert kubectl, "make test installs kubectl (Debian kubernetes-client) for this test"
    assert os.path.exists(os.path.join(BIN, "kubectl-breakglass")), "pip install -e . puts it in the venv"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    p = subprocess.run([kubectl, "plugin", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert os.path.join(BIN, "kubectl-breakglass") in p.stdout
    p = subprocess.run([kubectl, "breakglass", "diagnose", os.path.join(ROOT, "examples", "logs",
                                                                         "healthy-apiserver.log")],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([kubectl, "breakglass", "leaks"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith("breakglass: error: no logs given")
    p = subprocess.run([kubectl, "breakglass", "recover", "--bogus"], env=env, capture_output=True, text=True)
    # one line, and the help to read, named as the engineer typed it
    assert p.returncode == 2 and "`kubectl breakglass recover --help` shows the options" in p.stderr


def test_kubectl_plugin_completion_speaks_cobra():
    exe = os.path.join(BIN, "kubectl_complete-breakglass")
    out = subprocess.run([exe, "recover", "--method", ""], capture_output=True, text=True, timeout=60).stdout
    assert out.splitlines() == ["kubeapi", "static-manifests", "talos", "kubeadm", "k3s", "rke2", "etcd", ":4"]  # the registry's rank order
    out = subprocess.run([exe, "diagnose", ""], capture_output=True, text=True, timeout=60).stdout
    assert out.splitlines()[-1] == ":0"  # log paths: the shell completes file names
    kubectl = shutil.which("kubectl")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    p = subprocess.run([kubectl, "__complete", "breakglass", "et"], env=env, capture_output=True, text=True,
                       timeout=60)
    if "kubectl_complete-breakglass" not in p.stderr:
        pytest.skip("this kubectl predates plugin completion (1.26); the direct call above is the test")
    assert p.stdout.splitlines()[0].startswith("etcd\t") and p.stdout.splitlines()[-1] == ":4"
