"""etcd through SSH: a local port forwarded to the node's 127.0.0.1:2379, with the node's
client certificate read into 0600 temporary files that are removed when breakglass exits.

etcd is never exposed: nothing listens but a loopback port on this machine, for this process.
"""

from __future__ import annotations

import atexit
import os
import tempfile

from breakglass.access.etcd import EtcdSettings
from breakglass.access.ssh import quoted_path, remote_path
from breakglass.errors import BadInput, Unreachable

KUBEADM_PKI = {"cacert": "/etc/kubernetes/pki/etcd/ca.crt",
               "cert": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
               "key": "/etc/kubernetes/pki/apiserver-etcd-client.key"}


def _fetch(node, path: str, tmpdir: str, name: str) -> str:
    r = node.run(f"cat -- {quoted_path(path, 'etcd certificate path')}")
    if r.rc != 0:
        raise BadInput(f"{node.host}:{path}: {r.err.decode('utf-8', 'replace').strip()[:200] or 'cannot read'}")
    local = os.path.join(tmpdir, name)
    fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(r.out)
    return local


def tunnel(node, cacert: str | None, cert: str | None, key: str | None, timeout: float | None,
           remote_port: int = 2379, user: str | None = None, password: str | None = None) -> EtcdSettings:
    """EtcdSettings that reach etcd on ``node`` through SSH. Certificate paths are on the node
    (kubeadm's by default); ``cacert`` alone means TLS without a client certificate."""
    paths = {"cacert": cacert, "cert": cert, "key": key}
    if not any(paths.values()):
        paths = dict(KUBEADM_PKI)
    for p in paths.values():
        if p:
            remote_path(p, "etcd certificate path")  # before anything is made or run
    tmpdir = tempfile.mkdtemp(prefix="breakglass-etcd-")
    os.chmod(tmpdir, 0o700)

    def cleanup():
        for f in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, f))
        os.rmdir(tmpdir)

    atexit.register(cleanup)
    local = {k: _fetch(node, v, tmpdir, k) for k, v in paths.items() if v}
    try:
        host, port, _ = node.forward("127.0.0.1", remote_port)
    except Exception as e:  # noqa: BLE001
        raise Unreachable(f"ssh {node.host}: cannot forward to etcd ({e})") from None
    scheme = "https" if local else "http"
    return EtcdSettings(endpoints=(f"{scheme}://{host}:{port}",), cacert=local.get("cacert"),
                        cert=local.get("cert"), key=local.get("key"), timeout=timeout or 5.0, user=user,
                        password=password)
