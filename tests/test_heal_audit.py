"""audit on the heal model (issue 28): every model write a webhook would intercept is flagged at the entry's
severity, the fix exempts exactly those writes, selectors read the namespaces' real labels when a cluster was
read (and a Namespace's own labels for Namespace objects), and failure policy and timeout are judged together.
On the real kube-apiserver: tests/test_heal_diagnose.py (the fix applied, what the apiserver then calls)."""

from __future__ import annotations

import pytest

from breakglass.heal import writes as heal
from breakglass.webhooks import audit, intercept, model

ADMISSION = [w for w in heal.WRITES if w.admission]
INTERCEPT_RULES = ("bootstrap-intercept", "recovery-intercept", "self-intercept")


def _cfg(rules, **hook):
    w = {"name": "h.example.com", "clientConfig": {"service": {"namespace": "guard", "name": "svc"}},
         "rules": rules, "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    w.update(hook)
    return model.from_json({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                            "metadata": {"name": "cfg"}, "webhooks": [w]}, "t")


def _exact(w: heal.Write) -> list[dict]:
    return [{"operations": list(w.operations), "apiGroups": [w.group], "apiVersions": ["v1"],
             "resources": [w.resource + (f"/{w.subresource}" if w.subresource else "")]}]


def _flagged(rep) -> dict[str, str]:
    """kind -> the highest severity an intercept finding gives it."""
    out: dict[str, str] = {}
    for f in rep.findings:
        if f.rule in INTERCEPT_RULES:
            for k in f.kinds:
                if audit.RANK[f.severity] > audit.RANK.get(out.get(k, "info"), 0):
                    out[k] = f.severity
    return out


@pytest.mark.parametrize("w", ADMISSION, ids=lambda w: w.id)
def test_every_model_write_is_flagged_at_its_severity(w):
    cfg = _cfg(_exact(w))
    rep = audit.audit([cfg])
    hits = intercept.webhook_hits(cfg.webhooks[0])
    assert w in [h.write for h in hits]
    worst = max((h.write.severity for h in hits), key=audit.RANK.get)  # writes sharing the same rule
    assert audit.RANK[_flagged(rep)[w.kind]] >= audit.RANK[w.severity]
    assert rep.worst == worst or audit.RANK[rep.worst] >= audit.RANK[worst]
    # fail-open, the same rule is no deadlock risk (only a timeout on Leases is)
    open_rep = audit.audit([_cfg(_exact(w), failurePolicy="Ignore")])
    assert not _flagged(open_rep)


@pytest.mark.parametrize("w", ADMISSION, ids=lambda w: w.id)
def test_the_fix_exempts_exactly_the_writes_it_would_block(w):
    cfg = _cfg(_exact(w))
    [f] = [f for f in audit.audit([cfg]).findings if f.rule in INTERCEPT_RULES][:1]
    raw = cfg.raw
    raw["webhooks"][0]["matchConditions"] = f.fix.match_conditions
    fixed = model.from_json(raw, "t")
    assert intercept.webhook_hits(fixed.webhooks[0]) == []
    assert not {x.rule for x in audit.audit([fixed]).findings} & set(INTERCEPT_RULES)
    # the kubelet's, the scheduler's and the controllers' writes are named by resource and namespace, not by who
    # writes them: a user's write of the same resource elsewhere is still checked
    kinds = [c for c in f.fix.match_conditions if c["name"] == audit.CONDITION_KINDS]
    if not w.by_apiserver:
        [cond] = kinds
        res = f'request.resource.resource == "{w.resource}"'
        assert res in cond["expression"]
        if w.namespaces:
            assert "request.namespace in [" in cond["expression"]
        assert ("has(request.subResource)" in cond["expression"])


def test_namespace_object_selector_on_metadata_name_is_not_low():
    """Every Namespace carries kubernetes.io/metadata.name: an objectSelector naming kube-system on Namespaces
    matches kube-system itself (the apiserver recreates it when missing)."""
    cfg = _cfg([{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                 "resources": ["namespaces"]}],
               objectSelector={"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}})
    rep = audit.audit([cfg])
    assert audit.RANK[rep.worst] >= audit.RANK["high"]
    assert "Namespace" in _flagged(rep)
    other = _cfg(cfg.raw["webhooks"][0]["rules"], objectSelector={"matchLabels": {"kubernetes.io/metadata.name":
                                                                                   "team-a"}})
    assert "Namespace" not in _flagged(audit.audit([other]))


def test_namespace_selectors_read_the_clusters_labels():
    pods = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
    cfg = _cfg(pods, namespaceSelector={"matchLabels": {"policy": "enforced"}})
    assert "Pod" not in _flagged(audit.audit([cfg]))  # Kubernetes sets no such label
    labels = {"kube-system": {"kubernetes.io/metadata.name": "kube-system", "policy": "enforced"}}
    assert _flagged(audit.audit([cfg], namespaces=labels))["Pod"] == "high"
    # a NotIn on a label the cluster's namespaces carry
    notin = _cfg(pods, namespaceSelector={"matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                                "values": ["system"]}]})
    assert "Pod" in _flagged(audit.audit([notin]))
    real = {"kube-system": {"tier": "system"}, "guard": {"tier": "system"}}
    assert "Pod" not in _flagged(audit.audit([notin], namespaces=real))


def test_fail_open_leases_with_a_timeout_past_the_renew_deadline():
    leases = [{"operations": ["UPDATE"], "apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
               "resources": ["leases"]}]
    slow = audit.audit([_cfg(leases, failurePolicy="Ignore", timeoutSeconds=30)])
    [f] = [f for f in slow.findings if f.rule == "lease-timeout"]
    assert f.severity == "high" and f.kinds == ["Lease"] and "5s client timeout" in f.explanation
    assert f.fix and any(c["name"] == audit.CONDITION_KINDS for c in f.fix.match_conditions)
    # issue 36: a renewal carries a 5 s client timeout, so the v1 default (unset: 10 s) outlasts it; at 3 s or less
    # (Gardener's line) the rest of the request still fits
    for timeout in ({}, {"timeoutSeconds": 10}, {"timeoutSeconds": 5}, {"timeoutSeconds": 4}):
        assert "lease-timeout" in {x.rule for x in audit.audit([_cfg(leases, failurePolicy="Ignore",
                                                                       **timeout)]).findings}, timeout
    for timeout in ({"timeoutSeconds": 3}, {"timeoutSeconds": 1}):
        assert "lease-timeout" not in {x.rule for x in audit.audit([_cfg(leases, failurePolicy="Ignore",
                                                                           **timeout)]).findings}, timeout
    # not on Leases: no such risk however long
    pods = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
    assert "lease-timeout" not in {x.rule for x in audit.audit([_cfg(pods, failurePolicy="Ignore",
                                                                       timeoutSeconds=30)]).findings}


def test_match_policy_and_served_versions():
    beta = [{"operations": ["UPDATE"], "apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1beta1"],
             "resources": ["leases"]}]
    # coordination.k8s.io/v1beta1 was last served by 1.21: on a known newer cluster neither policy sends it a Lease
    for policy in ("Equivalent", "Exact"):
        assert "Lease" not in _flagged(audit.audit([_cfg(beta, matchPolicy=policy)], "1.30"))
    assert "Lease" not in _flagged(audit.audit([_cfg(beta, matchPolicy="Exact")]))  # Exact: v1beta1 requests only
    # the cluster's version unknown: Equivalent covers it where v1beta1 is still served, counted at most medium
    assert _flagged(audit.audit([_cfg(beta)]))["Lease"] == "medium"
    assert "Lease" in _flagged(audit.audit([_cfg([dict(beta[0], apiVersions=["v1"])])], "1.30"))


@pytest.mark.parametrize("resources,kind,sev", [
    (["nodes/status"], "Node", "critical"),
    (["pods/status"], "Pod", "high"),
    (["certificatesigningrequests/approval", "certificatesigningrequests/status"], "CertificateSigningRequest",
     "medium"),
    (["serviceaccounts/token"], "ServiceAccount", "critical"),
    (["pods/binding"], "Pod", "critical"),
])
def test_the_subresources_audit_missed(resources, kind, sev):
    groups = ["certificates.k8s.io"] if kind == "CertificateSigningRequest" else [""]
    rep = audit.audit([_cfg([{"operations": ["CREATE", "UPDATE"], "apiGroups": groups, "apiVersions": ["*"],
                              "resources": resources}])])
    assert _flagged(rep)[kind] == sev


def test_apiservices_csinodes_and_kube_system_secrets():
    rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"],
              "resources": ["apiservices", "apiservices/status", "csinodes", "secrets", "customresourcedefinitions",
                            "customresourcedefinitions/status"]}]
    rep = audit.audit([_cfg(rules)])
    flagged = _flagged(rep)
    assert flagged["APIService"] == "high"  # autoregister-completion: written only when missing or after an upgrade
    assert {"CSINode", "Secret", "CustomResourceDefinition"} <= set(flagged)
    [boot] = [f for f in rep.findings if f.rule == "bootstrap-intercept"]
    assert "autoregister-completion" in boot.explanation


def test_admission_policies_are_judged_on_the_model_through_their_bindings():
    pods = {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                               "resources": ["pods/binding", "nodes/status"]}]}
    vap = model.from_json({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                           "metadata": {"name": "p"}, "spec": {"failurePolicy": "Fail", "matchConstraints": pods}}, "t")

    def binding(**mr):
        return model.from_json({"apiVersion": "admissionregistration.k8s.io/v1",
                                "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
                                "spec": {"policyName": "p", "validationActions": ["Deny"], "matchResources": mr}}, "t")

    [f] = audit.audit([vap, binding()]).findings
    assert (f.rule, f.severity, f.kinds) == ("policy-bootstrap-intercept", "critical", ["Pod"])  # the scheduler
    # a binding that keeps kube-system out leaves nothing the cluster needs (pods/binding lands there)
    narrowed = binding(namespaceSelector={"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                "operator": "NotIn", "values": ["kube-system"]}]})
    assert audit.audit([vap, narrowed]).findings == []
