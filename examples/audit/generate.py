"""Regenerate the example audit log in this directory (deterministic).

The GKE/Gatekeeper story of examples/logs/gke-gatekeeper-fail-open.jsonl, as the audit log of the same
cluster: audit.k8s.io/v1 Events built field by field (reference §2), not copied from a real cluster.
Run: python examples/audit/generate.py
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = datetime(2026, 2, 24, 15, 32, 50, 100000, tzinfo=timezone.utc)  # the first fail-open line of the JSON log
GK = "validation.gatekeeper.sh"
FAILED_OPEN = "failed-open.validating.webhook.admission.k8s.io/round_0_index_0"
RS = "system:serviceaccount:kube-system:replicaset-controller"
UIDS = iter(range(1, 10**6))


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event(t: datetime, verb: str, resource: str, ns: str, name: str, user: str, code: int, *,
          group: str = "", sub: str = "", failed_open: bool = False, stage: str = "ResponseComplete",
          generated: str = "", aid: str = "") -> tuple[str, str]:
    aid = aid or f"5c1e{next(UIDS):04x}-0d2a-4f7e-9b61-3a8c2e7f{next(UIDS):04x}"
    ref = {"resource": resource, "namespace": ns, "name": name, "apiGroup": group, "apiVersion": "v1",
           "subresource": sub}
    ref = {k: v for k, v in ref.items() if v}
    prefix = f"/apis/{group}/v1" if group else "/api/v1"
    uri = prefix + (f"/namespaces/{ns}" if ns else "") + f"/{resource}" + (f"/{name}" if name and verb != "create"
                                                                             else "") + (f"/{sub}" if sub else "")
    ann = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
    if failed_open:
        ann[FAILED_OPEN] = GK
    e = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse" if generated else "Metadata",
         "auditID": aid, "stage": stage, "requestURI": uri, "verb": verb,
         "user": {"username": user, "groups": ["system:authenticated"]}, "sourceIPs": ["10.128.0.17"],
         "userAgent": "kubectl/v1.34.1 (linux/amd64) kubernetes/8e0d0c4" if "@" in user
         else "kube-controller-manager/v1.34.1 (linux/amd64) kubernetes/8e0d0c4",
         "objectRef": ref, "responseStatus": {"metadata": {}, "code": code},
         "requestReceivedTimestamp": stamp(t - timedelta(milliseconds=3)), "stageTimestamp": stamp(t),
         "annotations": ann if stage == "ResponseComplete" else {}}
    if generated:
        e["responseObject"] = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": generated, "namespace": ns}}
    return aid, json.dumps(e, separators=(",", ":"))


def rollout() -> list[str]:
    out: list[str] = []

    def add(t, *a, **kw):
        aid, line = event(t, *a, **kw)
        if kw.get("failed_open"):  # the first stage of the same request carries no annotations
            out.append(event(t - timedelta(milliseconds=3), *a, **{**kw, "stage": "RequestReceived", "aid": aid})[1])
        out.append(line)

    t = T0 - timedelta(minutes=2)
    for i in range(60):  # ordinary traffic before the rollout
        add(t, "get", "pods", "payments", f"api-7d9c{i % 5}", "system:node:gke-pool-1-a", 200)
        add(t, "update", "leases", "kube-node-lease", "gke-pool-1-a", "system:node:gke-pool-1-a", 200,
            group="coordination.k8s.io")
        t += timedelta(seconds=2)
    # Window 1: konnectivity-agent pods restart; every Gatekeeper call fails and is ignored.
    t = T0
    for i in range(30):
        if i % 5 == 0:
            add(t, "update", "deployments", "payments", "api", "alice@example.com", 200, group="apps",
                failed_open=True)  # a human pushes a deployment the policy would have refused
        elif i == 7:
            add(t, "create", "rolebindings", "payments", "debug-admin", "bob@example.com", 201,
                group="rbac.authorization.k8s.io", failed_open=True)
        elif i == 11:
            add(t, "create", "configmaps", "payments", "feature-flags", "alice@example.com", 409,
                failed_open=True)  # refused anyway (already exists): not worth re-checking
        elif i == 13:
            add(t, "patch", "pods", "payments", "api-7d9c4-x2kqp", RS, 200, sub="status", failed_open=True)
        else:
            add(t, "create", "pods", "payments", "", RS, 201, failed_open=True, generated=f"api-7d9c4-{i:05d}")
        add(t + timedelta(milliseconds=9), "get", "configmaps", "kube-system", "cluster-autoscaler-status",
            "system:cluster-autoscaler", 200)
        t += timedelta(milliseconds=250, microseconds=500)
    # Scale-down deletes two of the pods created in the window: nothing left to re-check for them.
    t = T0 + timedelta(minutes=3)
    for i in (1, 2):
        add(t, "delete", "pods", "payments", f"api-7d9c4-{i:05d}", RS, 200)
        t += timedelta(seconds=1)
    # Window 2: the second wave of the rollout, twenty minutes later.
    t = T0 + timedelta(minutes=20)
    for i in range(3):
        add(t, "create", "namespaces", "", f"sandbox-{i}", "bob@example.com", 201, failed_open=True)
        t += timedelta(seconds=4)
    # Decoys: the mutating webhook's invocation record, and a webhook-supplied annotation that looks alike.
    _, line = event(t, "create", "pods", "payments", "web-0", RS, 201)
    e = json.loads(line)
    e["annotations"]["mutation.webhook.admission.k8s.io/round_0_index_0"] = (
        '{"configuration":"gatekeeper-mutating-webhook-configuration","webhook":"mutation.gatekeeper.sh",'
        '"mutated":false}')
    e["annotations"]["policy.example.com/failed-open.note"] = "not a failed-open annotation"
    out.append(json.dumps(e, separators=(",", ":")))
    return out


_GRPC = {200: 0, 201: 0, 409: 6, 403: 7, 404: 5}


def cloud_logging(line: str) -> dict:
    """The same request as GKE's Cloud Logging records it: annotations become labels, the audit ID the
    operation id, objectRef a resourceName, verb the end of methodName, the HTTP code a gRPC code."""
    e = json.loads(line)
    ref = e["objectRef"]
    group = ref.get("apiGroup", "core")
    path = [group, ref.get("apiVersion", "v1")] + (["namespaces", ref["namespace"]] if ref.get("namespace") else [])
    path += [ref["resource"]] + ([ref["name"]] if ref.get("name") else []) + (
        [ref["subresource"]] if ref.get("subresource") else [])
    method = ".".join(["io.k8s"] + list(reversed(group.split(".")[:2] if group != "core" else ["core"]))
                      + ["v1", ref["resource"]] + ([ref["subresource"]] if ref.get("subresource") else [])
                      + [e["verb"]])
    payload = {"@type": "type.googleapis.com/google.cloud.audit.AuditLog",
               "authenticationInfo": {"principalEmail": e["user"]["username"]},
               "methodName": method, "resourceName": "/".join(path), "serviceName": "k8s.io",
               "requestMetadata": {"callerIp": e["sourceIPs"][0], "callerSuppliedUserAgent": e["userAgent"]},
               "status": {"code": _GRPC[e["responseStatus"]["code"]]}}
    if "responseObject" in e:
        payload["response"] = {"@type": "core.k8s.io/v1.Pod", "metadata": e["responseObject"]["metadata"]}
    last = e["stage"] == "ResponseComplete"
    return {"protoPayload": payload, "insertId": e["auditID"][:8] + ("-2" if last else "-1"),
            "resource": {"type": "k8s_cluster", "labels": {"cluster_name": "prod", "location": "europe-west1",
                                                           "project_id": "example"}},
            "timestamp": e["stageTimestamp"], "severity": "NOTICE",
            "logName": "projects/example/logs/cloudaudit.googleapis.com%2Factivity",
            "operation": {"id": e["auditID"], "producer": "k8s.io", "first": not last, "last": last},
            "labels": e["annotations"]}


def main() -> None:
    lines = rollout()
    with open(os.path.join(HERE, "gke-gatekeeper-rollout.audit.log"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    # as `gcloud logging read --format=json` prints it
    with open(os.path.join(HERE, "gke-gatekeeper-rollout.cloud-logging.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps([cloud_logging(x) for x in lines], indent=2) + "\n")


if __name__ == "__main__":
    main()
