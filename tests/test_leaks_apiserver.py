"""leaks --apiserver-log: fail-open calls from kube-apiserver's own log, with the resource where a slow-call
trace shows it. Lines are built from the format strings (reference §1.2, k8s.io/utils/trace)."""

from __future__ import annotations

import json

import pytest

from breakglass.leaks import apiserver
from tests import logbuild as lb
from tests.conftest import run_cli

GK = "validation.gatekeeper.sh"
CFG = "gatekeeper-validating-webhook-configuration"
TIMEOUT = 'context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
URL = "https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=10s"


def w(msg: str, t: str) -> str:
    return lb.klog(msg, "W", "dispatcher.go:205", t)


def story() -> list[str]:
    """A konnectivity rollout on 1.34: two calls time out (traced), one is refused at once (untraced)."""
    create = lb.trace(1234567, "Create", lb.handler_fields("aid-create", "/api/v1/namespaces/team/pods"),
                      "30-Nov-2026 03:10:00.000", 10004,
                      [lb.nested_call("validating", lb.webhook_fields(CFG, GK), 10003, "03:10:00.001")])
    update = lb.trace(7654321, "Update", lb.handler_fields("aid-update", "/apis/apps/v1/namespaces/prod/deployments/web",
                                                            "PUT", "deployments"),
                      "30-Nov-2026 03:10:02.500", 10002,
                      [lb.nested_call("validating", lb.webhook_fields(CFG, GK, "apps/v1, Resource=deployments",
                                                                      op="UPDATE"), 10001, "03:10:02.501")])
    slow_ok = lb.trace(555, "Patch", lb.handler_fields("aid-ok", "/api/v1/namespaces/team/pods/p9", "PATCH"),
                       "30-Nov-2026 03:09:00.000", 700,
                       [lb.nested_call("mutating", lb.webhook_fields("istio-sidecar-injector", "sidecar.istio.io",
                                                                     op="UPDATE"), 650, "03:09:00.010")])
    return [
        lb.klog("Trace-free noise about webhooks: validatingwebhookconfigurations synced", "I", "reflector.go:1", "1130 03:09:00.000000"),
        lb.klog(slow_ok, "I", "trace.go:236", "1130 03:09:00.700000"),  # slow but fine: not a leak
        w(lb.fail_open(GK, TIMEOUT, url=URL), "1130 03:10:10.002000"),
        lb.structured("Unhandled Error", lb.call_error(GK, TIMEOUT, url=URL), t="1130 03:10:10.002100"),  # echo
        lb.klog(create, "I", "trace.go:236", "1130 03:10:10.004000"),  # logged when the request ends
        w(lb.fail_open(GK, "dial tcp 10.96.0.50:443: connect: connection refused", url=URL), "1130 03:10:11.000000"),
        w(lb.fail_open(GK, TIMEOUT, url=URL), "1130 03:10:12.502000"),
        lb.klog(update, "I", "trace.go:236", "1130 03:10:12.503000"),
        w(lb.fail_closed("kyverno-resource.kyverno.svc", "connection refused"), "1130 03:10:13.000000"),  # not open
        lb.klog("Context canceled when calling webhook " + GK, "W", "dispatcher.go:200", "1130 03:10:14.000000"),
    ]


@pytest.fixture
def log(tmp_path):
    p = tmp_path / "kube-apiserver.log"
    p.write_text("\n".join(story()) + "\n")
    return p


def test_fail_open_calls_with_the_traced_resource(log):
    rep = apiserver.scan([str(log)], year=2026)
    assert rep.basis == "apiserver-log" and rep.caveat
    assert [(x.time, x.verb, x.resource, x.namespace, x.name, x.audit_id) for x in rep.leaks] == [
        ("2026-11-30T03:10:10.002000Z", "create", "pods", "team", "", "aid-create"),
        ("2026-11-30T03:10:11.000000Z", "", "", "", "", ""),  # refused at once: no trace, so no resource
        ("2026-11-30T03:10:12.502000Z", "update", "deployments.apps", "prod", "web", "aid-update"),
    ]
    assert rep.traced == 2 and rep.by_webhook == {GK: 3}
    assert list(rep.by_cause.values()) == [2, 1] and "connection refused" in rep.by_cause
    warnings = [i for i, line in enumerate(log.read_text().splitlines(), 1) if "failing open" in line]
    assert [x.source for x in rep.leaks] == [f"{log}:{i}" for i in warnings] and len(warnings) == 3
    assert [(r.resource, r.namespace, r.name) for r in rep.recheck] == [("deployments.apps", "prod", "web")]
    assert rep.unnamed_writes == 1  # the create: its name is in the body, not the URL
    assert len(rep.windows) == 1 and rep.windows[0].requests == 3


def test_pairing_is_in_order_and_one_to_one(tmp_path):
    """Three calls of one webhook time out together; each warning takes one trace, earliest first."""
    lines = []
    for i, (start, end) in enumerate([("03:10:00.100", "03:10:10.101"), ("03:10:00.200", "03:10:10.201"),
                                      ("03:10:00.300", "03:10:10.301")]):
        lines.append(w(lb.fail_open(GK, TIMEOUT, url=URL), f"1130 {end}000"))
        body = lb.trace(100 + i, "Create", lb.handler_fields(f"aid-{i}", f"/api/v1/namespaces/ns{i}/pods"),
                        f"30-Nov-2026 {start}", 10002, [lb.nested_call("validating", lb.webhook_fields(CFG, GK),
                                                                         10001, start)])
        lines.append(lb.klog(body, "I", "trace.go:236", f"1130 {end}500"))
    lines.append(w(lb.fail_open(GK, TIMEOUT, url=URL), "1130 03:30:00.000000"))  # long after: no trace left
    p = tmp_path / "a.log"
    p.write_text("\n".join(lines) + "\n")
    rep = apiserver.scan([str(p)], year=2026)
    assert [x.namespace for x in rep.leaks] == ["ns0", "ns1", "ns2", ""]
    assert rep.traced == 3 and len(rep.windows) == 2


def test_top_level_webhook_trace_before_nesting(tmp_path):
    """Before component-base tracing the webhook trace is its own, logged before the warning."""
    body = lb.trace(42, "Call mutating webhook", lb.webhook_fields("istio-sidecar-injector", "sidecar.istio.io",
                                                                   "apps/v1, Resource=deployments", "scale", "UPDATE"),
                    "30-Nov-2026 03:10:00.000", 10001)
    p = tmp_path / "a.log"
    p.write_text(lb.klog(body, "I", "trace.go:205", "1130 03:10:10.001000") + "\n"
                 + w(lb.fail_open("sidecar.istio.io", TIMEOUT), "1130 03:10:10.001500") + "\n")
    (leak,) = apiserver.scan([str(p)], year=2026).leaks
    assert (leak.verb, leak.resource, leak.kind, leak.audit_id) == ("update", "deployments.apps/scale", "mutating", "")


@pytest.mark.parametrize("wrap", ["json", "cri"])
def test_other_log_formats(tmp_path, wrap):
    body = lb.trace(9, "Create", lb.handler_fields("aid-j", "/api/v1/namespaces/team/pods"),
                    "30-Nov-2026 03:10:00.000", 10004,
                    [lb.nested_call("validating", lb.webhook_fields(CFG, GK), 10003, "03:10:00.001")])
    warn = lb.fail_open(GK, TIMEOUT, url=URL)
    if wrap == "json":  # --logging-format=json: the whole trace is one msg with its newlines escaped
        text = "\n".join([lb.json_line(warn, ts=1796008210002.0), lb.json_line(body, "trace/trace.go:236",
                                                                                ts=1796008210004.0)])
    else:  # CRI: every physical line of the trace gets its own prefix
        text = "\n".join([lb.cri(w(warn, "1130 03:10:10.002000"), ts="2026-11-30T03:10:10.002Z")]
                         + [lb.cri(x if i else lb.klog(x, "I", "trace.go:236", "1130 03:10:10.004000"),
                                   ts="2026-11-30T03:10:10.004Z")
                            for i, x in enumerate(body.split("\n"))])
    p = tmp_path / "a.log"
    p.write_text(text + "\n")
    (leak,) = apiserver.scan([str(p)], year=2026).leaks
    assert (leak.resource, leak.namespace, leak.audit_id, leak.verb) == ("pods", "team", "aid-j", "create")


def test_filters(log):
    assert apiserver.scan([str(log)], webhooks=["other.example.com"], year=2026).leaks == []
    rep = apiserver.scan([str(log)], since="2026-11-30T03:10:10.5Z", until="2026-11-30T03:10:11.5Z", year=2026)
    assert [x.time for x in rep.leaks] == ["2026-11-30T03:10:11.000000Z"]


def test_garbage_and_lookalikes_are_no_leaks(tmp_path):
    p = tmp_path / "g.log"
    p.write_text("Trace[1]: [\"Call validating webhook\" broken\nTrace[x]: \"Create\" (yesterday)\n"
                 "failing open is what we do not want\n" + lb.klog("webhook " * 50, "I") + "\n")
    rep = apiserver.scan([str(p)], year=2026)
    assert rep.leaks == [] and rep.traced == 0


def test_cli(log, tmp_path):
    p = run_cli("leaks", "--apiserver-log", str(log), "--year", "2026")
    assert p.returncode == 3, p.stderr
    out = p.stdout.decode()
    assert "3 webhook call(s) failed open; 2 tied to a resource by a slow-call trace" in out
    assert "kubectl get deployments.apps web -n prod -o yaml" in out and "note: kube-apiserver's log" in out
    j = json.loads(run_cli("leaks", "--apiserver-log", str(log), "--year", "2026", "-o", "json").stdout)
    assert j["result"]["basis"] == "apiserver-log" and j["result"]["traced"] == 2
    p = run_cli("leaks", "--apiserver-log", str(log), "--audit-log", str(log))
    assert p.returncode == 2 and b"not both" in p.stderr
    p = run_cli("leaks")
    assert p.returncode == 2 and b"--audit-log" in p.stderr
    clean = tmp_path / "clean.log"
    clean.write_text(lb.klog("nothing to see", "I") + "\n")
    p = run_cli("leaks", "--apiserver-log", str(clean))
    assert p.returncode == 0 and b"no webhook call failed open" in p.stdout


def test_a_log_from_another_year_pairs_by_the_traces_year(log):
    """klog has no year; the traces do. Without --year the warnings take the traces' year, so they still pair."""
    text = log.read_text().replace("30-Nov-2026", "30-Nov-2025")
    log.write_text(text)
    rep = apiserver.scan([str(log)])  # no year given: this year is assumed, and corrected from the traces
    assert rep.traced == 2 and rep.leaks[0].time.startswith("2025-11-30T03:10:10")
    assert apiserver.scan([str(log)], year=2024).traced == 0  # an explicit --year is taken as said


@pytest.mark.parametrize("total", ["10.001234567s", "10s1ms", "0h0m10.0012s"])
def test_the_started_era_of_utiltrace(tmp_path, total):
    """Kubernetes ~1.16-1.19: `(started: <Go time>) (total time: <Go duration>)`, webhook traces top-level."""
    body = lb.trace_started(77, "Call validating webhook",
                            lb.webhook_fields(CFG, GK, "apps/v1, Resource=deployments", op="UPDATE"),
                            "2026-11-30 04:10:00.000123456 +0100 CET m=+1234.567890123", total)
    p = tmp_path / "old.log"
    p.write_text(lb.klog(body, "I", "trace.go:116", "1130 03:10:10.001500") + "\n"
                 + w(lb.fail_open(GK, TIMEOUT, url=URL), "1130 03:10:10.002000") + "\n")
    (leak,) = apiserver.scan([str(p)], year=2026).leaks
    assert (leak.resource, leak.verb) == ("deployments.apps", "update")  # +0100 read: 04:10 CET is 03:10 UTC
