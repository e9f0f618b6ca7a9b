"""`breakglass webhooks`: one row per webhook or policy, with what it intercepts and whether
that includes objects the apiserver writes at start."""

from __future__ import annotations

from dataclasses import dataclass, field

from breakglass.webhooks import audit
from breakglass.webhooks.model import MAP_BINDING, VAP_BINDING
from breakglass.webhooks.sources import Inventory


@dataclass
class Row:
    kind: str
    configuration: str
    webhook: str | None
    failure_policy: str | None
    timeout_seconds: int | None
    intercepts: list[str]
    backend: str
    bootstrap: list[str]  # bootstrap / recovery kinds it sees
    match_conditions: int
    source: str


@dataclass
class Listing:
    rows: list[Row]
    sources: list[str]
    opaque: list[str] = field(default_factory=list)


def listing(inv: Inventory, target_version: str | None = None) -> Listing:
    target = audit.parse_version(target_version)
    rows: list[Row] = []
    for cfg in sorted(inv.configs, key=lambda c: (c.kind, c.name)):
        if cfg.webhooks:
            for w in cfg.webhooks:
                rows.append(Row(cfg.kind_name, cfg.name, w.name, w.failure_policy, w.timeout_seconds,
                                [r.describe() for r in w.rules], w.backend,
                                audit.bootstrap_kinds_touched(w, target), len(w.match_conditions), cfg.source))
        elif cfg.kind in (VAP_BINDING, MAP_BINDING):
            rows.append(Row(cfg.kind_name, cfg.name, None, None, None,
                            [f"binds {cfg.policy_name}"] + [r.describe() for r in cfg.rules],
                            "actions " + (",".join(cfg.validation_actions) or "-"), [], 0, cfg.source))
        else:
            hits = audit.at_risk(cfg.rules, "Equivalent", cfg.namespace_selector, cfg.object_selector,
                                  cfg.match_conditions, target, cfg.exclude_rules)
            rows.append(Row(cfg.kind_name, cfg.name, None, cfg.failure_policy, None,
                            [r.describe() for r in cfg.rules], "CEL, in the apiserver",
                            list(dict.fromkeys(k.kind for k, _ in hits)), len(cfg.match_conditions), cfg.source))
    return Listing(rows, inv.sources, inv.opaque)
