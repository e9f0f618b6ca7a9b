"""Issue 47 §2, §5: the words the apiserver uses when an admission policy refuses a write, as classes of line (the
texts are k8s.io/apiserver's own formats, shared reference §1.2; names and objects made up)."""

from __future__ import annotations

import json

from tests.conftest import diagnose_text

CIDR = "servicecidrs.networking.k8s.io \\\"kubernetes\\\" is forbidden: "


def _audit(user: str, resource: str, name: str, message: str, ts: str = "2026-12-06T08:15:0{}.000000Z") -> str:
    lines = []
    for i in range(6):
        lines.append(json.dumps({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseComplete",
            "verb": "create", "user": {"username": user},
            "objectRef": {"resource": resource, "name": name, "apiGroup": "networking.k8s.io" if resource ==
                          "servicecidrs" else "rbac.authorization.k8s.io", "apiVersion": "v1"},
            "responseStatus": {"status": "Failure", "message": message, "code": 422},
            "stageTimestamp": ts.format(i)}))
    return "\n".join(lines) + "\n"


def _lead(report):
    return report.findings[0] if report.findings else None


def test_a_validating_policy_refusing_the_bootstrap_servicecidr_is_a_deadlock_with_no_backend():
    msg = ('servicecidrs.networking.k8s.io "kubernetes" is forbidden: ValidatingAdmissionPolicy \'p1\' with binding '
           '\'b1\' denied request: every object needs an owner label')
    r = diagnose_text(_audit("system:apiserver", "servicecidrs", "kubernetes", msg))
    f = _lead(r)
    assert (f.family, f.policy, f.binding, f.webhook_type) == ("policy-rejects-bootstrap", "p1", "b1", "validating")
    assert r.verdict.state == "deadlocked" and "no backend" in r.verdict.explanation
    assert "docs/runbooks/policy-lockout.md" in r.verdict.explanation


def test_the_generic_dispatchers_words_are_a_mutating_policy_and_its_plugin():
    """MutatingAdmissionPolicy refuses through the generic dispatcher: `policy 'NAME' with binding 'B' denied
    request: …`, no kind in the words."""
    msg = "servicecidrs.networking.k8s.io \"kubernetes\" is forbidden: policy 'add-owner' with binding 'add-owner-b' " \
          "denied request: failed to configure binding: paramKind kind `example.com/v1, Kind=Knob` not known"
    r = diagnose_text(_audit("system:apiserver", "servicecidrs", "kubernetes", msg))
    f = _lead(r)
    assert (f.policy, f.binding, f.webhook_type, f.cause_class) == ("add-owner", "add-owner-b", "mutating",
                                                                    "policy-config")
    assert "cannot be evaluated" in f.title
    plugins = next(o.plugins for o in r.remedies if o.method == "talos")
    assert plugins == ["MutatingAdmissionPolicy"]
    etcd = next(o for o in r.remedies if o.method == "etcd")
    assert etcd.targets[0]["etcd_key"] == "/registry/mutatingadmissionpolicybindings/add-owner-b"


def test_a_policy_that_names_no_binding_leaves_the_policy_itself_as_the_handle():
    msg = ("servicecidrs.networking.k8s.io \"kubernetes\" is forbidden: ValidatingAdmissionPolicy 'gatekeeper-k8sx' "
           "denied request: failed to configure policy: failed to find resource referenced by paramKind: "
           "'constraints.gatekeeper.sh/v1beta1, Kind=K8sX'")
    r = diagnose_text(_audit("system:apiserver", "servicecidrs", "kubernetes", msg))
    f = _lead(r)
    assert f.cause_class == "policy-config" and f.binding is None
    etcd = next(o for o in r.remedies if o.method == "etcd")
    assert etcd.targets[0]["etcd_key"] == "/registry/validatingadmissionpolicies/gatekeeper-k8sx"
    assert "Gatekeeper" in f.advice  # the name is the one Gatekeeper generates: said as what the name suggests


def test_a_users_write_of_a_bootstrap_kind_is_not_the_apiservers_bootstrap():
    """A user's ClusterRole refused by a policy (an audit event says who wrote) is an ordinary refusal."""
    msg = ("clusterroles.rbac.authorization.k8s.io \"my-role\" is forbidden: ValidatingAdmissionPolicy 'p1' with "
           "binding 'b1' denied request: needs an owner")
    r = diagnose_text(_audit("kubernetes-admin", "clusterroles", "my-role", msg))
    assert not any(f.family == "policy-rejects-bootstrap" for f in r.findings)
    assert r.verdict.state not in ("deadlocked", "deadlock-likely")


def test_a_success_of_an_earlier_start_does_not_clear_a_later_start_that_keeps_failing():
    """The first boot created its ServiceCIDR; after the restart the create keeps failing: stuck, not clear."""
    lines = ["I1206 08:14:30.340149   100 server.go:150] Version: v1.34.4",
             "I1206 08:14:32.029024   100 default_servicecidr_controller.go:166] Creating default ServiceCIDR "
             "with CIDRs: [10.96.0.0/12]",
             "I1206 08:14:32.074186   100 default_servicecidr_controller.go:228] Setting default ServiceCIDR "
             "condition Ready to True",
             "I1206 08:14:35.863256   200 server.go:150] Version: v1.34.4"]
    for s in range(37, 60):
        lines.append(f"I1206 08:14:{s}.006655   200 default_servicecidr_controller.go:166] Creating default "
                     f"ServiceCIDR with CIDRs: [10.96.0.0/12]")
        lines.append(f'I1206 08:14:{s}.111161   200 event.go:389] "Event occurred" object="" fieldPath="" '
                     f'kind="ServiceCIDR" apiVersion="networking.k8s.io/v1" type="Warning" '
                     f'reason="KubernetesDefaultServiceCIDRError" message="The default ServiceCIDR can not be created"')
    r = diagnose_text("\n".join(lines) + "\n")
    assert r.verdict.state == "stuck", r.verdict
    assert "audit log" in r.verdict.explanation  # a policy's refusal is only there


def test_a_policy_with_a_paramkind_is_fixed_in_its_match_constraints_not_only_its_conditions():
    """A paramKind unresolved at start refuses before any matchCondition: the apiserver's own cluster-scoped writes
    leave matchConstraints (excludeResourceRules), its other exclusions kept."""
    from breakglass.webhooks import audit, model

    spec = {"failurePolicy": "Fail", "paramKind": {"apiVersion": "example.com/v1", "kind": "Knob"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                                                    "operations": ["CREATE", "UPDATE"], "scope": "*"}],
                                 "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["*"],
                                                           "resources": ["events"], "operations": ["*"]}]},
            "validations": [{"expression": "false"}]}
    pol = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": "knobbed"}, "spec": spec}
    bind = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "knobbed"}, "spec": {"policyName": "knobbed", "validationActions": ["Deny"],
                                                      "paramRef": {"name": "k"}}}
    rep = audit.audit([model.from_json(pol, "t"), model.from_json(bind, "t")], "1.34")
    [f] = [f for f in rep.findings if f.rule == "policy-bootstrap-intercept"]
    excl = (f.fix.patch_yaml and __import__("yaml").safe_load(f.fix.patch_yaml))["spec"]["matchConstraints"][
        "excludeResourceRules"]
    assert excl[0]["resources"] == ["events"]  # the policy's own exclusion kept
    assert {"servicecidrs", "clusterroles", "namespaces"} <= {r["resources"][0] for r in excl}
    without = dict(pol, spec={k: v for k, v in spec.items() if k != "paramKind"})
    rep = audit.audit([model.from_json(without, "t"), model.from_json(bind, "t")], "1.34")
    [f] = [f for f in rep.findings if f.rule == "policy-bootstrap-intercept"]
    assert "matchConstraints" not in f.fix.patch_yaml


def test_a_start_that_ends_and_starts_again_is_said_with_how_many_starts():
    """1.33+ ends a start whose hooks did not finish in 60 s; the verdict counts the starts and says the way out
    must land within one."""
    lines = []
    for pid, base in ((100, 0), (200, 1), (300, 2)):
        lines.append(f"I1206 08:1{base}:00.000000   {pid} server.go:150] Version: v1.34.4")
        for s in range(1, 59, 3):
            lines.append(f'I1206 08:1{base}:{s:02d}.100000   {pid} event.go:389] "Event occurred" object="" '
                         f'fieldPath="" kind="ServiceCIDR" apiVersion="networking.k8s.io/v1" type="Warning" '
                         f'reason="KubernetesDefaultServiceCIDRError" message="The default ServiceCIDR can not be '
                         f'created"')
        if pid != 300:
            lines.append(f'F1206 08:1{base}:59.900000   {pid} hooks.go:204] PostStartHook '
                         f'"start-service-ip-repair-controllers" failed: unable to perform initial IP and Port '
                         f'allocation check')
    r = diagnose_text("\n".join(lines) + "\n")
    assert r.verdict.state == "stuck", r.verdict
    assert "started 3 times" in r.verdict.explanation
