"""A local rehearsal environment, so every recovery can be rehearsed before the night it is needed.

``up`` starts Debian's etcd on a free loopback port (in the background, its own session). Given a
kube-apiserver binary (``apiserver=``), it runs the real apiserver on that etcd and brings it into a
scenario's state (``controlplane``, ``scenarios``): the seed's deadlock, a fail-open webhook, or health.
Without one, it writes the Kyverno configuration of the story and innocent ones byte for byte as
kube-apiserver stores them, and copies an example apiserver log, a Talos machine config and a kubeadm
manifest next to it. ``down`` stops everything it started and removes the directory; ``status`` shows it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

from breakglass.core import journal
from breakglass.core.errors import BadInput, Unreachable
from breakglass.sandbox import lock, procs, trust

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the checkout, for the example files

KYVERNO = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "kyverno-resource-validating-webhook-cfg", "uid": "5c3f1e0a-7b43-4c1e-9f0e-2b1d7f7a1c11",
                 "creationTimestamp": "2026-02-20T10:00:00Z",
                 "labels": {"webhook.kyverno.io/managed-by": "kyverno"}},
    "webhooks": [{"name": "validate.kyverno.svc-fail",
                  "clientConfig": {"service": {"namespace": "kyverno", "name": "kyverno-svc",
                                               "path": "/validate/fail", "port": 443}},
                  "rules": [{"operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"], "apiGroups": ["*"],
                             "apiVersions": ["*"], "resources": ["*/*"], "scope": "*"}],
                  "failurePolicy": "Fail", "sideEffects": "NoneOnDryRun", "timeoutSeconds": 10,
                  "admissionReviewVersions": ["v1"], "matchPolicy": "Equivalent",
                  "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                              "operator": "NotIn", "values": ["kyverno"]}]}}],
}
INNOCENT = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
     "metadata": {"name": "cert-manager-webhook", "uid": "0b7e2c1d-51a4-4f0e-8d7c-3e9a1b2c4d5e",
                  "creationTimestamp": "2026-01-05T09:00:00Z"},
     "webhooks": [{"name": "webhook.cert-manager.io",
                   "clientConfig": {"service": {"namespace": "cert-manager", "name": "cert-manager-webhook",
                                                "path": "/validate"}},
                   "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["cert-manager.io"],
                              "apiVersions": ["v1"], "resources": ["*/*"]}],
                   "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                   "admissionReviewVersions": ["v1"]}]},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
     "metadata": {"name": "istio-sidecar-injector", "uid": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
                  "creationTimestamp": "2026-01-05T09:00:00Z"},
     "webhooks": [{"name": "namespace.sidecar-injector.istio.io",
                   "clientConfig": {"service": {"namespace": "istio-system", "name": "istiod", "path": "/inject"}},
                   "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["pods"]}],
                   "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                   "namespaceSelector": {"matchLabels": {"istio-injection": "enabled"}},
                   "admissionReviewVersions": ["v1"]}]},
]


@dataclass
class Sandbox:
    dir: str
    endpoint: str
    pid: int
    files: dict
    apiserver: dict | None = None
    reused: bool = False  # `up` found it running and gave it back rather than a fresh one

    def flags(self) -> str:
        return f"--etcd-endpoints {self.endpoint}"


def talos_machinery_missing() -> str:
    """What a Talos node needs and is not built here, with the one command that builds it (the newest era)."""
    newest = None
    try:
        with open(os.path.join(ROOT, "go", "versions"), encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "talos-machinery":
                    newest = parts[1]
    except OSError:
        pass
    build = f"bash scripts/gobuild.sh talos-machinery@{newest}" if newest else "make go-components"
    return (f"--node talos needs Talos' config machinery, not built here: `{build}` builds it (needs Go; a few "
            f"minutes the first time), or use the default --node kubeadm")


def built(component: str) -> list[str]:
    """Binaries of ``component`` (kube-apiserver, talos-machinery) that `make go-components` built in this
    checkout (build/<component>/v<X.Y.Z>/<component>), oldest version first."""
    base = os.path.join(ROOT, "build", component)
    try:
        names = os.listdir(base)
    except OSError:
        return []

    def key(name: str) -> tuple:
        return tuple(int(x) if x.isdigit() else 0 for x in name.lstrip("v").split("."))

    paths = [os.path.join(base, n, component) for n in sorted(names, key=key)]
    return [p for p in paths if os.access(p, os.X_OK)]


def built_apiservers() -> list[str]:
    return built("kube-apiserver")


def default_dir(state: str | None = None) -> str:
    return os.path.join(journal.state_dir(state), "sandbox")


PORT_RANGE_ENV = "BREAKGLASS_PORT_RANGE"
_handed: list[int] = []  # ports this process gave out from the range, newest last: not offered again soon


def port_range() -> tuple[int, int] | None:
    """$BREAKGLASS_PORT_RANGE as (low, high), or None when unset. Sandboxes that run side by side (parallel test
    workers, two rehearsals on one CI host) each take their own range: a port the kernel hands one of them could
    otherwise go to the other between our check and the server's bind, and a readiness probe would then answer
    for the wrong process."""
    raw = os.environ.get(PORT_RANGE_ENV, "").strip()
    if not raw:
        return None
    low, sep, high = raw.partition("-")
    if sep and low.isdigit() and high.isdigit() and 1024 <= int(low) < int(high) <= 65535:
        return int(low), int(high)
    raise BadInput(f"${PORT_RANGE_ENV} is {raw[:40]!r}: give LOW-HIGH, two ports from 1024 to 65535, low first "
                   f"(e.g. 20000-24999)")


def free_port() -> int:
    """A loopback port nothing listens on: the kernel's choice, or one from $BREAKGLASS_PORT_RANGE."""
    bounds = port_range()
    if bounds is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    return port_between(*bounds)


def port_between(low: int, high: int) -> int:
    """A free loopback port from low to high (inclusive), not one this process gave out a moment ago."""
    import random  # noqa: PLC0415 - only with a range

    # the latest half of the range (at most 1024) is not handed out again: a port given out a moment ago may not
    # be bound yet; older ones are bound or long gone
    recent = set(_handed[-min((high - low + 1) // 2, 1024):])
    for _ in range(4 * (high - low + 1)):
        port = random.randint(low, high)
        if port in recent:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.append(port)
        del _handed[:-1024]
        return port
    raise Unreachable(f"no free loopback port between {low} and {high}")


def etcd_command(binary: str, name: str, data_dir: str, client_url: str, peer_port: int) -> list[str]:
    """A single-member etcd on loopback (the sandbox's, and the tests')."""
    peer = f"http://127.0.0.1:{peer_port}"
    return [binary, "--name", name, "--data-dir", data_dir, "--listen-client-urls", client_url,
            "--advertise-client-urls", client_url, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{name}={peer}", "--log-level", "error"]


def wait_listening(proc: subprocess.Popen, port: int, seconds: float) -> str | None:
    """None once the port accepts connections; otherwise why not ("exited" or "timed out")."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return "exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.3):
                return None
        except OSError:
            time.sleep(0.1)
    return "timed out"


MARKER = ".breakglass-sandbox"


def _running(directory: str) -> procs.Record | None:
    """The sandbox's etcd, while it runs: its record, checked against /proc (a recycled pid is not it)."""
    return procs.find(directory, "etcd")


def _data_dir(directory: str) -> str:
    return os.path.join(os.path.abspath(directory), "etcd-data")


def _owned(directory: str) -> bool:
    """Only a directory the sandbox made (or none, or an empty one) is ever removed."""
    if not os.path.lexists(directory):
        return True
    if not os.path.isdir(directory) or os.path.islink(directory):
        return False
    return os.path.exists(os.path.join(directory, MARKER)) or not os.listdir(directory)


def _refuse_foreign(directory: str) -> None:
    if not _owned(directory):
        raise BadInput(f"{directory} is not a breakglass sandbox directory; refusing to remove it",
                       hint="choose an empty or new directory with --dir")


def _trusted(directory: str) -> str | None:
    """None when only we can have written the sandbox directory; else why not (what it says is not believed:
    no process is signalled, started or reused from it)."""
    try:
        trust.own_dir(directory)
    except BadInput as e:
        return str(e)
    return None


def load(directory: str) -> Sandbox | None:
    if _trusted(directory) is not None:
        return None
    try:
        with open(os.path.join(directory, "sandbox.json"), encoding="utf-8") as f:
            d = json.load(f)
        api = d.get("apiserver")
        return Sandbox(directory, str(d["endpoint"]), int(d["pid"]), dict(d["files"]),
                       dict(api) if isinstance(api, dict) else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _save(sb: Sandbox) -> None:
    from breakglass.core.textfile import write_private  # noqa: PLC0415

    state = {"endpoint": sb.endpoint, "pid": sb.pid, "files": sb.files, "apiserver": sb.apiserver}
    write_private(os.path.join(sb.dir, "sandbox.json"), json.dumps(state, indent=2).encode())


PROCESS_NAMES = {"etcd": "etcd", "apiserver-boot": "kube-apiserver (first boot)", "kubelet": "kubelet stand-in",
                 "apiserver": "kube-apiserver", "backend": "webhook backend (stand-in)",
                 "engine-kyverno": "Kyverno", "engine-gatekeeper": "Gatekeeper",
                 "tunnel-server": "konnectivity-server", "tunnel-agent": "konnectivity-agent"}


def status(directory: str) -> dict:
    untrusted = _trusted(directory) if os.path.lexists(directory) else None
    if untrusted:
        return {"running": False, "dir": directory, "untrusted": untrusted, "processes": []}
    processes = [{"name": r.name, "what": PROCESS_NAMES.get(r.name, r.name), "pid": r.pid}
                 for r in procs.live(directory)]
    sb = load(directory)
    etcd = _running(directory)
    if sb is None:
        return {"running": False, "dir": directory, "processes": processes}
    out = {"running": etcd is not None, "dir": directory, "endpoint": sb.endpoint, "pid": sb.pid,
           "files": sb.files, "flags": sb.flags(), "processes": processes}
    if sb.apiserver:
        from breakglass.sandbox import controlplane  # noqa: PLC0415

        api = {k: sb.apiserver[k] for k in ("url", "kubeconfig", "log", "audit_log", "version", "scenario", "node",
                                            "node_config", "manifest", "webhook_url") if k in sb.apiserver}
        api.update(controlplane.readiness(sb.apiserver, directory) if out["running"] else
                   {"ready": False, "status": None, "failing": [], "pid": None})
        owner = sb.apiserver.get("engine")
        api["engine"] = owner
        api["backend_running"] = procs.find(directory, f"engine-{owner}" if owner else "backend") is not None
        api["tunnel"] = _tunnel().status(directory, sb.apiserver)
        out["apiserver"] = api
    return out


# which engine owns each scenario's webhooks in the seeds: Kyverno the deadlock, Gatekeeper the fail-open leak
ENGINE_SCENARIOS = {"kyverno": ("deadlock", "healthy"), "gatekeeper": ("fail-open", "policy-deadlock", "healthy")}


def up(directory: str, etcd_binary: str | None = None, apiserver: str | None = None, scenario: str = "deadlock",
       say=lambda _m: None, node: str = "kubeadm", engine: str | None = None,
       tunnel: bool | None = None) -> Sandbox:
    """Start the sandbox in ``directory``, or give back the one running there (``reused``). One ``up`` or
    ``down`` at a time holds the directory; an interrupt (Ctrl-C, SIGTERM, SIGHUP) stops what was started.
    ``engine``: the scenario's webhooks are the real engine's own (sandbox.engines), not the stand-in's.
    ``tunnel``: the webhook calls go through a real konnectivity server and agent (sandbox.tunnel); None: for
    the fail-open scenario wherever konnectivity is built."""
    directory = os.path.abspath(directory)
    port_range()  # a $BREAKGLASS_PORT_RANGE that is not one is said before anything is made
    if node == "talos" and apiserver is not None and not built("talos-machinery"):
        raise BadInput(talos_machinery_missing())  # said before anything starts, not after the apiserver has
    if engine is not None:
        _engine_fits(engine, apiserver, scenario)
    if tunnel and (apiserver is None or not _tunnel().available()):
        raise BadInput("--tunnel needs --apiserver and konnectivity built (`make go-components`, needs Go)")
    if apiserver is not None and scenario == "mutating-policy-deadlock":
        from breakglass.sandbox import controlplane  # noqa: PLC0415 - it imports this package's siblings

        controlplane.serves_mutating_policies(apiserver)  # said before anything is made
    _refuse_foreign(directory)
    trust.ancestors(directory, missing_ok=True)
    with lock.held(directory, create=True, say=say):
        trust.own_dir(directory)
        _refuse_foreign(directory)
        existing = load(directory)
        if existing and _running(directory):
            _same_or_refuse(existing, directory, apiserver, scenario, node, engine)
            existing.reused = True
            say(f"reusing the sandbox already running in {directory}; for a fresh one (a new deadlock): "
                f"`breakglass sandbox down{_dir_flag(directory)}` first")
            return existing
        etcd = _pin_etcd(etcd_binary)
        api = trust.pin(apiserver, "--apiserver") if apiserver is not None else None
        if api is not None:
            from breakglass.sandbox.apiserver import version  # noqa: PLC0415

            version(api.path)  # a wrong path is one line before anything starts
        try:
            return _start(directory, etcd, api, scenario, say, node, engine, tunnel)
        except BaseException:
            procs.stop(directory)  # an interrupt or a failure leaves no process behind
            _tunnel().cleanup(directory)
            raise


def _dir_flag(directory: str) -> str:
    return "" if directory == os.path.abspath(default_dir()) else f" --dir {directory}"


def _engine_fits(engine: str, apiserver: str | None, scenario: str) -> None:
    from breakglass.sandbox import engines  # noqa: PLC0415

    if apiserver is None:
        raise BadInput("--engine needs --apiserver: a policy engine installs through a real kube-apiserver")
    if engine not in ENGINE_SCENARIOS:
        raise BadInput(f"unknown engine {engine!r} (use {', '.join(ENGINE_SCENARIOS)})")
    if scenario not in ENGINE_SCENARIOS[engine]:
        raise BadInput(f"--engine {engine} rehearses {', '.join(ENGINE_SCENARIOS[engine])}, not {scenario}",
                       hint="the deadlock is Kyverno's (--engine kyverno); the fail-open leak and the "
                            "policy-deadlock (its generated admission policy) Gatekeeper's (--engine gatekeeper)")
    engines.require(engine)


def _same_or_refuse(existing: Sandbox, directory: str, apiserver: str | None, scenario: str, node: str,
                    engine: str | None = None) -> None:
    have = existing.apiserver or {}
    wanted = {"binary": os.path.realpath(apiserver), "scenario": scenario, "node": node,
              "engine": engine} if apiserver else {}
    if any(have.get(k) != v for k, v in wanted.items()):
        what = (f"kube-apiserver {have['version']} ({have['scenario']}, {have['node']} node"
                f"{', ' + have['engine'] if have.get('engine') else ''})" if have
                else "etcd only")
        raise BadInput(f"a sandbox already runs in {directory} ({what}), not the one asked for",
                       hint="`breakglass sandbox down` first, or --dir for another one")


def _pin_etcd(etcd_binary: str | None) -> trust.Pinned:
    binary = etcd_binary or shutil.which("etcd") or "/usr/bin/etcd"
    if not os.path.exists(binary):
        raise BadInput("etcd is not installed (Debian: apt-get install etcd-server; `make demo` installs it)")
    return trust.pin(binary)


def _empty(directory: str) -> None:
    """Remove what a previous sandbox left, keeping the directory itself (its lock is held)."""
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _tunnel():
    from breakglass.sandbox import tunnel  # noqa: PLC0415 - it imports this package's siblings

    return tunnel


def _start(directory: str, etcd: trust.Pinned, api: trust.Pinned | None, scenario: str, say, node: str,
           engine: str | None = None, tunnel: bool | None = None) -> Sandbox:
    if procs.stop(directory):
        say("stopped what an interrupted sandbox left running")
    _tunnel().cleanup(directory)
    try:
        _empty(directory)
        os.chmod(directory, 0o700)
        open(os.path.join(directory, MARKER), "w").close()
    except OSError as e:
        raise BadInput(f"{directory}: {(e.strerror or str(e)).lower()}") from None
    proc, endpoint = _start_etcd(etcd.verify(), directory)
    files = _files(directory, api is not None)
    sb = Sandbox(directory, endpoint, proc.pid, files)
    if api is None:
        _seed(sb)
        _save(sb)  # only a sandbox that is all up is described (and reused): an interrupted one is started afresh
        return sb
    from breakglass.sandbox import controlplane  # noqa: PLC0415

    sb.apiserver = controlplane.start(directory, endpoint, api, scenario, free_port, say, node, engine, tunnel)
    sb.files.update(apiserver_log=sb.apiserver["log"], audit_log=sb.apiserver["audit_log"],
                    kubeconfig=sb.apiserver["kubeconfig"])
    # the file the running apiserver obeys, and only that one
    sb.files["kubeadm_manifest" if node == "kubeadm" else "talos_config"] = sb.apiserver["node_config"]
    _save(sb)
    return sb


def _start_etcd(binary: str, directory: str, attempts: int = 3) -> tuple[subprocess.Popen, str]:
    """The sandbox's etcd, listening: (process, client URL). A free port can be taken by another process between
    free_port() and etcd's bind (seen once in CI, with tests running side by side): etcd then exits with "address
    already in use", and it is started again on new ports."""
    log_path = os.path.join(directory, "etcd.log")
    for attempt in range(attempts):
        cport, pport = free_port(), free_port()
        endpoint = f"http://127.0.0.1:{cport}"
        start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        proc = procs.spawn(directory, "etcd", etcd_command(binary, "sandbox", _data_dir(directory), endpoint, pport),
                           log_path)
        why = wait_listening(proc, cport, 20)
        if why is None:
            # what answered may be the process that took the port, with etcd already gone or about to go
            time.sleep(0.2)
            if proc.poll() is None and not _port_taken(log_path, start):
                return proc, endpoint
            why = "exited"
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if why == "exited" and attempt + 1 < attempts and _port_taken(log_path, start):
            continue
        raise Unreachable(f"sandbox etcd {why}; see {directory}/etcd.log")
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _port_taken(log_path: str, since: int) -> bool:
    with open(log_path, "rb") as f:
        f.seek(since)
        return b"address already in use" in f.read(1 << 20)


def _seed(sb: Sandbox) -> None:
    from breakglass.access.etcd import Etcd, EtcdSettings  # noqa: PLC0415
    from breakglass.webhooks import codec, sources  # noqa: PLC0415

    etcd = Etcd(EtcdSettings(endpoints=(sb.endpoint,)), tuple(sources.etcd_prefixes().values()))
    kinds = {"ValidatingWebhookConfiguration": "validating", "MutatingWebhookConfiguration": "mutating"}
    deadline = time.monotonic() + 15
    try:
        for obj in [KYVERNO, *INNOCENT]:
            key = sources.etcd_key(kinds[obj["kind"]], obj["metadata"]["name"])
            while True:
                try:
                    etcd.put_if_absent(key, codec.encode_value(obj))
                    break
                except Unreachable:  # etcd answers TCP a moment before it serves
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
    finally:
        etcd.close()


def _files(directory: str, with_apiserver: bool) -> dict:
    """The files a rehearsal reads. With an apiserver: none copied, its own log, kubeconfig and the node config it
    obeys are added after it starts (a copied example from another cluster beside them was read as this one's:
    issue 37 §6, §8). etcd alone: the example log and node configs, named ``example-…`` so none passes for a
    running node's."""
    if with_apiserver:
        return {}
    src = {
        "apiserver_log": os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log"),
        "talos_config": os.path.join(ROOT, "examples", "sandbox", "talos-controlplane.yaml"),
        "kubeadm_manifest": os.path.join(ROOT, "examples", "sandbox", "kube-apiserver.yaml"),
    }
    out = {}
    for name, path in src.items():
        if os.path.exists(path):
            dst = os.path.join(directory, "example-" + os.path.basename(path))
            shutil.copy(path, dst)
            out[name] = dst
    return out


def _etcd_backend(sb: Sandbox, start: bool) -> dict:
    """An etcd-only sandbox's "the policy engine is back": Kyverno's Service and an EndpointSlice with a ready
    endpoint written to etcd, as its pods coming back would have the controllers write them (there is no apiserver
    to call the webhook, so its backend's health is what etcd says of its Service); stop removes them again."""
    from breakglass.access.etcd import Etcd, EtcdSettings  # noqa: PLC0415
    from breakglass.webhooks import backend as bk, codec  # noqa: PLC0415

    svc = KYVERNO["webhooks"][0]["clientConfig"]["service"]
    ns, name = svc["namespace"], svc["name"]
    prefixes = bk.etcd_prefixes(ns)
    # the endpoint is on loopback, on a port nothing listens on: the revert guard calls a ready endpoint it can
    # reach, and a rehearsal must send nothing off this machine (a pod address such as 10.244.0.10 may route to a
    # real cluster over a VPN, or be answered by a proxy); refused, it reads "endpoints ready, not called from
    # here", as a pod's address seen from outside the cluster does
    port = free_port()
    objects = [(prefixes[0] + name.encode(), {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port, "protocol": "TCP"}],
                 "selector": {"app.kubernetes.io/component": "admission-controller"}, "type": "ClusterIP"}}),
        (prefixes[2] + f"{name}-sandbox".encode(), {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-sandbox", "namespace": ns, "labels": {bk.SERVICE_NAME_LABEL: name}},
            "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "protocol": "TCP", "port": port}]})]
    etcd = Etcd(EtcdSettings(endpoints=(sb.endpoint,)), prefixes)
    try:
        for key, obj in objects:
            if start:
                etcd.put_if_absent(key, codec.encode_value(obj))
            else:
                kv = etcd.get(key)
                if kv is not None:
                    etcd.delete_if_mod_revision(key, kv.mod_revision)
    finally:
        etcd.close()
    return {"running": start, "url": f"service {ns}/{name} (its endpoints in etcd)"}


def backend(directory: str, start: bool) -> dict:
    """Start or stop the webhook's backend: with an apiserver, the HTTPS server its webhook calls; etcd only, its
    Service's ready endpoint in etcd."""
    from breakglass.sandbox import controlplane  # noqa: PLC0415

    directory = os.path.abspath(directory)
    with lock.held(directory, create=False) as there:
        sb = load(directory) if there else None
        if sb is not None and not sb.apiserver and _running(directory):
            return _etcd_backend(sb, start)
        if sb is None or not sb.apiserver or not _running(directory):
            raise BadInput(f"no sandbox runs in {directory}", hint="breakglass sandbox up")
        owner = sb.apiserver.get("engine")
        if owner:  # the webhooks are the real engine's: its backend is the engine
            from breakglass.sandbox import engines  # noqa: PLC0415

            st = (engines.start_in_sandbox if start else engines.stop_in_sandbox)(directory, sb.apiserver, owner)
            _save(sb)
            return {"running": start, "url": f"{owner}" + (f" (log: {st['log']})" if st.get("log") else ""),
                    "engine": owner, "enforcing": st.get("enforcing"), "scenario": sb.apiserver.get("scenario")}
        if start:
            controlplane.start_backend(directory, sb.apiserver, detached=True)
        else:
            procs.stop(directory, ("backend",))
            sb.apiserver["backend_pid"] = None
        _save(sb)
    return {"running": start, "url": sb.apiserver["webhook_url"]}


def engine(directory: str, name: str, start: bool) -> dict:
    """Start or stop a real policy engine (Kyverno, Gatekeeper: breakglass.sandbox.engines) on the sandbox's
    apiserver, in place of the admit-everything stand-in backend."""
    from breakglass.sandbox import engines  # noqa: PLC0415

    directory = os.path.abspath(directory)
    with lock.held(directory, create=False) as there:
        sb = load(directory) if there else None
        if sb is None or not sb.apiserver or not _running(directory):
            raise BadInput(f"no sandbox with an apiserver runs in {directory}",
                           hint="breakglass sandbox up --apiserver build/kube-apiserver/v1.34.4/kube-apiserver")
        st = (engines.start_in_sandbox if start else engines.stop_in_sandbox)(directory, sb.apiserver, name)
        _save(sb)
    return st


def tunnel_restart(directory: str, down_for: float) -> dict:
    """The konnectivity agent's pod restarts (sandbox.tunnel.restart_agent) while the sandbox runs."""
    directory = os.path.abspath(directory)
    with lock.held(directory, create=False) as there:
        sb = load(directory) if there else None
        if sb is None or not sb.apiserver or not _running(directory):
            raise BadInput(f"no sandbox with an apiserver runs in {directory}",
                           hint="breakglass sandbox up --apiserver build/kube-apiserver/v1.34.4/kube-apiserver "
                                "--scenario fail-open")
        return _tunnel().restart_agent(directory, sb.apiserver, down_for)


def down(directory: str) -> bool:
    """Stop every process the sandbox started (found by their records) and remove its directory."""
    directory = os.path.abspath(directory)
    _refuse_foreign(directory)
    with lock.held(directory, create=False) as there:
        if not there:
            return False
        trust.own_dir(directory)  # another user's records are not believed: no pid is signalled from them
        _refuse_foreign(directory)
        was = procs.stop(directory)
        _tunnel().cleanup(directory)
        shutil.rmtree(directory, ignore_errors=True)
    return was
