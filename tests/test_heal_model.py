"""The heal model (breakglass/heal/writes.py), entry by entry: each entry is well formed, and the admission rule
that names exactly its write intercepts it while its neighbours (another subresource, another operation, a
version the apiserver does not serve) do not. The apiserver's post-start hooks and readiness checks are checked
against the real kube-apiserver in tests/test_heal_diagnose.py (its /readyz?verbose)."""

from __future__ import annotations

import pytest

from breakglass.heal import writes as heal
from breakglass.webhooks import intercept, model

ADMISSION = [w for w in heal.WRITES if w.admission]
OPS = {"CREATE", "UPDATE", "DELETE", "CONNECT"}


def _rule(**kw) -> model.Rule:
    r = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "*"}
    r.update(kw)
    return model.Rule.from_json(r)


def _res(w: heal.Write, sub: str | None = None) -> str:
    sub = w.subresource if sub is None else sub
    return w.resource + (f"/{sub}" if sub else "")


@pytest.mark.parametrize("w", heal.WRITES, ids=lambda w: w.id)
def test_entry_is_well_formed(w):
    assert w.severity in heal.SEVERITIES and w.breaks and w.actor
    assert heal.OLDEST <= w.since <= heal.NEWEST and (w.until is None or w.since <= w.until)
    assert w.source.startswith(("pkg/", "staging/src/k8s.io/", "cmd/kubeadm/", "not in kubernetes/kubernetes"))
    assert heal.BY_ID[w.id] is w
    if w.admission:
        assert set(w.operations) <= OPS and w.resource.islower() and w.versions == ("v1",)
    assert all(ns == heal.BACKEND or ns.startswith(("kube-", "default")) for ns in w.namespaces)


@pytest.mark.parametrize("w", ADMISSION, ids=lambda w: w.id)
def test_the_rule_naming_the_write_intercepts_it_and_its_neighbours_do_not(w):
    exact = _rule(operations=[w.operations[0]], apiGroups=[w.group], apiVersions=["v1"], resources=[_res(w)],
                  scope="Cluster" if w.cluster_scoped else "Namespaced")
    assert intercept.rule_matches(exact, w)
    assert intercept.rule_matches(_rule(resources=[f"{w.resource}/*"]), w)  # resource/* covers it and its subs
    assert intercept.rule_matches(_rule(resources=["*"]), w) is (w.subresource == "")  # * is no subresource
    assert not intercept.rule_matches(_rule(resources=[_res(w, "other" if w.subresource else "status")]), w)
    other_ops = sorted(OPS - set(w.operations))
    assert not intercept.rule_matches(_rule(operations=other_ops, resources=[_res(w)]), w)
    assert not intercept.rule_matches(_rule(apiGroups=["example.com"], resources=[_res(w)]), w)
    # matchPolicy Equivalent maps a request onto the rule's versions only where they are served: none else is
    assert not intercept.rule_matches(_rule(apiVersions=["v1beta1"], resources=[_res(w)]), w, "Equivalent")
    wrong_scope = "Namespaced" if w.cluster_scoped else "Cluster"
    assert not intercept.rule_matches(_rule(resources=[_res(w)], scope=wrong_scope), w)


@pytest.mark.parametrize("w", ADMISSION, ids=lambda w: w.id)
def test_a_wildcard_fail_closed_webhook_is_called_for_the_write_where_it_lands(w):
    """Every entry is reachable: a webhook with no selectors intercepts it, in each namespace it lands in (the
    backend's namespace replaced by the webhook's own Service's)."""
    hook = model.from_json({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                            "metadata": {"name": "c"}, "webhooks": [{
                                "name": "w.example.com", "rules": [{"operations": ["*"], "apiGroups": ["*"],
                                                                    "apiVersions": ["*"], "resources": ["*/*"]}],
                                "clientConfig": {"service": {"namespace": "guard", "name": "svc"}}}]},
                           "t").webhooks[0]
    [hit] = [h for h in intercept.webhook_hits(hook, w.until or heal.NEWEST) if h.write is w]
    assert hit.namespaces == w.where("guard")
    assert ("guard" in hit.namespaces) is (heal.BACKEND in w.namespaces)


def test_versions():
    cidr = heal.BY_ID["apiserver-servicecidr"]
    assert not cidr.applies((1, 32)) and cidr.applies((1, 33)) and cidr.applies(None)
    assert cidr not in heal.for_version((1, 32)) and cidr in heal.for_version((1, 34))
    assert heal.BY_ID["crd-conversion"] not in heal.for_version() and heal.BY_ID["crd-conversion"] in \
        heal.for_version(admission_only=False)


def test_needed_for_names_the_backends_own_writes():
    ids = {w.id for w in heal.needed_for("pods", "kyverno", backend_ns="kyverno")}
    assert ids == {"kcm-backend-pods"}
    assert {w.id for w in heal.needed_for("pods", "team-a", backend_ns="kyverno")} == set()
    assert {w.id for w in heal.needed_for("Pod", "kube-system", "binding")} == {"scheduler-binding"}
    assert {w.id for w in heal.needed_for("leases", "kube-node-lease")} == {"kubelet-node-lease"}
    assert {w.id for w in heal.needed_for("nodes", None, "status")} == {"kubelet-node-status"}


def test_the_leader_election_deadline_is_client_gos():
    """The renew deadline audit compares timeouts with: client-go's and component-base's default, 10 s."""
    from breakglass.webhooks import audit

    assert audit.RENEW_DEADLINE == 10
    assert {w.id for w in heal.WRITES if w.source.endswith("tools/leaderelection/leaderelection.go")} == {
        "scheduler-lease", "kcm-lease"}
