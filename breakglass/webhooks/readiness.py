"""Can this webhook's backend answer the apiserver? The one reading the revert guard, the kubeapi way's revert
blocker and the exporter share.

Three states:
- ``ready``: the call the apiserver makes was made from here and answered (``access.admission_call``: TLS verified
  against the webhook's caBundle, an AdmissionReview for this request back; a denial is an answer too);
- ``down``: it definitely cannot answer: a ``url:`` that refuses, times out or fails at TLS, HTTP or the review;
  for a ``service:``, no such Service, no Service port the webhook names (``service.port``, default 443), no ready
  endpoint serving that port, or an endpoint reached from here that failed the call;
- ``unchecked``: nothing conclusive: the Service could not be read, or its endpoints are ready but none could be
  called from here. A pod's address is often unreachable from outside the cluster (a laptop, a node the pod
  network does not route to), so a refused, unroutable or timed-out connection to an endpoint says nothing about
  the pod; a ``url:`` is the other way round: the apiserver on this control-plane node dials the same address.

An endpoint serves the Service port the webhook names when its slice (or Endpoints subset) lists a port of that
Service port's name, as the apiserver's resolver and kube-proxy match them; a slice written by hand for an
unnamed Service port may name its port differently, and then the number its targetPort names decides. The call to
an endpoint is the apiserver's with ``--enable-aggregator-routing``: to the endpoint's address and that port,
TLS checked as ``SERVICE.NAMESPACE.svc``. At most ``CALLED`` endpoints are called, each given ``DIAL`` seconds to
connect (a pod address from here may never answer at all).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from breakglass.access import admission_call
from breakglass.core.errors import BreakglassError
from breakglass.webhooks.backend import SERVICE_NAME_LABEL, Backend

READY, DOWN, UNCHECKED = "ready", "down", "unchecked"
CALLED = 3
DIAL = 3.0


@dataclass(frozen=True)
class Spec:
    """What the apiserver's call to one webhook needs: where (a Service and its port and path, or a URL), the roots
    it trusts, the AdmissionReview versions it may send, its timeout, and whether it mutates."""

    service: str | None = None  # NAMESPACE/NAME
    url: str | None = None
    port: int | None = None  # clientConfig.service.port (None: 443)
    path: str | None = None
    ca_bundle: str | None = None
    timeout: int = 10
    review_versions: tuple[str, ...] = ("v1",)
    mutating: bool = False
    known: bool = True  # False: only the Service is known (named by a diagnosis): no caBundle or path to call with

    @classmethod
    def of(cls, w) -> Spec:
        """From a ``model.Webhook``."""
        return cls(w.service, None if w.service else w.url, w.service_port, w.path, w.ca_bundle,
                   w.timeout_seconds or 10, tuple(w.review_versions), w.type == "mutating")

    @property
    def key(self) -> tuple:
        """Webhooks with the same key get the same answer: read and call once."""
        ca = hashlib.sha256((self.ca_bundle or "").encode()).hexdigest()[:16]
        return (self.service, self.url, self.port or 443, self.path or "", ca, self.timeout, self.review_versions,
                self.mutating, self.known)

    @property
    def what(self) -> str:
        if not self.service:
            return f"url {self.url}"
        port = self.port or 443
        return f"service {self.service}" + (f" port {port}" if port != 443 else "") + (
            f" path {self.path}" if self.path and self.known else "")


@dataclass
class Reading:
    what: str  # "service NS/NAME[ port P][ path /p]" or "url https://..."
    state: str  # ready | down | unchecked
    detail: str  # what was checked, from where, and what it found
    check: str = ""  # what an engineer runs to see it for themselves
    endpoints: int = 0  # ready endpoints serving the webhook's port (a Service); 1 if the URL answered

    @property
    def ready(self) -> bool | None:
        return {READY: True, DOWN: False}.get(self.state)


def of_url(spec: Spec, configuration: str = "", webhook: str = "") -> Reading:
    """``configuration`` (``validating/NAME``) and ``webhook`` only make the check command exact."""
    url = spec.url or ""
    r = admission_call.call(url, spec.ca_bundle, review_versions=spec.review_versions, timeout=spec.timeout,
                            mutating=spec.mutating)
    check = url_check(url, spec.ca_bundle, configuration, webhook)
    if r.ok:
        return Reading(spec.what, READY, f"backend url {url}: called {url}: {r.detail} (checked from this machine)",
                       check, 1)
    return Reading(spec.what, DOWN, f"backend url {url}: {r.detail} (checked from this machine)", check)


def of_service(spec: Spec, b: Backend, call: bool = True) -> Reading:
    """``b``: the Service as ``webhooks.backend`` read it; ``call``: False to count and not call (the exporter)."""
    ns, name = (spec.service or "/").split("/", 1)
    check = service_check(ns, name)
    head = b.line()
    port = spec.port or 443

    def said(state: str, text: str, n: int = 0) -> Reading:
        return Reading(spec.what, state, text, check, n)

    if not b.found:
        why = ("no ready endpoints" if not b.ready else
               f"though {b.ready} ready endpoint(s) are listed for it: the apiserver finds the Service first")
        return said(DOWN, f"{head}, {why}")
    if b.ports is None:
        return said(UNCHECKED, f"{head}; the Service could not be read, so which port serves the webhook is not "
                               f"known")
    if b.service_type == "ExternalName":
        return said(UNCHECKED, f"{head}; an ExternalName Service: the apiserver calls {b.external_name}:{port}, "
                               f"not checked here")
    sp = next((p for p in b.ports if p.get("port") == port), None)
    if sp is None:
        ports = ", ".join(str(p.get("port")) for p in b.ports) or "none"
        return said(DOWN, f"backend {spec.service}: Service {spec.service} has no port {port} (ports: {ports}; read "
                          f"from {b.source}), so the apiserver cannot route the webhook's call")
    serving = _serving(b, sp)
    n = len({e.who for e, _ in serving})
    target = sp.get("targetPort", port)
    port_text = f"port {port}" + (f" (targetPort {target})" if str(target) != str(port) else "")
    if not serving:
        return said(DOWN, f"{head}: no ready endpoints serve {port_text}")
    head = f"{head}; {n} serve {port_text}"
    if not call:
        return said(UNCHECKED, f"{head}; not called", n)
    if not spec.known:
        return said(UNCHECKED, f"{head}; not called: only the Service is known to this run (the webhook's caBundle "
                               f"and path are not)", n)
    return _called(spec, ns, name, serving, head, n, said)


def _serving(b: Backend, sp: dict) -> list:
    """(endpoint, port number) of each ready endpoint serving Service port ``sp``, one per address."""
    pname = str(sp.get("name") or "")
    target = sp.get("targetPort", sp.get("port"))
    target = int(target) if isinstance(target, str) and target.isdigit() else target
    out, seen = [], set()
    for e in b.endpoints:
        if not e.ready or e.address in seen:
            continue
        num = next((n for nm, n in e.ports if nm == pname), None)
        if num is None and not pname and isinstance(target, int):
            num = next((n for _, n in e.ports if n == target), None)
        if num is not None:
            seen.add(e.address)
            out.append((e, num))
    return out


def _called(spec: Spec, ns: str, name: str, serving: list, head: str, n: int, said) -> Reading:
    host = f"{name}.{ns}.svc"
    calls = []
    for e, num in serving[:CALLED]:
        r = admission_call.call(f"https://{host}:{spec.port or 443}{spec.path or ''}", spec.ca_bundle,
                                address=(e.address, num), review_versions=spec.review_versions,
                                timeout=spec.timeout, mutating=spec.mutating, connect_timeout=DIAL)
        calls.append((_hostport(e.address, num), r))
    path = spec.path or "/"
    failed = [(a, r) for a, r in calls if not r.ok and (r.reached or r.stage == admission_call.REVIEW)]
    if failed:
        a, r = failed[0]
        return said(DOWN, f"{head}; called https://{a}{path} as {host}: {r.detail} (checked from this machine)", n)
    answered = [(a, r) for a, r in calls if r.ok]
    if answered:
        a, r = answered[0]
        more = f" ({len(answered)} of {len(calls)} called answered)" if len(calls) > 1 else ""
        return said(READY, f"{head}; called https://{a}{path}: {r.detail}{more} (checked from this machine)", n)
    why = "; ".join(r.detail for _, r in calls)
    return said(UNCHECKED, f"{head}; endpoints ready, not called from here ({why}: a pod's address is often not "
                           f"reachable from outside the cluster)", n)


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def service_check(ns: str, name: str) -> str:
    return (f"kubectl -n {ns} get service {name} -o wide && kubectl -n {ns} get endpointslices "
            f"-l {SERVICE_NAME_LABEL}={name} -o wide")


def url_check(url: str, ca_bundle, configuration: str = "", webhook: str = "") -> str:
    """curl as the apiserver calls it: with the webhook's caBundle as the only roots (written to a file first:
    curl takes no inline CA)."""
    probe = f"curl -sS -H 'Content-Type: application/json' -d '{{}}'"
    if not ca_bundle:
        return f"{probe} {url}"
    kind, _, cfg = configuration.partition("/")
    resource = {"validating": "validatingwebhookconfiguration", "mutating": "mutatingwebhookconfiguration"}.get(kind)
    if not resource or not cfg:
        return f"{probe} --cacert CA.crt {url}   (CA.crt: the webhook's caBundle, base64-decoded)"
    where = f'?(@.name=="{webhook}")' if webhook else "0"
    return (f"kubectl get {resource} {cfg} -o jsonpath='{{.webhooks[{where}].clientConfig.caBundle}}' | base64 -d "
            f"> /tmp/webhook-ca.crt && {probe} --cacert /tmp/webhook-ca.crt {url}")


def of_webhook(spec: Spec, read, configuration: str = "", webhook: str = "") -> Reading:
    """``read(namespace, name)``: the Service's Backend (``webhooks.backend.from_api`` or ``from_etcd``); a
    BreakglassError reading it is an unchecked reading that says why."""
    if not spec.service:
        return of_url(spec, configuration, webhook)
    ns, name = spec.service.split("/", 1)
    try:
        b = read(ns, name)
    except BreakglassError as e:
        return unread(spec, str(e))
    return of_service(spec, b)


def unread(spec: Spec, why: str) -> Reading:
    ns, name = (spec.service or "/").split("/", 1)
    return Reading(spec.what, UNCHECKED, f"backend {spec.service}: not checked ({why})", service_check(ns, name))
