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

# API versions a supported cluster (1.28+) no longer serves: a rule naming only one of them matches a request
# only where the cluster still serves it (matchPolicy Equivalent covers the served versions). Offline, the cluster's
# version unknown, the audit counts it (at most medium); with the version known, it does not
REMOVED = {("apps", "v1beta1"), ("apps", "v1beta2"), ("extensions", "v1beta1"), ("coordination.k8s.io", "v1beta1"),
           ("networking.k8s.io", "v1beta1"), ("rbac.authorization.k8s.io", "v1alpha1"),
           ("rbac.authorization.k8s.io", "v1beta1"), ("apiextensions.k8s.io", "v1beta1"),
           ("apiregistration.k8s.io", "v1beta1"), ("scheduling.k8s.io", "v1alpha1"), ("scheduling.k8s.io", "v1beta1")}
# a group version that never served the resource: a rule naming it matches nothing on any cluster
NEVER_SERVED = {("apps", "v1beta1", "daemonsets"), ("extensions", "v1beta1", "controllerrevisions"),
                ("networking.k8s.io", "v1beta1", "networkpolicies")}
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
    group = "apps" if e["group"] == "extensions" and e["resource"] != "networkpolicies" else e["group"]
    return group, e["resource"] + (f"/{e['subresource']}" if e["subresource"] else "")  # extensions' moved on


def _worst(cfg, target: str | None = None, running=None) -> str | None:
    return audit.audit([cfg], target, running=running).worst


def _flagged(worst: str | None) -> bool:
    return worst is not None and audit.RANK[worst] >= audit.RANK["medium"]


def test_the_table_is_gardeners_whole_list():
    assert len(ENTRIES) == 80 and {e["list"] for e in ENTRIES} == {"main", "leases"}
    assert all(e["where"] in ("cluster", "kube-system", "default", "any") for e in ENTRIES)


@pytest.mark.parametrize("e", [e for e in ENTRIES if e["list"] == "main"], ids=lambda e: "/".join(
    filter(None, (e["group"] or "core", e["version"], e["resource"], e["subresource"], e["where"]))))
def test_each_real_risk_is_flagged_medium_or_worse_and_the_rest_are_named(e):
    worst = _worst(_webhook(e))
    if _key(e) in NOT_A_RISK or (e["group"], e["version"], e["resource"]) in NEVER_SERVED:
        assert not _flagged(worst), (e, worst)
    elif (e["group"], e["version"]) in REMOVED:
        assert worst == "medium", (e, worst)  # the cluster might be that old: counted, and no more than medium
        for target in ("1.28", "1.37"):  # a cluster that serves it no longer: nothing to intercept
            assert not _flagged(_worst(_webhook(e), target)), (e, target)
        assert not _flagged(_worst(_webhook(e), running=(1, 30))), e  # read from a live cluster's /version
    else:
        assert _flagged(worst), (e, worst)


@pytest.mark.parametrize("e", [e for e in ENTRIES if e["list"] == "leases"], ids=lambda e: e["version"])
def test_a_fail_open_webhook_on_kube_system_leases_is_flagged_past_3_seconds(e):
    for timeout, expected in ((None, True), (10, True), (4, True), (3, False)):
        over = {"failurePolicy": "Ignore", **({"timeoutSeconds": timeout} if timeout else {})}
        found = {f.rule: f.severity for f in audit.audit([_webhook(e, **over)]).findings}
        assert ("lease-timeout" in found) is expected, (timeout, found)
        if expected:  # v1beta1 (retired in 1.22) only where the cluster might still serve it: at most medium
            assert found["lease-timeout"] == ("high" if e["version"] == "v1" else "medium"), found
            assert "lease-timeout" not in {f.rule for f in audit.audit([_webhook(e, **over)], "1.34").findings} or \
                e["version"] == "v1"


def test_the_judged_not_a_risk_list_is_in_the_readme():
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "commands", "audit.md"), encoding="utf-8") as f:
        readme = f.read()
    for (group, resource), _why in NOT_A_RISK.items():
        assert f"`{resource}`" in readme, resource
