"""Ask the webhooks again about what got in while they failed open (``leaks --recheck``).

Once the webhooks answer again, each object still worth re-checking (written while they failed open, not deleted
since) is sent back through admission as it is now: a server-side dry-run UPDATE of the object unchanged
(``PUT …?dryRun=All`` with its own resourceVersion). The apiserver calls every webhook that matches an UPDATE of it
and persists nothing; a webhook that now rejects it says why, in the apiserver's answer. That list is where the
seed's "corrective controls" start. Objects are read and asked one at a time through the caller's kubeconfig;
nothing is changed.

A webhook is only asked when the apiserver would send it a dry run: one whose ``sideEffects`` is ``Some`` or
``Unknown`` makes the apiserver refuse the dry run itself (``… does not support dry run``): that answer is
reported as "not asked", never as admitted or rejected.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from breakglass.core.errors import BreakglassError

REJECTED, ADMITTED, GONE, NOT_ASKED = "rejected", "admitted", "gone", "not-asked"


@dataclass
class Verdict:
    resource: str
    namespace: str
    name: str
    outcome: str  # rejected | admitted | gone | not-asked
    reason: str  # the apiserver's message (a webhook's denial), or why not asked
    webhooks: list[str]  # the webhooks that failed open for it

    def to_json(self) -> dict:
        return asdict(self)


def _split(resource: str) -> tuple[str, str, str]:
    """(resource, group, subresource) of ``resource[.group][/subresource]``."""
    base, _, sub = resource.partition("/")
    plural, _, group = base.partition(".")
    return plural, group, sub


def _versions(api, group: str, cache: dict) -> str | None:
    """The preferred version of an API group (core: v1), from discovery, once per group."""
    if group == "":
        return "v1"
    if group not in cache:
        status, doc = api.request("GET", f"/apis/{group}")
        cache[group] = ((doc.get("preferredVersion") or {}).get("version")) if status == 200 else None
    return cache[group]


def _path(api, resource: str, namespace: str, name: str, cache: dict) -> str | None:
    plural, group, _ = _split(resource)
    version = _versions(api, group, cache)
    if not version or not plural or not name:
        return None
    base = "/api/v1" if group == "" else f"/apis/{group}/{version}"
    ns = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{ns}/{plural}/{name}"


def ask(api, items) -> list[Verdict]:
    """One verdict per item (``model.Recheck``): read it, then a dry-run UPDATE of it as it is."""
    cache: dict = {}
    out = []
    for r in items:
        def verdict(outcome: str, reason: str) -> Verdict:
            return Verdict(r.resource, r.namespace, r.name, outcome, reason, list(r.webhooks))

        try:
            path = _path(api, r.resource, r.namespace, r.name, cache)
            if path is None:
                out.append(verdict(NOT_ASKED, "the log does not name its API group's version or its name"))
                continue
            status, obj = api.request("GET", path)
            if status == 404:
                out.append(verdict(GONE, "deleted since"))
                continue
            if status != 200:
                out.append(verdict(NOT_ASKED, f"GET: HTTP {status} {obj.get('message', '')}".strip()))
                continue
            status, doc = api.request("PUT", path, obj, query="dryRun=All", forbidden_returns=True)
        except BreakglassError as e:
            out.append(verdict(NOT_ASKED, str(e)))
            continue
        message = str(doc.get("message") or "")
        if 200 <= status < 300:
            out.append(verdict(ADMITTED, "every webhook it matches admits it as it is now"))
        elif "does not support dry run" in message:
            out.append(verdict(NOT_ASKED, message))
        elif "admission webhook" in message and "denied the request" in message:
            out.append(verdict(REJECTED, message))
        elif "failed calling webhook" in message:
            out.append(verdict(NOT_ASKED, f"a webhook still cannot be called: {message}"))
        else:
            out.append(verdict(REJECTED if status in (400, 403, 422) else NOT_ASKED, f"HTTP {status}: {message}"))
    return out
