"""Issue 21: every webhook deadlock family named, with its own ways out (real excerpts: tests/test_pastes.py)."""

from __future__ import annotations

import json

from breakglass.flows import planner
from breakglass.diagnose import signatures
from tests import logbuild as lb
from tests.conftest import diagnose_text, run_cli

CONV = ('E0216 23:10:50.683373       1 cacher.go:428] unexpected ListAndWatch error: storage/cacher.go:/cert-manager.io/'
        'certificaterequests: Failed to list cert-manager.io/v1alpha3, Kind=CertificateRequest: conversion webhook for '
        'cert-manager.io/v1, Kind=CertificateRequest failed: Post https://cert-manager-webhook.cert-manager.svc:443/'
        'convert?timeout=30s: no endpoints available for service "cert-manager-webhook"\n')


def test_conversion_is_reached_through_an_existing_anchor_and_the_gate():
    assert b"ebhook" in signatures.ANCHORS and signatures.record_gate(CONV.encode())
    assert any(a in CONV.encode() for a in signatures.ANCHORS)
    # one literal covers kubelet's `failed to update lease` and the structured `"Failed to update lease"`
    assert b"ailed to update lease" in signatures.ANCHORS and b"failed to update lease" not in signatures.ANCHORS


def test_conversion_is_its_own_family_and_never_offers_the_admission_flag():
    d = diagnose_text(CONV)
    [f] = d.findings
    assert (f.family, f.deadlock, f.cause_class) == ("conversion-webhook", "conversion", "unreachable")
    assert f.blocked == ["certificaterequests.cert-manager.io"] and f.service == "cert-manager/cert-manager-webhook"
    assert d.verdict.family == "conversion" and d.verdict.state == "degraded"
    assert "does NOT switch conversion off" in d.verdict.explanation
    assert [r.method for r in d.remedies] == ["kubeapi", "kubeapi", "etcd"]
    text = json.dumps([r.__dict__ for r in d.remedies])
    assert "talos" not in [r.method for r in d.remedies] and "--disable-admission-plugins=" not in text
    manual = [m for r in d.remedies for m in r.manual]
    assert any("kubectl patch crd certificaterequests.cert-manager.io" in m and '"strategy":"None"' in m for m in manual)


def test_with_an_admission_webhook_failing_too_the_flag_is_offered_for_it_only():
    text = CONV + lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "connection refused")) + "\n"
    d = diagnose_text(text)
    conv = [r for r in d.remedies if r.family == "conversion"]
    flags = [r for r in d.remedies if r.method in ("talos", "kubeadm")]
    assert conv and flags and all(r.method in ("kubeapi", "etcd") for r in conv)
    assert all("CertificateRequest" not in json.dumps(r.targets) for r in flags)


def test_planner_orders_by_family_and_never_offers_the_flag_for_conversion():
    probes = {n: planner.Probe(n, True, "ok") for n in ("apiserver", "talos", "ssh", "etcd")}
    opts = planner.options(probes, family="conversion")
    assert [o.method for o in opts if o.available] == ["kubeapi", "etcd"]
    assert all(not o.available and "does not switch" in o.reason for o in opts
               if o.method in ("talos", "kubeadm", "k3s", "rke2"))
    assert [o.method for o in planner.options(probes, family="self-dependency")][0] == "kubeapi"
    assert [o.method for o in planner.options(probes)] == ["kubeapi", "talos", "kubeadm", "k3s", "rke2", "etcd"]


AUDIT = ('{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete",'
         '"requestURI":"/api/v1/namespaces/kyverno/pods","verb":"create","user":{"username":"system:serviceaccount:'
         'kube-system:replicaset-controller"},"objectRef":{"resource":"pods","namespace":"kyverno","apiVersion":"v1"},'
         '"responseStatus":{"metadata":{},"status":"Failure","message":"Internal error occurred: failed calling webhook '
         '\\"validate.kyverno.svc-fail\\": failed to call webhook: Post \\"https://kyverno-svc.kyverno.svc:443/validate/'
         'fail?timeout=10s\\": dial tcp 10.96.0.50:443: connect: connection refused","code":500},'
         '"requestReceivedTimestamp":"2026-11-30T17:32:02.798324Z","stageTimestamp":"2026-11-30T17:32:02.800159Z"}\n')


def test_a_webhook_blocking_pods_of_its_own_namespace_is_a_self_dependency():
    d = diagnose_text(AUDIT)
    [f] = d.findings
    assert (f.deadlock, f.severity, f.service) == ("self-dependency", "critical", "kyverno/kyverno-svc")
    # issue 28: from the log alone the cycle is inferred from names (the pod's namespace is the webhook's
    # Service's): deadlock-likely, with the command that proves it; `deadlocked` needs the configuration read
    assert d.verdict.state == "deadlock-likely" and d.verdict.family == "self-dependency"
    assert d.verdict.prove.startswith("breakglass diagnose ") and "--kubeconfig" in d.verdict.prove
    assert "NotIn [kyverno]" in d.verdict.explanation
    assert d.remedies[0].method == "kubeapi" and d.remedies[0].summary.startswith("Exclude")
    assert any("namespaceSelector" in m and '"kyverno"' in m for m in d.remedies[0].manual)
    # the same failure on another namespace's pods is an outage that heals when the backend comes back
    other = diagnose_text(AUDIT.replace('"namespace":"kyverno"', '"namespace":"team-a"'))
    assert [g.deadlock for g in other.findings] == [None] and other.verdict.state == "degraded"


def test_kube_system_daemonset_pods_are_what_the_backend_needs():
    line = ('kube-system   2m    Warning   FailedCreate   daemonset/calico-node   Error creating: Internal error '
            'occurred: failed calling webhook "mpod.kb.io": failed to call webhook: Post "https://kruise-webhook-'
            'service.kruise-system.svc:443/mutate-pod?timeout=10s": dial tcp 10.96.134.53:443: connect: connection refused\n')
    [f] = diagnose_text(line).findings
    assert f.deadlock == "self-dependency" and "calico-node" in " ".join(f.requests)


def test_lease_updates_denied_are_starvation_and_the_apiservers_own_lease_is_not():
    denied = ('E1220 10:00:00.000000    2478 controller.go:195] "Failed to update lease" err="admission webhook '
              '\\"freeze.example.com\\" denied the request: frozen"\n')
    d = diagnose_text(denied)
    [f] = d.findings
    assert (f.deadlock, f.mode, f.severity) == ("node-lease", "deny", "critical") and d.verdict.family == "node-lease"
    # the apiserver's identity lease (its own log holds the dispatcher lines): degraded, not starvation
    own = lb.klog(lb.fail_closed("v.example.com", "connection refused")) + "\n" + (
        'E1220 10:00:01.000000       1 controller.go:195] "Failed to update lease" err="Internal error occurred: '
        'failed calling webhook \\"v.example.com\\": failed to call webhook: Post \\"https://v.v.svc:443/v\\": dial '
        'tcp 10.0.0.1:443: connect: connection refused"\n')
    assert not any(g.deadlock for g in diagnose_text(own).findings)


def _readyz(t: str) -> str:
    return lb.klog("poststarthook/rbac/bootstrap-roles check failed: readyz", level="I", caller="healthz.go:280", t=t)


def test_a_hook_failing_for_a_second_at_start_is_not_stuck_but_a_persistent_one_is():
    later = lb.klog(lb.fail_open("v.example.com", "connection refused"), t="0224 15:01:00.000000")
    brief = "\n".join([_readyz("0224 15:00:00.100000"), _readyz("0224 15:00:01.200000"), later]) + "\n"
    assert not any(f.family in ("bootstrap-stuck", "admission-not-ready") for f in diagnose_text(brief).findings)
    lasting = "\n".join([_readyz("0224 15:00:00.100000"), _readyz("0224 15:00:40.000000"), later]) + "\n"
    assert any(f.family == "bootstrap-stuck" for f in diagnose_text(lasting).findings)
    # issue 36: a log that ends a second after the hook first failed shows nothing persisting: a notice, no alarm
    ends = "\n".join([_readyz("0224 15:00:00.100000"), _readyz("0224 15:00:01.200000")]) + "\n"
    d = diagnose_text(ends)
    assert not d.findings and [n.family for n in d.notices] == ["startup-readiness"], d.findings
    assert "the log ends there" in d.notices[0].title
    fatal = brief + lb.klog('PostStartHook "rbac/bootstrap-roles" failed: unable to initialize roles', level="F",
                            caller="hooks.go:203", t="0224 15:00:01.300000") + "\n"
    assert diagnose_text(fatal).verdict.state == "deadlocked"


def test_json_exposes_the_family(tmp_path):
    p = tmp_path / "conv.log"
    p.write_text(CONV)
    doc = json.loads(run_cli("diagnose", str(p), "-o", "json").stdout)["result"]
    assert doc["verdict"]["family"] == "conversion" and doc["findings"][0]["deadlock"] == "conversion"


def _leader_lines(err: str, verb: str = "Put") -> str:
    url = "https://10.0.0.1:6443/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
    first = (f'Failed to update lock: {verb} "{url}?timeout=5s": {err}' if verb != "Get" else
             f'error retrieving resource lock kube-system/kube-controller-manager: Get "{url}?timeout=5s": {err}')
    return "\n".join([
        lb.klog(first, level="E", caller="leaderelection.go:347", t="1203 10:00:06.000000"),
        lb.klog("failed to renew lease kube-system/kube-controller-manager: timed out waiting for the condition",
                level="I", caller="leaderelection.go:285", t="1203 10:00:08.000000"),
        lb.klog('"leaderelection lost"', level="E", caller="controllermanager.go:302", t="1203 10:00:08.100000"),
    ]) + "\n"


def test_lease_renewals_timing_out_with_no_webhook_named_are_likely_lease_starvation():
    """issue 36, 45 §3: the renewal's write (`Failed to update lock: Put …?timeout=5s … Client.Timeout exceeded`)
    with the apiserver up is starvation behind something slower than the client's timeout (a webhook on Leases,
    failing open or not, or etcd), said as likely with the command that finds it; not `clear`. Admission runs on
    writes only: the lease's read timing out (a GET) is the apiserver or etcd being slow, never a webhook."""
    d = diagnose_text(_leader_lines("net/http: request canceled (Client.Timeout exceeded while awaiting headers)"))
    assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "node-lease"), d.verdict
    assert "breakglass audit" in d.verdict.prove and "lease-timeout" in d.verdict.explanation
    assert "failurePolicy Ignore alone does not help" in d.verdict.explanation
    assert "A slow etcd does the same" in d.verdict.explanation
    # the apiserver down (connection refused) is an outage of its own, not starvation
    down = diagnose_text(_leader_lines("dial tcp 10.0.0.1:6443: connect: connection refused"))
    assert down.verdict.state == "clear" and not down.findings, down.verdict
    # the read timing out: not admission, said as the apiserver's or etcd's slowness, no alarm
    read = diagnose_text(_leader_lines("net/http: request canceled (Client.Timeout exceeded while awaiting "
                                       "headers)", verb="Get"))
    assert read.verdict.state == "clear" and not read.verdict.needs_action, read.verdict
    assert [f.family for f in read.findings] == ["apiserver-slow"] and "not admission" in read.findings[0].title
    # etcd's own timeout on the write is storage, not a webhook
    etcd = diagnose_text(lb.klog("Failed to update lock: etcdserver: request timed out", level="E",
                                 caller="leaderelection.go:258", t="1203 10:00:06.000000") + "\n")
    assert etcd.verdict.state == "clear", etcd.verdict


KUBEADM_UPGRADE = (
    '[upgrade/staticpods] Waiting for the kubelet to restart the component\n'
    '[upgrade/staticpods] This can take up to 5m0s\n'
    "error execution phase control-plane: couldn't complete the static pod upgrade: couldn't upgrade control plane. "
    'kubeadm has tried to recover everything into the earlier state. Errors faced: static Pod hash for component '
    'kube-apiserver on Node cp-0 did not change after 5m0s: context deadline exceeded\n')


def test_an_upgrade_whose_apiserver_never_came_back_is_not_clear_but_cannot_tell():
    """issue 36: kubeadm's (or an installer's) word that kube-apiserver did not come back, with no webhook named: not
    `clear`, but stuck and undetermined, with the commands that read the apiserver and the webhooks; no way out."""
    d = diagnose_text(KUBEADM_UPGRADE)
    assert d.verdict.state == "stuck" and d.verdict.needs_action and d.remedies == [], d.verdict
    assert "cannot tell" in d.verdict.headline and "breakglass webhooks" in d.verdict.explanation
    for line in ("E1203 10:00:00.000000 1 installer.go:12] kube-apiserver is not healthy after 300s",
                 "FATAL: kube-apiserver did not become ready"):
        assert diagnose_text(line + "\n").verdict.state == "stuck", line
    # with the apiserver's own lines naming a webhook, they say why: the webhook leads
    own = lb.klog(lb.fail_closed("validate.kyverno.svc-fail", "no endpoints available for service \"kyverno-svc\""),
                  t="1203 10:00:01.000000")
    d = diagnose_text(KUBEADM_UPGRADE + own + "\n")
    assert d.verdict.state != "stuck" and all(f.family != "apiserver-unhealthy" for f in d.findings), d.verdict
    p = run_cli("diagnose", "-", stdin=KUBEADM_UPGRADE.encode())
    assert p.returncode == 3, p.stderr


def test_a_fail_closed_webhook_whose_path_judges_nodes_is_likely_node_starvation():
    """issue 36: the dispatcher's line names no request, but a webhook called at `/validate-nodes` (or a
    controller-runtime `/mutate--v1-node`) judges Node writes the kubelet and the CNI must make before any pod,
    its own backend's included, gets an address."""
    def line(path: str) -> str:
        return lb.klog('Failed calling webhook, failing closed nodes.policy.example.com: failed calling webhook '
                       '"nodes.policy.example.com": failed to call webhook: Post '
                       f'"https://engine.policy.svc:443{path}?timeout=10s": no endpoints available for service '
                       '"engine"', t="1203 10:00:00.000000") + "\n"

    for path in ("/validate-nodes", "/mutate--v1-node"):
        d = diagnose_text(line(path))
        assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "node-lease"), (path, d.verdict)
    assert diagnose_text(line("/validate")).verdict.state == "degraded"  # the same webhook, no Node in its path
    # a path that names no Node is not taken for one
    other = lb.klog('Failed calling webhook, failing closed v.example.com: failed calling webhook "v.example.com": '
                    'failed to call webhook: Post "https://engine.policy.svc:443/validate-nodepools?timeout=10s": '
                    'no endpoints available for service "engine"', t="1203 10:00:00.000000")
    assert diagnose_text(other + "\n").verdict.family != "node-lease"


def test_recover_auto_says_a_stuck_diagnosis_names_no_webhook_before_it_acts(tmp_path):
    """issue 36: the wizard's guard for `stuck` reached from the scripted front end too."""
    from breakglass.flows import scripted

    p = run_cli("diagnose", "-", "-o", "json", stdin=KUBEADM_UPGRADE.encode())
    assert p.returncode == 3 and json.loads(p.stdout)["result"]["verdict"]["state"] == "stuck"
    path = tmp_path / "diag.json"
    path.write_bytes(p.stdout)
    assert "STUCK and names no webhook" in scripted.verdict_note(str(path))
