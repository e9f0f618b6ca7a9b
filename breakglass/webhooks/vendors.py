"""What the common admission operators name their webhooks and configurations.

Apiserver logs name the *webhook* but never the *configuration* that holds it; to delete
or patch something the engineer needs the configuration. For the operators most often
behind these outages, the configuration follows from the webhook name by the operator's
own convention (from their install manifests). Such a guess is always labelled as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class VendorHint:
    vendor: str
    configuration: str
    webhook_type: str  # validating | mutating
    service: str | None  # namespace/name of the usual backing service
    managed_note: str  # why deleting or patching the configuration directly is temporary
    # How the vendor's shipped configuration keeps its own backend's pods (and kube-system's) out of the webhook,
    # when it does: a failing call then refuses other namespaces' pods, never the ones that bring it back. None
    # where the shipped configuration intercepts them (or varies by version): the log cannot tell, so it is asked.
    exempts_own: str | None = None


_KYVERNO = ("Kyverno recreates its webhook configurations; set the exclusions in its Helm values "
            "(config.webhooks / config.matchConditions) or scale the admission controller down first.")
_GATEKEEPER = ("Gatekeeper's chart owns this configuration; set validatingWebhookMatchConditions / "
               "validatingWebhookExemptNamespacesLabels in the Helm values.")
_CERT_MANAGER = "cert-manager's cainjector rewrites caBundle; fix the webhook pod or its certificate."
# Kyverno's chart v3 (Kyverno 1.10+) defaults config.excludeKyvernoNamespace to true: its generated webhooks carry
# a namespaceSelector `kubernetes.io/metadata.name NotIn [kyverno]` (older charts excluded it in resourceFilters only,
# inside Kyverno, after the call: those still refused its own pods while it was down)
_KYVERNO_OWN = ("its generated webhooks leave the kyverno namespace out (the chart's config.excludeKyvernoNamespace, "
                "true by default since chart v3, Kyverno 1.10; older Kyverno still intercepted it)")
_ISTIO = "istiod reconciles this configuration; set values in the IstioOperator / Helm chart."

# (pattern on the webhook name, hint)
_RULES: tuple[tuple[re.Pattern, VendorHint], ...] = (
    (re.compile(r"^validate\.kyverno\.svc"), VendorHint(
        "Kyverno", "kyverno-resource-validating-webhook-cfg", "validating", "kyverno/kyverno-svc", _KYVERNO,
        _KYVERNO_OWN)),
    (re.compile(r"^mutate\.kyverno\.svc"), VendorHint(
        "Kyverno", "kyverno-resource-mutating-webhook-cfg", "mutating", "kyverno/kyverno-svc", _KYVERNO,
        _KYVERNO_OWN)),
    (re.compile(r"^validate-policy\.kyverno\.svc"), VendorHint(
        "Kyverno", "kyverno-policy-validating-webhook-cfg", "validating", "kyverno/kyverno-svc", _KYVERNO)),
    (re.compile(r"^mutate-policy\.kyverno\.svc"), VendorHint(
        "Kyverno", "kyverno-policy-mutating-webhook-cfg", "mutating", "kyverno/kyverno-svc", _KYVERNO)),
    (re.compile(r"^(?:validate-)?exception\.kyverno\.svc"), VendorHint(
        "Kyverno", "kyverno-exception-validating-webhook-cfg", "validating", "kyverno/kyverno-svc", _KYVERNO)),
    (re.compile(r"^monitor-webhooks\.kyverno\.svc"), VendorHint(
        "Kyverno", "kyverno-verify-mutating-webhook-cfg", "mutating", "kyverno/kyverno-svc", _KYVERNO)),
    (re.compile(r"^(?:validation|check-ignore-label)\.gatekeeper\.sh$"), VendorHint(
        "Gatekeeper", "gatekeeper-validating-webhook-configuration", "validating",
        "gatekeeper-system/gatekeeper-webhook-service", _GATEKEEPER)),
    (re.compile(r"^mutation\.gatekeeper\.sh$"), VendorHint(
        "Gatekeeper", "gatekeeper-mutating-webhook-configuration", "mutating",
        "gatekeeper-system/gatekeeper-webhook-service", _GATEKEEPER)),
    (re.compile(r"^webhook\.cert-manager\.io$"), VendorHint(
        "cert-manager", "cert-manager-webhook", "validating", "cert-manager/cert-manager-webhook", _CERT_MANAGER)),
    (re.compile(r"^(?:rev\.)?validation\.istio\.io$"), VendorHint(
        "Istio", "istio-validator-istio-system", "validating", "istio-system/istiod", _ISTIO)),
    (re.compile(r"sidecar-injector\.istio\.io$"), VendorHint(
        "Istio", "istio-sidecar-injector", "mutating", "istio-system/istiod", _ISTIO,
        "its shipped namespaceSelector is opt-in (istio-injection=enabled or istio.io/rev), which istio-system and "
        "kube-system do not carry")),
    (re.compile(r"^linkerd-proxy-injector\.linkerd\.io$"), VendorHint(
        "Linkerd", "linkerd-proxy-injector-webhook-config", "mutating", "linkerd/linkerd-proxy-injector",
        "linkerd's control plane reconciles this configuration.",
        "its shipped namespaceSelector leaves out namespaces labelled config.linkerd.io/admission-webhooks=disabled, "
        "as linkerd's own namespaces and kube-system are")),
    (re.compile(r"^vault\.hashicorp\.com$"), VendorHint(
        "Vault agent injector", "vault-agent-injector-cfg", "mutating", None,
        "the Vault Helm chart owns this configuration.")),
)


def hint_for(webhook: str) -> VendorHint | None:
    for pat, hint in _RULES:
        if pat.search(webhook):
            return hint
    return None


def guess_type(webhook: str) -> str | None:
    """validating / mutating from naming habits, when nothing better is known."""
    hint = hint_for(webhook)
    if hint:
        return hint.webhook_type
    low = webhook.lower()
    if "mutat" in low or "inject" in low:
        return "mutating"
    if "valid" in low or "policy" in low:
        return "validating"
    return None


def hint_for_configuration(name: str, labels: dict[str, str]) -> VendorHint | None:
    """The vendor of a configuration, by its well-known name or by its labels."""
    for _, hint in _RULES:
        if hint.configuration == name:
            return hint
    text = (name + " " + " ".join(f"{k}={v}" for k, v in labels.items())).lower()
    for _, hint in _RULES:
        if hint.vendor.lower().split()[0] in text:
            return hint
    return None


# The policies Gatekeeper generates from a ConstraintTemplate with a CEL source (`gatekeeper-<template>`) and their
# bindings (`gatekeeper-<kind>-<constraint>`): pkg/drivers/k8scel/transform in open-policy-agent/gatekeeper. Only a
# guess from a name in a log; in the cluster the ownerReferences say it (webhooks.owners).
_GATEKEEPER_POLICY = re.compile(r"^gatekeeper-[a-z0-9][a-z0-9.-]*$")


def policy_hint(policy: str | None) -> str | None:
    """What a policy's name suggests about who keeps it, said as a guess."""
    if policy and _GATEKEEPER_POLICY.match(policy):
        return ("The name is the one Gatekeeper gives the ValidatingAdmissionPolicies it generates from a "
                "ConstraintTemplate's CEL source (gatekeeper-<template>): while Gatekeeper runs it re-creates what "
                "is deleted, and the lasting fix goes into the template (its source's matchCondition, or "
                "generateVAP: false) or Gatekeeper's flags (--default-create-vap-for-templates)")
    return None
