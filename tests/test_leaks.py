"""The fail-open leak report, on audit logs built here field by field from audit.k8s.io/v1's Event
(reference §2): leaks, noise, and decoys that only look like leaks."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from breakglass import leaks
from breakglass.leaks import audit, events
from breakglass.logs import lines
from breakglass.core.errors import BadInput
from tests.conftest import run_cli

GK = "validation.gatekeeper.sh"
VKEY = "failed-open.validating.webhook.admission.k8s.io/round_0_index_{}"
MKEY = "failed-open.mutation.webhook.admission.k8s.io/round_{}_index_{}"


def event(aid, verb="create", resource="pods", ns="default", name="p1", ann=None, code=201,
          ts="2026-11-30T03:10:00.123456Z", stage="ResponseComplete", user="alice", group="", sub="",
          api="audit.k8s.io/v1", response_name=None):
    ref = {"resource": resource, "namespace": ns, "name": name, "apiVersion": "v1"}
    if group:
        ref["apiGroup"] = group
    if sub:
        ref["subresource"] = sub
    if not ns:
        ref.pop("namespace")
    if not name:
        ref.pop("name")
    e = {"kind": "Event", "apiVersion": api, "level": "Metadata", "auditID": aid, "stage": stage,
         "requestURI": f"/api/v1/namespaces/{ns}/{resource}", "verb": verb,
         "user": {"username": user, "groups": ["system:authenticated"]}, "sourceIPs": ["10.0.0.9"],
         "objectRef": ref, "responseStatus": {"metadata": {}, "code": code},
         "requestReceivedTimestamp": ts, "stageTimestamp": ts}
    if ann:
        e["annotations"] = ann
    if response_name:
        e["level"] = "RequestResponse"
        e["responseObject"] = {"kind": "Pod", "metadata": {"name": response_name, "namespace": ns}}
    return json.dumps(e, separators=(",", ":"))  # Go's encoding/json: no spaces


def fo(hook=GK, i=0):
    return {VKEY.format(i): hook, "authorization.k8s.io/decision": "allow"}


def story() -> list[str]:
    """A konnectivity rollout: two windows of failing open among ordinary traffic and decoys."""
    return [
        event("n1", "get", code=200),  # ordinary traffic
        event("a1", stage="RequestReceived", ann=fo()),  # the same request's earlier stage
        event("a1", ann=fo()),
        event("a1", ann=fo()),  # the same event twice (a replayed shipper)
        event("a2", "update", "deployments", "prod", "web", fo(), 200, "2026-11-30T03:10:30Z", user="bob",
              group="apps"),
        event("a3", "patch", "pods", "default", "p2", fo(), 200, "2026-11-30T03:10:40Z", sub="status"),
        event("a4", "create", "configmaps", "prod", "cm", fo(), 403, "2026-11-30T03:10:45Z"),  # rejected anyway
        event("d1", "delete", "pods", "default", "p1", None, 200, "2026-11-30T03:20:00Z"),  # p1 deleted later
        event("x1", ann={"x-" + VKEY.format(0): "lookalike"}),  # an annotation that only looks similar
        event("x2", ann={"validating.webhook.admission.k8s.io/round_0_index_0": GK}),  # not failed open
        event("x3", ann={"mutation.webhook.admission.k8s.io/round_0_index_0":
                         '{"configuration":"c","webhook":"failed-open.example.com","mutated":false}'}),
        '{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","annotations":{"failed-open.vali',
        "E1130 03:11:00.000000 1 dispatcher.go:1] failed-open. is mentioned in a klog line",
        event("m1", "create", "pods", "team", "", {MKEY.format(1, 2): "sidecar.istio.io", **fo(GK, 1)}, 201,
              "2026-11-30T04:00:00Z", response_name="job-abcde"),
        event("a5", "create", "namespaces", "", "ns-new", fo(), 201, "2026-11-30T04:00:20Z",
              api="audit.k8s.io/v1beta1"),
        event("d2", "deletecollection", "pods", "default", "", None, 200, "2026-11-30T04:05:00Z"),
    ]


@pytest.fixture
def log(tmp_path):
    p = tmp_path / "audit.log"
    p.write_text("\n".join(story()) + "\n")
    return p


def test_every_leak_once_with_its_fields(log):
    rep = audit.scan([str(log)])
    assert [x.audit_id for x in rep.leaks] == ["a1", "a2", "a3", "a4", "m1", "a5"]
    a2 = rep.leaks[1]
    assert (a2.time, a2.user, a2.verb, a2.resource, a2.namespace, a2.name, a2.webhooks, a2.kind, a2.code) == (
        "2026-11-30T03:10:30Z", "bob", "update", "deployments.apps", "prod", "web", [GK], "validating", 200)
    m1 = rep.leaks[4]
    assert m1.webhooks == ["sidecar.istio.io", GK] and m1.kind == "both" and m1.name == "job-abcde"
    assert rep.leaks[2].resource == "pods/status"
    assert rep.lines_skipped == 2  # the truncated event and the klog line


def test_summaries_and_windows(log):
    rep = audit.scan([str(log)])
    assert rep.by_webhook == {GK: 6, "sidecar.istio.io": 1}
    assert list(rep.by_resource)[0] == "pods" and rep.by_resource["pods"] == 2
    assert rep.by_user == {"alice": 5, "bob": 1}
    assert [(w.start, w.end, w.requests) for w in rep.windows] == [
        ("2026-11-30T03:10:00.123456Z", "2026-11-30T03:10:45Z", 4),
        ("2026-11-30T04:00:00Z", "2026-11-30T04:00:20Z", 2)]


def test_recheck_skips_deleted_rejected_and_collapses_subresources(log):
    rep = audit.scan([str(log)])
    got = [(r.resource, r.namespace, r.name) for r in rep.recheck]
    # p1 was deleted later; cm was rejected (403); p2's status patch re-checks p2
    assert got == [("deployments.apps", "prod", "web"), ("namespaces", "", "ns-new"), ("pods", "default", "p2"),
                   ("pods", "team", "job-abcde")]
    assert rep.recheck[0].kubectl == "kubectl get deployments.apps web -n prod -o yaml"
    assert rep.recheck[1].kubectl == "kubectl get namespaces ns-new -o yaml"
    doc = __import__("yaml").safe_load(leaks.recheck_yaml(rep))
    assert doc["kind"] == "RecheckList" and doc["items"][0]["failedOpenWebhooks"] == [GK]


def test_a_write_after_the_delete_is_rechecked_again(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("\n".join([event("a1", ann=fo()), event("d1", "delete", code=200, ts="2026-11-30T03:11:00Z"),
                            event("a2", ann=fo(), ts="2026-11-30T03:12:00Z")]) + "\n")
    assert [r.name for r in audit.scan([str(p)]).recheck] == ["p1"]


def test_filters(log):
    assert [x.audit_id for x in audit.scan([str(log)], since="2026-11-30T03:10:35Z",
                                           until="2026-11-30T04:00:00Z").leaks] == ["a3", "a4", "m1"]
    assert [x.audit_id for x in audit.scan([str(log)], webhooks=["sidecar.istio.io"]).leaks] == ["m1"]
    with pytest.raises(BadInput, match="not an RFC 3339 time"):
        audit.scan([str(log)], since="yesterday")


def test_gzip_rotated_sets_and_stdin_read_the_same(tmp_path, log):
    lines = story()
    d = tmp_path / "rotated"
    d.mkdir()
    # the audit log backend (lumberjack) rotates audit.log to audit-<time>.log, then gzips it
    (d / "audit-2026-11-30T03-30-00.000.log.gz").write_bytes(gzip.compress(("\n".join(lines[:7]) + "\n").encode()))
    (d / "audit.log").write_text("\n".join(lines[7:]) + "\n")
    want = [x.audit_id for x in audit.scan([str(log)]).leaks]
    assert [x.audit_id for x in audit.scan([str(d)]).leaks] == want
    assert [x.audit_id for x in audit.scan(["-"], stdin=io.BytesIO(log.read_bytes())).leaks] == want
    assert [r.name for r in audit.scan([str(d)]).recheck] == [r.name for r in audit.scan([str(log)]).recheck]


@pytest.mark.parametrize("engine", ["python", "auto"])
@pytest.mark.parametrize("size", [1, 7, 64, 333, 4096])
def test_lines_split_across_chunks(log, size, engine):
    from breakglass.logs.scanner import Finder
    finder = Finder((b"failed-open.", b'"verb":"delete'), engine)
    data = log.read_bytes()
    chunks = [data[i:i + size] for i in range(0, len(data), size)]
    whole = list(lines.lines_with([data], finder))
    assert list(lines.lines_with(chunks, finder)) == whole
    assert whole == [line.encode() for line in story() if "failed-open." in line or '"verb":"delete' in line]
    assert len(whole) == 14


def test_both_engines_agree(log):
    assert audit.scan([str(log)], engine="python") == audit.scan([str(log)], engine="auto")


def test_an_endless_line_does_not_grow_memory(monkeypatch):
    from breakglass.logs.scanner import Finder
    monkeypatch.setattr(lines, "MAX_LINE", 1000)
    chunks = [b"x" * 100] * 500 + [b"failed-open.\n" + event("a1", ann=fo()).encode() + b"\n"]
    finder = Finder((b"failed-open.",), "python")
    tap = lines.LineTap(finder)
    got = list(lines.lines_with(chunks, finder, tap))
    assert len(got) == 1 and [(c.at, c.length) for c in tap.cuts] == [(0, 50012)]  # the 50 kB line: skipped, named
    assert events.view(events.parse_line(got[0])).audit_id == "a1"


def test_last_line_without_newline(tmp_path):
    p = tmp_path / "a.log"
    p.write_text(event("a1", ann=fo()))
    assert [x.audit_id for x in audit.scan([str(p)]).leaks] == ["a1"]


def test_cli_text_json_csv_and_exit_codes(log, tmp_path):
    p = run_cli("leaks", "--audit-log", str(log))
    assert p.returncode == 3, p.stderr
    assert b"6 request(s) admitted while a webhook failed open" in p.stdout
    assert b"kubectl get deployments.apps web -n prod -o yaml" in p.stdout
    j = json.loads(run_cli("leaks", "--audit-log", str(log), "-o", "json").stdout)
    assert j["kind"] == "LeakReport" and len(j["result"]["leaks"]) == 6 and j["exitCode"] == 3
    c = run_cli("leaks", "--audit-log", str(log), "-o", "csv").stdout.decode().splitlines()
    assert c[0] == ",".join(leaks.CSV_FIELDS) and len(c) == 7
    assert c[5].startswith("2026-11-30T04:00:00Z,alice,create,pods,team,job-abcde,sidecar.istio.io;" + GK)
    clean = tmp_path / "clean.log"
    clean.write_text(event("n1", "get", code=200) + "\n")
    p = run_cli("leaks", "--audit-log", str(clean))
    assert p.returncode == 0 and b"no request carried a failed-open annotation" in p.stdout


@pytest.mark.parametrize("make,match", [
    (lambda d: str(d / "missing.log"), "no such file"),
    (lambda d: (d / "b").write_bytes(os.urandom(3000) + b"\x00") and str(d / "b"), "binary data"),
    (lambda d: (d / "t.gz").write_bytes(gzip.compress(b"x" * 10000)[:-20]) and str(d / "t.gz"), "truncated gzip"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, make, match):
    p = run_cli("leaks", "--audit-log", make(tmp_path))
    assert p.returncode == 2 and match in p.stderr.decode(), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    p = run_cli("leaks", "--audit-log", "-", "--since", "soon", stdin=b"")
    assert p.returncode == 2 and b"not an RFC 3339 time" in p.stderr


def test_garbage_is_no_leak(tmp_path):
    p = tmp_path / "g.log"
    import random
    import string
    rnd = random.Random(7)
    noise = "".join("".join(rnd.choices(string.printable[:94] + " ", k=80)) + "\n" for _ in range(200))
    p.write_text(noise + '{"verb":"delete" not json\n' + "failed-open. {not json}\n" * 10)
    rep = audit.scan([str(p)])
    assert rep.leaks == [] and rep.lines_skipped == 10


def test_ref_name_reads_only_the_objectref():
    assert events.ref_name(event("d1", "delete", name="web-1").encode()) == b"web-1"
    assert events.ref_name(b'{"objectRef":{"resource":"pods"},"responseObject":{"metadata":{"name":"x"}}}') is None
    assert events.ref_name(b'{"verb":"delete","user":{"username":"a"}}') is None


def test_events_inside_shippers_records(tmp_path):
    """The same event as CloudWatch (`aws logs filter-log-events`, pretty JSON with the event as a string),
    Fluent Bit ({"log": ...}), Azure Monitor ({"log_s": ...}) and Vector ({"message": {...}}) carry it."""
    ev = event("w1", ann=fo())
    cloudwatch = json.dumps({"events": [{"logStreamName": "kube-apiserver-audit-1a2b", "timestamp": 1796008200000,
                                         "message": ev, "ingestionTime": 1796008201000, "eventId": "3790"}]},
                            indent=4)
    lines = [cloudwatch,
             json.dumps({"log": ev + "\n", "stream": "stdout", "time": "2026-11-30T03:10:00.1Z"}),
             json.dumps({"TimeGenerated": "2026-11-30T03:10:00Z", "Category": "kube-audit", "log_s": ev}),
             json.dumps({"message": json.loads(ev), "source_type": "file"})]
    for i, text in enumerate(lines):
        p = tmp_path / f"w{i}.log"
        p.write_text(text + "\n")
        rep = audit.scan([str(p)])
        assert [(x.audit_id, x.name, x.user) for x in rep.leaks] == [("w1", "p1", "alice")], (i, text[:200])


def test_eventlist_batches_from_the_audit_webhook_backend(tmp_path):
    """A sink that stores each posted EventList as one line: leaks and deletes anywhere in the batch."""
    def batch(*events):
        return json.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {},
                           "items": [json.loads(e) for e in events]}, separators=(",", ":"))
    p = tmp_path / "batches.log"
    p.write_text("\n".join([
        batch(event("n1", "get", code=200), event("b1", ann=fo()), event("b2", "create", name="p2", ann=fo())),
        batch(event("n2", "get", name="zz", code=200), event("d1", "delete", name="p2", code=200,
                                                               ts="2026-11-30T03:20:00Z")),
    ]) + "\n")
    rep = audit.scan([str(p)])
    assert [x.audit_id for x in rep.leaks] == ["b1", "b2"]
    assert [r.name for r in rep.recheck] == ["p1"]  # p2 was deleted by the second item of a later batch


def test_since_takes_a_duration_like_kubectl(log):
    from datetime import datetime, timezone

    from breakglass.leaks.model import parse_bound
    now = datetime(2026, 11, 30, 4, 10, 0, tzinfo=timezone.utc)
    assert parse_bound("90m", now) == datetime(2026, 11, 30, 2, 40, tzinfo=timezone.utc)
    assert parse_bound("1h30m", now) == parse_bound("90m", now) and parse_bound("2h", now).hour == 2
    assert parse_bound("2026-11-30T03:10:35Z") == datetime(2026, 11, 30, 3, 10, 35, tzinfo=timezone.utc)
    with pytest.raises(BadInput, match="or a duration"):
        parse_bound("h")
    assert audit.scan([str(log)], since="1h").leaks == []  # the story happened long before now


def test_a_window_that_excludes_every_leak_says_how_many_are_outside_it():
    from tests.conftest import ROOT, run_cli
    import os

    log = os.path.join(ROOT, "examples", "audit", "gke-gatekeeper-rollout.audit.log")
    p = run_cli("leaks", "--audit-log", log, "--since", "2020-01-01T00:00:00Z", "--until", "2020-01-02T00:00:00Z")
    assert p.returncode == 0 and b"but 33 outside it did" in p.stdout, p.stdout
    j = run_cli("leaks", "--audit-log", log, "--since", "2020-01-01T00:00:00Z", "--until", "2020-01-02T00:00:00Z",
                "-o", "json")
    import json

    assert json.loads(j.stdout)["result"]["outside_window"] == 33
