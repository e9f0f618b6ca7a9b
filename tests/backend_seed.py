"""A webhook's backend as etcd holds it when it is healthy: its Service and an EndpointSlice with a ready endpoint,
encoded the way kube-apiserver stores them. Tests that revert a run put these in first, as a cluster whose webhook is
back would have them: the engine refuses to re-arm a webhook whose backend has no ready endpoint.

The endpoint is on loopback: the revert guard calls a ready endpoint it can reach (webhooks.readiness), and tests
send nothing off this machine. By default nothing listens at 127.0.0.1:9443, so the call is refused: "endpoints
ready, not called from here", as a pod's address seen from outside the cluster (unchecked: a CLI revert goes on).
Give ``port`` of a real backend serving a certificate for NAME.NAMESPACE.svc for a backend that answers."""

from __future__ import annotations

from breakglass.webhooks import backend, codec


def healthy(namespace: str = "kyverno", name: str = "kyverno-svc", prefix: str = "/registry",
            address: str = "127.0.0.1", port: int = 9443) -> list[tuple]:
    """(key, value) pairs for a Service NAMESPACE/NAME (port 443, targetPort ``port``) with one ready endpoint at
    ``address``."""
    svc_prefix, _, slice_prefix = backend.etcd_prefixes(namespace, prefix)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port, "protocol": "TCP"}],
                        "selector": {"app": name}, "type": "ClusterIP"}}
    eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": f"{name}-abcde", "namespace": namespace,
                        "labels": {backend.SERVICE_NAME_LABEL: name}},
           "addressType": "IPv4", "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
           "ports": [{"name": "https", "protocol": "TCP", "port": port}]}
    return [(svc_prefix + name.encode(), codec.encode_value(service)),
            (slice_prefix + eps["metadata"]["name"].encode(), codec.encode_value(eps))]
