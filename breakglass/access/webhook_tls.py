"""The TLS a kube-apiserver speaks to an admission webhook, as k8s.io/apiserver/pkg/util/webhook builds it.

The roots are the webhook's ``clientConfig.caBundle`` alone when it holds any certificate (client-go puts it in a
fresh pool: the system's roots are then not trusted), else the system's roots. The name checked is the URL's host
for a ``url:`` webhook (an IP address is matched against the certificate's IP SANs, as Go does) or
``SERVICE.NAMESPACE.svc`` for a ``service:`` one, in SNI and in the certificate; like Go, a certificate's common
name never stands in for a missing SAN. TLS 1.2 at least (Go's client default), HTTP/1.1 offered.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl

_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.S)

# OpenSSL's verify codes (x509_vfy.h) and the words Go's x509 package would use for them
_UNKNOWN_AUTHORITY = {2, 18, 19, 20, 21}  # issuer unknown, self-signed, chain cannot be built to a root
_EXPIRED, _NOT_YET_VALID = 10, 9
_NAME_MISMATCH = {62, 64}  # hostname, IP address


def ca_pem(ca_bundle) -> bytes:
    """The PEM bytes of a caBundle: base64 text as ``clientConfig.caBundle`` holds it in JSON, PEM text, or PEM
    bytes. Empty for none. ValueError if base64 text does not decode."""
    if not ca_bundle:
        return b""
    if isinstance(ca_bundle, str):
        text = ca_bundle.strip()
        if text.startswith("-----BEGIN"):
            return text.encode("ascii", "replace")
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("the webhook's caBundle is not base64") from None
    return bytes(ca_bundle)


def context(ca_bundle) -> ssl.SSLContext:
    """A client context trusting what the apiserver would trust for this caBundle. ValueError (said in words)
    when the caBundle holds no certificate the apiserver could use: client-go then cannot build the client at
    all, so no backend can be verified with it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the name
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.hostname_checks_common_name = False
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # Go: every certificate in the pool is an anchor
    ctx.set_alpn_protocols(["http/1.1"])
    pem = ca_pem(ca_bundle)
    if not pem:
        ctx.load_default_certs()
        return ctx
    loaded = 0
    for block in _PEM_CERT.findall(pem):  # Go's AppendCertsFromPEM: a block it cannot parse is skipped
        try:
            ctx.load_verify_locations(cadata=block.decode("ascii"))
            loaded += 1
        except (ssl.SSLError, ValueError, UnicodeDecodeError):
            continue
    if not loaded:
        raise ValueError("the webhook's caBundle holds no PEM certificate, so the apiserver cannot verify any "
                         "backend with it")
    return ctx


def trusted_by(ca_bundle) -> str:
    return "the webhook's caBundle" if ca_bundle else "the system's trust roots (the webhook has no caBundle)"


def verify_words(err: ssl.SSLCertVerificationError, server_name: str, ca_bundle, names: list[str]) -> str:
    """A failed verification as an SRE reads it; ``names``: the certificate's SANs where they could be read."""
    code = getattr(err, "verify_code", None)
    if code in _UNKNOWN_AUTHORITY:
        return ("TLS: certificate signed by unknown authority "
                + ("(not the webhook's caBundle)" if ca_bundle else "(not a CA this system trusts; the webhook "
                                                                     "has no caBundle)"))
    if code in _NAME_MISMATCH:
        valid = f"valid for {', '.join(names)}" if names else "not valid for it"
        return f"TLS: certificate is {valid}, not {server_name}"
    if code == _EXPIRED:
        return "TLS: certificate has expired"
    if code == _NOT_YET_VALID:
        return "TLS: certificate is not valid yet"
    return f"TLS: certificate refused ({getattr(err, 'verify_message', '') or err.reason or err})"


def cert_names(der: bytes | None) -> list[str]:
    """The DNS and IP SANs of a DER certificate, for saying which names it is valid for."""
    if not der:
        return []
    try:
        from cryptography import x509  # noqa: PLC0415 - only a name mismatch needs it

        cert = x509.load_der_x509_certificate(der)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except Exception:  # noqa: BLE001 - a certificate too odd to parse still gets the plain message
        return []
    return [*san.get_values_for_type(x509.DNSName), *(str(i) for i in san.get_values_for_type(x509.IPAddress))]
