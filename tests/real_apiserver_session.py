"""One real kube-apiserver and its etcd for a whole test session: what the kubeapi tests run against.

Started once (about 5 s on two cores) from the sandbox's own launcher pieces (breakglass.sandbox.apiserver:
kubeadm's flags on loopback, the audit log on, an admin kubeconfig in system:masters) on Debian's etcd, with
one difference from ``sandbox up``: the tests need client certificates that ``pki.make`` does not issue (a
user outside system:masters, an expired one), and ``pki.make`` keeps no CA key. So ``--client-ca-file`` is a
bundle of the sandbox CA and a client CA made here, whose key the tests keep; the serving certificate, the
admin certificate and the service-account keys are ``pki.make``'s, unchanged.

The fixture ``real_apiserver`` is session-scoped and shared by every module that imports it (one process,
however many modules); ``kube`` gives a test that apiserver and, afterwards, removes every admission
configuration the test left and the Endpoints of the scratch namespace, so tests stay independent.
A missing build skips with the reason, and fails under CI (tests/real_control_plane.py: binary_for).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import time

import pytest
import yaml

from breakglass.sandbox import apiserver as launcher, etcd_command, free_port, pki as pkimod, wait_listening

VERSION = "1.34"  # the seed's upgrade target
ADMISSION = "/apis/admissionregistration.k8s.io/v1/"
ADMISSION_KINDS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                   "validatingadmissionpolicies", "validatingadmissionpolicybindings")
SCRATCH_NS = "kyverno"  # where the webhook backends' Endpoints are made (a namespace is never really deleted
#                         without kube-controller-manager, so it is made once per session)
SA_NS = "breakglass-test"
ADMIN_SA = "breakglass-admin"  # bound to cluster-admin: the default identity of breakglass in the tests
NO_RIGHTS_SA = "no-rights"  # authenticates, may do nothing


class RealApiserver:
    def __init__(self, directory: str, binary: str) -> None:
        self.dir = directory
        self.binary = binary
        self.layout = launcher.Layout(directory)
        self.etcd_proc: subprocess.Popen | None = None
        self.proc: subprocess.Popen | None = None
        self._tokens: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> RealApiserver:
        try:
            self._start_etcd()
            self._start_apiserver()
            self._bootstrap()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, argv: list[str], log: str) -> subprocess.Popen:
        with open(log, "ab") as f:
            return subprocess.Popen(argv, stdout=f, stderr=f, stdin=subprocess.DEVNULL, start_new_session=True)

    def _start_etcd(self) -> None:
        cport = free_port()
        self.etcd_endpoint = f"http://127.0.0.1:{cport}"
        argv = etcd_command(shutil.which("etcd") or "/usr/bin/etcd", "real", os.path.join(self.dir, "etcd-data"),
                            self.etcd_endpoint, free_port())
        self.etcd_proc = self._spawn(argv, os.path.join(self.dir, "etcd.log"))
        if wait_listening(self.etcd_proc, cport, 30):
            raise RuntimeError(f"etcd did not start; see {self.dir}/etcd.log")

    def _start_apiserver(self) -> None:
        self.version = launcher.version(self.binary)
        self.pki = pkimod.make(self.layout.pki_dir)
        self._client_ca = _make_ca()
        self.client_ca_path = os.path.join(self.layout.pki_dir, "client-ca.crt")
        with open(self.client_ca_path, "wb") as out:
            out.write(_pem(self._client_ca[1]))
        bundle = os.path.join(self.layout.pki_dir, "client-ca-bundle.crt")
        with open(self.pki.ca, "rb") as a, open(self.client_ca_path, "rb") as b, open(bundle, "wb") as out:
            out.write(a.read() + b.read())
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        launcher.write_files(self.layout, self.pki, self.url)
        keys = dataclasses.replace(self.pki, ca=bundle)  # of the flags, only --client-ca-file reads it
        argv = launcher.flags(self.layout, keys, self.etcd_endpoint, port)
        assert f"--client-ca-file={bundle}" in argv
        self.argv = [self.binary, *argv]
        self.proc = self._spawn(self.argv, self.layout.log)
        self.client = launcher.Client(self.url, self.pki)
        launcher.wait_state(self.client, "ready", 120, alive=lambda: self.proc.poll() is None)

    def restart(self, seconds: float = 180) -> None:
        """Stop the apiserver and start it again on the same etcd, as an upgrade's or a kubelet's restart does;
        returns once it is ready (Unreachable, naming its log, if it exits or never is)."""
        from tests.real_control_plane import stop_group

        stop_group(self.proc)
        self.proc = self._spawn(self.argv, self.layout.log)
        try:
            launcher.wait_state(self.client, "ready", seconds, alive=lambda: self.proc.poll() is None)
        except Exception as e:
            raise AssertionError(f"the restarted apiserver: {e} (log: {self.layout.log})") from None

    def _bootstrap(self) -> None:
        c = self.client
        for ns in (SA_NS, SCRATCH_NS):
            c.must("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        for sa in (ADMIN_SA, NO_RIGHTS_SA):
            c.must("POST", f"/api/v1/namespaces/{SA_NS}/serviceaccounts", {"metadata": {"name": sa}})
        c.must("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": "breakglass-test-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": ADMIN_SA, "namespace": SA_NS}]})
        for sa in (ADMIN_SA, NO_RIGHTS_SA):  # now: a test's failing webhook may judge a TokenRequest
            self.token(sa)
        self.baseline = self.admission_objects()

    def stop(self) -> None:
        from tests.real_control_plane import stop_group

        for proc in (self.proc, self.etcd_proc):  # apiserver first: it must not outlive its storage
            stop_group(proc)

    # -- identities --------------------------------------------------------------------------------
    def token(self, sa: str = ADMIN_SA) -> str:
        """A ServiceAccount token from the real TokenRequest API, made at start and kept for the session (a
        whole `make test` may pass between the first and the last module using it: it lasts two days)."""
        if sa not in self._tokens:
            out = self.client.must("POST", f"/api/v1/namespaces/{SA_NS}/serviceaccounts/{sa}/token",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                    "spec": {"expirationSeconds": 2 * 86400}})
            self._tokens[sa] = out["status"]["token"]
        return self._tokens[sa]

    def user_name(self, sa: str = ADMIN_SA) -> str:
        return f"system:serviceaccount:{SA_NS}:{sa}"

    def client_cert(self, directory: str, cn: str, groups: tuple[str, ...] = (), expired: bool = False,
                    foreign: bool = False) -> dict:
        """A kubeconfig ``user`` with a client certificate for ``cn`` in ``groups``: issued by the client CA the
        apiserver trusts, or (``foreign``) by a CA of its own the apiserver has never seen."""
        return _issue(directory, cn, groups, _make_ca() if foreign else self._client_ca, expired)

    def kubeconfig(self, path: str, user: dict | None = None, ca: str | None = None, server: str | None = None) -> str:
        """A kubeconfig for ``user`` (default: the admin ServiceAccount's bearer token)."""
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
               "clusters": [{"name": "k", "cluster": {"server": server or self.url,
                                                      "certificate-authority": ca or self.pki.ca}}],
               "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
               "users": [{"name": "u", "user": user or {"token": self.token()}}]}
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(doc, f)
        return path

    # -- reading what happened ---------------------------------------------------------------------
    def etcd_value(self, key: str) -> bytes | None:
        import pyetcd

        host, port = self.etcd_endpoint.split("://")[1].split(":")
        c = pyetcd.client(host, int(port), timeout=10)
        try:
            return c.get(key)[0]
        finally:
            c.close()

    def etcd_delete(self, prefix: str) -> list[str]:
        """Delete every key under ``prefix`` straight from etcd (what a cluster upgraded from an older version
        lacks); the keys deleted."""
        import pyetcd

        host, port = self.etcd_endpoint.split("://")[1].split(":")
        c = pyetcd.client(host, int(port), timeout=10)
        try:
            keys = [meta.key.decode() for _, meta in c.get_prefix(prefix, keys_only=True)]
            for key in keys:
                c.delete(key)
            return keys
        finally:
            c.close()

    def audit_mark(self) -> int:
        try:
            return os.path.getsize(self.layout.audit_log)
        except OSError:
            return 0

    def audit_events(self, since: int, user: str | None = None) -> list[dict]:
        """The audit events written after ``since`` (audit_mark), of ``user`` if given. A request of the
        admin's is made and waited for first, so every event of an earlier request is in the file."""
        marker = f"audit-mark-{time.monotonic_ns()}"
        self.client.call("GET", f"/api/v1/namespaces/{SCRATCH_NS}/configmaps/{marker}")
        deadline = time.monotonic() + 10
        while True:
            with open(self.layout.audit_log, "rb") as f:
                f.seek(since)
                events = [json.loads(line) for line in f.read().splitlines() if line.strip()]
            if any((e.get("objectRef") or {}).get("name") == marker for e in events) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        return [e for e in events if user is None or (e.get("user") or {}).get("username") == user]

    # -- keeping tests independent -----------------------------------------------------------------
    def admission_objects(self) -> set[tuple[str, str]]:
        out = set()
        for kind in ADMISSION_KINDS:
            for item in self.client.must("GET", ADMISSION + kind).get("items") or []:
                out.add((kind, item["metadata"]["name"]))
        return out

    def reset(self) -> None:
        """Remove what a test made: admission objects (webhook configurations first: they are never sent to
        webhooks, and until they are gone a webhook of the test's may judge the rest), then Endpoints."""
        for kind, name in sorted(self.admission_objects() - self.baseline):
            self.client.must("DELETE", f"{ADMISSION}{kind}/{name}", ok=(200, 202, 404))
        eps = self.client.must("GET", f"/api/v1/namespaces/{SCRATCH_NS}/endpoints").get("items") or []
        for ep in eps:
            self.client.must("DELETE", f"/api/v1/namespaces/{SCRATCH_NS}/endpoints/{ep['metadata']['name']}",
                             ok=(200, 202, 404))
        assert self.admission_objects() == self.baseline


def _make_ca():
    """(key, certificate) of a new CA for client certificates."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "breakglass-tests-client-ca")])
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=30))
          .not_valid_after(now + datetime.timedelta(days=7))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(key, hashes.SHA256()))
    return key, ca


def _pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _issue(directory: str, cn: str, groups: tuple[str, ...], ca, expired: bool) -> dict:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key, ca_cert = ca
    now = datetime.datetime.now(datetime.timezone.utc)
    not_after = now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=2)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=2))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    os.makedirs(directory, exist_ok=True)
    crt, pem = os.path.join(directory, f"{cn}.crt"), os.path.join(directory, f"{cn}.key")
    with open(crt, "wb") as f:
        f.write(_pem(cert))
    with open(pem, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return {"client-certificate": crt, "client-key": pem}


_shared: dict = {"server": None, "users": 0}


@pytest.fixture(scope="session")
def real_apiserver(tmp_path_factory):
    """The session's real apiserver. Each module importing this fixture gets its own session-scoped
    definition from pytest, so the process is shared here and stopped when the last one is finalised."""
    from tests.real_control_plane import binary_for

    if _shared["server"] is None:
        _, binary = binary_for(VERSION)
        _shared["server"] = RealApiserver(str(tmp_path_factory.mktemp("real-apiserver")), binary).start()
    _shared["users"] += 1
    try:
        yield _shared["server"]
    finally:
        _shared["users"] -= 1
        if not _shared["users"]:
            _shared["server"].stop()
            _shared["server"] = None


@pytest.fixture
def kube(real_apiserver):
    """The session's apiserver, left as the test found it."""
    yield real_apiserver
    real_apiserver.reset()
