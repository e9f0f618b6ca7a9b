"""leaks --audit-log on GKE's Cloud Logging entries: the audit annotations are the entry's labels, the audit ID
is operation.id, and resourceName/methodName name the object and verb (field names as Google's Kubernetes
History Inspector reads them). As JSON lines from a sink, and as `gcloud logging read --format=json` prints."""

from __future__ import annotations

import json

import pytest

from breakglass.leaks import audit
from tests.conftest import run_cli

GK = "validation.gatekeeper.sh"
FO = "failed-open.validating.webhook.admission.k8s.io/round_0_index_0"


def entry(op, method, resource_name, labels=None, code=0, ts="2026-11-30T03:10:00.5Z", who="alice@example.com",
          first=True, last=True, response_name=None):
    e = {"protoPayload": {"@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                          "authenticationInfo": {"principalEmail": who},
                          "authorizationInfo": [{"granted": True, "permission": method, "resource": resource_name}],
                          "methodName": method, "resourceName": resource_name, "serviceName": "k8s.io",
                          "requestMetadata": {"callerIp": "10.128.0.7"}, "status": {"code": code}},
         "insertId": f"ins-{op}", "resource": {"type": "k8s_cluster", "labels": {
             "cluster_name": "prod", "location": "europe-west1", "project_id": "p"}},
         "timestamp": ts, "severity": "NOTICE", "logName": "projects/p/logs/cloudaudit.googleapis.com%2Factivity",
         "operation": {"id": op, "producer": "k8s.io", "first": first, "last": last},
         "labels": {"authorization.k8s.io/decision": "allow", **(labels or {})}}
    if response_name:
        e["protoPayload"]["response"] = {"@type": "core.k8s.io/v1.Pod", "metadata": {"name": response_name}}
    return e


def entries():
    fo = {FO: GK}
    return [
        entry("n1", "io.k8s.core.v1.pods.get", "core/v1/namespaces/team/pods/p0"),  # ordinary
        entry("g1", "io.k8s.core.v1.pods.create", "core/v1/namespaces/team/pods", fo, first=True, last=False),
        entry("g1", "io.k8s.core.v1.pods.create", "core/v1/namespaces/team/pods", fo, response_name="web-7c9d-x1"),
        entry("g2", "io.k8s.apps.v1.deployments.update", "apps/v1/namespaces/prod/deployments/api", fo,
              ts="2026-11-30T03:10:05Z", who="system:serviceaccount:ci:deployer"),
        entry("g3", "io.k8s.apps.v1.deployments.scale.patch", "apps/v1/namespaces/prod/deployments/api/scale", fo,
              ts="2026-11-30T03:10:06Z"),
        entry("g4", "io.k8s.core.v1.configmaps.create", "core/v1/namespaces/prod/configmaps/flags", fo, code=6,
              ts="2026-11-30T03:10:07Z"),  # ALREADY_EXISTS: refused anyway
        entry("g5", "io.k8s.core.v1.namespaces.create", "core/v1/namespaces/sandbox", fo, ts="2026-11-30T03:10:08Z"),
        entry("g6", "io.k8s.core.v1.namespaces.status.update", "core/v1/namespaces/sandbox/status", fo,
              ts="2026-11-30T03:10:09Z"),
        entry("g7", "io.k8s.authorization.rbac.v1.rolebindings.create",
              "rbac.authorization.k8s.io/v1/namespaces/prod/rolebindings/debug", fo, ts="2026-11-30T03:10:10Z"),
        entry("d1", "io.k8s.core.v1.pods.delete", "core/v1/namespaces/team/pods/web-7c9d-x1", ts="2026-11-30T03:20:00Z"),
        entry("x1", "io.k8s.core.v1.pods.create", "core/v1/namespaces/team/pods/p9",
              {"x-" + FO: "lookalike", "mutation.webhook.admission.k8s.io/round_0_index_0":
               '{"configuration":"c","webhook":"failed-open.example.com","mutated":false}'}),
        {"protoPayload": {"methodName": "google.container.v1.ClusterManager.UpdateCluster"}, "labels": {FO: GK}},
    ]


def _check(rep):
    got = [(x.audit_id, x.verb, x.resource, x.namespace, x.name, x.user, x.code) for x in rep.leaks]
    assert got == [
        ("g1", "create", "pods", "team", "web-7c9d-x1", "alice@example.com", 200),
        ("g2", "update", "deployments.apps", "prod", "api", "system:serviceaccount:ci:deployer", 200),
        ("g3", "patch", "deployments.apps/scale", "prod", "api", "alice@example.com", 200),
        ("g4", "create", "configmaps", "prod", "flags", "alice@example.com", 409),
        ("g5", "create", "namespaces", "", "sandbox", "alice@example.com", 200),
        ("g6", "update", "namespaces/status", "", "sandbox", "alice@example.com", 200),
        ("g7", "create", "rolebindings.rbac.authorization.k8s.io", "prod", "debug", "alice@example.com", 200),
    ]
    assert [(r.resource, r.namespace, r.name) for r in rep.recheck] == [
        ("deployments.apps", "prod", "api"), ("namespaces", "", "sandbox"),
        ("rolebindings.rbac.authorization.k8s.io", "prod", "debug")]  # the pod was deleted; the 409 refused


def test_cloud_logging_json_lines(tmp_path):
    p = tmp_path / "gke-audit.jsonl"
    p.write_text("\n".join(json.dumps(e, separators=(",", ":")) for e in entries()) + "\n")
    _check(audit.scan([str(p)]))


@pytest.mark.parametrize("chunk", [7, 100, 4096, 1 << 22])
def test_gcloud_json_array(tmp_path, monkeypatch, chunk):
    from breakglass.logs import sources
    monkeypatch.setattr(sources, "CHUNK", chunk)
    p = tmp_path / "gcloud.json"
    p.write_text(json.dumps(entries(), indent=2))  # as `gcloud logging read --format=json` prints it
    _check(audit.scan([str(p)]))


def test_broken_array_is_bad_input(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text(json.dumps(entries(), indent=2)[:-300])
    r = run_cli("leaks", "--audit-log", str(p))
    assert r.returncode == 2 and b"cut off or broken" in r.stderr and len(r.stderr.splitlines()) == 1
    p.write_text("[1, 2, ")
    r = run_cli("leaks", "--audit-log", str(p))
    assert r.returncode == 2 and b"not closed" in r.stderr


def test_cli_on_cloud_logging(tmp_path):
    p = tmp_path / "gke.json"
    p.write_text(json.dumps(entries(), indent=2))
    r = run_cli("leaks", "--audit-log", str(p), "-o", "recheck")
    assert r.returncode == 3
    assert b"name: debug" in r.stdout and b"web-7c9d-x1" not in r.stdout
