"""A real etcd (Debian's etcd-server) on free loopback ports, for the tests.

Plain or with TLS (a CA, a server and a client certificate made here with the
`cryptography` package). Nothing is mocked: breakglass talks gRPC to this process.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from breakglass.sandbox import etcd_command, free_port, wait_listening


@dataclass
class EtcdServer:
    proc: subprocess.Popen
    endpoint: str
    data_dir: str
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def make_pki(d: str) -> dict[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)

    def key():
        return ec.generate_private_key(ec.SECP256R1())

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(path, obj, private=False):
        data = obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()) if private else obj.public_bytes(serialization.Encoding.PEM)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def cert(cn, k, issuer_key, issuer_name, ca=False, usage=None, san=False):
        b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(issuer_name).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if usage:
            b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    out = {}
    for prefix in ("", "other-"):  # a second, unrelated CA for wrong-certificate tests
        ca_key = key()
        ca = cert(f"{prefix}etcd-ca", ca_key, ca_key, name(f"{prefix}etcd-ca"), ca=True)
        out[prefix + "ca"] = write(os.path.join(d, f"{prefix}ca.crt"), ca)
        for role, usage in (("server", [ExtendedKeyUsageOID.SERVER_AUTH]), ("client", [ExtendedKeyUsageOID.CLIENT_AUTH])):
            k = key()
            c = cert(f"{prefix}{role}", k, ca_key, ca.subject, usage=usage, san=True)
            out[prefix + role + "_cert"] = write(os.path.join(d, f"{prefix}{role}.crt"), c)
            out[prefix + role + "_key"] = write(os.path.join(d, f"{prefix}{role}.key"), k, private=True)
    return out


def start(tmp: str, tls: bool = False) -> EtcdServer:
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    if not os.path.exists(binary):
        raise RuntimeError("etcd is not installed: run `make test`, which installs Debian's etcd-server")
    data = os.path.join(tmp, f"etcd-{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(data)
    cport, pport = free_port(), free_port()
    scheme = "https" if tls else "http"
    args = etcd_command(binary, "t", data, f"{scheme}://127.0.0.1:{cport}", pport)
    args += ["--quota-backend-bytes", str(2 << 30)]
    pki = {}
    if tls:
        pki = make_pki(tmp)
        args += ["--cert-file", pki["server_cert"], "--key-file", pki["server_key"], "--client-cert-auth",
                 "--trusted-ca-file", pki["ca"]]
    env = dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.environ.get("ETCD_UNSUPPORTED_ARCH", ""))
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    srv = EtcdServer(proc, f"{scheme}://127.0.0.1:{cport}", data, pki.get("ca"), pki.get("client_cert"),
                     pki.get("client_key"))
    srv.pki = pki
    why = wait_listening(proc, cport, 30)
    if why == "exited":
        raise RuntimeError(f"etcd exited: {proc.stderr.read().decode()[-2000:]}")
    if why:
        srv.stop()
        raise RuntimeError("etcd did not start in 30s")
    # port open is not yet serving: wait for a successful read
    c = raw_client(srv)
    for _ in range(100):
        try:
            c.get(b"/x")
            break
        except Exception:
            time.sleep(0.1)
    c.close()
    return srv


def raw_client(srv: EtcdServer):
    """A pyetcd client for seeding test data (breakglass's own module only reads)."""
    import pyetcd

    host, port = srv.endpoint.split("://")[1].split(":")
    if srv.cacert:
        return pyetcd.client(host, int(port), ca_cert=srv.cacert, cert_key=srv.key, cert_cert=srv.cert, timeout=10)
    return pyetcd.client(host, int(port), timeout=10)


def put_many(client, items, batch: int = 100) -> None:
    """Write (key, value) pairs in transactions of `batch` puts."""
    items = list(items)
    for i in range(0, len(items), batch):
        ops = [client.transactions.put(k, v) for k, v in items[i:i + batch]]
        client.transaction(compare=[], success=ops, failure=[])
