"""Which configuration holds a webhook a log names, read from the cluster, and who owns it.

An apiserver log names a webhook (``validate.policy.corp.example.com``), never the configuration that holds it.
Vendor naming conventions (``breakglass.webhooks.vendors``) guess it for a few operators; this module asks the cluster:
every ValidatingWebhookConfiguration and MutatingWebhookConfiguration read from etcd or the API, indexed by the
names of their webhooks. The answer says where it came from (``etcd``, ``api``), replaces a convention's guess,
and names the owner from the object itself (Helm's release annotations, ``app.kubernetes.io`` labels,
``ownerReferences``) before any vendor table.

A webhook is named in a ``-w`` reference as ``webhook:NAME``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from breakglass.core.errors import BadInput
from breakglass.webhooks import model, owners

WEBHOOK_REF = "webhook:"
_WEBHOOK_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?")


@dataclass
class Match:
    webhook: str
    kind: str  # validating | mutating
    configuration: str
    source: str  # etcd | api
    backend: str  # where its calls go (service NS/NAME:PORT/path, or the URL)
    owner: str | None
    service: str | None = None  # NAMESPACE/NAME of its backend Service, when it calls one
    delete_warning: str | None = None  # what its owner does to a deleted configuration (owners.Owners.warning)

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.configuration}"


def webhook_names(refs: Iterable[str]) -> tuple[list[str], list[str]]:
    """(configuration references, webhook names) of ``-w`` references."""
    configs, hooks = [], []
    for r in refs:
        if r.startswith(WEBHOOK_REF):
            name = r[len(WEBHOOK_REF):].strip()
            if not name:
                raise BadInput(f"{r!r} names no webhook (webhook:NAME)")
            if not _WEBHOOK_NAME.fullmatch(name):  # the apiserver requires a DNS subdomain (at most 253)
                raise BadInput(f"not a webhook name: {name[:80]!r}{'...' if len(name) > 80 else ''} (webhook names "
                               "are DNS names such as validate.kyverno.svc)")
            hooks.append(name)
        else:
            configs.append(r)
    return configs, hooks


def owner_of(cfg: model.AdmissionConfig) -> str | None:
    """Who will recreate or overwrite this configuration, from the object: a Helm release, an owning object, a
    managing tool; None when the object does not say."""
    ann, labels = cfg.annotations, cfg.labels
    engine = next((o for o in owners.of(cfg).owners if o.kind in ("kyverno", "gatekeeper", "argocd", "flux")), None)
    if engine:  # the party that acts soonest, named by what the object says
        return f"{engine.name} ({engine.evidence})"
    release, release_ns = ann.get("meta.helm.sh/release-name"), ann.get("meta.helm.sh/release-namespace")
    if release:
        return f"Helm release {release_ns + '/' if release_ns else ''}{release} (meta.helm.sh annotations)"
    if cfg.owners:
        return f"owned by {', '.join(cfg.owners)} (ownerReferences)"
    managed = labels.get("app.kubernetes.io/managed-by")
    part_of, instance = labels.get("app.kubernetes.io/part-of"), labels.get("app.kubernetes.io/instance")
    if managed or part_of:
        what = f"managed by {managed}" if managed else f"part of {part_of}"
        if managed and part_of:
            what += f", part of {part_of}"
        if instance:
            what += f", instance {instance}"
        return what + " (app.kubernetes.io labels)"
    return None


def find(configs: Iterable[model.AdmissionConfig], webhook: str, source: str,
         kinds: Iterable[str] | None = None) -> list[Match]:
    """Every configuration (of ``kinds``, default both webhook kinds) defining a webhook named ``webhook``."""
    wanted = set(kinds or (model.VALIDATING, model.MUTATING))
    out = []
    for cfg in configs:
        if cfg.kind not in wanted:
            continue
        for w in cfg.webhooks:
            if w.name == webhook:
                out.append(Match(webhook, cfg.kind, cfg.name, source, w.backend, owner_of(cfg), w.service,
                                 owners.of(cfg).warning("delete")))
                break
    return out


def choose(webhook: str, matches: list[Match], take_all: bool) -> list[Match]:
    """The configurations to act on for one webhook name. Several: all of them only when asked to (``--yes``)
    and when they call the same backend, so they fail together; otherwise the engineer says which."""
    if not matches:
        raise BadInput(f"no webhook configuration defines a webhook named {webhook!r}",
                       hint="`breakglass webhooks` lists what the cluster holds")
    if len(matches) == 1:
        return matches
    listed = ", ".join(f"{m.ref} ({m.backend})" for m in matches)
    if take_all and len({m.backend for m in matches}) == 1:
        return matches
    why = "they call different backends" if len({m.backend for m in matches}) > 1 else "say which, or add --yes"
    raise BadInput(f"webhook {webhook!r} is defined in {len(matches)} configurations: {listed}; {why}",
                   hint="name one with -w KIND/NAME (for example -w " + matches[0].ref + ")")


def placed(hooks: list[str], load, source: str, kinds: Iterable[str] | None, take_all: bool) -> list[Match]:
    """The configurations to act on for each webhook name (``choose``), reading the configurations with
    ``load()`` only when there is a name to place."""
    if not hooks:
        return []
    configs = load()
    return [m for hook in hooks for m in choose(hook, find(configs, hook, source, kinds), take_all)]


def note(m: Match, where: str, owner: bool = True) -> str:
    """What is said of a webhook placed: where it was found, and who may recreate it."""
    return f"webhook {m.webhook} is in {m.ref} (read from {where})" + (
        f"; {m.delete_warning}" if owner and m.delete_warning else
        f"; {m.owner}, which may recreate it" if owner and m.owner else "")
