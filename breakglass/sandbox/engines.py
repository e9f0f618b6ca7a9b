"""The real policy engines, out of cluster, against a sandbox's (or a test's) real kube-apiserver.

Kyverno and Gatekeeper own the webhooks of the seeds, and what they do to their configurations (Kyverno re-creates
a deleted one and rewrites a patched one within a second; Gatekeeper's rotator injects its CA) decides whether a
recovery, a revert and a lasting fix hold. So they run here as they ship: upstream's main packages built by
`make go-components` (go/versions), installed from the manifests in the same module zips (CRDs, namespace,
ConfigMaps, RBAC: everything but the Deployments, which have no kubelet to run them), then started as processes
with the flags their Deployments pass plus what running out of cluster needs (reference/real-components.md):

- Kyverno: ``--kubeconfig``, ``--serverIP=127.0.0.1:PORT`` (it then registers ``url:`` webhooks to that address
  and puts the IP in its own certificate), ``--webhookServerHost/Port``, its CA and TLS Secrets; it registers its
  own webhook configurations, as in a cluster.
- Gatekeeper: see ``Gatekeeper`` (its webhooks are the shipped ones, rewritten to ``url:``).

Nothing here is a stand-in: a machine without the builds says so (``missing``), and the sandbox keeps its
admit-everything backend, named as the stand-in it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from breakglass.core.errors import BadInput, Unreachable
from breakglass.sandbox import builds, scenarios

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# what an install applies, in this order (CRDs and the namespace before what lives in them)
_ORDER = ("Namespace", "CustomResourceDefinition", "ServiceAccount", "ConfigMap", "Secret", "ClusterRole",
          "ClusterRoleBinding", "Role", "RoleBinding", "Service", "PodDisruptionBudget")
_PATHS = {  # kind -> (API prefix, plural, namespaced)
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "Service": ("/api/v1", "services", True),
    "Pod": ("/api/v1", "pods", True),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "ValidatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1",
                                       "validatingwebhookconfigurations", False),
    "MutatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations",
                                     False),
}


def versions(component: str) -> list[str]:
    """The versions of ``component`` go/versions lists."""
    return builds.versions(component)


def binary(component: str, name: str | None = None) -> str | None:
    """The built binary ``name`` (default ``component``) of the newest listed version, or None."""
    for v in reversed(versions(component)):
        path = os.path.join(ROOT, "build", component, f"v{v}", name or component)
        if os.access(path, os.X_OK):
            return path
    return None


def module_dir(module: str, version: str) -> str:
    """The module's unpacked zip in Go's module cache (where `make go-components` left it); fetched with
    `go mod download` if the cache was cleaned."""
    cache = os.environ.get("GOMODCACHE") or _go_env("GOMODCACHE") or os.path.expanduser("~/go/pkg/mod")
    escaped = "".join("!" + c.lower() if c.isupper() else c for c in module)  # the cache's case escaping
    path = os.path.join(cache, f"{escaped}@v{version}")
    if os.path.isdir(path):
        return path
    go = shutil.which("go")
    if go:
        p = subprocess.run([go, "mod", "download", "-json", f"{module}@v{version}"], capture_output=True,
                           timeout=600, check=False)
        try:
            d = json.loads(p.stdout or b"{}").get("Dir")
        except ValueError:
            d = None
        if d and os.path.isdir(d):
            return d
    raise Unreachable(f"{module}@v{version} is not in Go's module cache ({cache}): run make go-components")


def _go_env(name: str) -> str | None:
    go = shutil.which("go")
    if not go:
        return None
    try:
        return subprocess.run([go, "env", name], capture_output=True, text=True, timeout=60,
                              check=False).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def manifests(path: str, skip=("Deployment", "Job", "CronJob", "DaemonSet", "StatefulSet")) -> list[dict]:
    """The objects of a multi-document YAML install, minus workloads nothing here would run."""
    import yaml  # noqa: PLC0415

    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if isinstance(d, dict) and d.get("kind")]
    return [d for d in docs if d["kind"] not in skip]


def object_path(obj: dict, name: bool = True) -> str:
    kind = obj.get("kind")
    if kind not in _PATHS:
        raise BadInput(f"no API path known for kind {kind!r}")
    prefix, plural, namespaced = _PATHS[kind]
    meta = obj.get("metadata") or {}
    ns = f"/namespaces/{meta.get('namespace') or 'default'}" if namespaced else ""
    return f"{prefix}{ns}/{plural}" + (f"/{meta['name']}" if name else "")


def apply(client, objects: list[dict]) -> list[str]:
    """Create each object (kubectl create: an existing one is left as it is); what was skipped, by kind."""
    skipped = []
    rank = {k: i for i, k in enumerate(_ORDER)}
    for obj in sorted(objects, key=lambda o: rank.get(o["kind"], len(_ORDER))):
        if obj["kind"] not in _PATHS:
            skipped.append(obj["kind"])
            continue
        # an object already there is left as it is without a write: admission judges a create before its name
        # is found taken, and an admission policy that refuses it (the policy-deadlock) would stop a re-install
        if client.call("GET", object_path(obj))[0] == 200:
            continue
        status, out = client.call("POST", object_path(obj, name=False), obj)
        if status not in (200, 201, 202, 409):
            raise Unreachable(f"installing {obj['kind']}/{obj['metadata'].get('name')}: HTTP {status}: "
                              f"{out.get('message', out)}")
        if obj["kind"] == "CustomResourceDefinition":
            _established(client, obj["metadata"]["name"])
    return skipped


def _established(client, name: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
    while time.monotonic() < deadline:
        status, crd = client.call("GET", path)
        conds = {c.get("type"): c.get("status") for c in (crd.get("status") or {}).get("conditions") or []}
        if status == 200 and conds.get("Established") == "True":
            return
        time.sleep(0.2)
    raise Unreachable(f"CRD {name} did not become Established in {seconds:g} s")


@dataclass
class Engine:
    """One engine's process: its argv and environment, and where it logs."""

    name: str
    argv: list[str]
    env: dict
    log: str

    def start(self) -> subprocess.Popen:
        with open(self.log, "ab") as out:
            return subprocess.Popen(self.argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **self.env}, start_new_session=True)


KYVERNO_MODULE = "github.com/kyverno/kyverno"
KYVERNO_NS = "kyverno"
KYVERNO_HOOK = "validate.kyverno.svc-fail"  # what Kyverno registers for a Fail policy on every kind
KYVERNO_CFG_PATH = ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"
                    "kyverno-resource-validating-webhook-cfg")


def kyverno_install(version: str) -> list[dict]:
    """Kyverno's own install manifest (config/install-latest-testing.yaml of its module), workloads aside."""
    return manifests(os.path.join(module_dir(KYVERNO_MODULE, version), "config", "install-latest-testing.yaml"))


def kyverno(directory: str, kubeconfig: str, port: int, extra: list[str] = ()) -> Engine:
    """Kyverno's admission controller with its Deployment's flags, serving its webhooks on 127.0.0.1:PORT."""
    path = binary("kyverno")
    if path is None:
        raise Unreachable("Kyverno is not built (make go-components builds it from its Go module)")
    argv = [path, f"--kubeconfig={kubeconfig}", f"--serverIP=127.0.0.1:{port}", "--webhookServerHost=127.0.0.1",
            f"--webhookServerPort={port}", "--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca",
            "--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair", "--servicePort=443",
            "--backgroundServiceAccountName=system:serviceaccount:kyverno:kyverno-background-controller",
            "--reportsServiceAccountName=system:serviceaccount:kyverno:kyverno-reports-controller",
            # its metrics server listens even with --disableMetrics, on 0.0.0.0:8000 unless told: a second
            # sandbox's Kyverno (or anything on 8000, a common port) made it exit at start
            "--metricsHost=127.0.0.1", f"--metricsPort={_free_port()}",
            "--autoUpdateWebhooks=true", "--admissionReports=false", "--disableMetrics=true",
            "--controllerRuntimeMetricsAddress=0", "--enableDeferredLoading=true", "--loggingFormat=text", "--v=2",
            "--omitEvents=PolicyApplied,PolicySkipped,PolicyViolation,PolicyError", *extra]
    env = {"INIT_CONFIG": "kyverno", "METRICS_CONFIG": "kyverno-metrics", "KYVERNO_NAMESPACE": KYVERNO_NS,
           "KYVERNO_POD_NAME": "kyverno-admission-controller-0",
           "KYVERNO_SERVICEACCOUNT_NAME": "kyverno-admission-controller",
           "KYVERNO_ROLE_NAME": "kyverno:admission-controller", "KYVERNO_SVC": "kyverno-svc",
           "KYVERNO_DEPLOYMENT": "kyverno-admission-controller", "TUF_ROOT": os.path.join(directory, "sigstore")}
    return Engine("kyverno", argv, env, os.path.join(directory, "kyverno.log"))


# a policy on every kind, as in the seed: Kyverno then registers validate.kyverno.svc-fail, failurePolicy Fail, on
# every resource; it denies only objects labelled breakglass-deny (so the cluster keeps working while it runs)
KYVERNO_POLICY = {
    "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
    "metadata": {"name": "deny-labelled"},
    "spec": {"validationFailureAction": "Enforce", "background": False, "failurePolicy": "Fail",
             "rules": [{"name": "no-deny-label", "match": {"any": [{"resources": {"kinds": ["*"]}}]},
                        "validate": {"message": "objects labelled breakglass-deny are refused",
                                     "pattern": {"metadata": {"=(labels)": {"X(breakglass-deny)": "null"}}}}}]},
}


GATEKEEPER_MODULE = "github.com/open-policy-agent/gatekeeper/v3"
GATEKEEPER_NS = "gatekeeper-system"
GATEKEEPER_POD = "gatekeeper-controller-manager-0"


def gatekeeper_install(version: str, url: str, ca_bundle: str) -> list[dict]:
    """Gatekeeper's own install (deploy/gatekeeper.yaml of its module), workloads aside, with its shipped webhooks
    sent to ``url`` (it registers none itself: out of cluster there is no Service to reach it by) and a Pending
    Pod of the name it runs as (it reads its own Pod at start)."""
    objs = manifests(os.path.join(module_dir(GATEKEEPER_MODULE, version), "deploy", "gatekeeper.yaml"))
    for o in objs:
        for w in o.get("webhooks") or [] if o["kind"].endswith("WebhookConfiguration") else []:
            path = ((w.get("clientConfig") or {}).get("service") or {}).get("path") or ""
            w["clientConfig"] = {"url": url.rstrip("/") + path, "caBundle": ca_bundle}
    objs.append({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": GATEKEEPER_POD, "namespace": GATEKEEPER_NS,
                              "labels": {"control-plane": "controller-manager", "gatekeeper.sh/system": "yes"}},
                 "spec": {"serviceAccountName": "gatekeeper-admin", "automountServiceAccountToken": False,
                          "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                          "containers": [{"name": "manager", "image": "openpolicyagent/gatekeeper:v" + version,
                                          "securityContext": {"allowPrivilegeEscalation": False,
                                                              "capabilities": {"drop": ["ALL"]}}}]}})
    # (its namespace enforces the restricted Pod Security level, as its Deployment's pods satisfy)
    return objs


def gatekeeper(directory: str, kubeconfig: str, port: int, cert_dir: str) -> Engine:
    """Gatekeeper's manager (webhook, audit, status and the constraint CRDs' generation, its default operations)
    serving on 127.0.0.1:PORT with the certificate in ``cert_dir`` (tls.crt/tls.key for 127.0.0.1): its own cert
    rotation names only the Service's DNS name, which a ``url:`` call to loopback cannot verify."""
    path = binary("gatekeeper")
    if path is None:
        raise Unreachable("Gatekeeper is not built (make go-components builds it from its Go module)")
    free = _free_port
    argv = [path, f"--port={port}", "--host=127.0.0.1", f"--cert-dir={cert_dir}", "--disable-cert-rotation",
            f"--health-addr=127.0.0.1:{free()}", f"--metrics-addr=127.0.0.1:{free()}",
            # its Prometheus exporter listens on 8888 unless told: a second Gatekeeper here would stop at once
            f"--prometheus-port={free()}", "--logtostderr",
            f"--exempt-namespace={GATEKEEPER_NS}", "--disable-opa-builtin={http.send}"]
    env = {"KUBECONFIG": kubeconfig, "POD_NAMESPACE": GATEKEEPER_NS, "POD_NAME": GATEKEEPER_POD,
           "NAMESPACE": GATEKEEPER_NS, "CONTAINER_NAME": "manager"}
    return Engine("gatekeeper", argv, env, os.path.join(directory, "gatekeeper.log"))


def _free_port() -> int:
    from breakglass.sandbox import free_port  # noqa: PLC0415 - the package imports this module's siblings

    return free_port()


# a ConstraintTemplate and a constraint of the fail-open seed: ConfigMaps must carry an owner label
GATEKEEPER_TEMPLATE = {
    "apiVersion": "templates.gatekeeper.sh/v1", "kind": "ConstraintTemplate",
    "metadata": {"name": "k8srequiredlabels"},
    "spec": {"crd": {"spec": {"names": {"kind": "K8sRequiredLabels"},
                              "validation": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "labels": {"type": "array", "items": {"type": "string"}}}}}}},
             "targets": [{"target": "admission.k8s.gatekeeper.sh", "rego": (
                 "package k8srequiredlabels\n"
                 "violation[{\"msg\": msg}] {\n"
                 "  provided := {l | input.review.object.metadata.labels[l]}\n"
                 "  required := {l | l := input.parameters.labels[_]}\n"
                 "  missing := required - provided\n"
                 "  count(missing) > 0\n"
                 "  msg := sprintf(\"missing required labels: %v\", [missing])\n"
                 "}\n")}]},
}
GATEKEEPER_CONSTRAINT = {
    "apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "K8sRequiredLabels",
    "metadata": {"name": "configmaps-need-owner"},
    "spec": {"enforcementAction": "deny",
             "match": {"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}], "namespaces": ["default"]},
             "parameters": {"labels": ["owner"]}},
}


# The policy-deadlock seed: a ConstraintTemplate with a CEL source (Gatekeeper's K8sNativeValidation engine, as the
# Gatekeeper library's k8srequiredlabels has), which Gatekeeper turns into a ValidatingAdmissionPolicy by default
# (--default-create-vap-for-templates, failurePolicy from --default-k8s-native-validation-failure-policy: Fail),
# and a constraint meant for the team namespaces, turned into its binding (--default-create-vap-binding-for-
# constraints). Gatekeeper's namespaces matcher lets every cluster-scoped object through ("cluster-scoped objects
# always match"), so the binding refuses the apiserver's own default ServiceCIDR.
GATEKEEPER_CEL_TEMPLATE = {
    "apiVersion": "templates.gatekeeper.sh/v1", "kind": "ConstraintTemplate",
    "metadata": {"name": "k8srequiredlabels"},
    "spec": {"crd": {"spec": {"names": {"kind": "K8sRequiredLabels"},
                              "validation": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "labels": {"type": "array", "items": {"type": "object", "properties": {
                                      "key": {"type": "string"}}}}}}}}},
             "targets": [{"target": "admission.k8s.gatekeeper.sh", "code": [{
                 "engine": "K8sNativeValidation",
                 "source": {"validations": [{
                     "expression": "[object, oldObject].exists(obj, obj != null && has(obj.metadata) && "
                                   "variables.params.labels.all(entry, has(obj.metadata.labels) && "
                                   "entry.key in obj.metadata.labels))",
                     "messageExpression": "\"missing required label, requires all of: \" + "
                                          "variables.params.labels.map(entry, entry.key).join(\", \")"}]}}]}]},
}
GATEKEEPER_CEL_CONSTRAINT = {
    "apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "K8sRequiredLabels",
    "metadata": {"name": "team-objects-need-owner"},
    "spec": {"enforcementAction": "deny",
             "match": {"kinds": [{"apiGroups": ["*"], "kinds": ["*"]}], "namespaces": ["team-*"]},
             "parameters": {"labels": [{"key": "owner"}]}},
}
# what Gatekeeper names them (pkg/drivers/k8scel/transform: "gatekeeper-" + template; + lower kind + constraint)
GATEKEEPER_VAP = "gatekeeper-k8srequiredlabels"
GATEKEEPER_VAPB = "gatekeeper-k8srequiredlabels-team-objects-need-owner"
VAP_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


# What a user sends while Gatekeeper is down: a ConfigMap its constraint refuses, and a binding no constraint
# covers, both admitted through validation.gatekeeper.sh failing open (a Namespace would fail closed through
# check-ignore-label.gatekeeper.sh, so none is sent).
GATEKEEPER_LEAKS = [
    ("/api/v1/namespaces/default/configmaps",
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unlabelled-config"}, "data": {"k": "v"}}),
    scenarios.LEAKED_BINDING,
]


# -- konnectivity: the tunnel of the fail-open seed ------------------------------------------------------------

def egress_config(path: str, uds: str) -> str:
    """An EgressSelectorConfiguration sending the apiserver's calls to ``url:`` webhooks (``controlplane``) and to
    ``service:`` ones (``cluster``) through the konnectivity server's socket (gRPC over UDS), as GKE's and kubeadm's
    konnectivity set-ups do (k8s.io/apiserver pkg/util/webhook/authentication.go picks the selection)."""
    import yaml  # noqa: PLC0415

    conn = {"proxyProtocol": "GRPC", "transport": {"uds": {"udsName": uds}}}
    doc = {"apiVersion": "apiserver.k8s.io/v1beta1", "kind": "EgressSelectorConfiguration",
           "egressSelections": [{"name": "controlplane", "connection": conn}, {"name": "cluster", "connection": conn}]}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f)
    return path


def low_port() -> int:
    """A free loopback port below the ephemeral range: konnectivity refuses an ephemeral one for each of its
    ports ("please do not try to use ephemeral port …"). With $BREAKGLASS_PORT_RANGE, one from that range (which
    the sandbox's documentation asks to be below the ephemeral range)."""
    from breakglass.sandbox import port_between, port_range  # noqa: PLC0415 - the package imports its siblings

    return port_between(*(port_range() or (20000, 32000)))


def konnectivity_server(directory: str, uds: str, cert: str, key: str, agent_port: int,
                        health_port: int | None = None) -> Engine:
    """konnectivity-server in gRPC mode on ``uds`` (the apiserver's side), agents on 127.0.0.1:agent_port over TLS
    with ``cert``/``key`` (mandatory for the agents' side); its /readyz (plain HTTP on ``health_port``) is 200 once
    an agent is connected."""
    path = binary("konnectivity", "konnectivity-server")
    if path is None:
        raise Unreachable("konnectivity is not built (make go-components builds it from its Go module)")
    free = low_port
    argv = [path, "--mode=grpc", f"--uds-name={uds}", "--delete-existing-uds-file", "--server-port=0",
            f"--cluster-cert={cert}", f"--cluster-key={key}", f"--agent-port={agent_port}",
            "--agent-bind-address=127.0.0.1", f"--admin-port={free()}", "--admin-bind-address=127.0.0.1",
            f"--health-port={health_port or free()}", "--health-bind-address=127.0.0.1", "--server-count=1"]
    return Engine("konnectivity-server", argv, {}, os.path.join(directory, "konnectivity-server.log"))


def konnectivity_agent(directory: str, ca: str, agent_port: int) -> Engine:
    """konnectivity-agent dialling the server at 127.0.0.1:agent_port, trusting ``ca`` for its certificate."""
    path = binary("konnectivity", "konnectivity-agent")
    if path is None:
        raise Unreachable("konnectivity is not built (make go-components builds it from its Go module)")
    free = low_port
    argv = [path, "--proxy-server-host=127.0.0.1", f"--proxy-server-port={agent_port}", f"--ca-cert={ca}",
            "--health-server-host=127.0.0.1", f"--health-server-port={free()}", f"--admin-server-port={free()}",
            "--admin-bind-address=127.0.0.1", "--sync-interval=1s", "--sync-interval-cap=2s"]
    return Engine("konnectivity-agent", argv, {}, os.path.join(directory, "konnectivity-agent.log"))


# -- in a sandbox ----------------------------------------------------------------------------------------------

ENGINES = ("kyverno", "gatekeeper")


def _spawn(directory: str, eng: Engine) -> subprocess.Popen:
    """Start an engine as one of the sandbox's recorded processes (`sandbox down` stops it), its environment
    given through env(1): procs.spawn passes the sandbox's own. It runs under the kubelet stand-in's restart
    (sandbox.supervise): an engine that exits is started again, as its pod would be."""
    from breakglass.sandbox import procs  # noqa: PLC0415

    argv = [*procs.python_module("breakglass.sandbox.supervise"), "--", "/usr/bin/env",
            *(f"{k}={v}" for k, v in eng.env.items()), *eng.argv]
    return procs.spawn(directory, f"engine-{eng.name}", argv, eng.log, detached=True)


def until(what: str, test, proc: subprocess.Popen, log: str, seconds: float = 180, who: str = "the engine",
          step: float = 0.3):
    """Poll ``test`` until it returns something true (returned); Unreachable naming ``log`` if ``proc`` (the
    sandbox's engine or tunnel process, ``who``) exits first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        if proc.poll() is not None:
            raise Unreachable(f"{who} exited ({proc.returncode}) before {what}; see {log}")
        time.sleep(step)
    raise Unreachable(f"no {what} within {seconds:g} s; see {log}")


def require(name: str) -> None:
    """One line before anything starts when ``name`` is unknown or not built here."""
    if name not in ENGINES:
        raise BadInput(f"unknown engine {name!r} (use {', '.join(ENGINES)})")
    if binary(name) is None:
        raise BadInput(f"{name} is not built here: `make go-components` builds it from its Go module (needs Go)")


def start_in_sandbox(directory: str, info: dict, name: str, client=None) -> dict:
    """Install ``name`` (its own manifests, once) on the sandbox's apiserver and start it in place of the
    admit-everything backend: Kyverno registers its own webhooks (taking over the configuration of its name);
    Gatekeeper's shipped ones are sent to it by url:. Its policy is the seed's. Returns what it is doing.
    ``client``: the apiserver to install through (sandbox up's first boot), else the sandbox's."""
    from breakglass.sandbox import apiserver as launcher, procs, pki as pkimod  # noqa: PLC0415

    require(name)
    if procs.find(directory, f"engine-{name}"):
        return {"engine": name, "running": True, "log": os.path.join(directory, f"{name}.log")}
    layout = launcher.Layout(directory)
    keys = pkimod.load(layout.pki_dir)
    given = client is not None  # sandbox up's first boot: the scenario is being made
    client = client or launcher.Client(info["url"], keys)
    status, _ = client.readyz()
    if status != 200:
        raise BadInput(f"the sandbox's apiserver is not ready ({status or 'not answering'}): an engine installs "
                       "through it", hint="recover first (breakglass wizard), then start the engine")
    try:
        return _start_in_sandbox(directory, info, name, layout, keys, client, setup=given)
    except BaseException:
        procs.stop(directory, (f"engine-{name}",))  # a failed or interrupted start leaves no engine behind
        raise


def _start_in_sandbox(directory: str, info: dict, name: str, layout, keys, client, setup: bool = False) -> dict:
    version = versions(name)[-1]
    # an engine started again serves where it did: Gatekeeper's webhooks, once installed, keep their url:
    ports = info.setdefault("engine_ports", {})
    port = ports.get(name) or _free_port()
    ports[name] = port
    if name == "kyverno":
        apply(client, kyverno_install(version))
        eng = kyverno(directory, layout.kubeconfig, port)
        proc = _spawn(directory, eng)
        until("Kyverno's webhook configurations", lambda: client.call("GET", KYVERNO_CFG_PATH)[0] == 200, proc,
               eng.log)
        until("the ClusterPolicy accepted", lambda: client.call(
            "POST", "/apis/kyverno.io/v1/clusterpolicies", KYVERNO_POLICY)[0] in (200, 201, 409), proc, eng.log)
        until(f"Kyverno's webhook for the policy ({KYVERNO_HOOK})", lambda: any(
            w.get("name") == KYVERNO_HOOK for w in client.call("GET", KYVERNO_CFG_PATH)[1].get("webhooks") or []),
            proc, eng.log)
    else:
        import base64  # noqa: PLC0415

        certs = os.path.join(directory, "gatekeeper-certs")
        os.makedirs(certs, mode=0o700, exist_ok=True)
        for src, dst in ((keys.webhook_cert, "tls.crt"), (keys.webhook_key, "tls.key"), (keys.ca, "ca.crt")):
            shutil.copyfile(src, os.path.join(certs, dst))
            os.chmod(os.path.join(certs, dst), 0o600)
        with open(keys.ca, "rb") as f:
            bundle = base64.b64encode(f.read()).decode()
        apply(client, gatekeeper_install(version, f"https://127.0.0.1:{port}", bundle))
        eng = gatekeeper(directory, layout.kubeconfig, port, certs)
        proc = _spawn(directory, eng)
        policy = info.get("scenario") == "policy-deadlock"
        template, constraint = ((GATEKEEPER_CEL_TEMPLATE, GATEKEEPER_CEL_CONSTRAINT) if policy
                                else (GATEKEEPER_TEMPLATE, GATEKEEPER_CONSTRAINT))
        until("the ConstraintTemplate accepted", lambda: client.call(
            "POST", "/apis/templates.gatekeeper.sh/v1/constrainttemplates", template)[0]
            in (200, 201, 409), proc, eng.log)
        until("the constraint accepted", lambda: client.call(
            "POST", "/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels", constraint)[0]
            in (200, 201, 409), proc, eng.log)
        if policy and setup:  # later starts find the template as the user left it (generateVAP: false, …)
            until(f"Gatekeeper's generated policy and binding ({GATEKEEPER_VAP}, {GATEKEEPER_VAPB})", lambda: (
                client.call("GET", f"{VAP_PATH}/{GATEKEEPER_VAP}")[0] == 200
                and client.call("GET", f"{VAPB_PATH}/{GATEKEEPER_VAPB}")[0] == 200), proc, eng.log)
    # running is not enforcing (Gatekeeper admits until it has synced its constraint, Kyverno until its policy
    # is ready): asked as a user's write would be, through the apiserver, by a dry run it must refuse; with the
    # webhook plugins off (the plugin-flag way out) the apiserver calls no engine, and that is said instead
    from breakglass.sandbox.apiserver import calls_webhooks  # noqa: PLC0415

    if info.get("scenario") == "policy-deadlock":  # the apiserver enforces the generated policy itself
        if enforcing := setup and calls_webhooks(directory, "ValidatingAdmissionPolicy"):
            until("the generated policy refusing what it forbids", lambda: _refused_by_policy(client), proc, eng.log)
    elif enforcing := calls_webhooks(directory):
        until(f"{name} refusing what its policy forbids", lambda: _refused(client), proc, eng.log)
    info.setdefault("engines", {})[name] = {"pid": proc.pid, "port": port, "version": version, "log": eng.log}
    return {"engine": name, "version": version, "running": True, "log": eng.log,
            "enforcing": True if enforcing else None}  # None: not seen, the apiserver calls no webhook now


# a ConfigMap both seed policies refuse: no owner label (Gatekeeper's constraint), the breakglass-deny label
# (Kyverno's policy); sent as a server-side dry run, which both engines' webhooks take (sideEffects None)
_FORBIDDEN = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "breakglass-enforcing-probe", "labels": {"breakglass-deny": "yes"}}}


def _refused(client) -> bool:
    status, out = client.call("POST", "/api/v1/namespaces/default/configmaps?dryRun=All", _FORBIDDEN)
    return status in (400, 403) and "denied the request" in str(out.get("message", ""))


def _refused_by_policy(client) -> bool:
    """A cluster-scoped object without an owner label, as a server-side dry run: refused by the apiserver's own
    admission policy (the VAP plugin runs before the webhooks), not by Gatekeeper's webhook."""
    probe = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "breakglass-enforcing-probe"}, "rules": []}
    status, out = client.call("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles?dryRun=All", probe)
    return status in (400, 403, 422) and "ValidatingAdmissionPolicy" in str(out.get("message", ""))


def stop_in_sandbox(directory: str, info: dict, name: str) -> dict:
    """Stop the engine (its webhooks stay registered, as when its pods are gone)."""
    from breakglass.sandbox import procs  # noqa: PLC0415

    if name not in ENGINES:
        raise BadInput(f"unknown engine {name!r} (use {', '.join(ENGINES)})")
    was = procs.stop(directory, (f"engine-{name}",))
    (info.get("engines") or {}).pop(name, None)
    return {"engine": name, "running": False, "was_running": was}
