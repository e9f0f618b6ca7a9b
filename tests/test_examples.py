"""The bundled example logs say what examples/logs/README.md says they show."""

from __future__ import annotations

import os

import pytest

from breakglass.diagnose.engine import Options, diagnose_paths
from tests.conftest import ROOT

EX = os.path.join(ROOT, "examples", "logs")
EXPECT = {
    "talos-servicecidr-kyverno.log": ("deadlocked", "webhook-unreachable", "validate.kyverno.svc-fail"),
    "kubeadm-priorityclass-gatekeeper.log": ("deadlocked", "webhook-timeout", "validation.gatekeeper.sh"),
    "gke-gatekeeper-fail-open.jsonl": ("leaking", "webhook-fail-open", "validation.gatekeeper.sh"),
    "pods": ("degraded", "webhook-tls", "webhook.cert-manager.io"),
    "ticket-paste.txt": ("deadlocked", "webhook-rejects-bootstrap", "validate.kyverno.svc-fail"),
    "k3s-journald-istio.log": ("degraded", "webhook-timeout", "namespace.sidecar-injector.istio.io"),
    "ipaddress-not-ready.log": ("deadlocked", "admission-not-ready", None),
    "healthy-apiserver.log": ("clear", None, None),
}


def test_every_example_is_covered_and_described():
    readme = open(os.path.join(EX, "README.md"), encoding="utf-8").read()
    names = {n for n in os.listdir(EX) if not n.endswith((".py", ".md"))}
    assert names == set(EXPECT)
    for n in names:
        assert n in readme


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example(name):
    state, family, webhook = EXPECT[name]
    d, warnings = diagnose_paths([os.path.join(EX, name)], Options(year=2026))
    assert d.verdict.state == state and not warnings
    if family:
        top = d.findings[0]
        assert (top.family, top.webhook) == (family, webhook)
    else:
        assert d.findings == []


def test_examples_regenerate_identically(tmp_path):
    import filecmp
    import shutil
    import subprocess
    import sys
    copy = tmp_path / "logs"
    shutil.copytree(EX, copy)
    subprocess.run([sys.executable, str(copy / "generate.py")], check=True)
    cmp = filecmp.dircmp(EX, copy)
    assert not cmp.diff_files
