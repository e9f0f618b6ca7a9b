"""Bring a real kube-apiserver into a scenario's state, and take it down again.

The order is the one a real cluster goes through: the apiserver boots once on the sandbox's etcd so every
bootstrap object exists; the operator installs the webhook; its backend goes down; for the deadlock, the
objects a 1.32 cluster never had are removed; then the node's own machinery (the kubelet stand-in reading a
kubeadm static-pod manifest) restarts the apiserver, and the scenario's end state is waited for.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import yaml

from breakglass.core.errors import BadInput, BreakglassError, Unreachable
from breakglass.sandbox import apiserver, pki as pkimod, procs, scenarios, trust, tunnel as tunnelmod
from breakglass.sandbox.apiserver import Client, Layout, kubelet_state
from breakglass.sandbox.kubelet import image_tag
from breakglass.core.textfile import write_private


def kubeadm_manifest(command: list[str], ver: str, port: int) -> str:
    """A static-pod manifest in the shape ``kubeadm init`` writes, carrying the sandbox's command line."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"annotations": {"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint":
                                     f"127.0.0.1:{port}"},
                     "creationTimestamp": None, "labels": {"component": "kube-apiserver", "tier": "control-plane"},
                     "name": "kube-apiserver", "namespace": "kube-system"},
        "spec": {"containers": [{
            "command": ["kube-apiserver", *command], "image": f"registry.k8s.io/kube-apiserver:{ver}",
            "imagePullPolicy": "IfNotPresent",
            "livenessProbe": {"failureThreshold": 8, "httpGet": {"host": "127.0.0.1", "path": "/livez", "port": port,
                                                                 "scheme": "HTTPS"}},
            "name": "kube-apiserver", "resources": {"requests": {"cpu": "250m"}}}],
            "hostNetwork": True, "priority": 2000001000, "priorityClassName": "system-node-critical"},
        "status": {},
    }
    return yaml.safe_dump(pod, sort_keys=False, default_flow_style=False)


def _remove_upgrade_missing(etcd_endpoint: str) -> list[str]:
    from breakglass.access.etcd import Etcd, EtcdSettings  # noqa: PLC0415

    db = Etcd(EtcdSettings(endpoints=(etcd_endpoint,)), scenarios.UPGRADE_MISSING_PREFIXES)
    removed = []
    try:
        for prefix in scenarios.UPGRADE_MISSING_PREFIXES:
            for kv in list(db.range_prefix(prefix, keys_only=True)):
                if db.delete_if_mod_revision(kv.key, kv.mod_revision):
                    removed.append(kv.key.decode())
    finally:
        db.close()
    return removed


def start(directory: str, etcd_endpoint: str, binary: trust.Pinned, scenario: str, free_port, say=lambda _m: None,
          node: str = "kubeadm", engine: str | None = None, tunnel: bool | None = None) -> dict:
    """Start the control plane of ``scenario`` under ``directory``; returns what sandbox.json records. The
    binary was pinned by ``up``: every start of it, here and by the kubelet stand-in, checks it is unchanged.
    With ``engine`` the scenario's webhooks are that real engine's own (sandbox.engines), not the stand-in's.
    ``tunnel``: webhook calls through a real konnectivity server and agent (sandbox.tunnel); None: for the
    fail-open scenario wherever konnectivity is built."""
    ver = apiserver.version(binary.verify())
    layout = Layout(directory)
    keys = pkimod.make(layout.pki_dir)
    port, backend_port = free_port(), free_port()
    url = f"https://127.0.0.1:{port}"
    apiserver.write_files(layout, keys, url)
    command = apiserver.flags(layout, keys, etcd_endpoint, port)
    client = Client(url, keys)
    info = {"url": url, "kubeconfig": layout.kubeconfig, "log": layout.log, "audit_log": layout.audit_log,
            "version": ver, "binary": binary.path, "scenario": scenario, "node": node, "manifest": layout.manifest,
            "backend_port": backend_port, "webhook_url": f"https://127.0.0.1:{backend_port}",
            "kubelet_pid": None, "backend_pid": None, "engine": engine}
    if tunnel or (tunnel is None and scenario == "fail-open" and tunnelmod.available()):
        say("starting a konnectivity server and agent: the webhook calls go through them, as on GKE")
        command = sorted([*command, *tunnelmod.start(directory, info, keys)])  # kubeadm sorts its flags

    say(f"booting kube-apiserver {ver} once so the bootstrap objects exist")
    first = procs.spawn(directory, "apiserver-boot", [binary.verify(), *command], layout.log)
    try:
        try:
            apiserver.wait_state(client, "ready", 120, alive=lambda: first.poll() is None)
        except Unreachable as e:
            raise Unreachable(f"{e}; its log: {layout.log}") from None
        _settle(client, ver)
        if engine:
            _install_engine(directory, info, engine, scenario, client, say)
        elif scenario in scenarios.POLICIES:
            kind = "MutatingAdmissionPolicy" if scenario.startswith("mutating") else "ValidatingAdmissionPolicy"
            say(f"installing a fail-closed {kind} and binding as their operator would")
            for path, obj in scenarios.policy_objects(scenario):
                client.must("POST", path, obj)
        else:
            say(f"installing the {scenario} webhook as its operator would")
            for obj in scenarios.webhooks(scenario, info["webhook_url"], keys.ca):
                client.must("POST", scenarios.VWC_PATH, obj)
            if scenario == "fail-open":
                say("sending requests while the webhook's backend is down (they are admitted: it fails open)")
                for path, obj in scenarios.leaked_requests():
                    client.must("POST", path, obj)
    finally:
        with procs.interrupts_deferred():
            _stop_first_boot(first)
    if scenario in scenarios.UPGRADES:
        removed = _remove_upgrade_missing(etcd_endpoint)
        info["removed_keys"] = removed
        say(f"removed what a cluster upgraded from 1.32 lacks: {', '.join(removed) or 'nothing'}")
    if scenario == "healthy" and not engine:
        start_backend(directory, info)

    node_args = _node_config(layout, node, command, ver, port, info, say)
    # the images the stand-in may "pull" go on its command line, pinned: never a path read from a file that
    # someone could have written since
    pulls = [a for tag, pin in images(binary, ver).items() for a in ("--image", tag, pin.path, pin.sha256)]
    kubelet = procs.spawn(directory, "kubelet", [*procs.python_module("breakglass.sandbox.kubelet"), "--dir",
                                                 directory, *node_args, *pulls, "--log", layout.log,
                                                 "--state", layout.path("kubelet.json")],
                          layout.path("kubelet.log"))
    info["kubelet_pid"] = kubelet.pid
    say(f"restarting kube-apiserver from the {'static-pod manifest' if node == 'kubeadm' else 'machine config'} "
        f"({'kubelet' if node == 'kubeadm' else 'Talos'} stand-in)")
    want = "stuck" if scenario in scenarios.UPGRADES and apiserver.minor(ver) >= 33 else "ready"
    try:
        apiserver.wait_state(client, want, 120, alive=lambda: kubelet.poll() is None)
    except BreakglassError as e:
        stop(directory, info)
        raise Unreachable(f"{e}; see {layout.log} and {layout.path('kubelet.json')}") from None
    return info


def serves_mutating_policies(binary: str) -> None:
    """Refuse (one line, before anything is made) a kube-apiserver that does not serve MutatingAdmissionPolicy by
    default, for the mutating-policy-deadlock scenario."""
    ver = apiserver.version(binary)
    if apiserver.minor(ver) < scenarios.MUTATING_POLICY_SINCE:
        since = scenarios.MUTATING_POLICY_SINCE
        raise BadInput(f"kube-apiserver {ver} does not serve MutatingAdmissionPolicy by default (1.{since} and newer "
                       f"do)", hint="--apiserver build/kube-apiserver/v1.36.3/kube-apiserver")


def _install_engine(directory: str, info: dict, engine: str, scenario: str, client: Client, say) -> None:
    """The real engine installed from its own manifests and started on the first boot; it registers its webhooks
    (Kyverno its own, for the seed's policy on every kind). Outside ``healthy`` it then goes down, its webhooks
    left registered, as when its pods are gone; the fail-open scenario's requests are sent after that."""
    from breakglass.sandbox import engines  # noqa: PLC0415

    say(f"installing {engine} from its own manifests, as its operator would, and starting it")
    engines.start_in_sandbox(directory, info, engine, client)
    if scenario == "healthy":
        return
    say(f"{engine} goes down (its webhooks stay registered, as when its pods are gone)")
    engines.stop_in_sandbox(directory, info, engine)
    if scenario == "fail-open":
        say("sending requests while Gatekeeper is down (they are admitted: its webhook fails open)")
        for path, obj in engines.GATEKEEPER_LEAKS:
            client.must("POST", path, obj)


def _stop_first_boot(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, as the kubelet ends a pod (terminationGracePeriodSeconds 30):
    a loaded machine can keep kube-apiserver's graceful shutdown going longer, and what it wrote is in etcd."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def images(binary: trust.Pinned, ver: str) -> dict[str, trust.Pinned]:
    """Image tags the kubelet stand-in can "pull": the given binary's version, and every version built beside
    it in `make kube-apiserver`'s layout (build/kube-apiserver/v<X.Y.Z>/kube-apiserver), for upgrades; each
    pinned now (one another user could change is left out)."""
    out = {ver: binary}
    parent = os.path.dirname(os.path.dirname(binary.path))
    if os.path.basename(os.path.dirname(binary.path)) == ver:
        for name in sorted(os.listdir(parent)):
            candidate = os.path.join(parent, name, "kube-apiserver")
            if name.startswith("v") and name not in out and os.access(candidate, os.X_OK):
                try:
                    out[name] = trust.pin(candidate)
                except BadInput:
                    continue
    return out


def _node_config(layout: Layout, node: str, command: list[str], ver: str, port: int, info: dict, say) -> list[str]:
    """Write what the node's own machinery reads (a kubeadm manifest, or a Talos machine config generated by
    Talos' code) and return the kubelet stand-in's arguments for it."""
    if node == "kubeadm":
        write_private(layout.manifest, kubeadm_manifest(command, ver, port).encode())
        info["node_config"] = layout.manifest
        return ["--manifest", layout.manifest]
    machinery, talos_ver = _talos_config(layout, ver, info["url"], say)
    base = layout.path("talos", "apiserver-base-args.json")
    write_private(base, json.dumps(command, indent=2).encode())
    info.update(node_config=layout.talos_config, talos_version=talos_ver, talos_machinery=machinery.path)
    return ["--talos-config", layout.talos_config, "--talos-base", base, "--talos-machinery", machinery.path,
            machinery.sha256]


def _talos_config(layout: Layout, ver: str, url: str, say) -> tuple[trust.Pinned, str]:
    """A control-plane machine config as `talosctl gen config` writes it, from the newest Talos machinery
    built here that accepts this Kubernetes version; the node's version and platform beside it (the files the
    talosctl stand-in in tests/ reads)."""
    from breakglass import sandbox  # noqa: PLC0415

    builds = sandbox.built("talos-machinery")[::-1]
    if not builds:
        raise BadInput(sandbox.talos_machinery_missing())
    gen_dir = layout.path("talos", "gen")
    os.makedirs(gen_dir, mode=0o700, exist_ok=True)
    why = ""
    for built in builds:
        machinery = trust.pin(built)
        talos_ver = os.path.basename(os.path.dirname(machinery.path)).lstrip("v")
        gen = subprocess.run([machinery.verify(), "gen", "--cluster-name", "sandbox", "--endpoint", url,
                              "--kubernetes-version", ver.lstrip("v"), "--output-dir", gen_dir],
                             capture_output=True, text=True, timeout=120, cwd=layout.dir)
        cfg = os.path.join(gen_dir, "controlplane.yaml")
        check = gen if gen.returncode else subprocess.run(
            [machinery.verify(), "validate", "--config", cfg, "--mode", "container"], capture_output=True, text=True,
            timeout=120, cwd=layout.dir)
        if check.returncode == 0:
            os.makedirs(os.path.dirname(layout.talos_config), mode=0o700, exist_ok=True)
            with open(cfg, "rb") as f:
                write_private(layout.talos_config, f.read())
            stem = layout.talos_config[:-len(".yaml")]
            write_private(stem + ".version", talos_ver.encode())
            write_private(stem + ".platform", b"container")
            say(f"generated the node's machine config with Talos {talos_ver}'s own generator")
            return machinery, talos_ver
        why = (check.stderr or check.stdout).strip().splitlines()[-1:] or [""]
        why = why[0]
    raise BadInput(f"no Talos machinery built here accepts Kubernetes {ver} ({why})")


def _settle(client: Client, ver: str, seconds: float = 60) -> None:
    """Ready is not done: the bootstrap controller creates the default/kubernetes Service (and, from 1.33, its
    IPAddress) only after /readyz is 200. Wait for them, so the webhook the scenario installs next does not see
    the apiserver's own first writes (a fail-open scenario would otherwise count them as leaks, sometimes)."""
    paths = ["/api/v1/namespaces/default/services/kubernetes"]
    if apiserver.minor(ver) >= 33:
        paths += ["/apis/networking.k8s.io/v1/servicecidrs/kubernetes", "/apis/networking.k8s.io/v1/ipaddresses"]
    deadline = time.monotonic() + seconds
    for path in paths:
        while True:
            status, body = client.call("GET", path)
            if status == 200 and (not path.endswith("/ipaddresses") or body.get("items")):
                break
            if time.monotonic() > deadline:
                raise Unreachable(f"kube-apiserver {ver} did not finish its bootstrap ({path}: HTTP {status})")
            time.sleep(0.2)


def start_backend(directory: str, info: dict, detached: bool = False) -> int:
    """Start the webhook's backend (it admits everything): the operator's webhook is healthy again."""
    layout = Layout(directory)
    running = procs.find(directory, "backend")
    if running:
        return running.pid
    keys = pkimod.load(layout.pki_dir)
    proc = procs.spawn(directory, "backend", [*procs.python_module("breakglass.sandbox.backend"), "--port",
                                              str(info["backend_port"]), "--cert", keys.webhook_cert, "--key",
                                              keys.webhook_key], layout.path("backend.log"), detached=detached)
    from breakglass.sandbox import wait_listening  # noqa: PLC0415

    if wait_listening(proc, int(info["backend_port"]), 15):
        raise Unreachable(f"the webhook backend did not start; see {layout.path('backend.log')}")
    info["backend_pid"] = proc.pid
    return proc.pid


def stop(directory: str, info: dict) -> bool:
    """Stop the kubelet stand-in (which stops the apiserver), any apiserver it left, and the backend."""
    was = procs.stop(directory, ("kubelet", "apiserver", "apiserver-boot"))
    procs.stop(directory, ("backend",))
    info["kubelet_pid"] = info["backend_pid"] = None
    return was


def readiness(info: dict, directory: str) -> dict:
    """Whether the apiserver is ready now, and which checks fail."""
    from breakglass.access.readyz import parse  # noqa: PLC0415

    status, body = Client(info["url"], pkimod.load(Layout(directory).pki_dir), timeout=5).readyz()
    failing = parse(body)[1] if status is not None else []
    kubelet = kubelet_state(directory)
    out = {"ready": status == 200, "status": status, "failing": failing,
           "pid": kubelet.get("pid"), "restarts": kubelet.get("restarts", 0)}
    running = image_tag(kubelet["image"]) if kubelet.get("image") else None
    if running and running != info.get("version"):  # the node configuration's image moved on: an upgrade
        out["version"] = running
    return out
