"""Gardener's problematic-webhook table (tests/fixtures/gardener/): the resources its care check holds can stop a
cluster from waking up. Every entry that is a real risk on a supported cluster (1.28 and newer) is flagged by
`audit` at medium or worse, for a webhook that fails closed on it (and, for its Lease list, one that fails open
with the v1 default timeout). The entries judged no real risk are named here with the reason, and in the manual (docs/commands/audit.md):
a test that only lists what passes would never fail."""

from __future__ import annotations

import csv
import os

import pytest

from breakglass.webhooks import audit, model

TABLE = os.path.join(os.path.dirname(__file__), "fixtures", "gardener", "webhook-constraint-matchers.tsv")

# API versions a supported cluster no longer serves (removed by 1.22 or never served for that resource): a rule
# naming only one of them matches no request, under either matchPolicy (the equivalence covers served versions)
REMOVED = {("apps", "v1beta1"), ("apps", "v1beta2"), ("extensions", "v1beta1"), ("coordination.k8s.io", "v1beta1"),
           ("networking.k8s.io", "v1beta1"), ("rbac.authorization.k8s.io", "v1alpha1"),
           ("rbac.authorization.k8s.io", "v1beta1"), ("apiextensions.k8s.io", "v1beta1"),
           ("apiregistration.k8s.io", "v1beta1"), ("scheduling.k8s.io", "v1alpha1"), ("scheduling.k8s.io", "v1beta1")}
# served, but nothing on the way back to a working cluster writes them (see the audit page of the manual, docs/commands/audit.md)
NOT_A_RISK = {
    ("", "namespaces/status"): "written by the namespace controller while a namespace is deleted; Gardener's own "
                               "resource manager labels kube-system",
    ("apps", "replicasets/scale"): "only a HorizontalPodAutoscaler that targets a ReplicaSet writes it",
}


def _entries():
    with open(TABLE, encoding="utf-8") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return [dict(zip(("group", "version", "resource", "subresource", "where", "objects", "list"), r)) for r in rows]


ENTRIES = _entries()


def _webhook(e: dict, **over) -> model.AdmissionConfig:
    hook = {"name": "h.example.com", "clientConfig": {"service": {"namespace": "policy", "name": "engine"}},
            "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [e["group"]],
                       "apiVersions": [e["version"]],
                       "resources": [e["resource"] + (f"/{e['subresource']}" if e["subresource"] else "")],
                       "scope": "*"}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", **over}
    return model.from_json({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                            "metadata": {"name": "from-gardeners-table"}, "webhooks": [hook]}, "gardener")


def _key(e: dict) -> tuple[str, str]:
    return e["group"], e["resource"] + (f"/{e['subresource']}" if e["subresource"] else "")


def _worst(cfg) -> str | None:
    return audit.audit([cfg]).worst


def test_the_table_is_gardeners_whole_list():
    assert len(ENTRIES) == 80 and {e["list"] for e in ENTRIES} == {"main", "leases"}
    assert all(e["where"] in ("cluster", "kube-system", "default", "any") for e in ENTRIES)


@pytest.mark.parametrize("e", [e for e in ENTRIES if e["list"] == "main"], ids=lambda e: "/".join(
    filter(None, (e["group"] or "core", e["version"], e["resource"], e["subresource"], e["where"]))))
def test_each_real_risk_is_flagged_medium_or_worse_and_the_rest_are_named(e):
    worst = _worst(_webhook(e))
    flagged = worst is not None and audit.RANK[worst] >= audit.RANK["medium"]
    if (e["group"], e["version"]) in REMOVED:
        assert not flagged, (e, worst)  # matches no request on a cluster breakglass supports
    elif _key(e) in NOT_A_RISK:
        assert not flagged, (e, worst)
    else:
        assert flagged, (e, worst)


@pytest.mark.parametrize("e", [e for e in ENTRIES if e["list"] == "leases" and e["version"] == "v1"],
                         ids=lambda e: e["version"])
def test_a_fail_open_webhook_on_kube_system_leases_is_flagged_past_3_seconds(e):
    for timeout, expected in ((None, True), (10, True), (4, True), (3, False)):
        over = {"failurePolicy": "Ignore", **({"timeoutSeconds": timeout} if timeout else {})}
        rules = {f.rule for f in audit.audit([_webhook(e, **over)]).findings}
        assert ("lease-timeout" in rules) is expected, (timeout, rules)


def test_the_judged_not_a_risk_list_is_in_the_readme():
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "commands", "audit.md"), encoding="utf-8") as f:
        readme = f.read()
    for (group, resource), _why in NOT_A_RISK.items():
        assert f"`{resource}`" in readme, resource
