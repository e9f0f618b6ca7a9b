"""How many endpoints are ready behind a webhook's Service: from etcd while the apiserver is down, or the API.

The apiserver stores a Service at ``/registry/services/specs/NS/NAME`` and its EndpointSlices at
``/registry/endpointslices/NS/SLICE`` (shared reference §4.1), each slice labelled
``kubernetes.io/service-name=NAME``; where no slice exists, the core/v1 Endpoints object at
``/registry/services/endpoints/NS/NAME`` counts instead. Both are decoded with the storage codec (checked byte for byte against
Kubernetes' own fixtures in k8s.io/api/testdata). An endpoint counts once however many slices list it (one per
address family): a ready endpoint is one whose ``conditions.ready`` is true or unset, as the EndpointSlice API
says consumers should read an unknown state; a terminating one is not ready.

Besides the counts, a Backend carries what the apiserver's call is routed by: the Service's ``spec.ports`` (its
type, and for ExternalName the name), and each listed endpoint with the ports its slice (or Endpoints subset)
names, so ``webhooks.readiness`` can find the endpoints that serve the webhook's ``service.port``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Iterable

from breakglass.core.errors import BadInput
from breakglass.webhooks import codec

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True)
class Endpoint:
    address: str  # the first address, the one the apiserver's resolver dials
    ports: tuple[tuple[str, int], ...]  # (name, number) as the slice or subset lists them
    ready: bool
    who: tuple  # the pod it stands for (or its addresses): one endpoint however many families list it


@dataclass
class Backend:
    service: str  # NAMESPACE/NAME
    source: str  # etcd | api
    found: bool  # the Service exists
    ready: int = 0
    not_ready: int = 0
    slices: int = 0  # none: the count comes from the Service's Endpoints object, if there is one
    problems: list[str] = field(default_factory=list)  # values that could not be read (encrypted, corrupt)
    ports: list[dict] | None = None  # the Service's spec.ports; None: no Service, or it could not be read
    service_type: str = "ClusterIP"
    external_name: str = ""
    endpoints: list[Endpoint] = field(default_factory=list)  # every endpoint listed, ready or not

    @property
    def healthy(self) -> bool:
        return self.found and self.ready > 0

    def line(self) -> str:
        if not self.found:
            return f"backend {self.service}: no such Service (read from {self.source})"
        text = (f"backend {self.service}: {self.ready} ready endpoint(s), {self.not_ready} not ready "
                f"(read from {self.source}, {self.slices} EndpointSlice(s))")
        if self.problems:
            text += "; unreadable: " + ", ".join(self.problems)
        return text


def etcd_prefixes(namespace: str, prefix: str = "/registry") -> tuple[bytes, bytes, bytes]:
    """(Services, Endpoints, EndpointSlices) key prefixes of one namespace: the only keys a backend check reads."""
    if not namespace or "/" in namespace or namespace in (".", ".."):
        raise BadInput(f"not a namespace: {namespace!r}")
    base = prefix.rstrip("/")
    return (f"{base}/services/specs/{namespace}/".encode(), f"{base}/services/endpoints/{namespace}/".encode(),
            f"{base}/endpointslices/{namespace}/".encode())


def count_endpoints(ep: dict) -> tuple[int, int]:
    """(ready, not ready) addresses of a core/v1 Endpoints object: the fallback where no EndpointSlice exists
    (a cluster whose slices are not made, an Endpoints object written by hand)."""
    subsets = ep.get("subsets") or []
    return (sum(len(s.get("addresses") or []) for s in subsets),
            sum(len(s.get("notReadyAddresses") or []) for s in subsets))


def _who(ep: dict, addresses: list) -> tuple:
    ref = ep.get("targetRef") or {}
    return (ref.get("kind"), ref.get("namespace"), ref.get("name")) if ref.get("name") else tuple(sorted(addresses))


def _ports(ports) -> tuple[tuple[str, int], ...]:
    return tuple((str(p.get("name") or ""), p["port"]) for p in ports or []
                 if isinstance(p, dict) and isinstance(p.get("port"), int))


def listed(slices: Iterable[dict], name: str) -> list[Endpoint]:
    """Every endpoint the EndpointSlices of Service ``name`` list, with its slice's ports (ready as ``count``)."""
    out = []
    for s in slices:
        if ((s.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) != name:
            continue
        ports = _ports(s.get("ports"))
        for ep in s.get("endpoints") or []:
            addresses = [a for a in ep.get("addresses") or [] if isinstance(a, str)]
            if not addresses:
                continue
            cond = ep.get("conditions") or {}
            ready = cond.get("ready", True) is not False and not cond.get("terminating")
            out.append(Endpoint(addresses[0], ports, ready, _who(ep, addresses)))
    return out


def listed_in_endpoints(ep: dict) -> list[Endpoint]:
    """The same from a core/v1 Endpoints object: ``addresses`` ready, ``notReadyAddresses`` not."""
    out = []
    for s in ep.get("subsets") or []:
        ports = _ports(s.get("ports"))
        for key, ready in (("addresses", True), ("notReadyAddresses", False)):
            for a in s.get(key) or []:
                if isinstance(a, dict) and isinstance(a.get("ip"), str):
                    out.append(Endpoint(a["ip"], ports, ready, _who(a, [a["ip"]])))
    return out


def _service(out: Backend, svc: dict | None) -> None:
    spec = (svc or {}).get("spec") or {}
    out.ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)] if svc is not None else None
    out.service_type = str(spec.get("type") or "ClusterIP")
    out.external_name = str(spec.get("externalName") or "")


def count(slices: Iterable[dict], name: str) -> tuple[int, int, int]:
    """(ready, not ready, slices) over the EndpointSlices of Service ``name`` (JSON-shaped objects)."""
    ready: set = set()
    waiting: set = set()
    n = 0
    for s in slices:
        labels = (s.get("metadata") or {}).get("labels") or {}
        if labels.get(SERVICE_NAME_LABEL) != name:
            continue
        n += 1
        for ep in s.get("endpoints") or []:
            ref = ep.get("targetRef") or {}
            who = (ref.get("kind"), ref.get("namespace"), ref.get("name")) if ref.get("name") else \
                tuple(sorted(ep.get("addresses") or []))
            cond = ep.get("conditions") or {}
            if cond.get("ready", True) is not False and not cond.get("terminating"):
                ready.add(who)
            else:
                waiting.add(who)
    waiting -= ready  # listed ready in one family's slice and not yet in the other's: it serves
    return len(ready), len(waiting), n


def from_etcd(etcd, namespace: str, name: str, prefix: str = "/registry") -> Backend:
    """``etcd``: an ``access.etcd.Etcd`` allowed ``etcd_prefixes(namespace, prefix)``."""
    svc_prefix, eps_prefix, slice_prefix = etcd_prefixes(namespace, prefix)
    svc_kv = etcd.get(svc_prefix + name.encode())
    out = Backend(f"{namespace}/{name}", "etcd", svc_kv is not None)
    if svc_kv is not None:
        _service(out, _decoded(svc_kv, out))
    slices = [obj for obj in (_decoded(kv, out) for kv in etcd.range_prefix(slice_prefix)) if obj is not None]
    out.ready, out.not_ready, out.slices = count(slices, name)
    out.endpoints = listed(slices, name)
    if not out.slices:
        kv = etcd.get(eps_prefix + name.encode())
        ep = _decoded(kv, out) if kv is not None else None
        if ep is not None:
            out.ready, out.not_ready = count_endpoints(ep)
            out.endpoints = listed_in_endpoints(ep)
    return out


def _decoded(kv, out: Backend) -> dict | None:
    key = kv.key.decode("utf-8", "replace")
    try:
        dec = codec.decode_value(kv.value)
    except BadInput as e:
        out.problems.append(f"{key} ({e})")
        return None
    if dec.obj is None:
        out.problems.append(f"{key} (encrypted: {dec.detail})")
    return dec.obj


def from_api(api, namespace: str, name: str) -> Backend:
    """``api``: an ``access.kubeapi`` client (its ``request`` returns (status, JSON dict))."""
    out = Backend(f"{namespace}/{name}", "api", False)
    ns, svc = urllib.parse.quote(namespace, safe=""), urllib.parse.quote(name, safe="")
    status, service = api.request("GET", f"/api/v1/namespaces/{ns}/services/{svc}")
    out.found = status == 200
    if out.found:
        _service(out, service if isinstance(service, dict) else {})
    selector = urllib.parse.quote(f"{SERVICE_NAME_LABEL}={name}", safe="")
    status, doc = api.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
                                     f"?labelSelector={selector}")
    if status == 200:
        out.ready, out.not_ready, out.slices = count(doc.get("items") or [], name)
        out.endpoints = listed(doc.get("items") or [], name)
    if not out.slices:
        status, ep = api.request("GET", f"/api/v1/namespaces/{ns}/endpoints/{svc}")
        if status == 200:
            out.ready, out.not_ready = count_endpoints(ep)
            out.endpoints = listed_in_endpoints(ep)
    return out
