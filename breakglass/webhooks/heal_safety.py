"""Can a fail-closed webhook go back in the path while its backend is still down? The heal model's answer.

A webhook whose backend is down refuses every write it intercepts. That is the policy working, not an outage, as
long as none of those writes is on the cluster's path back (``heal.writes``, severity high or critical). A bootstrap
deadlock's writes are mostly one-time: the default ServiceCIDR controller writes ``kubernetes`` only until it exists
and is Ready, the IP repair controller creates an IPAddress only for a ClusterIP that has none, and the apiserver's
other start-up writes (RBAC roles, flow-control defaults, system namespaces) are made only when missing or changed,
so once the apiserver has come up at this version with the plugins off they are settled: a restart writes none of
them, until the next upgrade. Everything else an actor writes continuously (kubelet leases and node status, leader
leases, the backend's own pods and endpoints) is never settled: a webhook that intercepts one of those keeps the
cluster down while its backend is, and waits for it.

So the answer is safe only when, read through the apiserver: it is ready; the objects that settle the one-time
writes exist (the ``kubernetes`` ServiceCIDR Ready, an IPAddress for every ClusterIP); and every high or critical
write each re-armed webhook intercepts is one of those settled writes. A ``url:`` webhook's backend runs nobody
knows where, so its own pods cannot be said to be exempt: never safe while down.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from breakglass.core.errors import BreakglassError
from breakglass.heal import writes as heal
from breakglass.webhooks import intercept

# The apiserver's start-up writes made only while their object is missing, not Ready or out of date: settled once the
# apiserver has come up at this version (the first two also by the objects named, which are checked)
SETTLED_WHEN_READY = {"apiserver-servicecidr", "apiserver-ipaddress", "apiserver-clusterroles",
                      "apiserver-clusterrolebindings", "apiserver-roles", "apiserver-rolebindings",
                      "apiserver-priorityclasses", "apiserver-flowschemas", "apiserver-prioritylevels",
                      "apiserver-system-namespaces", "apiserver-auth-configmap", "apiserver-apiservices"}
BLOCKING = heal.rank("high")


@dataclass
class Facts:
    """What the apiserver says of the objects that settle a bootstrap deadlock's writes (None: not read)."""

    ready: bool | None = None
    version: tuple[int, int] | None = None
    service_cidr: str | None = None  # why the default ServiceCIDR is not settled ("" when it is)
    ip_addresses: str | None = None  # why not every ClusterIP has its IPAddress ("" when each has)
    namespaces: dict[str, dict[str, str]] | None = None  # the cluster's namespaces' labels
    unread: str = ""  # why the facts could not be read


@dataclass
class Case:
    safe: bool
    reasons: list[str] = field(default_factory=list)  # why it is safe (said when it is)
    blockers: list[str] = field(default_factory=list)  # the writes that keep it from being safe

    def to_json(self) -> dict:
        return asdict(self)


def assess(webhooks: list, facts: Facts) -> Case:
    """The case for re-arming ``webhooks`` (model.Webhook, each with its backend down) given ``facts``."""
    if facts.unread:
        return Case(False, blockers=[f"the cluster could not be read ({facts.unread})"])
    blockers: list[str] = []
    if facts.ready is not True:
        blockers.append("the apiserver is not ready, so its start-up writes are not settled")
    settled_by = {"apiserver-servicecidr": facts.service_cidr, "apiserver-ipaddress": facts.ip_addresses}
    exempt: list[str] = []
    for w in webhooks:
        if not w.service:
            blockers.append(f"{w.name} calls a URL: where its backend runs, and whether its own pods are sent to it, "
                            f"is not known")
            continue
        backend_ns = w.service.partition("/")[0]
        hits = intercept.webhook_hits(w, facts.version, facts.namespaces)
        own = [h for h in hits if backend_ns in h.namespaces]
        for h in hits:
            if heal.rank(h.write.severity) < BLOCKING:
                continue
            why_not = settled_by.get(h.write.id)
            if h.write.id in SETTLED_WHEN_READY and facts.ready and not why_not:
                continue
            where = f" in {', '.join(h.namespaces)}" if h.namespaces else ""
            blockers.append(f"{w.name} intercepts {_what(h.write)}{where} ({h.write.actor}): "
                            f"{why_not or h.write.breaks}")
        if not own:
            exempt.append(backend_ns)
    if blockers:
        return Case(False, blockers=list(dict.fromkeys(blockers)))
    reasons = ["the apiserver is ready" + (f" at {facts.version[0]}.{facts.version[1]}" if facts.version else "")]
    if facts.service_cidr == "":
        reasons.append("the kubernetes ServiceCIDR exists and is Ready")
    if facts.ip_addresses == "":
        reasons.append("every Service's ClusterIP has its IPAddress")
    if exempt:
        reasons.append(f"{' and '.join(sorted(set(exempt)))}'s pods are not sent to it (its backend can come back)")
    reasons.append("until the next upgrade: the lasting fix keeps the bootstrap writes out for good")
    return Case(True, reasons)


def _what(w: heal.Write) -> str:
    return f"{'/'.join(w.operations)} {w.kind}" + (f" {w.subresource}" if w.subresource else "")


def read_facts(api) -> Facts:
    """The facts, read through ``api`` (access.kubeapi.Api)."""
    from breakglass.webhooks.audit import parse_version  # noqa: PLC0415

    f = Facts()
    try:
        f.ready = api.readyz().ready is True
        status, doc = api.request("GET", "/version")
        try:
            f.version = parse_version(doc.get("gitVersion")) if status == 200 else None
        except BreakglassError:
            f.version = None
        f.namespaces = _namespaces(api)
        if f.version is None or f.version >= (1, 33):  # the MultiCIDRServiceAllocator writes (GA in 1.33)
            f.service_cidr = _service_cidr(api)
            f.ip_addresses = _ip_addresses(api)
    except BreakglassError as e:
        f.unread = str(e)
    return f


def _namespaces(api) -> dict[str, dict[str, str]] | None:
    status, doc = api.request("GET", "/api/v1/namespaces")
    if status != 200:
        return None
    return {(n.get("metadata") or {}).get("name", ""): dict((n.get("metadata") or {}).get("labels") or {})
            for n in doc.get("items") or [] if isinstance(n, dict)}


def _service_cidr(api) -> str:
    status, doc = api.request("GET", "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")
    if status == 404:
        return "the kubernetes ServiceCIDR does not exist: the apiserver writes it on its next start"
    if status != 200:
        return f"the kubernetes ServiceCIDR could not be read (HTTP {status})"
    ready = [c for c in (doc.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        return "the kubernetes ServiceCIDR is not Ready: the apiserver writes it again on its next start"
    return ""


def _ip_addresses(api) -> str:
    status, services = api.request("GET", "/api/v1/services")
    status2, addresses = api.request("GET", "/apis/networking.k8s.io/v1/ipaddresses")
    if status != 200 or status2 != 200:
        return f"Services and IPAddresses could not be listed (HTTP {status}, {status2})"
    have = {(a.get("metadata") or {}).get("name") for a in addresses.get("items") or [] if isinstance(a, dict)}
    missing = []
    for s in services.get("items") or []:
        spec = (s.get("spec") or {}) if isinstance(s, dict) else {}
        for ip in spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else []):
            if ip and ip != "None" and ip not in have:
                meta = s.get("metadata") or {}
                missing.append(f"{meta.get('namespace')}/{meta.get('name')} ({ip})")
    if missing:
        return (f"{len(missing)} ClusterIP(s) have no IPAddress ({', '.join(missing[:3])}"
                f"{', …' if len(missing) > 3 else ''}): the repair controller writes them on the next start")
    return ""
