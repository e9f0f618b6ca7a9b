"""etcd through SSH: a local port forwarded to the node's 127.0.0.1:2379, with the node's
client certificate and key read into this process's memory only: never written to a file,
so no signal, crash or full disk can leave the key behind in /tmp.

etcd is never exposed: nothing listens but a loopback port on this machine, for this process.
A run journals the route (the host, the endpoint as the node sees it, the certificate paths
there), not the forward port, which dies with the process; ``reopen`` reaches etcd again that way.

Given no certificate paths and no endpoint, the node is looked at first (``breakglass.access.distro``): kubeadm's
certificates, k3s' or RKE2's embedded etcd certificates (/var/lib/rancher/<k3s|rke2>/server/tls/etcd/), or k3s' kine
on its unix socket, which is reached through an SSH channel to the socket itself (no TLS there: kine.sock has none).
What was found, in the order it was looked for, goes with the settings as evidence (``route["found"]``).
"""

from __future__ import annotations

from breakglass.access.etcd import EtcdSettings, _parse_endpoint, _unix_path, credentials
from breakglass.access.ssh import quoted_path, remote_path
from breakglass.core.errors import BadInput, Unreachable

KUBEADM_PKI = {"cacert": "/etc/kubernetes/pki/etcd/ca.crt",
               "cert": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
               "key": "/etc/kubernetes/pki/apiserver-etcd-client.key"}


def _fetch(node, path: str) -> bytes:
    r = node.run(f"cat -- {quoted_path(path, 'etcd certificate path')}")
    if r.rc != 0:
        raise BadInput(f"{node.host}:{path}: {r.err.decode('utf-8', 'replace').strip()[:200] or 'cannot read'}")
    return r.out


def tunnel(node, cacert: str | None, cert: str | None, key: str | None, timeout: float | None,
           remote_port: int = 2379, user: str | None = None, password: str | None = None,
           remote_host: str = "127.0.0.1", remote_socket: str | None = None, detect: bool = False,
           tcp_given: bool = False) -> EtcdSettings:
    """EtcdSettings that reach etcd on ``node`` through SSH. Certificate paths are on the node; ``cacert`` alone
    means TLS without a client certificate; ``remote_socket`` is a unix socket on the node (kine), reached without
    TLS. ``detect``: no certificate path was given, so the node's distribution says where they are (and, unless
    ``tcp_given`` names a host:port on the node, whether etcd is kine on a socket)."""
    paths = {"cacert": cacert, "cert": cert, "key": key}
    found = None
    if detect and not any(paths.values()) and not remote_socket:
        from breakglass.access import distro  # noqa: PLC0415

        d, etcd = distro.etcd_route(node)
        found = {"distro": d.name, "summary": d.summary(), "evidence": d.evidence}
        if etcd.socket and not tcp_given:
            remote_socket = etcd.socket
        elif not etcd.socket:
            paths = dict(etcd.certs)
    elif not any(paths.values()) and not remote_socket:
        paths = dict(KUBEADM_PKI)
    if remote_socket:
        remote_path(remote_socket, "etcd unix socket")
        if any(paths.values()):
            raise BadInput(f"unix://{remote_socket}: TLS over a unix socket is not supported (k3s' kine.sock has "
                           f"none): leave out --etcd-cacert, --etcd-cert and --etcd-key")
        node.check_socket(remote_socket)
        host, port, _ = node.forward_socket(remote_socket)
        route = {"ssh": node.host, "endpoint": "unix://" + remote_socket}
        if found:
            route["found"] = found
        return EtcdSettings(endpoints=(f"http://{host}:{port}",), timeout=timeout or 5.0, user=user,
                            password=password, route=route)
    for p in paths.values():
        if p:
            remote_path(p, "etcd certificate path")  # before anything is run
    pem = {k: _fetch(node, v) for k, v in paths.items() if v}
    try:
        host, port, _ = node.forward(remote_host, remote_port)
    except Exception as e:  # noqa: BLE001
        raise Unreachable(f"ssh {node.host}: cannot forward to etcd ({e})") from None
    scheme = "https" if pem else "http"
    route = {"ssh": node.host, "endpoint": f"{scheme}://{remote_host}:{remote_port}",
             **{k: v for k, v in paths.items() if v}}
    if found:
        route["found"] = found
    return EtcdSettings(endpoints=(f"{scheme}://{host}:{port}",), timeout=timeout or 5.0, user=user,
                        password=password, pem=pem or None, route=route)


def endpoint_on_node(endpoint: str | None) -> tuple[str, int, str | None]:
    """--etcd-endpoints as the node sees it: (host, port, None), or a unix socket: ("", 0, path)."""
    if not endpoint:
        return "127.0.0.1", 2379, None
    first = endpoint.split(",")[0].strip()
    path = _unix_path(first)
    if path is not None:
        return "", 0, remote_path(path, "etcd unix socket")
    host, port, _ = _parse_endpoint(first)
    return host, port, None


def reopen(target: dict, ssh_options, user: str | None = None, timeout: float | None = None) -> EtcdSettings:
    """Reach etcd again the way a run's journal says it was reached (``EtcdSettings.journal_target``)."""
    from breakglass.access.ssh import Node, SshOptions  # noqa: PLC0415

    host = target.get("etcd_via_ssh")
    eps = target.get("etcd_endpoints") or ["127.0.0.1:2379"]
    certs = target.get("etcd_node_certs") or {}
    if not isinstance(host, str) or not host or host.startswith("-") or not isinstance(eps, list) \
            or not isinstance(certs, dict) or not all(isinstance(v, str) for v in certs.values()):
        raise BadInput("the run's journal has no usable SSH route to etcd (etcd_via_ssh, etcd_endpoints)")
    rhost, rport, sock = endpoint_on_node(str(eps[0]))
    user, password = credentials(user, None)  # asked for before connecting
    node = Node(host, ssh_options or SshOptions()).connect()
    return tunnel(node, certs.get("cacert"), certs.get("cert"), certs.get("key"), timeout, rport, user, password,
                  remote_host=rhost, remote_socket=sock)
