"""A webhook's backend as etcd holds it when it is healthy: its Service and an EndpointSlice with a ready endpoint,
encoded the way kube-apiserver stores them. Tests that revert a run put these in first, as a cluster whose webhook is
back would have them: the engine refuses to re-arm a webhook whose backend has no ready endpoint."""

from __future__ import annotations

from breakglass.webhooks import backend, codec


def healthy(namespace: str = "kyverno", name: str = "kyverno-svc", prefix: str = "/registry") -> list[tuple]:
    """(key, value) pairs for a Service NAMESPACE/NAME with one ready endpoint."""
    svc_prefix, _, slice_prefix = backend.etcd_prefixes(namespace, prefix)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443, "protocol": "TCP"}],
                        "selector": {"app": name}, "type": "ClusterIP"}}
    eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": f"{name}-abcde", "namespace": namespace,
                        "labels": {backend.SERVICE_NAME_LABEL: name}},
           "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
           "ports": [{"name": "https", "protocol": "TCP", "port": 9443}]}
    return [(svc_prefix + name.encode(), codec.encode_value(service)),
            (slice_prefix + eps["metadata"]["name"].encode(), codec.encode_value(eps))]
