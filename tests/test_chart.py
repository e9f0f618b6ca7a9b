"""The guard's Helm chart (deploy/helm/breakglass) and alert rules (deploy/prometheus), with the real tools:
helm built from its Go module (go/helm), promtool (Debian's prometheus package), kubectl against the real
kube-apiserver (server-side dry-run: the Kubernetes schemas, strict field validation), its RBAC checked by the
apiserver's own authorizer (kubectl auth can-i, impersonating the chart's ServiceAccount), and the chart's
command lines run as its pods would run them."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from breakglass.sandbox import free_port
from tests.conftest import ROOT, run_cli
from tests.real_apiserver_session import real_apiserver  # noqa: F401
from tests.real_control_plane import built, require, stop_group
from tests.test_exporter import _audit_json, _get, _samples, _until, risky_cluster  # noqa: F401

CHART = os.path.join(ROOT, "deploy", "helm", "breakglass")
RULES = os.path.join(ROOT, "deploy", "prometheus", "breakglass-rules.yaml")
RULE_TESTS = sorted(glob.glob(os.path.join(ROOT, "deploy", "prometheus", "tests", "*.yaml")))
NAMESPACE = "breakglass-guard"
RELEASE = "guard"  # fullname: guard-breakglass
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-breakglass"
OPERATOR_KINDS = ("PrometheusRule", "ServiceMonitor")  # prometheus-operator's CRDs: not in a bare apiserver
# their CRD manifests, fetched from prometheus-operator's Go module by scripts/operator_crds.sh (its one version pin)
OPERATOR_CRDS = {"PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
                 "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml"}
CRONJOB = ("mode=cronjob", "cronjob.pushgateway=http://pgw:9091")
# The renderings the apiserver checks, and the operator kinds each renders: the default exporter (its
# PrometheusRule), the exporter with its ServiceMonitor and both kinds' extra labels, and cronjob mode, where an
# enabled ServiceMonitor is left out (no Service to scrape: the CronJob pushes).
MODES = {
    "exporter": ((), ["PrometheusRule"]),
    "exporter+servicemonitor": (("serviceMonitor.enabled=true", "serviceMonitor.interval=30s",
                                 "serviceMonitor.labels.release=kube-prometheus-stack",
                                 "prometheusRule.labels.release=kube-prometheus-stack"),
                                ["PrometheusRule", "ServiceMonitor"]),
    "cronjob": ((*CRONJOB, "targetVersion=1.33", "serviceMonitor.enabled=true"), ["PrometheusRule"]),
}
ADMISSION_RESOURCES = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                       "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                       "mutatingadmissionpolicies", "mutatingadmissionpolicybindings")


def _helm() -> str:
    (_, binary), = built("helm")
    require(binary)
    return binary


def _promtool() -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package: apt-get install prometheus)")
    return tool


def _run(argv: list[str], ok: bool = True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    if ok:
        assert p.returncode == 0, f"{argv}: {p.stdout}\n{p.stderr}"
    return p


def _render(*sets: str, ok: bool = True) -> subprocess.CompletedProcess:
    args = [a for s in sets for a in ("--set", s)]
    return _run([_helm(), "template", RELEASE, CHART, "--namespace", NAMESPACE, *args], ok=ok)


def _docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


# -- alert rules ------------------------------------------------------------------------------

def test_promtool_checks_the_rules_and_their_tests_pass():
    promtool = _promtool()
    assert "SUCCESS: 4 rules found" in _run([promtool, "check", "rules", RULES]).stdout
    assert RULE_TESTS
    p = _run([promtool, "test", "rules", *RULE_TESTS])
    assert "SUCCESS" in p.stdout and "FAILED" not in p.stdout


def test_every_alert_has_a_test_that_fires_and_one_that_stays_silent():
    with open(RULES, encoding="utf-8") as f:
        alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]}
    fires, silent = set(), set()
    for path in RULE_TESTS:
        with open(path, encoding="utf-8") as f:
            for test in yaml.safe_load(f)["tests"]:
                for t in test.get("alert_rule_test") or []:
                    (fires if t.get("exp_alerts") else silent).add(t["alertname"])
    assert alerts == {"BreakglassWebhookCriticalRisk", "BreakglassFailClosedWebhookBackendDown",
                      "BreakglassAuditStale", "BreakglassAuditMissing"}
    assert fires == alerts and silent == alerts


def test_a_broken_rule_fails_its_promtool_tests(tmp_path):
    """The rule tests can fail: the risk alert without the exporter's own instance in its text lookup (so another
    cluster's text could be shown) is caught."""
    promtool = _promtool()
    with open(RULES, encoding="utf-8") as f:
        broken = f.read().replace(",instance=%q,job=%q}", "}").replace("$labels.instance $labels.job", "")
    (tmp_path / "breakglass-rules.yaml").write_text(broken)
    os.mkdir(tmp_path / "tests")
    for path in RULE_TESTS:
        shutil.copy(path, tmp_path / "tests")
    p = _run([promtool, "test", "rules", *sorted(glob.glob(str(tmp_path / "tests" / "*.yaml")))], ok=False)
    assert p.returncode != 0 and "FAILED" in p.stdout + p.stderr


def test_the_charts_rules_are_the_plain_rules_file():
    with open(RULES, "rb") as a, open(os.path.join(CHART, "files", "breakglass-rules.yaml"), "rb") as b:
        assert a.read() == b.read()
    rule, = [d for d in _docs(_render().stdout) if d["kind"] == "PrometheusRule"]
    with open(RULES, encoding="utf-8") as f:
        assert rule["spec"] == yaml.safe_load(f)
    assert not [d for d in _docs(_render("prometheusRule.enabled=false").stdout) if d["kind"] == "PrometheusRule"]


# -- the chart --------------------------------------------------------------------------------

def test_helm_lints_and_renders_both_modes():
    helm = _helm()
    _run([helm, "lint", "--strict", CHART])
    _run([helm, "lint", "--strict", CHART, "--set", "mode=cronjob", "--set", "cronjob.pushgateway=http://pgw:9091"])
    kinds = sorted(d["kind"] for d in _docs(_render().stdout))
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "NetworkPolicy", "PrometheusRule", "Service",
                     "ServiceAccount"]
    kinds = sorted(d["kind"] for d in _docs(_render("serviceMonitor.enabled=true").stdout))
    assert "ServiceMonitor" in kinds
    cron = _docs(_render("mode=cronjob", "cronjob.pushgateway=http://pgw:9091").stdout)
    assert sorted(d["kind"] for d in cron) == ["ClusterRole", "ClusterRoleBinding", "CronJob", "PrometheusRule",
                                               "ServiceAccount"]
    p = _render("mode=cronjob", ok=False)
    assert p.returncode != 0 and "cronjob mode needs cronjob.pushgateway" in p.stderr
    p = _render("mode=daemon", ok=False)
    assert p.returncode != 0 and 'mode must be exporter or cronjob, not "daemon"' in p.stderr


def test_the_cluster_role_reads_only_what_the_audit_reads():
    role, = [d for d in _docs(_render().stdout) if d["kind"] == "ClusterRole"]
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("admissionregistration.k8s.io", r) for r in ADMISSION_RESOURCES} | {
        ("", "services"), ("", "endpoints"), ("", "namespaces"), ("discovery.k8s.io", "endpointslices")}
    assert all(sorted(rule["verbs"]) == ["get", "list", "watch"] for rule in role["rules"])


def _kubectl(kubeconfig: str, *args: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    return _run([kubectl, "--kubeconfig", kubeconfig, *args], ok=ok, input=stdin)


def _namespace(kube) -> None:
    kube.client.must("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}, ok=(201, 409))


def test_rendered_manifests_pass_server_side_validation(real_apiserver, tmp_path):  # noqa: F811
    """Every object the chart renders, in each rendering of MODES, through the real apiserver's schemas and strict
    field validation (a dry run: nothing is stored). The prometheus-operator kinds need its CRDs, which a bare
    apiserver lacks: they are left out here, and checked against those CRDs below (their rules are promtool's)."""
    kube = real_apiserver
    _namespace(kube)
    kubeconfig = kube.kubeconfig(str(tmp_path / "admin.kubeconfig"))
    for sets, _ in MODES.values():
        docs = [d for d in _docs(_render(*sets).stdout) if d["kind"] not in OPERATOR_KINDS]
        p = _kubectl(kubeconfig, "apply", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-",
                     stdin=yaml.safe_dump_all(docs))
        out = json.loads(p.stdout)
        items = out.get("items", [out])
        assert sorted(i["kind"] for i in items) == sorted(d["kind"] for d in docs)
    # strict validation does refuse a field the schema does not have: the check above can fail
    bad = next(d for d in _docs(_render().stdout) if d["kind"] == "Deployment")
    bad["spec"]["template"]["spec"]["containers"][0]["notAField"] = True
    p = _kubectl(kubeconfig, "apply", "--dry-run=server", "--validate=strict", "-f", "-", ok=False,
                 stdin=yaml.safe_dump(bad))
    assert p.returncode != 0 and "notAField" in p.stderr


def test_the_network_policy_admits_only_the_scrape_and_findings_are_off(real_apiserver, tmp_path):  # noqa: F811
    """Nothing authenticates a scrape: the chart's NetworkPolicy admits only the pods its values select (the
    Prometheus namespace and pods), to the metrics port, and selects exactly the exporter's pods. /findings (the
    whole audit) is off unless findings.enabled. Each rendering passes the real apiserver's strict server-side
    validation."""
    kube = real_apiserver
    _namespace(kube)
    kubeconfig = kube.kubeconfig(str(tmp_path / "admin.kubeconfig"))
    docs = _docs(_render().stdout)
    policy, = [d for d in docs if d["kind"] == "NetworkPolicy"]
    deployment, = [d for d in docs if d["kind"] == "Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
        "ports": [{"port": "metrics", "protocol": "TCP"}]}]
    container, = deployment["spec"]["template"]["spec"]["containers"]
    assert [p["name"] for p in container["ports"]] == ["metrics"]  # the port the policy names
    assert "--no-findings" in container["args"]
    assert "--no-findings" not in _container_args(_docs(_render("findings.enabled=true").stdout), "Deployment")

    custom = _docs(_render("networkPolicy.prometheus.namespaceSelector.matchLabels.team=observability",
                           "networkPolicy.prometheus.podSelector=null").stdout)
    policy_custom, = [d for d in custom if d["kind"] == "NetworkPolicy"]
    assert policy_custom["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring", "team": "observability"}}}]
    for doc in (policy, policy_custom):
        out = json.loads(_kubectl(kubeconfig, "apply", "--dry-run=server", "--validate=strict", "-o", "json", "-f",
                                  "-", stdin=yaml.safe_dump(doc)).stdout)
        assert out["kind"] == "NetworkPolicy" and out["spec"]["ingress"] == doc["spec"]["ingress"]

    assert not [d for d in _docs(_render("networkPolicy.enabled=false").stdout) if d["kind"] == "NetworkPolicy"]
    assert not [d for d in _docs(_render(*CRONJOB).stdout) if d["kind"] == "NetworkPolicy"]  # nothing listens
    p = _render("networkPolicy.prometheus.namespaceSelector=null", "networkPolicy.prometheus.podSelector=null",
                ok=False)
    assert p.returncode != 0 and "networkPolicy.prometheus needs a namespaceSelector or a podSelector" in p.stderr


# -- the prometheus-operator kinds, against prometheus-operator's own CRDs --------------------------------

@pytest.fixture(scope="module")
def operator_crds() -> dict[str, dict]:
    """kind -> prometheus-operator's published CRD for it, from scripts/operator_crds.sh (the operator's Go module
    at the release pinned there, checksum-verified by the go command; kept in build/operator-crds/, not in git).
    Without Go or the download, the tests skip with the reason; under CI they fail, like a missing build."""
    p = subprocess.run([os.path.join(ROOT, "scripts", "operator_crds.sh")], capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        why = f"scripts/operator_crds.sh could not fetch prometheus-operator's CRDs: {p.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(why + ": CI must validate the chart's PrometheusRule and ServiceMonitor")
        pytest.skip(why)
    directory = p.stdout.strip().splitlines()[-1]
    version = os.path.basename(directory).removeprefix("v")
    crds = {}
    for kind, name in OPERATOR_CRDS.items():
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            crd, = _docs(f.read())
        assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == kind
        assert crd["spec"]["group"] == "monitoring.coreos.com"
        assert crd["metadata"]["annotations"]["operator.prometheus.io/version"] == version, name
        assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v1"], name
        crds[kind] = crd
    return crds


@pytest.fixture
def operator_apiserver(real_apiserver, operator_crds, tmp_path):  # noqa: F811
    """The session's apiserver with prometheus-operator's two CRDs created and Established, and an admin
    kubeconfig for it. The apiserver is shared by the whole session: the CRDs are this fixture's alone (created
    here, so a left-over would fail loudly), deleted after, and waited for until they are gone."""
    kube = real_apiserver
    _namespace(kube)
    kubeconfig = kube.kubeconfig(str(tmp_path / "admin.kubeconfig"))
    crds = [crd["metadata"]["name"] for crd in operator_crds.values()]
    names = [f"crd/{name}" for name in crds]
    manifest = yaml.safe_dump_all(list(operator_crds.values()))
    _kubectl(kubeconfig, "create", "-f", "-", stdin=manifest)
    try:
        _kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", *names)
        yield kubeconfig
    finally:
        _kubectl(kubeconfig, "delete", "--ignore-not-found", "--wait", "--timeout=60s", *names)
        assert not _kubectl(kubeconfig, "get", "crd", "-o", "name", "--ignore-not-found", *crds).stdout


def _dry_run(kubeconfig: str, docs: list[dict], ok: bool = True) -> subprocess.CompletedProcess:
    """A server-side dry run of ``docs`` with strict field validation: the apiserver's own schema check."""
    return _kubectl(kubeconfig, "apply", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-",
                    ok=ok, stdin=yaml.safe_dump_all(docs))


def test_the_prometheus_operator_kinds_pass_server_side_validation_against_its_crds(operator_apiserver):
    """The chart's PrometheusRule and ServiceMonitor, in every rendering above, through prometheus-operator's own
    CRD schemas (strict: an unknown field is refused, not pruned) in the real apiserver: accepted, and stored
    as rendered (nothing pruned or defaulted away). The ServiceMonitor also selects the chart's Service by its
    labels and scrapes the port it names."""
    kubeconfig = operator_apiserver
    for mode, (sets, kinds) in MODES.items():
        rendered = _docs(_render(*sets).stdout)
        docs = [d for d in rendered if d["kind"] in OPERATOR_KINDS]
        assert sorted(d["kind"] for d in docs) == kinds, mode
        out = json.loads(_dry_run(kubeconfig, docs).stdout)
        items = out.get("items", [out])
        assert sorted(i["kind"] for i in items) == kinds, mode
        for doc, item in zip(docs, items):
            assert (item["apiVersion"], item["kind"]) == (doc["apiVersion"], doc["kind"]), mode
            assert item["metadata"]["namespace"] == NAMESPACE, mode
            assert item["metadata"]["labels"] == doc["metadata"]["labels"], mode
            assert item["spec"] == doc["spec"], (mode, doc["kind"])
        for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
            service, = [d for d in rendered if d["kind"] == "Service"]
            assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
            assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
            ports = {p["name"] for p in service["spec"]["ports"]}
            assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
            assert [e["interval"] for e in monitor["spec"]["endpoints"]] == ["30s"]
    # an interval of "" leaves Prometheus' own: no interval at all (not `interval: null`, which the apiserver
    # drops, so that what is stored would differ from what helm rendered)
    monitor, = [d for d in _docs(_render("serviceMonitor.enabled=true", "serviceMonitor.interval=").stdout)
                if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics"}]
    assert json.loads(_dry_run(kubeconfig, [monitor]).stdout)["spec"] == monitor["spec"]


def test_a_wrong_prometheus_rule_or_service_monitor_is_refused_by_the_crd_schemas(operator_apiserver):
    """The check above can fail: with the CRDs in place, the apiserver refuses a rendered PrometheusRule or
    ServiceMonitor with a field their schemas do not have, or a value of the wrong type or form."""
    kubeconfig = operator_apiserver
    sets, _ = MODES["exporter+servicemonitor"]
    rendered = {d["kind"]: d for d in _docs(_render(*sets).stdout)}

    def broken(kind: str, change) -> dict:
        doc = json.loads(json.dumps(rendered[kind]))
        change(doc["spec"])
        return doc

    cases = [
        # an unknown field under spec, and one in a rule (strict validation refuses, where a plain apply prunes)
        (broken("PrometheusRule", lambda s: s.update(notAField=True)), 'unknown field "spec.notAField"'),
        (broken("PrometheusRule", lambda s: s["groups"][0]["rules"][0].update(severity="critical")),
         'unknown field "spec.groups[0].rules[0].severity"'),
        # a rule's `for` of the wrong type, and not a Prometheus duration
        (broken("PrometheusRule", lambda s: s["groups"][0]["rules"][0].update({"for": 600})),
         'spec.groups[0].rules[0].for: Invalid value: "integer": spec.groups[0].rules[0].for in body must be of '
         'type string'),
        (broken("PrometheusRule", lambda s: s["groups"][0]["rules"][0].update({"for": "10 minutes"})),
         "spec.groups[0].rules[0].for in body should match"),
        (broken("ServiceMonitor", lambda s: s.update(notAField=True)), 'unknown field "spec.notAField"'),
        # an interval of the wrong type (a bare number of seconds), and a selector of the wrong shape
        (broken("ServiceMonitor", lambda s: s["endpoints"][0].update(interval=60)),
         "spec.endpoints[0].interval in body must be of type string"),
        (broken("ServiceMonitor", lambda s: s.update(selector=["app.kubernetes.io/name=breakglass"])),
         "spec.selector in body must be of type object"),
    ]
    for doc, error in cases:
        p = _dry_run(kubeconfig, [doc], ok=False)
        assert p.returncode != 0 and error in p.stderr, (doc["spec"], p.stdout, p.stderr)
        print(f"{doc['kind']} refused: {p.stderr.strip()}")
    # and the same objects unbroken are accepted (the refusals are the broken fields')
    assert _dry_run(kubeconfig, [rendered["PrometheusRule"], rendered["ServiceMonitor"]]).returncode == 0


@pytest.fixture
def chart_rbac(real_apiserver, tmp_path):  # noqa: F811
    """The chart's ServiceAccount, ClusterRole and ClusterRoleBinding applied for real; removed after."""
    kube = real_apiserver
    _namespace(kube)
    kubeconfig = kube.kubeconfig(str(tmp_path / "admin.kubeconfig"))
    docs = [d for d in _docs(_render().stdout) if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    manifest = yaml.safe_dump_all(docs)
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
    try:
        # the pod's token now: once a test's fail-closed webhook is in place, it would judge the TokenRequest
        env, mount = _pod_env(kube, tmp_path, ACCOUNT)
        yield kube, kubeconfig, env, mount
    finally:
        _kubectl(kubeconfig, "delete", "--ignore-not-found", "-f", "-", stdin=manifest)


def test_the_rbac_allows_reading_webhooks_and_denies_writes_and_secrets(chart_rbac):
    _, kubeconfig, _, _ = chart_rbac

    def can(verb: str, resource: str, *extra: str) -> bool:
        p = _kubectl(kubeconfig, "auth", "can-i", verb, resource, f"--as={ACCOUNT}", *extra, ok=False)
        assert p.stdout.strip() in ("yes", "no"), p.stderr
        return p.stdout.strip() == "yes"

    # kubectl resolves the resource through discovery: only the kinds this apiserver serves can be asked about
    # (1.34 serves no MutatingAdmissionPolicy by default; the role names it for clusters that do)
    served = set(_kubectl(kubeconfig, "api-resources", "--api-group=admissionregistration.k8s.io",
                          "-o", "name").stdout.split())
    assert "validatingwebhookconfigurations.admissionregistration.k8s.io" in served
    for r in ADMISSION_RESOURCES:
        if f"{r}.admissionregistration.k8s.io" not in served:
            continue
        for verb in ("get", "list", "watch"):
            assert can(verb, f"{r}.admissionregistration.k8s.io"), (verb, r)
    for r in ("services", "endpoints", "namespaces", "endpointslices.discovery.k8s.io"):
        assert can("list", r, "-A"), r
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        for r in (*sorted(served), "services", "endpoints",
                  "namespaces", "endpointslices.discovery.k8s.io", "pods", "secrets", "configmaps",
                  "clusterroles.rbac.authorization.k8s.io", "*.*"):
            assert not can(verb, r, "-A"), (verb, r)
    for verb in ("get", "list", "watch"):
        assert not can(verb, "secrets", "-A")
        assert not can(verb, "secrets", "-n", "kube-system")
        assert not can(verb, "secrets", "-n", NAMESPACE)
    assert not can("impersonate", "serviceaccounts", "-A")
    # everything the account may do, as the authorizer lists it: read verbs only, but for the self-reviews
    # every authenticated user may create (system:basic-user)
    table = _kubectl(kubeconfig, "auth", "can-i", "--list", f"--as={ACCOUNT}").stdout.splitlines()
    assert table[0].split()[0] == "Resources"
    # one row per rule: RESOURCES [NON-RESOURCE URLS] [NAMES] [VERBS]; rows of non-resource URLs start blank
    rules = [{"resources": [ln.split()[0]], "verbs": ln.rsplit("[", 1)[1].rstrip(" ]").split()}
             for ln in table[1:] if ln.strip() and not ln.startswith(" ")]
    assert any(r["resources"] == ["validatingwebhookconfigurations.admissionregistration.k8s.io"] for r in rules)
    for rule in rules:
        if all(r.startswith("self") for r in rule["resources"]):
            continue
        assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
        assert not any(r.startswith("secrets") or r == "*" for r in rule["resources"]), rule


def _pod_env(kube, tmp_path, account: str) -> tuple[dict, str]:
    """What the kubelet gives the chart's pod: its ServiceAccount's token and the cluster CA, mounted; the
    kubernetes Service's address in the environment."""
    ns, name = account.split(":")[2:]
    token = kube.client.must("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                             {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                              "spec": {"expirationSeconds": 3600}})["status"]["token"]
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(token)
    shutil.copy(kube.pki.ca, mount / "ca.crt")
    host, port = kube.url.split("://", 1)[1].rsplit(":", 1)
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
            "KUBECONFIG": str(tmp_path / "no-kubeconfig")}, str(mount)


def _container_args(docs: list[dict], kind: str) -> list[str]:
    obj, = [d for d in docs if d["kind"] == kind]
    spec = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"] if kind == "CronJob" else obj["spec"]["template"]["spec"]
    container, = spec["containers"]
    return container["args"]


def test_the_charts_exporter_runs_as_its_service_account_and_serves(chart_rbac, risky_cluster, tmp_path):
    """The Deployment's own arguments, run as the chart's ServiceAccount in a pod's setting: the read-only role
    is enough for the whole audit (the findings are the cluster-admin's audit's), and the probes' /healthz and
    /metrics answer on the chart's port."""
    kube, admin_kubeconfig = risky_cluster
    expected = _audit_json(admin_kubeconfig)
    port = free_port()
    args = _container_args(_docs(_render(f"port={port}", "interval=5", "findings.enabled=true").stdout), "Deployment")
    assert args == ["exporter", f"--listen=0.0.0.0:{port}", "--interval=5"]
    _, _, env, mount = chart_rbac
    with open(tmp_path / "exporter.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "breakglass", *args, "--service-account-dir", mount],
                                cwd=ROOT, stdout=log, stderr=log, env={**os.environ, **env}, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _until("the exporter's /healthz", lambda: proc.poll() is not None or _get(url + "/healthz")[0] == 200)
        assert proc.poll() is None, (tmp_path / "exporter.log").read_text()
        s = _samples(_get(url + "/metrics")[1])
        assert s["breakglass_audit_errors_total"] == [({}, 0.0)], (tmp_path / "exporter.log").read_text()
        assert sorted((m["configuration"], m["webhook"], m["rule"]) for m, _ in s["breakglass_webhook_risk"]) == \
            sorted({(f["configuration"], f["webhook"] or "", f["rule"]) for f in expected["result"]["findings"]})
        assert json.loads(_get(url + "/findings")[1])["result"] == expected["result"]
    finally:
        stop_group(proc)


def test_the_charts_cronjob_pushes_to_a_real_pushgateway(chart_rbac, risky_cluster, tmp_path):
    """The CronJob's own arguments (--once --push), as the chart's ServiceAccount, into Debian's Pushgateway: the
    gateway then serves the audit's series for Prometheus to scrape."""
    gateway = shutil.which("prometheus-pushgateway")
    if gateway is None:
        pytest.skip("Debian's prometheus-pushgateway package is not installed")
    kube, admin_kubeconfig = risky_cluster
    expected = _audit_json(admin_kubeconfig)
    gport = free_port()
    pgw = subprocess.Popen([gateway, f"--web.listen-address=127.0.0.1:{gport}",
                            f"--persistence.file={tmp_path / 'pgw.data'}"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{gport}"
        _until("the pushgateway", lambda: _get(url + "/-/ready")[0] == 200)
        args = _container_args(_docs(_render("mode=cronjob", f"cronjob.pushgateway={url}").stdout), "CronJob")
        assert args[:3] == ["exporter", "--once", f"--push={url}"]
        _, _, env, mount = chart_rbac
        p = run_cli(*args, "--service-account-dir", mount, env=env)
        assert p.returncode == 0, p.stderr
        s = _samples(_get(url + "/metrics")[1])
        risk = [(m["configuration"], m["webhook"], m["rule"]) for m, _ in s.get("breakglass_webhook_risk", [])
                if m.get("job") == "breakglass"]
        assert sorted(risk) == sorted({(f["configuration"], f["webhook"] or "", f["rule"])
                                       for f in expected["result"]["findings"]})
        pushed = [v for m, v in s["breakglass_audit_last_success_timestamp_seconds"] if m.get("job") == "breakglass"]
        assert pushed and pushed[0] > time.time() - 3600
    finally:
        stop_group(pgw)

