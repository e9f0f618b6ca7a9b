"""The outages a sandbox can rehearse on a real kube-apiserver, set up the way a real cluster gets there.

- ``deadlock``, the seed story: a Kyverno-shaped validating webhook (``failurePolicy: Fail``, every resource,
  a namespaceSelector that cannot exempt cluster-scoped kinds) installed as the operator would, its backend
  down, and the default ServiceCIDR and IPAddress objects gone, as in a cluster upgraded from 1.32 (which had
  neither). On 1.33 and newer the restarted apiserver never becomes ready; on 1.32 it does, which is the
  point of running both.
- ``fail-open``: a Gatekeeper-shaped webhook with ``failurePolicy: Ignore`` and its backend down; the
  apiserver is ready, audit logging is on, and requests that Gatekeeper should have judged get in (the
  scenario makes a few, as a user would).
- ``policy-deadlock``: the same upgrade, locked by no webhook at all: a ValidatingAdmissionPolicy and its binding,
  fail-closed, that refuse every cluster-scoped object without an ``owner`` label (the kind of rule Gatekeeper
  generates from a ConstraintTemplate by default). The policy runs inside the apiserver: there is no backend to
  come back, and a restart of anything changes nothing. On 1.33 and newer the restarted apiserver's default
  ServiceCIDR is refused and it never becomes ready.
- ``mutating-policy-deadlock``: the same, with a MutatingAdmissionPolicy (served by default from 1.36): it copies
  an object's ``team`` annotation into an ``owner`` label, and its expression fails on an object without the
  annotation, which with failurePolicy Fail refuses the write (the apiserver's default ServiceCIDR has none).
- ``healthy``: the same Kyverno-shaped webhook with its backend up.

The webhooks call a ``url:`` on loopback (never a Service's cluster IP), with the sandbox CA as caBundle.
"""

from __future__ import annotations

import base64

SCENARIOS = ("deadlock", "fail-open", "policy-deadlock", "mutating-policy-deadlock", "healthy")
# the scenarios whose restart is the 1.32 upgrade: the bootstrap objects 1.33+ must create are removed first
UPGRADES = ("deadlock", "policy-deadlock", "mutating-policy-deadlock")
POLICIES = ("policy-deadlock", "mutating-policy-deadlock")  # locked by an admission policy, no webhook
MUTATING_POLICY_SINCE = 36  # MutatingAdmissionPolicy v1, on by default (k8s.io/apiserver features: GA in 1.36)

KYVERNO_NAME = "kyverno-resource-validating-webhook-cfg"
GATEKEEPER_NAME = "gatekeeper-validating-webhook-configuration"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

# The default ServiceCIDR and the IPAddress objects of 1.33+ (the etcd keys have no API group): a cluster
# upgraded from 1.32 has none of them, and the new apiserver must create them before it is ready.
UPGRADE_MISSING_PREFIXES = (b"/registry/servicecidrs/", b"/registry/ipaddresses/")


def _ca_bundle(ca_path: str) -> str:
    with open(ca_path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def kyverno(url: str, ca_path: str) -> dict:
    """Kyverno's resource validating webhook as its admission controller registers it (all resources, Fail),
    pointed at ``url``."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": KYVERNO_NAME, "labels": {"webhook.kyverno.io/managed-by": "kyverno"}},
        "webhooks": [{
            "name": "validate.kyverno.svc-fail",
            "clientConfig": {"url": url + "/validate/fail", "caBundle": _ca_bundle(ca_path)},
            "rules": [{"operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"], "apiGroups": ["*"],
                       "apiVersions": ["*"], "resources": ["*/*"], "scope": "*"}],
            "failurePolicy": "Fail", "sideEffects": "NoneOnDryRun", "timeoutSeconds": 10,
            "admissionReviewVersions": ["v1"], "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                        "values": ["kyverno"]}]},
        }],
    }


def gatekeeper(url: str, ca_path: str) -> dict:
    """Gatekeeper's validating webhook as its Helm chart installs it: fail-open, 3 s, gatekeeper-system and
    namespaces labelled admission.gatekeeper.sh/ignore exempt."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": GATEKEEPER_NAME, "labels": {"gatekeeper.sh/system": "yes"}},
        "webhooks": [{
            "name": "validation.gatekeeper.sh",
            "clientConfig": {"url": url + "/v1/admit", "caBundle": _ca_bundle(ca_path)},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                       "resources": ["*"], "scope": "*"}],
            "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 3,
            "admissionReviewVersions": ["v1", "v1beta1"], "matchPolicy": "Exact",
            "namespaceSelector": {"matchExpressions": [
                {"key": "admission.gatekeeper.sh/ignore", "operator": "DoesNotExist"},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["gatekeeper-system"]}]},
        }],
    }


def webhooks(scenario: str, url: str, ca_path: str) -> list[dict]:
    return [gatekeeper(url, ca_path)] if scenario == "fail-open" else [kyverno(url, ca_path)]


POLICY_NAME = "require-owner-label"
VAP_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


MAP_NAME = "stamp-owner"
MAP_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies"
MAPB_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings"


def owner_stamp_policy() -> list[tuple[str, dict]]:
    """A MutatingAdmissionPolicy and binding as an operator writes them: every cluster-scoped object created gets
    its ``team`` annotation as an ``owner`` label. On an object without the annotation the expression fails, and
    failurePolicy Fail turns that into a refusal."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": MAP_NAME},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                 "matchConstraints": {"resourceRules": [{
                     "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                     "operations": ["CREATE"], "scope": "Cluster"}]},
                 "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                     "expression": 'Object{metadata: Object.metadata{labels: {"owner": '
                                   'object.metadata.annotations["team"]}}}'}}]},
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": MAP_NAME}, "spec": {"policyName": MAP_NAME},
    }
    return [(MAP_PATH, policy), (MAPB_PATH, binding)]


def policy_objects(scenario: str) -> list[tuple[str, dict]]:
    return owner_stamp_policy() if scenario == "mutating-policy-deadlock" else owner_label_policy()


def owner_label_policy() -> list[tuple[str, dict]]:
    """A ValidatingAdmissionPolicy and binding as an operator writes them: every cluster-scoped object created or
    updated must carry an ``owner`` label, failurePolicy Fail. Nothing exempts what the apiserver creates itself."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{
                     "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                     "operations": ["CREATE", "UPDATE"], "scope": "Cluster"}]},
                 "validations": [{"expression": "has(object.metadata.labels) && 'owner' in object.metadata.labels",
                                  "message": "every cluster-scoped object needs an owner label"}]},
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
    return [(VAP_PATH, policy), (VAPB_PATH, binding)]


# What a user sends while Gatekeeper fails open: the kind of requests its policies exist to stop.
LEAKED_NAMESPACE = "team-a"


# cluster-admin for a team: what no policy engine should let in, whichever kinds its policies name
LEAKED_BINDING = (
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "team-a-is-cluster-admin"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
     "subjects": [{"kind": "Group", "name": "team-a", "apiGroup": "rbac.authorization.k8s.io"}]})


def leaked_requests() -> list[tuple[str, dict]]:
    ns = LEAKED_NAMESPACE
    return [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        (f"/api/v1/namespaces/{ns}/configmaps",
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unlabelled-config"}, "data": {"k": "v"}}),
        LEAKED_BINDING,
    ]
