"""`breakglass diagnose` on what real kube-apiservers logged (tests/fixtures/real, made by
scripts/capture_real_logs.py; see its README): every cause, each version, klog text and JSON logging."""

from __future__ import annotations

import glob
import json
import os

import pytest

from tests.conftest import ROOT, run_cli

REAL = os.path.join(ROOT, "tests", "fixtures", "real")


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


MANIFESTS = {os.path.basename(os.path.dirname(p)): _load(p)
             for p in sorted(glob.glob(os.path.join(REAL, "v*", "captures.json")))}

SERVICECIDR = 'ServiceCIDR "kubernetes"'

# cause -> (verdict, family, cause class, cause detail) of the finding about the capture's webhook.
# None for the family: no finding about the webhook is expected.
EXPECT = {
    "connection-refused": ("degraded", "webhook-unreachable", "unreachable", "connection refused"),
    "mutating-refused": ("degraded", "webhook-unreachable", "unreachable", "connection refused"),
    "timeout": ("degraded", "webhook-timeout", "timeout", "timed out"),
    "timeout-no-response": ("degraded", "webhook-timeout", "timeout", "timed out"),
    "tls-handshake-timeout": ("degraded", "webhook-timeout", "timeout", "TLS handshake timed out"),
    "tls-unknown-authority": ("degraded", "webhook-tls", "tls", "certificate signed by unknown authority (caBundle)"),
    "tls-name-mismatch": ("degraded", "webhook-tls", "tls", "certificate name mismatch"),
    "tls-no-ip-san": ("degraded", "webhook-tls", "tls", "certificate name mismatch"),
    "tls-expired": ("degraded", "webhook-tls", "tls", "certificate expired or not yet valid"),
    "plain-http": ("degraded", "webhook-error", "misconfigured", "webhook serves plain HTTP"),
    "not-tls": ("degraded", "webhook-error", "misconfigured", "webhook does not speak TLS"),
    "connection-closed": ("degraded", "webhook-unreachable", "proxy", "connection dropped"),
    "bad-response": ("degraded", "webhook-error", "bad-response", "invalid webhook response"),
    "service-not-found": ("degraded", "webhook-unreachable", "unreachable", "service not found"),
    "no-service-port": ("degraded", "webhook-error", "misconfigured", "no such service port"),
    "headless-service": ("degraded", "webhook-error", "misconfigured", "service type cannot be routed"),
    "endpoints-not-found": ("degraded", "webhook-unreachable", "unreachable", "no endpoints (no Endpoints object)"),
    "no-endpoints": ("degraded", "webhook-unreachable", "unreachable", "no endpoints"),
    "denied": ("clear", None, None, None),  # an ordinary denial: the webhook doing its job
    "fail-open": ("leaking", "webhook-fail-open", "unreachable", "connection refused"),
    "canceled": ("clear", "webhook-canceled", None, None),  # the client went away; nothing failed open
    "deadlock": ("deadlocked", "webhook-unreachable", "unreachable", "connection refused"),
    "deadlock-denied": ("deadlocked", "webhook-rejects-bootstrap", "rejected", None),
    "restart-no-deadlock": ("degraded", "webhook-unreachable", "unreachable", "connection refused"),
    "fatal-hook": ("deadlocked", "webhook-unreachable", "unreachable", "connection refused"),
}
NEEDS_ACTION = {"deadlocked", "degraded", "leaking"}
# The deadlock families of issue 21, produced by the same apiserver: their expectations are in
# tests/test_real_families.py.
FAMILY_CAUSES = {"self-dependency", "node-lease-refused", "node-lease-denied", "conversion-down"}


def _cases() -> list:
    out = []
    for version, m in MANIFESTS.items():
        for cap in m["captures"]:
            if cap["cause"] in FAMILY_CAUSES:
                continue
            for kind, name in sorted(cap["files"].items()):
                if kind != "readyz":
                    out.append(pytest.param(version, cap, kind, name, id=f"{version}/{name}"))
    return out


def _diagnose(path: str) -> tuple[int, dict]:
    p = run_cli("diagnose", path, "-o", "json")
    assert p.stderr == b"" or p.returncode in (0, 3), p.stderr.decode()
    return p.returncode, json.loads(p.stdout)["result"]


def test_fixtures_are_there_and_described():
    assert MANIFESTS, "no captures: run python scripts/capture_real_logs.py"
    with open(os.path.join(REAL, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "python scripts/capture_real_logs.py" in readme and "byte for byte" in readme
    for version, m in MANIFESTS.items():
        assert f"## {version}" in readme
        causes = {c["cause"] for c in m["captures"]}
        assert causes <= set(EXPECT) | FAMILY_CAUSES, causes - set(EXPECT) - FAMILY_CAUSES
        # the core causes, on every version
        assert {"connection-refused", "timeout", "tls-unknown-authority", "service-not-found", "no-endpoints",
                "denied", "fail-open"} <= causes
        assert ("deadlock" in causes) != ("restart-no-deadlock" in causes)
        for cap in m["captures"]:
            assert cap["files"].get("text"), f"{version}/{cap['cause']} has no klog text capture"
            assert cap["files"].get("json"), f"{version}/{cap['cause']} has no JSON logging capture"
            for name in cap["files"].values():
                with open(os.path.join(REAL, version, name), "rb") as f:
                    data = f.read()
                assert data.endswith(b"\n") and len(data.splitlines()) <= 300, name
                for secret in (b"-----BEGIN", b"PRIVATE KEY", b"LS0tLS1CRUdJT"):
                    assert secret not in data, f"{name} holds {secret!r}"


@pytest.mark.parametrize("version,cap,kind,name", _cases())
def test_diagnose_reads_the_real_log(version, cap, kind, name):
    path = os.path.join(REAL, version, name)
    code, d = _diagnose(path)
    state, family, cls, detail = EXPECT[cap["cause"]]
    hook = cap["webhook"]
    assert d["verdict"]["state"] == state, d["verdict"]
    assert code == (3 if state in NEEDS_ACTION else 0)
    ours = [f for f in d["findings"] if f["webhook"] == hook]
    if family is None:
        assert d["findings"] == []
        return
    [f] = [f for f in ours if f["family"] == family]
    if family == "webhook-canceled":
        assert not any(g["family"] == "webhook-fail-open" for g in d["findings"])
        return
    assert f["cause_class"] == cls
    # validating or mutating: JSON logging names the dispatcher's package, and the URL's path says it too
    # (/validate…, /mutate…, /admit); a klog text line without a URL says neither.
    if kind == "json" or f["url"]:
        assert f["webhook_type"] == cap["webhook_type"]
    else:
        assert f["webhook_type"] in (None, cap["webhook_type"])
    if detail is not None:
        assert f["cause"] == detail
    if cap["cause"] == "deadlock-denied":  # the webhook's own words, also from klog's multi-line err=<…> values
        assert "policy ServiceCIDR//kubernetes for resource violation" in f["cause"]
    assert f["mode"] == {"Ignore": "open"}.get(cap["failure_policy"], "deny" if cls == "rejected" else "closed")

    # The configuration: named by the log itself (the mutation audit annotation) or, for the vendors whose naming
    # convention breakglass knows, guessed and labelled so; never another one.
    if kind == "audit":
        assert (f["configuration"], f["configuration_source"]) == (cap["configuration"], "log")
    elif f["configuration"] is not None:
        assert f["configuration"] == cap["configuration"] and f["configuration_source"].startswith("convention: ")

    # The service: only what the log shows. A webhook called at a url: has none, whatever its vendor's habits.
    if f["url"] and f["url"].startswith("https://127.0.0.1:"):
        assert f["service"] is None
    elif cap["cause"] in ("service-not-found", "endpoints-not-found", "no-endpoints"):
        assert (f["service"], f["url"]) == ("kyverno/kyverno-svc",
                                            "https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s")
    elif cap["cause"] in ("no-service-port", "headless-service"):
        assert f["service"].startswith("policy/policy-")

    if state == "deadlocked":
        assert f["bootstrap_deadlock"] and f["severity"] == "critical"
        if cap["cause"] == "fatal-hook":
            assert f["hooks"] == ["scheduling/bootstrap-system-priority-classes"]
            assert any(b.startswith("PriorityClass") for b in f["blocked"])
        else:
            assert SERVICECIDR in f["blocked"] and "start-kubernetes-service-cidr-controller" in f["hooks"]
    else:
        assert not any(g["bootstrap_deadlock"] for g in d["findings"])
    if cap["cause"] == "fail-open":
        assert d["verdict"]["state"] == "leaking" and f["severity"] == "warning"


@pytest.mark.parametrize("version", sorted(MANIFESTS))
def test_readyz_of_the_restart(version):
    caps = {c["cause"]: c for c in MANIFESTS[version]["captures"]}
    cap = caps.get("deadlock") or caps["restart-no-deadlock"]
    name = cap["files"]["readyz"]
    code, d = _diagnose(os.path.join(REAL, version, name))
    if cap["cause"] == "deadlock":
        assert name == "readyz-deadlock.txt" and code == 3
        hooks = {h for f in d["findings"] for h in f["hooks"]}
        assert {"start-kubernetes-service-cidr-controller", "start-service-ip-repair-controllers"} <= hooks
        assert d["verdict"]["state"] != "clear"
    else:  # 1.32 comes back: nothing is stuck
        assert code == 0 and d["findings"] == []


@pytest.mark.parametrize("version", sorted(MANIFESTS))
def test_a_real_denial_is_read_but_not_reported(version):
    """An ordinary denial is no outage; but the line must still be understood (webhook and message), since the
    same line about a bootstrap object is one."""
    from breakglass.diagnose import signatures
    from breakglass.logs import formats

    cap = next(c for c in MANIFESTS[version]["captures"] if c["cause"] == "denied")
    for name in (cap["files"]["text"], cap["files"]["json"]):
        with open(os.path.join(REAL, version, name), encoding="utf-8") as f:
            line = f.readline().rstrip("\n")
        [ev] = signatures.classify(formats.parse_record(line, name, 1, 1, 2026))
        assert (ev.kind, ev.webhook) == ("webhook-denied", cap["webhook"])
        assert ev.detail.startswith("\\n\\npolicy ConfigMap/team-a/denied-")  # %#v keeps \n escaped
        assert "for resource violation" in ev.detail and ev.detail.endswith("/app.kubernetes.io/name/'\\n")
