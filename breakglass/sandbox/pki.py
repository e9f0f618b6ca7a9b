"""A throwaway PKI for a loopback control plane: one CA, the apiserver's serving certificate, an admin
client certificate in ``system:masters``, the service-account key pair, and a serving certificate for the
webhook backend. Made fresh for every sandbox (and test), written 0600, valid for a week: nothing here is
meant to outlive a rehearsal.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from breakglass.core.textfile import write_private


@dataclass(frozen=True)
class Pki:
    ca: str
    serving_cert: str
    serving_key: str
    admin_cert: str
    admin_key: str
    sa_pub: str
    sa_key: str
    webhook_cert: str
    webhook_key: str


def make(directory: str) -> Pki:
    from cryptography import x509  # noqa: PLC0415 - only the sandbox needs it, and it costs 50 ms to import
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415

    os.makedirs(directory, mode=0o700, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(attrs)

    def pem_key(k) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    def save(fname: str, data: bytes) -> str:
        path = os.path.join(directory, fname)
        write_private(path, data)
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("breakglass-sandbox-ca")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=7))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(fname: str, subject: x509.Name, usage, sans=()) -> tuple[str, str]:
        k = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=7))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        c = b.sign(ca_key, hashes.SHA256())
        return (save(fname + ".crt", c.public_bytes(serialization.Encoding.PEM)), save(fname + ".key", pem_key(k)))

    loopback = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    serving = leaf("apiserver", name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH,
                   [*loopback, x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default.svc")])
    admin = leaf("admin", name("breakglass-sandbox-admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH)
    webhook = leaf("webhook", name("webhook-backend"), ExtendedKeyUsageOID.SERVER_AUTH, loopback)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_pub = save("sa.pub", sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    return Pki(ca=save("ca.crt", ca.public_bytes(serialization.Encoding.PEM)), serving_cert=serving[0],
               serving_key=serving[1], admin_cert=admin[0], admin_key=admin[1], sa_pub=sa_pub,
               sa_key=save("sa.key", pem_key(sa)), webhook_cert=webhook[0], webhook_key=webhook[1])


def load(directory: str) -> Pki:
    """The PKI a previous ``make`` left in ``directory`` (file names are fixed)."""
    j = lambda f: os.path.join(directory, f)  # noqa: E731
    return Pki(j("ca.crt"), j("apiserver.crt"), j("apiserver.key"), j("admin.crt"), j("admin.key"), j("sa.pub"),
               j("sa.key"), j("webhook.crt"), j("webhook.key"))
