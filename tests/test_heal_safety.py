"""The heal model's case for re-arming a webhook whose backend is still down (webhooks.heal_safety): safe only when
every high or critical write it intercepts is a one-time start-up write that is settled, and its own pods are not
sent to it. The facts are given here; tests/test_kubeapi.py reads them from the real apiserver."""

from __future__ import annotations

from breakglass.webhooks import heal_safety, model


def _webhook(rules, namespace_selector=None, service=("kyverno", "kyverno-svc"), url=None):
    cc = {"url": url} if url else {"service": {"namespace": service[0], "name": service[1]}}
    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": "cfg"},
           "webhooks": [{"name": "validate.kyverno.svc-fail", "failurePolicy": "Fail", "sideEffects": "None",
                         "admissionReviewVersions": ["v1"], "clientConfig": cc, "rules": rules,
                         **({"namespaceSelector": namespace_selector} if namespace_selector else {})}]}
    return model.from_json(obj, "test").webhooks[0]


BOOTSTRAP_ONLY = [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                   "resources": ["servicecidrs", "ipaddresses"]},
                  {"apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["v1"],
                   "operations": ["CREATE", "UPDATE"], "resources": ["clusterroles", "clusterrolebindings"]}]
EVERYTHING = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"]}]
KYVERNO_EXEMPT = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                        "values": ["kube-system", "kyverno"]}]}
SETTLED = heal_safety.Facts(ready=True, version=(1, 34), service_cidr="", ip_addresses="", namespaces={})


def test_a_webhook_on_the_one_time_bootstrap_writes_is_safe_once_they_are_settled():
    case = heal_safety.assess([_webhook(BOOTSTRAP_ONLY)], SETTLED)
    assert case.safe, case.blockers
    text = "; ".join(case.reasons)
    assert "ServiceCIDR exists and is Ready" in text and "ClusterIP has its IPAddress" in text
    assert "kyverno's pods are not sent to it" in text and "1.34" in text


def test_a_missing_service_cidr_or_ipaddress_or_an_unready_apiserver_is_not_settled():
    for facts, said in (
            (heal_safety.Facts(True, (1, 34), "the kubernetes ServiceCIDR does not exist", "", {}), "does not exist"),
            (heal_safety.Facts(True, (1, 34), "", "1 ClusterIP(s) have no IPAddress", {}), "no IPAddress"),
            (heal_safety.Facts(False, (1, 34), "", "", {}), "apiserver is not ready")):
        case = heal_safety.assess([_webhook(BOOTSTRAP_ONLY)], facts)
        assert not case.safe and said in "; ".join(case.blockers), case


def test_a_webhook_on_every_kind_blocks_node_heartbeats_and_is_never_safe_while_down():
    case = heal_safety.assess([_webhook(EVERYTHING, KYVERNO_EXEMPT)], SETTLED)
    assert not case.safe
    text = "; ".join(case.blockers)
    assert "Lease in kube-node-lease (kubelet)" in text  # every node goes NotReady
    assert "in kyverno" not in text  # its own namespace is exempt: not what blocks it


def test_a_webhook_on_its_own_backends_pods_is_a_self_dependency():
    pods = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    case = heal_safety.assess([_webhook(pods)], SETTLED)
    text = "; ".join(case.blockers)
    assert not case.safe and "CREATE Pod in kyverno" in text and "self-dependency" in text, case.blockers


def test_a_url_webhooks_backend_is_nowhere_known_so_never_safe_while_down():
    case = heal_safety.assess([_webhook(BOOTSTRAP_ONLY, url="https://10.0.0.1:9443/validate")], SETTLED)
    assert not case.safe and "calls a URL" in case.blockers[0]


def test_unread_facts_are_not_safe():
    case = heal_safety.assess([_webhook(BOOTSTRAP_ONLY)], heal_safety.Facts(unread="apiserver: connection refused"))
    assert not case.safe and "connection refused" in case.blockers[0]
