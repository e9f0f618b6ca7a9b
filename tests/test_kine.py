"""The etcd remedy through real kine, k3s' etcd shim over SQLite (built from its Go module by `make
go-components`), with a real kube-apiserver on that kine: back up and delete a webhook configuration, see the
running apiserver drop it without a restart, and revert it byte for byte.

kine serves only the requests kube-apiserver sends (no sort order, three transaction shapes, no snapshot), so
these tests are what keeps breakglass' etcd access within them. kine runs as k3s runs it: its own default SQLite
DSN (``./db/state.db`` with its WAL parameters) in its working directory, on ``unix://kine.sock`` there, which
is also what the apiserver is given (``--etcd-servers=unix://kine.sock``); one test uses TCP instead. Every
value compared here is read through kine with gRPC directly, not through breakglass' own client.
Required under CI (a missing build fails); skipped with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from breakglass.core import journal
from breakglass.sandbox import apiserver as launcher, free_port, pki as pkimod, wait_listening
from tests import webhook_backends as wb
from tests.conftest import ROOT, run_cli
from tests.real_control_plane import binary_for, built, require, stop_group

KINE = built("kine")
NAME = "kyverno-resource-validating-webhook-cfg"
NS = "k3s-apps"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def kine_binary() -> str:
    if not KINE:
        pytest.fail("go/versions has no kine line")
    _, binary = KINE[-1]
    require(binary)
    return binary


class Kine:
    """kine on SQLite in its own directory, on a unix socket (as k3s runs it) or on a loopback TCP port."""

    def __init__(self, directory: str, unix: bool) -> None:
        self.dir = directory
        self.log = os.path.join(directory, "kine.log")
        if unix:
            listen = "unix://kine.sock"  # k3s' own: relative to the working directory
            self.endpoint = "unix://" + os.path.join(directory, "kine.sock")  # for breakglass, from anywhere
            self.target = "unix:" + os.path.join(directory, "kine.sock")  # for gRPC
        else:
            port = free_port()
            listen = f"127.0.0.1:{port}"
            self.endpoint = f"http://127.0.0.1:{port}"
            self.target = f"127.0.0.1:{port}"
        self.listen = listen
        os.makedirs(os.path.join(directory, "db"), mode=0o700, exist_ok=True)  # kine makes it only without --endpoint
        with open(self.log, "ab") as f:
            # no --endpoint: kine's default, sqlite ./db/state.db with its own parameters (WAL, busy timeout)
            self.proc = subprocess.Popen([kine_binary(), "--listen-address", listen, "--metrics-bind-address", "0"],
                                         cwd=directory, stdout=f, stderr=f, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        if unix:
            why = self._wait_unix(30)
        else:
            why = wait_listening(self.proc, port, 30)
        if why:
            stop_group(self.proc)
            raise AssertionError(f"kine {why}: {self.logtail()}")
        assert os.path.exists(os.path.join(directory, "db", "state.db"))

    def _wait_unix(self, seconds: float) -> str | None:
        import socket

        path = os.path.join(self.dir, "kine.sock")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "exited"
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(path)
                    return None
            except OSError:
                time.sleep(0.1)
        return "timed out"

    def logtail(self) -> str:
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()[-2000:]

    # raw reads and writes through kine, with gRPC and etcd's own messages: independent of breakglass' client
    def _kv(self):
        import grpc
        from pyetcd import etcdrpc

        ch = grpc.insecure_channel(self.target)
        return ch, etcdrpc.KVStub(ch), etcdrpc

    def get(self, key: bytes):
        """The key's (value, mod_revision) as kine holds it, or None."""
        ch, kv, rpc = self._kv()
        try:
            resp = kv.Range(rpc.RangeRequest(key=key), timeout=10)
        finally:
            ch.close()
        return (resp.kvs[0].value, resp.kvs[0].mod_revision) if resp.kvs else None

    def keys(self, prefix: bytes) -> list[bytes]:
        ch, kv, rpc = self._kv()
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        try:
            resp = kv.Range(rpc.RangeRequest(key=prefix, range_end=end, keys_only=True), timeout=10)
        finally:
            ch.close()
        return [k.key for k in resp.kvs]

    def create(self, key: bytes, value: bytes) -> bool:
        """kube-apiserver's create: put only while absent."""
        ch, kv, rpc = self._kv()
        try:
            cmp = rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=0)
            op = rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))
            return kv.Txn(rpc.TxnRequest(compare=[cmp], success=[op]), timeout=10).succeeded
        finally:
            ch.close()

    def stop(self) -> None:
        stop_group(self.proc)


class ApiserverOnKine:
    """A real kube-apiserver whose storage is kine: kubeadm's flags on loopback (the sandbox's launcher), with
    --etcd-servers at kine, as k3s gives its embedded apiserver, and the storage media type left at its default."""

    def __init__(self, directory: str, kine: Kine, binary: str, etcd_prefix: str | None = None) -> None:
        self.layout = launcher.Layout(directory)
        self.pki = pkimod.make(self.layout.pki_dir)
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        launcher.write_files(self.layout, self.pki, self.url)
        # unix://kine.sock from kine's directory, exactly k3s' flag; TCP as an http:// URL
        etcd = kine.listen if kine.listen.startswith("unix://") else kine.endpoint
        argv = launcher.flags(self.layout, self.pki, etcd, port)
        if etcd_prefix:
            argv.append(f"--etcd-prefix={etcd_prefix}")
        with open(self.layout.log, "ab") as f:
            self.proc = subprocess.Popen([binary, *argv], cwd=kine.dir, stdout=f, stderr=f,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.client = launcher.Client(self.url, self.pki)
        try:
            launcher.wait_state(self.client, "ready", 240, alive=lambda: self.proc.poll() is None)
        except BaseException:
            self.stop()
            with open(self.layout.log, encoding="utf-8", errors="replace") as f:
                raise AssertionError("kube-apiserver on kine not ready: " + f.read()[-3000:]) from None

    def stop(self) -> None:
        stop_group(self.proc)


@pytest.fixture
def short_dir():
    """A short directory of our own (a unix socket path has at most 107 bytes; pytest's tmp_path can be longer)."""
    d = tempfile.mkdtemp(prefix="bg-kine-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def stack(short_dir):
    """kine, then a kube-apiserver on it; both stopped afterwards, apiserver first."""
    made: list = []

    def make(unix: bool, etcd_prefix: str | None = None, apiserver: bool = True):
        kine = Kine(os.path.join(short_dir, "k"), unix)
        made.append(kine)
        api = None
        if apiserver:
            _, binary = binary_for("1.34")
            api = ApiserverOnKine(os.path.join(short_dir, "a"), kine, binary, etcd_prefix)
            made.append(api)
        return kine, api

    yield make
    for thing in reversed(made):
        thing.stop()


def _webhook(dead_port: int, ca_bundle: str | None = None) -> dict:
    """A fail-closed webhook on configmap creates in NS whose backend is down: the deadlock in miniature
    (``ca_bundle``: the CA its backend's certificate is to be verified against, when one is started)."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME, "labels": {"webhook.kyverno.io/managed-by": "kyverno"}},
            "webhooks": [{"name": "validate.kyverno.svc-fail",
                          "clientConfig": {"url": f"https://127.0.0.1:{dead_port}/validate/fail",
                                           **({"caBundle": ca_bundle} if ca_bundle else {})},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["configmaps"]}],
                          "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 5,
                          "admissionReviewVersions": ["v1"],
                          "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}}]}


def _configmap_create(api: ApiserverOnKine) -> tuple[int, dict]:
    return api.client.call("POST", f"/api/v1/namespaces/{NS}/configmaps",
                           {"metadata": {"generateName": "probe-"}, "data": {"a": "b"}})


def _eventually(predicate, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while True:
        got = predicate()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.25)


def _blocked(api) -> bool:
    status, out = _configmap_create(api)
    return status >= 400 and "failed calling webhook" in out.get("message", "")


def _admitted(api) -> bool:
    return _configmap_create(api)[0] == 201


def _seed_through_the_api(api: ApiserverOnKine, ca_bundle: str | None = None) -> dict:
    api.client.must("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    created = api.client.must("POST", VWC_PATH, _webhook(free_port(), ca_bundle))
    _eventually(lambda: _blocked(api), "the apiserver enforces the new webhook")
    return created


def _cli(state: str, endpoint: str, *args: str):
    return run_cli(*args, "--etcd-endpoints", endpoint, env={"BREAKGLASS_STATE_DIR": state, "ETCDCTL_ENDPOINTS": ""})


def _one_line_error(p) -> str:
    """The error's one line (at most a hint line after it), never a traceback."""
    err = p.stderr.decode()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("breakglass: error: "), err + p.stdout.decode()
    assert all(ln.startswith("hint: ") for ln in lines[1:]) and len(lines) <= 2, err
    return lines[0]


def test_recover_through_kine_deletes_backed_up_the_apiserver_drops_it_live_and_revert_is_byte_identical(
        stack, tmp_path):
    kine, api = stack(unix=True)
    ca = wb.Ca()  # issue 33: the webhook trusts it, so a real backend can be started for the revert (below)
    created = _seed_through_the_api(api, ca.bundle)
    key = f"/registry/validatingwebhookconfigurations/{NAME}".encode()  # k3s' prefix: kube-apiserver's default
    before = kine.get(key)
    assert before and before[0].startswith(b"k8s\x00")  # stored by the apiserver, as protobuf (the default)
    apiserver_pid = api.proc.pid
    state = str(tmp_path / "state")

    # issue 33: --apiserver, the apiserver on this kine (else none is known for it: exit 8); exit 0 is its /readyz
    p = _cli(state, kine.endpoint, "recover", "--method", "etcd", "-w", NAME, "--yes", "-o", "json",
             "--apiserver", api.url)
    assert p.returncode == 0, p.stderr.decode() + p.stdout.decode()
    assert json.loads(p.stdout)["result"]["ready_check"]["ready"] is True, p.stdout.decode()
    assert kine.get(key) is None
    [run] = journal.list_runs(state)
    with open(os.path.join(run.backups, "s1.value"), "rb") as f:
        assert f.read() == before[0]  # the backup is the exact bytes kine held
    # issue 33: the /readyz wait is journaled after the steps, as its own event (was: ends with run-finished)
    assert [e["event"] for e in run.events()][-2:] == ["run-finished", "readiness"]
    # the running apiserver saw the delete through kine's watch: no restart, the webhook is gone
    _eventually(lambda: api.client.call("GET", f"{VWC_PATH}/{NAME}")[0] == 404, "GET says 404")
    _eventually(lambda: _admitted(api), "a configmap create is admitted again")
    assert api.proc.poll() is None and api.proc.pid == apiserver_pid

    port = int(created["webhooks"][0]["clientConfig"]["url"].split(":")[2].split("/")[0])
    # the webhook's backend is back: the revert may re-arm it. Issue 33: a real one that answers the apiserver's
    # call (TLS against the caBundle, an AdmissionReview), where a bare TCP listener used to count as "back"
    crt, crt_key = ca.issue(str(tmp_path / "backend"), "hook", ips=("127.0.0.1",))
    backend = wb.RealBackend(crt, crt_key, str(tmp_path / "backend.log"), port=port)
    try:
        r = _cli(state, kine.endpoint, "revert", "--yes", "-o", "json")
    finally:
        backend.stop()  # gone again: the restored webhook blocks, below
    assert r.returncode == 0, r.stderr.decode() + r.stdout.decode()
    after = kine.get(key)
    assert after is not None and after[0] == before[0]  # byte for byte, read back through kine
    assert after[1] > before[1]  # a new revision: kine really wrote it again
    def restored():
        status, out = api.client.call("GET", f"{VWC_PATH}/{NAME}")
        return out if status == 200 else None

    back = _eventually(restored, "GET finds the restored configuration")
    assert back["metadata"]["uid"] == created["metadata"]["uid"] and back["webhooks"] == created["webhooks"]
    _eventually(lambda: _blocked(api), "the restored webhook is enforced again")
    assert json.loads(run_cli("runs", "-o", "json", env={"BREAKGLASS_STATE_DIR": state}).stdout)[
        "result"][0]["status"] == "reverted"


def test_a_non_default_etcd_prefix_over_tcp_and_a_recreated_configuration_on_revert(stack, tmp_path):
    prefix = "/k3s-custom-prefix"  # k3s passes none (kube-apiserver's default /registry); any cluster may
    kine, api = stack(unix=False, etcd_prefix=prefix)
    _seed_through_the_api(api)
    key = f"{prefix}/validatingwebhookconfigurations/{NAME}".encode()
    before = kine.get(key)
    assert before is not None and kine.keys(b"/registry/validatingwebhookconfigurations/") == []
    state = str(tmp_path / "state")

    # without the prefix, the name is looked for under /registry: not found, said so, nothing deleted
    p = _cli(state, kine.endpoint, "recover", "--method", "etcd", "-w", NAME, "--yes")
    assert p.returncode != 0 and "no configuration named" in _one_line_error(p)
    assert kine.get(key) == before

    p = _cli(state, kine.endpoint, "recover", "--method", "etcd", "-w", NAME, "--etcd-prefix", prefix, "--yes",
             "-o", "json", "--apiserver", api.url)  # issue 33: the apiserver on this kine, whose /readyz is waited for
    assert p.returncode == 0, p.stderr.decode() + p.stdout.decode()
    assert kine.get(key) is None
    _eventually(lambda: api.client.call("GET", f"{VWC_PATH}/{NAME}")[0] == 404, "GET says 404")
    _eventually(lambda: _admitted(api), "a configmap create is admitted again")

    # an operator recreates it meanwhile (through the API, so through kine): revert leaves it unless forced,
    # and --force overwrites it with kine's update transaction (compare mod_revision, put, else get)
    recreated = _webhook(free_port())
    recreated["webhooks"][0]["failurePolicy"] = "Ignore"
    recreated["metadata"].pop("labels")  # an operator's own copy (Kyverno's would be left as Kyverno wrote it)
    api.client.must("POST", VWC_PATH, recreated)
    now = kine.get(key)
    assert now is not None and now[0] != before[0]
    r = _cli(state, kine.endpoint, "revert", "--yes")
    assert r.returncode == 4 and b"recreated" in r.stdout + r.stderr, r.stderr.decode() + r.stdout.decode()
    assert kine.get(key) == now
    r = _cli(state, kine.endpoint, "revert", "--yes", "--force")
    # issue 33: --force also re-arms over the webhook's backend, which is down: reverted, not verified (was 0)
    assert r.returncode == 8 and b"not verified:" in r.stdout, r.stderr.decode() + r.stdout.decode()
    assert kine.get(key)[0] == before[0]
    _eventually(lambda: api.client.call("GET", f"{VWC_PATH}/{NAME}")[1].get("webhooks", [{}])[0].get(
        "failurePolicy") == "Fail", "the apiserver serves the restored configuration")
    _eventually(lambda: _blocked(api), "the restored webhook is enforced again")


def test_without_an_apiserver_kine_compare_and_swap_paging_and_no_snapshot(stack, tmp_path, monkeypatch):
    """breakglass' own client straight on kine (unix socket): every request shape it sends is one kine serves."""
    from breakglass.access import etcd as access
    from breakglass.core.errors import Unreachable

    kine, _ = stack(unix=True, apiserver=False)
    prefix = b"/registry/validatingwebhookconfigurations/"
    e = access.Etcd(access.EtcdSettings.resolve(kine.endpoint, env={}), (prefix,))
    try:
        names = [f"w{i:02d}".encode() for i in range(7)]
        for n in names:
            assert e.put_if_absent(prefix + n, b"v-" + n)
        assert not e.put_if_absent(prefix + names[0], b"other")  # create refuses an existing key
        assert kine.get(prefix + names[0])[0] == b"v-w00"
        monkeypatch.setattr(access, "PAGE", 3)  # pages of 3 keys: kine's limit and its "more" flag
        seen = [kv.key for kv in e.range_prefix(prefix)]
        assert seen == [prefix + n for n in names]
        assert len(e.ranges) >= 3
        kv = e.get(prefix + names[1])
        assert not e.delete_if_mod_revision(prefix + names[1], kv.mod_revision + 1000)  # a stale revision
        assert kine.get(prefix + names[1]) is not None
        assert e.put_if_mod_revision(prefix + names[1], b"new", kv.mod_revision)
        assert not e.put_if_mod_revision(prefix + names[1], b"newer", kv.mod_revision)  # compared, refused
        kv2 = e.get(prefix + names[1])
        assert kv2.value == b"new" and kv2.mod_revision > kv.mod_revision
        assert e.delete_if_mod_revision(prefix + names[1], kv2.mod_revision)
        assert kine.get(prefix + names[1]) is None
        assert e.put_if_absent(prefix + names[1], b"back")  # a deleted key can be created again
        with pytest.raises(Unreachable, match="snapshot is not supported") as err:
            e.save_snapshot(str(tmp_path / "x.db"))
        assert "kine" in (err.value.hint or "")
        assert not os.path.exists(tmp_path / "x.db") and not os.path.exists(tmp_path / "x.db.part")
    finally:
        e.close()

    # through the CLI: `etcd snapshot` and `recover --snapshot` are one clear line, and nothing is deleted
    state = str(tmp_path / "state")
    p = _cli(state, kine.endpoint, "etcd", "snapshot", str(tmp_path / "snap.db"))
    assert p.returncode != 0 and "snapshot is not supported" in _one_line_error(p)
    assert not os.path.exists(tmp_path / "snap.db")
    key = prefix + names[2]
    p = _cli(state, kine.endpoint, "recover", "--method", "etcd", "-w", "validating/w02", "--yes",
             "--snapshot", str(tmp_path / "snap.db"))
    assert p.returncode != 0 and "snapshot is not supported" in _one_line_error(p)
    assert kine.get(key)[0] == b"v-w02"
