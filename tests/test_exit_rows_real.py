"""The exit-code table, row by row, on one real deadlocked kube-apiserver (issue 33 §7): each code is what the
manual (docs/exit-codes.md) says it is, from the apiserver's point of view. Rows that need no cluster (1, 6, 9, 130) are walked in
test_exit_code_walk.py, test_bundle.py and test_full_disk.py."""

from __future__ import annotations

import json
import os
import re
import socket

from breakglass.core.errors import ExitCode
from breakglass.flows import wizard
from breakglass.present.prompts import ScriptedPrompter
from breakglass.sandbox import scenarios
from tests.conftest import ROOT
from tests.real_control_plane import binary_for, real_sandbox  # noqa: F401 - the fixture


def _dead() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def _rows() -> set[int]:
    with open(os.path.join(ROOT, "docs", "exit-codes.md"), encoding="utf-8") as f:
        table = f.read()
    return {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}


def test_every_row_with_the_real_apiserver(real_sandbox, tmp_path):
    _, binary = binary_for("1.34")
    sb = real_sandbox(binary)
    seen: dict[int, str] = {}

    def run(code: int, *args, what: str):
        p = sb.cli(*args)
        assert p.returncode == code, (what, p.stdout.decode()[-600:], p.stderr.decode()[-600:])
        if p.returncode:
            assert b"Traceback" not in p.stderr
        seen[code] = what
        return p

    name = scenarios.KYVERNO_NAME
    etcd = ("--etcd-endpoints", sb.endpoint)
    # 3: the apiserver's own log shows the deadlock
    run(3, "diagnose", sb.api["log"], what="diagnose finds the deadlock")
    # 2: an unknown configuration is bad input, and nothing changes
    run(2, "recover", "etcd", "-w", "no-such-configuration", *etcd, "--yes", what="unknown name")
    # 5: an etcd nobody listens on
    run(5, "recover", "etcd", "-w", name, "--etcd-endpoints", f"http://{_dead()}", "--timeout", "1", "--yes",
        what="etcd unreachable")
    # 8: applied, but nothing to ask: the apiserver's readiness was not checked
    run(8, "recover", "etcd", "-w", name, *etcd, "--no-wait", "--yes", what="applied, not verified")
    # 0 only when /readyz is 200: the change in place and the apiserver seen ready
    p = run(0, "recover", "etcd", "-w", name, *etcd, "--apiserver", sb.api["url"], "--wait-timeout", "150",
            "--yes", "-o", "json", what="already applied, and ready")
    assert json.loads(p.stdout)["result"]["status"] == "already-done"
    # 4: the revert would re-arm a webhook whose backend cannot answer the apiserver's call
    run(4, "revert", "--yes", what="revert refused: backend down")
    # 7: the wizard's resume, the revert's risk stated, and the typed word not given
    p = ScriptedPrompter(["revert", ""])
    code = wizard.run(p, sb.state)
    assert code == int(ExitCode.DECLINED), p.transcript
    assert any("Not safe to revert yet" in line for line in p.transcript), p.transcript
    seen[7] = "wizard resume: re-arm declined"
    # 8: reverted over the guard (--force): the apiserver's own canary call fails, so not verified
    kube = ("--kubeconfig", sb.api["kubeconfig"])  # this sandbox is not in the default directory: say which API
    p = run(8, "revert", "--yes", "--force", *kube, "-o", "json", what="forced revert, canary failed")
    told = json.loads(p.stdout)
    assert told["result"]["guard"]["canary"]["ok"] is False, told["result"]["guard"]
    assert any(n.startswith("breakglass recover etcd") for n in told["outcome"]["next"]), told["outcome"]
    # 0: the backend back, then the take-back command and a revert the apiserver itself agrees with
    assert sb.cli("sandbox", "backend", "start", "--dir", sb.dir).returncode == 0
    run(0, "recover", "etcd", "-w", name, *etcd, "--apiserver", sb.api["url"], "--wait-timeout", "150", "--yes",
        what="recover verified")
    p = run(0, "revert", "--yes", *kube, "-o", "json", what="revert verified by the canary")
    assert json.loads(p.stdout)["result"]["guard"]["canary"]["ok"] is True
    walked_elsewhere = {1, 6, 9, 130}
    assert _rows() - walked_elsewhere <= set(seen), (sorted(_rows()), seen)
