"""Benchmark the 3 a.m. triage: which ways out are reachable, against the usual manual checks.

The outage as the planner meets it: kube-apiserver's port accepts connections but never answers (it
is stuck), one control-plane host's SSH port does the same (the node is wedged), and etcd is healthy.
Timed, each as a whole command, with the same 3 s timeout per check:
  breakglass recover --auto --dry-run -w CFG --kubeconfig K --ssh HOST --etcd-endpoints E
      (probes all three in parallel, picks the first viable way out, plans it: the etcd deletion's diff)
  kubectl get --raw /readyz --request-timeout=3s; etcdctl endpoint health --command-timeout=3s;
  ssh -o ConnectTimeout=3 HOST true      (one after another, as an engineer types them; no plan at the end)
Usage: python bench/triage.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, need, report, run, seeded_etcd  # noqa: E402


def hung_port() -> tuple[socket.socket, int]:
    """A port whose connections complete the TCP handshake and then hear nothing."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s, s.getsockname()[1]


def main() -> int:
    for tool in ("kubectl", "etcdctl", "ssh"):
        need(tool)
    with seeded_etcd(0, 1) as (srv, _, blobs, tmp):
        api_sock, api_port = hung_port()
        ssh_sock, ssh_port = hung_port()
        try:
            _triage(srv, blobs, tmp, api_port, ssh_port)
        finally:
            api_sock.close()
            ssh_sock.close()
    return 0


def _triage(srv, blobs, tmp, api_port, ssh_port) -> None:
    """One probe-and-plan run against a hung apiserver and a wedged SSH port, and the same checks by hand."""
    kubeconfig = os.path.join(tmp, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write(f"apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n"
                f"    server: https://127.0.0.1:{api_port}\n    insecure-skip-tls-verify: true\n"
                f"users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n"
                f"    cluster: c\n    user: u\n")
    ssh_config = os.path.join(tmp, "ssh_config")
    with open(ssh_config, "w") as f:
        f.write(f"Host cp1\n  HostName 127.0.0.1\n  Port {ssh_port}\n  User root\n")
    cfg = next(iter(blobs)).decode().rsplit("/", 1)[-1]
    cmd = [*BREAKGLASS, "recover", "--auto", "--dry-run", "-o", "json", "-w", f"validating/{cfg}",
           "--kubeconfig", kubeconfig, "--ssh", "cp1", "--ssh-config", ssh_config,
           "--known-hosts", os.path.join(tmp, "known_hosts"), "--etcd-endpoints", srv.endpoint,
           "--state-dir", os.path.join(tmp, "state")]
    chosen = subprocess.run(cmd, capture_output=True, text=True)
    assert json.loads(chosen.stdout)["result"]["method"] == "etcd", chosen.stderr  # the plan, not an error
    ours, _, code = run(cmd)
    assert code == 0, f"breakglass exited {code}"
    script = (f"kubectl --kubeconfig {kubeconfig} get --raw /readyz --request-timeout=3s; "
              f"etcdctl --endpoints {srv.endpoint} --command-timeout=3s endpoint health; "
              f"ssh -F {ssh_config} -o ConnectTimeout=3 -o BatchMode=yes cp1 true; true")
    theirs, _, _ = run(["sh", "-c", script])
    report("triage: probe apiserver, etcd, SSH and plan", ours, theirs,
           "kubectl + etcdctl + ssh in turn", "lower is better: parallel probes, and the plan comes with it")


if __name__ == "__main__":
    sys.exit(main())
