"""leaks reads audit logs where they are: on Talos nodes through `talosctl ls`/`read` (the stand-in), and on
kubeadm nodes over a real SSH server with sudo (the files are root's, mode 0600, as kube-apiserver writes them)."""

from __future__ import annotations

import gzip
import json
import os
import shutil

from tests.conftest import ROOT, run_cli
from tests.test_talos import FakeTalos

EXAMPLE = os.path.join(ROOT, "examples", "audit", "gke-gatekeeper-rollout.audit.log")

def _rotated(d):
    """The example's lines as lumberjack leaves them: an older gzipped file, then the live one."""
    lines = open(EXAMPLE, "rb").read().splitlines(keepends=True)
    half = len(lines) // 2
    d.mkdir(parents=True)
    (d / "kube-apiserver-2026-02-24T15-40-00.000.log.gz").write_bytes(gzip.compress(b"".join(lines[:half])))
    (d / "kube-apiserver.log").write_bytes(b"".join(lines[half:]))
    return d

def _local():
    return json.loads(run_cli("leaks", "--audit-log", EXAMPLE, "-o", "json").stdout)["result"]

def _same(got, want):
    key = ("audit_id", "time", "verb", "resource", "namespace", "name")
    assert [[x[k] for k in key] for x in got["leaks"]] == [[x[k] for k in key] for x in want["leaks"]]
    assert got["recheck"] == want["recheck"]

def test_talos_nodes_default_to_talos_audit_dir(tmp_path):
    t = FakeTalos(tmp_path)
    for n in ("cp1", "cp2"):  # an HA control plane: each apiserver logs its own requests
        t.node(n, "v1.10-single.yaml", "1.10")
    _rotated(t.dir / "nodes" / "cp1.fs" / "var" / "log" / "audit" / "kube")
    shutil.copytree(t.dir / "nodes" / "cp1.fs", t.dir / "nodes" / "cp2.fs")  # the same requests twice: counted once
    p = t.cli("leaks", "--talos-node", "cp1,cp2", "-o", "json")
    assert p.returncode == 3, p.stderr
    got = json.loads(p.stdout)["result"]
    _same(got, _local())
    assert got["sources"] == [f"{n}:/var/log/audit/kube/{f}" for n in ("cp1", "cp2") for f in (
        "kube-apiserver-2026-02-24T15-40-00.000.log.gz", "kube-apiserver.log")]
    calls = [json.loads(x) for x in open(t.dir / "calls.log")]
    assert ["ls", "/var/log/audit/kube/", "--type", "f", "--recurse"] in [c[2:] for c in calls]

def test_talos_missing_path_and_unreachable_node_are_one_line(tmp_path):
    t = FakeTalos(tmp_path)
    t.node("cp1", "v1.10-single.yaml", "1.10")
    p = t.cli("leaks", "--talos-node", "cp1", "--audit-log", "/var/log/nope/")
    assert p.returncode == 2 and b"cp1:/var/log/nope/: no such file or directory" in p.stderr
    assert len(p.stderr.splitlines()) == 1
    p = t.cli("leaks", "--talos-node", "cp9")  # not answering at all: unreachable
    assert p.returncode == 5 and b"connection refused" in p.stderr and len(p.stderr.splitlines()) == 1

def test_ssh_reads_root_only_audit_logs_with_sudo(tmp_path, sshd):
    d = _rotated(tmp_path / "audit")
    for f in d.iterdir():
        os.chmod(f, 0o600)  # root's, as kube-apiserver writes them: only sudo can read them
    os.chmod(d, 0o700)
    args = ["--ssh-config", sshd.ssh_config, "--known-hosts", sshd.known_hosts]
    p = run_cli("leaks", "--audit-log", str(d), "--ssh", "cp1,cp2", *args, "-o", "json")
    assert p.returncode == 3, p.stderr
    got = json.loads(p.stdout)["result"]
    _same(got, _local())
    assert len(got["sources"]) == 4 and got["sources"][0].startswith("cp1:")
    p = run_cli("leaks", "--audit-log", str(tmp_path / "none"), "--ssh", "cp1", *args)
    assert p.returncode == 2 and b"no such file" in p.stderr and len(p.stderr.splitlines()) == 1
    p = run_cli("leaks", "--ssh", "cp1", *args)
    assert p.returncode == 2 and b"no logs given" in p.stderr
