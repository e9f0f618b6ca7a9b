"""Each family of §1-§3, in each format, becomes the right finding."""

from __future__ import annotations

import pytest

from tests import logbuild as lb
from tests.conftest import diagnose_text

HOOK = "validate.kyverno.svc-fail"
SERVICECIDR_ATTEMPT = "I0224 15:32:50.979280       1 default_servicecidr_controller.go:166] Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]"

CAUSES = [
    ("dial tcp 10.96.0.50:443: connect: connection refused", "webhook-unreachable", "connection refused"),
    ("dial tcp 10.112.0.99:8443: i/o timeout", "webhook-unreachable", "connect timed out (packets dropped)"),
    ("dial tcp 10.254.76.42:443: connect: connection timed out", "webhook-unreachable", "connect timed out (packets dropped)"),
    ("dial tcp 10.1.2.3:443: connect: no route to host", "webhook-unreachable", "no route to host"),
    ("dial tcp 10.1.2.3:443: connect: operation not permitted", "webhook-unreachable",
     "operation not permitted (local network policy)"),
    ('no endpoints available for service "kyverno-svc"', "webhook-unreachable", "no endpoints"),
    ('service "kyverno-svc" not found', "webhook-unreachable", "service not found"),
    ("context deadline exceeded", "webhook-timeout", "timed out"),
    ("context deadline exceeded (Client.Timeout exceeded while awaiting headers)", "webhook-timeout", "timed out"),
    ("net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)",
     "webhook-timeout", "timed out"),
    ("x509: certificate signed by unknown authority", "webhook-tls", "certificate signed by unknown authority (caBundle)"),
    ("tls: failed to verify certificate: x509: certificate signed by unknown authority", "webhook-tls",
     "certificate signed by unknown authority (caBundle)"),
    ("x509: certificate has expired or is not yet valid: current time 2026-02-24T15:32:50Z is after 2026-01-01T00:00:00Z",
     "webhook-tls", "certificate expired or not yet valid"),
    ("x509: certificate is valid for a.b, not kyverno-svc.kyverno.svc", "webhook-tls", "certificate name mismatch"),
    ("remote error: tls: bad certificate", "webhook-tls", "TLS handshake failed"),
    ("Address is not allowed", "webhook-unreachable", "egress proxy (konnectivity) failed"),
    ('received invalid webhook response: expected response.uid="a", got "b"', "webhook-error", "invalid webhook response"),
]


@pytest.mark.parametrize("cause,family,detail", CAUSES)
def test_fail_closed_cause_classes(cause, family, detail):
    d = diagnose_text(lb.klog(lb.fail_closed(HOOK, cause)) + "\n")
    [f] = d.findings
    assert (f.family, f.cause, f.webhook, f.mode) == (family, detail, HOOK, "closed")
    assert f.service == "kyverno/kyverno-svc"
    assert f.url == lb.SVC_URL
    assert d.verdict.state == "degraded"


@pytest.mark.parametrize("wrapper", sorted(lb.WRAPPERS))
def test_servicecidr_deadlock_in_every_format(wrapper):
    text = SERVICECIDR_ATTEMPT + "\n" + lb.WRAPPERS[wrapper](lb.fail_closed(HOOK, "dial tcp 10.96.0.50:443: connect: connection refused")) + "\n"
    d = diagnose_text(text)
    [f] = [f for f in d.findings if f.webhook == HOOK]
    assert f.blocked == ['ServiceCIDR "kubernetes"']
    assert f.hooks == ["start-kubernetes-service-cidr-controller"]
    assert f.bootstrap_deadlock and f.severity == "critical"
    assert f.configuration == "kyverno-resource-validating-webhook-cfg"
    assert d.verdict.state == "deadlocked"


@pytest.mark.parametrize("era", ["1.22+", "1.18-1.21", "go<1.14", "<=1.10"])
def test_every_version_shape_of_the_error(era):
    line = lb.klog("Failed calling webhook, failing closed x.y.z: " + lb.call_error("x.y.z", "connection refused", era=era))
    [f] = diagnose_text(line + "\n").findings
    assert f.webhook == "x.y.z" and f.cause == "connection refused"
    assert f.service == "kyverno/kyverno-svc"


def test_client_echo_alone_still_names_the_webhook():
    text = ('Error from server (InternalError): error when creating "ns.yaml": Internal error occurred: '
            + lb.call_error(HOOK, "dial tcp 10.96.0.50:443: connect: connection refused") + "\n")
    [f] = diagnose_text(text).findings
    assert f.webhook == HOOK and f.count == 1 and f.mode == "closed"


@pytest.mark.parametrize("line,blocked,hook", [
    ('PostStartHook "scheduling/bootstrap-system-priority-classes" failed: unable to add default system priority '
     'classes: Internal error occurred: ' + lb.call_error("p.q", "context deadline exceeded"),
     ["PriorityClass"], "scheduling/bootstrap-system-priority-classes"),
    ("unable to create required kubernetes system namespace kube-system: Internal error occurred: "
     + lb.call_error("p.q", "connection refused"), ['Namespace "kube-system"'], "start-system-namespaces-controller"),
    ('"Unable to create required kubernetes system Namespace" err="Internal error occurred: '
     + lb.call_error("p.q", "connection refused") + '" namespace="kube-node-lease"',
     ['Namespace "kube-node-lease"'], "start-system-namespaces-controller"),
    ("unable to reconcile clusterrole.rbac.authorization.k8s.io/system:discovery: Internal error occurred: "
     + lb.call_error("p.q", "connection refused"), ['ClusterRole "system:discovery"'], "rbac/bootstrap-roles"),
    ("unable to initialize APF bootstrap configuration: Internal error occurred: " + lb.call_error("p.q", "EOF"),
     ["FlowSchema"], "priority-and-fairness-config-producer"),
    ("error initializing the default ServiceCIDR: Internal error occurred: " + lb.call_error("p.q", "connection refused"),
     ['ServiceCIDR "kubernetes"'], "start-kubernetes-service-cidr-controller"),
])
def test_bootstrap_objects_named_on_the_same_line(line, blocked, hook):
    d = diagnose_text(lb.klog(line, level="E", caller="controller.go:1") + "\n")
    [f] = [f for f in d.findings if f.webhook == "p.q"]
    assert f.blocked == blocked and f.hooks == [hook] and f.link == "direct"
    assert f.bootstrap_deadlock


def test_denial_of_bootstrap_object_where_the_webhook_cannot_reach_the_apiserver():
    line = ('unable to create required kubernetes system namespace kube-system: admission webhook "validate.kyverno.svc-fail" '
            'denied the request: failed to get namespace: Get "https://10.96.0.1:443/api/v1/namespaces/kube-system": '
            'dial tcp 10.96.0.1:443: connect: connection refused')
    [f] = diagnose_text(lb.klog(line, level="E") + "\n").findings
    assert f.family == "webhook-rejects-bootstrap" and f.severity == "critical"
    assert f.blocked == ['Namespace "kube-system"']
    assert "cannot reach the apiserver" in f.explanation


def test_ordinary_denials_are_not_findings():
    line = 'admission webhook "validate.kyverno.svc-fail" denied the request: pods "x" must set runAsNonRoot'
    d = diagnose_text(lb.klog(line, level="I") + "\n")
    assert d.findings == [] and d.verdict.state == "clear"


def test_rejected_by_webhook_struct_print():
    line = ('rejected by webhook "validate.kyverno.svc-fail": &errors.StatusError{ErrStatus:v1.Status{TypeMeta:v1.TypeMeta{Kind:"", '
            'APIVersion:""}, Status:"Failure", Message:"admission webhook \\"validate.kyverno.svc-fail\\" denied the request: '
            'servicecidrs.networking.k8s.io \\"kubernetes\\" blocked by policy require-labels", Reason:"", Code:400}}')
    [f] = diagnose_text(lb.klog(line) + "\n").findings
    assert f.webhook_type == "validating" and f.blocked == ['ServiceCIDR "kubernetes"']


def test_fatal_hook_without_a_webhook_is_its_own_finding():
    text = "\n".join([
        lb.klog('"Unhandled Error" err="ipaddresses.networking.k8s.io \\"10.0.0.9\\" is forbidden: not yet ready to handle request"',
                level="E", caller="repairip.go:523"),
        lb.klog('PostStartHook "start-service-ip-repair-controllers" failed: unable to perform initial IP and Port allocation check',
                level="F", caller="hooks.go:203"),
    ]) + "\n"
    d = diagnose_text(text)
    [f] = d.findings
    assert f.family == "admission-not-ready" and f.severity == "critical"
    assert f.hooks == ["start-service-ip-repair-controllers"] and len(f.evidence) == 2
    # issue 36: no line ties it to a webhook: stuck, what the lines point at, and no webhook way out
    assert d.verdict.state == "stuck" and d.remedies == [] and d.verdict.needs_action
    assert "admission not ready" in d.verdict.explanation and "breakglass webhooks" in d.verdict.explanation


def test_readyz_failures_tie_to_the_only_fail_closed_webhook_as_probable():
    text = "\n".join([
        lb.klog(lb.fail_closed(HOOK, "connection refused"), t="0224 15:00:00.000000"),
        lb.klog("poststarthook/start-kubernetes-service-cidr-controller check failed: readyz", level="I",
                caller="healthz.go:280", t="0224 15:05:00.000000"),
        "[-]poststarthook/start-kubernetes-service-cidr-controller failed: reason withheld",
    ]) + "\n"
    d = diagnose_text(text)
    [f] = d.findings
    assert f.link == "probable" and f.bootstrap_deadlock
    assert any(e.role == "context" for e in f.evidence)


def test_fail_open_is_a_leak_not_a_deadlock_and_echoes_are_not_double_counted():
    cause = "Address is not allowed"
    text = "\n".join([lb.klog(lb.fail_open("validation.gatekeeper.sh", cause), caller="dispatcher.go:205"),
                      lb.structured("Unhandled Error", lb.call_error("validation.gatekeeper.sh", cause))] * 3) + "\n"
    d = diagnose_text(text)
    [f] = d.findings
    assert (f.family, f.severity, f.count) == ("webhook-fail-open", "warning", 3)
    assert d.verdict.state == "leaking" and d.verdict.needs_action


def test_leader_election_loss_counts_only_when_webhooks_fail():
    lost = lb.klog("failed to renew lease kube-system/kube-controller-manager: timed out waiting for the condition",
                   level="E", caller="leaderelection.go:297")
    assert diagnose_text(lost + "\n").findings == []
    d = diagnose_text(lb.klog(lb.fail_closed("lease.guard.io", "context deadline exceeded")) + "\n" + lost + "\n")
    assert {f.family for f in d.findings} == {"webhook-timeout", "leader-election-lost"}


def test_validating_admission_policy_on_bootstrap_objects():
    line = ("unable to create required kubernetes system namespace kube-public: ValidatingAdmissionPolicy "
            "'require-owner' with binding 'require-owner-binding' denied request: namespaces must have an owner label")
    [f] = diagnose_text(lb.klog(line, level="E") + "\n").findings
    assert f.family == "policy-rejects-bootstrap" and f.binding == "require-owner-binding"
    flag = next(r for r in diagnose_text(lb.klog(line, level="E") + "\n").remedies if r.method == "talos")
    assert flag.plugins == ["ValidatingAdmissionPolicy"]


def test_one_finding_per_webhook_and_cause():
    lines = [lb.klog(lb.fail_closed(HOOK, "connection refused"))] * 50
    lines += [lb.klog(lb.fail_closed(HOOK, "context deadline exceeded"))] * 5
    lines += [lb.klog(lb.fail_closed("other.hook", "connection refused"))] * 2
    d = diagnose_text("\n".join(lines) + "\n")
    got = sorted((f.webhook, f.cause_class, f.count) for f in d.findings)
    assert got == [("other.hook", "unreachable", 2), (HOOK, "timeout", 5), (HOOK, "unreachable", 50)]
    assert all(len(f.evidence) <= 5 for f in d.findings)


def test_remedies_are_ordered_and_name_the_exact_etcd_key():
    d = diagnose_text(SERVICECIDR_ATTEMPT + "\n" + lb.klog(lb.fail_closed(HOOK, "connection refused")) + "\n")
    assert [r.method for r in d.remedies] == ["kubeapi", "talos", "kubeadm", "etcd"]
    etcd = d.remedies[-1]
    assert etcd.targets[0]["etcd_key"] == "/registry/validatingwebhookconfigurations/kyverno-resource-validating-webhook-cfg"
    assert "admissionregistration.k8s.io" not in " ".join(etcd.manual)
    assert d.remedies[1].plugins == ["ValidatingAdmissionWebhook"]


def test_unknown_webhook_type_disables_both_plugins():
    line = lb.fail_closed("acme.example.com", "connection refused", url="https://acme.acme.svc:443/hook")
    d = diagnose_text(SERVICECIDR_ATTEMPT + "\n" + lb.klog(line) + "\n")
    talos = next(r for r in d.remedies if r.method == "talos")
    assert talos.plugins == ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"]


def test_mutating_webhook_known_from_the_json_caller():
    line = lb.json_line(lb.fail_closed("acme.example.com", "connection refused"), caller="mutating/dispatcher.go:225")
    [f] = diagnose_text(line + "\n").findings
    assert f.webhook_type == "mutating"


def test_noise_that_mentions_webhooks_is_not_a_finding():
    noise = [
        'I0224 15:32:50.000000       1 httplog.go:134] "HTTP" verb="GET" URI="/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?limit=500" resp=200',
        "I0224 15:32:50.000000       1 plugins.go:157] Loaded 13 mutating admission controller(s) successfully in the following order: MutatingAdmissionWebhook.",
        "I0224 15:32:50.000000       1 shared_informer.go:320] Caches are synced for ValidatingAdmissionPolicy",
    ]
    d = diagnose_text("\n".join(noise * 10) + "\n")
    assert d.findings == [] and not d.verdict.needs_action


def test_leader_election_loss_an_hour_away_from_the_failures_is_not_tied():
    fail = lb.klog(lb.fail_closed("lease.guard.io", "context deadline exceeded"), t="0224 10:00:00.000000")
    lost = lb.klog("failed to renew lease kube-system/kube-scheduler: timed out waiting for the condition",
                   level="E", caller="leaderelection.go:297", t="0224 11:30:00.000000")
    d = diagnose_text(fail + "\n" + lost + "\n")
    assert {f.family for f in d.findings} == {"webhook-timeout"}


def test_configuration_named_by_an_audit_annotation_beats_the_convention():
    import json
    ev = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "verb": "create", "stage": "ResponseComplete",
          "objectRef": {"resource": "pods", "namespace": "web", "name": "p"}, "user": {"username": "u"},
          "responseStatus": {"code": 201}, "stageTimestamp": "2026-02-24T15:32:50Z",
          "annotations": {"mutation.webhook.admission.k8s.io/round_0_index_0":
                          json.dumps({"configuration": "my-kyverno-mutating", "webhook": "mutate.kyverno.svc-fail",
                                      "mutated": False})}}
    text = json.dumps(ev) + "\n" + lb.klog(lb.fail_closed("mutate.kyverno.svc-fail", "connection refused")) + "\n"
    [f] = diagnose_text(text).findings
    assert (f.configuration, f.configuration_source) == ("my-kyverno-mutating", "log")


def test_a_timeout_logged_after_the_write_still_ties_to_it():
    url = "https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=10s"
    text = "\n".join([
        "I0224 15:32:50.000000       1 default_servicecidr_controller.go:166] Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]",
        lb.klog(lb.fail_closed("validation.gatekeeper.sh", "context deadline exceeded", url=url), t="0224 15:33:00.004000"),
    ]) + "\n"
    [f] = diagnose_text(text).findings
    assert f.blocked == ['ServiceCIDR "kubernetes"'] and f.link == "time"


def test_a_webhook_failure_minutes_away_from_the_write_is_not_tied():
    text = "\n".join([
        "I0224 15:32:50.000000       1 default_servicecidr_controller.go:166] Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]",
        lb.klog(lb.fail_closed("pods.guard.io", "connection refused"), t="0224 15:40:00.000000"),
    ]) + "\n"
    f = next(f for f in diagnose_text(text).findings if f.webhook == "pods.guard.io")
    assert f.link != "time"


def test_a_write_still_ties_to_its_call_behind_hundreds_of_older_calls_and_a_few_seconds_of_jitter():
    # The correlator looks back through a source's recent calls newest first and stops at the first one past the
    # window (plus 5 s for goroutines logging out of order): that stop must not hide a call near the write.
    older = [lb.klog(lb.fail_closed("other.example.com", "connection refused"), t=f"0224 15:{20 + i // 60:02d}:{i % 60:02d}.000000")
             for i in range(300)]
    text = "\n".join([
        *older,
        lb.klog(lb.fail_closed("validation.gatekeeper.sh", "connection refused"), t="0224 15:32:49.500000"),
        lb.klog(lb.fail_closed("late.example.com", "connection refused"), t="0224 15:32:45.000000"),  # 4.5 s late
        "I0224 15:32:50.000000       1 default_servicecidr_controller.go:166] Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]",
    ]) + "\n"
    found = {f.webhook: f for f in diagnose_text(text).findings}
    assert found["validation.gatekeeper.sh"].blocked == ['ServiceCIDR "kubernetes"']
    assert found["validation.gatekeeper.sh"].link == "time"
    assert found["other.example.com"].link != "time"


def test_webhook_kind_from_the_url_path():
    url = "https://cert-manager-webhook.cert-manager.svc:443/mutate?timeout=10s"
    [f] = diagnose_text(lb.klog(lb.fail_closed("webhook.cert-manager.io", "EOF", url=url)) + "\n").findings
    assert f.webhook_type == "mutating"
