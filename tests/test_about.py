"""breakglass version: its libraries (with whether the native ones load) and the tools on PATH."""

from __future__ import annotations

import json
import os
import stat

from breakglass.core import about
from tests.conftest import ROOT, run_cli


def _tool(dir_, name, text):
    p = dir_ / name
    p.write_text("#!/bin/sh\nprintf '%s\\n' '" + text.replace("\n", "' '") + "'\n")  # PATH has no cat
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_versions_of_tools_on_path(tmp_path, monkeypatch):
    _tool(tmp_path, "kubectl", "Client Version: v1.34.1\nKustomize Version: v5.7.1")
    _tool(tmp_path, "talosctl", "Client:\n\tTag:         v1.11.5\n\tSHA:         1a2b3c4d")
    _tool(tmp_path, "etcdctl", "etcdctl version: 3.5.21\nAPI version: 3.5")
    monkeypatch.setenv("PATH", str(tmp_path))  # no ssh here
    got = {t.name: (t.version, t.path) for t in about.collect(check_imports=False).tools}
    assert got == {"kubectl": ("v1.34.1", str(tmp_path / "kubectl")), "talosctl": ("v1.11.5", str(tmp_path / "talosctl")),
                   "etcdctl": ("3.5.21", str(tmp_path / "etcdctl")), "ssh": (None, None)}


def test_what_the_talosctl_stand_in_prints_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TALOS_DIR", str(tmp_path))
    t = about._tool("python3", [os.path.join(ROOT, "tests", "fake_talosctl.py"), "version", "--client"],
                    about.TOOLS[1][2], 5)
    assert t.version == "v1.12.0-fake"


def test_cli_text_and_json():
    p = run_cli("version")
    assert p.returncode == 0 and b"LIBRARY" in p.stdout and b"grpcio" in p.stdout
    j = json.loads(run_cli("version", "-o", "json").stdout)["result"]
    libs = {x["name"]: x for x in j["libraries"]}
    assert libs["grpcio"]["version"] and libs["grpcio"]["loads"] is True  # installed for the tests: it must load
    assert j["python"] and j["bundle"] is None
    assert run_cli("version", "--short").stdout.strip().startswith(b"breakglass ")
