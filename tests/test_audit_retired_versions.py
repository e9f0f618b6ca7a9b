"""A rule that names only an API version Kubernetes no longer serves (apps/v1beta1, flowcontrol's v1beta3, ...)
intercepts under matchPolicy Equivalent wherever the cluster still serves that version, and nowhere else: judged
exactly when the cluster's version is known (--target-version, or /version read through the API), and counted at
most medium, with the reason, when it is not (files, etcd)."""

from __future__ import annotations

import json

from breakglass.webhooks import audit, model, sources


def _config(group: str, version: str, resource: str, **over) -> model.AdmissionConfig:
    hook = {"name": "old.example.com", "clientConfig": {"service": {"namespace": "policy", "name": "engine"}},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [group], "apiVersions": [version],
                       "resources": [resource]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", **over}
    return model.from_json({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                            "metadata": {"name": "old-chart"}, "webhooks": [hook]}, "test")


def _risky(rep) -> list[audit.AuditFinding]:
    return [f for f in rep.findings if f.rule in ("bootstrap-intercept", "recovery-intercept")]


def test_flowcontrol_v1beta3_is_intercepted_where_it_is_still_served_and_not_after():
    cfg = _config("flowcontrol.apiserver.k8s.io", "v1beta3", "flowschemas")
    on_131 = _risky(audit.audit([cfg], "1.31"))  # 1.31 serves v1 and v1beta3: Equivalent covers the v1 writes
    assert [f.rule for f in on_131] == ["bootstrap-intercept"] and "FlowSchema" in on_131[0].kinds
    assert audit.RANK[on_131[0].severity] > audit.RANK["medium"]  # served for certain: the write's own severity
    assert "no longer serve" not in on_131[0].explanation
    assert _risky(audit.audit([cfg], "1.32")) == []  # 1.32 stopped serving v1beta3


def test_offline_a_retired_version_counts_at_most_medium_and_says_why():
    rep = audit.audit([_config("apps", "v1beta1", "deployments")])
    found = _risky(rep)
    assert [f.severity for f in found] == ["medium"], [(f.rule, f.severity) for f in rep.findings]
    text = found[0].explanation
    assert "apps/v1beta1" in text and "Kubernetes 1.15 and older" in text and "--target-version" in text
    assert found[0].fix is not None and "deployments" in json.dumps(found[0].fix.match_conditions)


def test_extensions_v1beta1_is_equivalent_to_where_its_resources_moved():
    for resource, kind in (("daemonsets", "DaemonSet"), ("networkpolicies", "NetworkPolicy")):
        found = _risky(audit.audit([_config("extensions", "v1beta1", resource)]))
        assert found and kind in found[0].kinds, resource


def test_a_version_that_never_served_the_resource_matches_nothing():
    for group, version, resource in (("networking.k8s.io", "v1beta1", "networkpolicies"),
                                     ("apps", "v1beta1", "daemonsets"), ("extensions", "v1beta1", "controllerrevisions")):
        assert _risky(audit.audit([_config(group, version, resource)])) == [], (group, version, resource)


def test_matchpolicy_exact_sees_only_the_version_named():
    assert _risky(audit.audit([_config("apps", "v1beta1", "deployments", matchPolicy="Exact")])) == []


class _Api:
    """What sources.load_api_with reads: one configuration list and /version (the real apiserver's answers are
    read the same way in test_fleet against kube-apiserver 1.34)."""
    host = "https://fake"

    def __init__(self, git_version: str | None):
        self.git_version = git_version

    def get(self, path: str):
        if path == "/version":
            return (200, json.dumps({"gitVersion": self.git_version})) if self.git_version else (404, "")
        if path == "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations":
            cfg = {"metadata": {"name": "old-chart"}, "webhooks": [{
                "name": "old.example.com", "clientConfig": {"service": {"namespace": "policy", "name": "engine"}},
                "rules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1beta1"],
                           "resources": ["deployments"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail"}]}
            return 200, json.dumps({"kind": "ValidatingWebhookConfigurationList", "apiVersion": "admissionregistration"
                                    ".k8s.io/v1", "items": [cfg]})
        if path == "/api/v1/namespaces":
            return 200, json.dumps({"items": []})
        return 404, ""


def test_through_the_api_the_cluster_version_decides():
    inv = sources.load_api_with(_Api("v1.34.4"))
    assert inv.version == "v1.34.4"
    assert _risky(audit.audit(inv.configs, None, inv.namespaces, running=audit.running_minor(inv.version))) == []
    unknown = sources.load_api_with(_Api(None))
    assert unknown.version is None
    assert [f.severity for f in _risky(audit.audit(unknown.configs, running=audit.running_minor(None)))] == ["medium"]
    assert audit.running_minor("not-a-version") is None
