"""k3s and RKE2 nodes over the real OpenSSH server: which distribution a node runs (breakglass.access.distro), etcd found
where that distribution keeps it (embedded etcd's client certificates, or k3s' kine on its unix socket, reached
through an SSH channel to the socket), and `diagnose --ssh` reading k3s' journal and RKE2's static-pod logs.

"The node" is a directory laid out as a k3s or RKE2 server's root, on this machine (the SSH server logs in here):
breakglass is pointed at it with $BREAKGLASS_NODE_ROOT, as it would be at /host in a debug container. etcd is real,
with TLS client authentication and certificates from the sandbox's throwaway CA (breakglass/sandbox/pki.py); kine
is real (built by `make go-components`), serving a SQLite file on the socket where k3s puts it. `journalctl` on the
SSH sessions' PATH is a stand-in that prints a unit's journal from ROOT/var/log/journal/UNIT.txt: its lines are
real journal excerpts copied from public issues (tests/fixtures/journals/SOURCES.yaml).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile

import pytest
import yaml

from breakglass.access import distro
from tests.conftest import ROOT, run_cli

FIX = os.path.join(ROOT, "tests", "fixtures", "journals")

JOURNALCTL = """#!/bin/sh
# journalctl stand-in: prints UNIT's journal from DIR/UNIT.txt (journalctl -D DIR -u UNIT ...)
d=; u=
while [ $# -gt 0 ]; do case "$1" in -D) d=$2; shift;; -u) u=$2; shift;; esac; shift; done
if [ -z "$d" ] || [ ! -f "$d/$u.txt" ]; then echo "Failed to open journal for $u in '$d'" >&2; exit 1; fi
exec cat "$d/$u.txt"
"""


@pytest.fixture(scope="module")
def node_sshd(tmp_path_factory):
    """A real sshd whose sessions find the journalctl stand-in first on PATH."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the OpenSSH fixture needs root (sshd privilege separation)")
        pytest.skip("the OpenSSH fixture needs root (sshd privilege separation); CI runs as root")
    from tests import sshd_server

    bindir = str(tmp_path_factory.mktemp("journalctl-bin"))
    os.chmod(bindir, 0o755)
    with open(os.path.join(bindir, "journalctl"), "w") as f:
        f.write(JOURNALCTL)
    os.chmod(os.path.join(bindir, "journalctl"), 0o755)
    srv = sshd_server.start(str(tmp_path_factory.mktemp("ssh")),
                            extra_config=f"SetEnv PATH={bindir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin\n")
    yield srv
    srv.stop()


@pytest.fixture
def root():
    """A node root of our own, short (a unix socket path has at most 107 bytes)."""
    d = tempfile.mkdtemp(prefix="bg-node-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _ssh(srv) -> list[str]:
    return ["--ssh-config", srv.ssh_config, "--known-hosts", srv.known_hosts]


def _node(srv):
    from breakglass.access.ssh import Node, SshOptions

    return Node("cp1", SshOptions(config=srv.ssh_config, known_hosts=srv.known_hosts)).connect()


def _touch(root: str, path: str, text: str = "") -> str:
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)
    return full


def _layout(root: str, name: str) -> None:
    """What each distribution's installer leaves on a server node."""
    if name in ("k3s", "rke2"):
        r = distro.rancher(name)
        os.makedirs(root + r["server"], exist_ok=True)
        _touch(root, f"/etc/systemd/system/{r['unit']}" if name == "k3s" else f"/usr/lib/systemd/system/{r['unit']}",
               "[Service]\n")
        _touch(root, r["config"], "write-kubeconfig-mode: '0644'\n")
    elif name == "kubeadm":
        _touch(root, distro.KUBEADM["manifest"], "apiVersion: v1\nkind: Pod\n")
    elif name == "talos":
        _touch(root, "/etc/os-release", 'NAME="Talos"\nID=talos\n')


def _one_line_error(p) -> str:
    err = p.stderr.decode()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and "Traceback" not in err, err
    errors = [ln for ln in lines if ln.startswith("breakglass: error: ")]
    assert len(errors) == 1 and all(ln.startswith(("hint: ", "breakglass: error: ")) or " runs " in ln
                                    for ln in lines), err
    return errors[0]


# -- detection --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout,expected", [
    (["k3s"], "k3s"), (["rke2"], "rke2"), (["kubeadm"], "kubeadm"), (["talos", "k3s"], "talos"), ([], "unknown"),
    (["k3s", "kubeadm"], "unknown")])
def test_detects_the_distribution_over_ssh_with_the_evidence_in_order(node_sshd, root, layout, expected):
    for name in layout:
        _layout(root, name)
    d = distro.detect(_node(node_sshd), root)
    assert d.name == expected, d.evidence
    assert d.evidence[0].startswith(("found /etc/os-release", "no ID"))
    if expected in ("k3s", "rke2"):
        r = distro.rancher(expected)
        assert f"found {root}{r['server']} (directory)" in d.evidence
        assert any(e.startswith("found ") and e.endswith(f"/{r['unit']} (file)") for e in d.evidence)
        assert d.ways_out() == ("kubeapi", expected, "etcd")
        # the order it was looked in: RKE2's markers before k3s', k3s' before kubeadm's
        checked = [e.split()[1] for e in d.evidence[1:] if "/var/lib/rancher/" in e or "/etc/kubernetes/" in e]
        assert checked.index(root + "/var/lib/rancher/rke2/server") < checked.index(root + "/var/lib/rancher/k3s/server")
    if layout == ["k3s", "kubeadm"]:
        assert "markers of k3s and kubeadm on one node" in d.evidence[-1]
    assert d.summary().startswith("cp1 runs")


def test_local_detection_and_a_bad_root():
    from breakglass.access.local import LocalNode
    from breakglass.core.errors import BadInput

    d = tempfile.mkdtemp(prefix="bg-node-")
    try:
        _layout(d, "rke2")
        assert distro.detect(LocalNode(), d).name == "rke2"
    finally:
        shutil.rmtree(d)
    with pytest.raises(BadInput, match="absolute"):
        distro.detect(LocalNode(), "relative/root")


# -- etcd through SSH, found by the distribution --------------------------------------------------------------------
@pytest.fixture(scope="module")
def sandbox_etcd(tmp_path_factory):
    """A real etcd with TLS client authentication, its certificates from the sandbox's throwaway CA."""
    from breakglass.sandbox import etcd_command, free_port, pki, wait_listening

    d = str(tmp_path_factory.mktemp("etcd-ca"))
    p = pki.make(os.path.join(d, "pki"))
    cport, pport = free_port(), free_port()
    args = etcd_command(shutil.which("etcd") or "/usr/bin/etcd", "n", os.path.join(d, "data"),
                        f"https://127.0.0.1:{cport}", pport)
    args += ["--cert-file", p.serving_cert, "--key-file", p.serving_key, "--client-cert-auth",
             "--trusted-ca-file", p.ca]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert wait_listening(proc, cport, 30) is None, proc.stderr.read().decode()[-2000:] if proc.poll() else "slow"
    import pyetcd

    client = pyetcd.client("127.0.0.1", cport, ca_cert=p.ca, cert_key=p.admin_key, cert_cert=p.admin_cert, timeout=10)
    for _ in range(100):
        try:
            client.get(b"/x")
            break
        except Exception:  # noqa: BLE001 - listening is not yet serving
            import time
            time.sleep(0.1)
    yield p, cport, client
    client.close()
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def kyverno_backend(tmp_path_factory):
    """issue 33: the seeded webhook's backend, really answering: the sandbox's AdmissionReview server on loopback
    with a certificate for kyverno-svc.kyverno.svc from a CA the seeded caBundle holds, so the revert guard's call
    (TLS against the caBundle, then an AdmissionReview) succeeds and the revert is verified."""
    from tests import webhook_backends as wb

    ca = wb.Ca()
    d = str(tmp_path_factory.mktemp("kyverno-backend"))
    crt, key = ca.issue(d, "kyverno-svc", dns=("kyverno-svc.kyverno.svc",))
    backend = wb.RealBackend(crt, key, f"{d}/backend.log")
    backend.bundle = ca.bundle
    yield backend
    backend.stop()


def _seed(put, backend) -> tuple[bytes, bytes]:
    from breakglass.webhooks import codec, sources
    from tests.test_codec import KYVERNO
    from tests import backend_seed, webhook_backends as wb

    key = sources.etcd_key("validating", KYVERNO["metadata"]["name"])
    value = codec.encode_value(wb.with_ca_bundle(KYVERNO, backend.bundle))
    put(key, value)
    # the webhook's backend is back by the time of the revert (its Service's endpoint: the real backend)
    for k, v in backend_seed.healthy(port=backend.port):
        put(k, v)
    return key, value


def _planned(state: str) -> dict:
    import glob

    [journal] = glob.glob(os.path.join(state, "runs", "*", "journal.jsonl"))
    return next(e for e in map(json.loads, open(journal)) if e["event"] == "planned")["target"]


def test_rke2_embedded_etcd_certificates_are_found_on_the_node_and_the_run_reverts(node_sshd, root, sandbox_etcd,
                                                                                    tmp_path, kyverno_backend):
    from tests.test_codec import KYVERNO

    p, port, client = sandbox_etcd
    _layout(root, "rke2")
    r = distro.rancher("rke2")
    for role, src in (("cacert", p.ca), ("cert", p.admin_cert), ("key", p.admin_key)):
        _touch(root, r[role])
        shutil.copy(src, root + r[role])
    key, value = _seed(client.put, kyverno_backend)
    env = {"BREAKGLASS_NODE_ROOT": root, "BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "ETCDCTL_ENDPOINTS": ""}
    # no certificate paths: they are RKE2's, found on the node; the port is the test etcd's (RKE2's is 2379)
    # issue 33: no apiserver runs in front of this etcd (it would be cp1:6443): --no-wait, applied, not verified
    run = run_cli("recover", "--method", "etcd", "-w", KYVERNO["metadata"]["name"], "--yes", "--etcd-via-ssh", "cp1",
                  "--etcd-endpoints", f"127.0.0.1:{port}", "--no-wait", *_ssh(node_sshd), env=env)
    assert run.returncode == 8, run.stderr.decode()
    assert b"not waited for (--no-wait)" in run.stdout
    assert b"cp1 runs rke2 (found: " in run.stderr and f"{root}/var/lib/rancher/rke2/server".encode() in run.stderr
    assert client.get(key)[0] is None
    target = _planned(str(tmp_path / "state"))
    assert target["etcd_node_certs"] == {k: root + r[k] for k in ("cacert", "cert", "key")}
    assert target["etcd_endpoints"] == [f"https://127.0.0.1:{port}"]
    assert target["etcd_node_found"]["summary"].startswith("cp1 runs rke2")
    assert f"found {root + r['cert']} (etcd cert)" in target["etcd_node_found"]["evidence"]
    # revert with only the SSH options: the journal's route
    back = run_cli("revert", "--yes", *_ssh(node_sshd), env=env)
    assert back.returncode == 0, back.stderr.decode() + back.stdout.decode()
    assert client.get(key)[0] == value


def test_k3s_kine_on_its_unix_socket_through_ssh_and_revert_byte_identical(node_sshd, root, tmp_path,
                                                                           kyverno_backend):
    from tests.test_codec import KYVERNO
    from tests.test_kine import Kine

    _layout(root, "k3s")
    server = root + distro.rancher("k3s")["server"]
    kine = Kine(server, unix=True)  # in k3s' server directory, on unix://kine.sock there, as k3s runs it
    try:
        key, value = _seed(kine.create, kyverno_backend)
        before = kine.get(key)
        env = {"BREAKGLASS_NODE_ROOT": root, "BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "ETCDCTL_ENDPOINTS": ""}
        # issue 33: no apiserver in front of this kine: --no-wait, applied, not verified
        run = run_cli("recover", "--method", "etcd", "-w", KYVERNO["metadata"]["name"], "--yes", "--etcd-via-ssh",
                      "cp1", "--no-wait", *_ssh(node_sshd), env=env)
        assert run.returncode == 8, run.stderr.decode() + run.stdout.decode()
        assert kine.get(key) is None
        assert b"cp1 runs k3s" in run.stderr and f"unix://{server}/kine.sock".encode() in run.stderr
        target = _planned(str(tmp_path / "state"))
        assert target["etcd_endpoints"] == [f"unix://{server}/kine.sock"] and not target.get("etcd_node_certs")
        assert f"found {server}/kine.sock (socket)" in target["etcd_node_found"]["evidence"]
        back = run_cli("revert", "--yes", *_ssh(node_sshd), env=env)
        assert back.returncode == 0, back.stderr.decode() + back.stdout.decode()
        after = kine.get(key)
        assert after[0] == before[0] == value and after[1] > before[1]
    finally:
        kine.stop()


def test_a_wrong_guess_is_one_line(node_sshd, root, tmp_path):
    env = {"BREAKGLASS_NODE_ROOT": root, "BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "ETCDCTL_ENDPOINTS": ""}
    args = ["webhooks", "--etcd-via-ssh", "cp1", *_ssh(node_sshd)]
    # nothing known on the node
    line = _one_line_error(run_cli(*args, env=env))
    assert "cp1 runs no distribution breakglass knows" in line
    # k3s, but its kine.sock is a stale socket nothing listens on
    _layout(root, "k3s")
    sock = root + distro.rancher("k3s")["kine"]
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock)
    s.close()
    line = _one_line_error(run_cli(*args, env=env))
    assert f"cannot connect to the unix socket {sock}" in line
    # k3s with embedded etcd's certificates, but no etcd where they say: the hint says what was found
    os.unlink(sock)
    r = distro.rancher("k3s")
    for role in ("cacert", "cert", "key"):
        _touch(root, r[role], "not a certificate\n")
    from breakglass.sandbox import free_port

    p = run_cli(*args, "--etcd-endpoints", f"127.0.0.1:{free_port()}", env=env)
    line = _one_line_error(p)
    assert "etcd at" in line and b"hint: cp1 runs k3s (found: " in p.stderr


# -- diagnose --ssh ------------------------------------------------------------------------------------------------
def _journal(root: str, unit: str, *fixtures: str) -> None:
    text = "".join(open(os.path.join(FIX, f)).read() for f in fixtures)
    _touch(root, f"/var/log/journal/{unit}.txt", text)


def test_the_fixtures_are_real_excerpts_with_their_sources():
    sources = yaml.safe_load(open(os.path.join(FIX, "SOURCES.yaml")))
    files = sorted(f for f in os.listdir(FIX) if f != "SOURCES.yaml")
    assert sorted(sources) == files
    assert all(v["source"].startswith("https://github.com/") for v in sources.values())


def test_a_k3s_journal_line_is_klog_behind_the_journald_prefix():
    from breakglass.logs.formats import parse_record

    lines = open(os.path.join(FIX, "k3s-8025-journal.txt")).read().splitlines()
    rec = parse_record(lines[3], "j", 4, 4, 2023)
    assert (rec.level, rec.caller, rec.node) == ("I", "trace.go:219", "fetchapi-vps-01")
    assert rec.message.startswith('Trace[434788677]: "Update"')  # `k3s[8982]: I0724 ... 8982 trace.go:219] ` peeled


def test_diagnose_ssh_reads_k3s_journal_and_offers_k3s_ways_out(node_sshd, root):
    _layout(root, "k3s")
    # the stand-in's journal: the excerpts one after another (the first, failing closed, is what has ways out; it
    # was quoted without a prefix, so it comes first, where it cannot be read as the tail of a long line)
    _journal(root, "k3s", "gatekeeper-2423-failing-closed.txt", "k3s-8025-journal.txt", "k8s-snap-1426-journal.txt")
    p = run_cli("diagnose", "--ssh", "cp1", *_ssh(node_sshd), "-o", "json", env={"BREAKGLASS_NODE_ROOT": root})
    assert p.returncode == 3, p.stderr.decode()
    res = json.loads(p.stdout)["result"]
    assert res["stats"]["sources"] == ["cp1:journalctl -u k3s"] and res["stats"]["lines"] == 7
    found = {f["webhook"]: f for f in res["findings"]}
    assert found["admission.juju.is"]["mode"] == "open" and found["validation.gatekeeper.sh"]["mode"] == "closed"
    assert found["admission.juju.is"]["sources"] == ["cp1:journalctl -u k3s"]
    methods = [r["method"] for r in res["remedies"]]
    assert methods == ["kubeapi", "k3s", "etcd"], methods
    k3s = res["remedies"][1]
    assert k3s["manual"][0].startswith("# cp1 runs k3s (found: ") and "/etc/rancher/k3s/config.yaml.d/" in k3s["summary"]
    assert "breakglass recover --method k3s --ssh cp1" in k3s["manual"]


def test_diagnose_ssh_reads_rke2_static_pod_logs_and_its_journal(node_sshd, root):
    _layout(root, "rke2")
    _touch(root, "/var/log/pods/kube-system_kube-apiserver-cp1_0a1b/kube-apiserver/0.log",
           open(os.path.join(FIX, "rke2-4910-apiserver.log")).read()
           + open(os.path.join(FIX, "gatekeeper-2423-failing-closed.txt")).read())
    _touch(root, "/var/log/journal/rke2-server.txt", "-- No entries --\n")
    p = run_cli("diagnose", "--ssh", "cp1", *_ssh(node_sshd), "-o", "json", env={"BREAKGLASS_NODE_ROOT": root})
    assert p.returncode == 3, p.stderr.decode()
    res = json.loads(p.stdout)["result"]
    assert res["stats"]["sources"] == [
        f"cp1:{root}/var/log/pods/kube-system_kube-apiserver-cp1_0a1b/kube-apiserver/0.log",
        "cp1:journalctl -u rke2-server"]
    assert {(f["webhook"], f["mode"]) for f in res["findings"]} == {("validation.gatekeeper.sh", "open"),
                                                                      ("validation.gatekeeper.sh", "closed")}
    assert [r["method"] for r in res["remedies"]] == ["kubeapi", "rke2", "etcd"]
    # text output: the same, with the evidence line
    t = run_cli("diagnose", "--ssh", "cp1", *_ssh(node_sshd), env={"BREAKGLASS_NODE_ROOT": root})
    assert b"rke2 (applies:" in t.stdout and b"# cp1 runs rke2 (found: " in t.stdout


def test_diagnose_ssh_says_in_one_line_when_the_journal_cannot_be_read(node_sshd, root):
    _layout(root, "k3s")  # and no journal for it
    p = run_cli("diagnose", "--ssh", "cp1", *_ssh(node_sshd), env={"BREAKGLASS_NODE_ROOT": root})
    assert p.returncode != 0
    assert "Failed to open journal for k3s" in _one_line_error(p)


# -- the planner offers the nodes' own flag way out ---------------------------------------------------------------
@pytest.mark.parametrize("layout,taken", [("k3s", "k3s"), ("rke2", "rke2"), ("kubeadm", "kubeadm")])
def test_auto_takes_the_flag_way_out_of_the_distribution_the_node_runs(node_sshd, root, monkeypatch, layout, taken):
    from breakglass.flows import planner, scripted
    from breakglass.access.ssh import Node, SshOptions

    _layout(root, layout)
    monkeypatch.setenv("BREAKGLASS_NODE_ROOT", root)
    a = planner.Access(ssh_nodes={"cp1": Node("cp1", SshOptions(config=node_sshd.ssh_config,
                                                                 known_hosts=node_sshd.known_hosts))})
    assert scripted.auto_method(a, have_targets=False) == taken
    opts = {o.method: o for o in planner.options(planner.probe(a), False, None, a.distros)}
    for other in {"kubeadm", "k3s", "rke2"} - {taken}:
        assert not opts[other].available and f"cp1 runs {taken}" in opts[other].reason
    conv = {o.method: o for o in planner.options(planner.probe(a), False, "conversion", a.distros)}
    assert not conv[taken].available and "conversion webhook" in conv[taken].reason
