"""Run a real kube-apiserver on loopback: its flags, its files, and a small client to drive it.

One launcher for the rehearsal sandbox and the end-to-end tests, so what users rehearse is what CI tests.
The flags are the ones kubeadm writes into its static-pod manifest, pointed at loopback and at a throwaway
PKI; audit logging is always on (the fail-open story is read from it). Nothing here leaves 127.0.0.1: a
webhook is only ever called at a ``url:`` on loopback, never through a Service's cluster IP.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from breakglass.core.errors import BadInput, Unreachable
from breakglass.sandbox.pki import Pki
from breakglass.core.textfile import write_private

SERVICE_CIDR = "10.96.0.0/12"
ISSUER = "https://kubernetes.default.svc.cluster.local"

# Everything at Metadata level: enough for `breakglass leaks` (annotations and objectRef) and small.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: Metadata
"""


@dataclass(frozen=True)
class Layout:
    """Where a loopback control plane keeps its files, all under one directory."""

    dir: str

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    @property
    def log(self) -> str:
        return self.path("kube-apiserver.log")

    @property
    def audit_log(self) -> str:
        return self.path("audit", "audit.log")

    @property
    def audit_policy(self) -> str:
        return self.path("audit", "policy.yaml")

    @property
    def kubeconfig(self) -> str:
        return self.path("kubeconfig")

    @property
    def manifest(self) -> str:
        return self.path("manifests", "kube-apiserver.yaml")

    @property
    def talos_config(self) -> str:
        """The node's machine config, where the talosctl stand-in of the tests keeps node "controlplane"."""
        return self.path("talos", "nodes", "controlplane.yaml")

    @property
    def pki_dir(self) -> str:
        return self.path("pki")


def kubelet_state(directory: str) -> dict:
    """What the kubelet stand-in last wrote of the apiserver it runs (its pid, restarts); {} before it ran."""
    try:
        with open(Layout(directory).path("kubelet.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def calls_webhooks(directory: str, plugin: str = "ValidatingAdmissionWebhook") -> bool:
    """Whether the sandbox's running apiserver calls validating webhooks (or runs another admission ``plugin``,
    such as ValidatingAdmissionPolicy): not while its command line disables the plugin (the plugin-flag way out),
    when no write through it can show an engine enforcing. True when it cannot tell (no apiserver under the
    kubelet stand-in yet: the first boot runs with the default plugins)."""
    from breakglass.text import admission_flags as af  # noqa: PLC0415

    pid = kubelet_state(directory).get("pid")
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            args = [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[1:] if a]
        disabled = af.split(af.values_of(af.occurrences(args, "kube-apiserver")).get(af.DISABLE))
    except (OSError, TypeError, ValueError, BadInput):
        return True
    return plugin not in disabled


def version(binary: str) -> str:
    """``v1.34.4`` from ``kube-apiserver --version``; a path that is not a kube-apiserver is bad input."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BadInput(f"--apiserver {binary}: cannot run it ({getattr(e, 'strerror', None) or e})") from None
    m = re.match(rb"Kubernetes (v\d+\.\d+\.\d+\S*)", out.stdout.strip())
    if out.returncode != 0 or not m:
        raise BadInput(f"--apiserver {binary}: not a kube-apiserver (`--version` said "
                       f"{out.stdout.strip()[:60].decode('utf-8', 'replace')!r})")
    return m.group(1).decode()


def minor(ver: str) -> int:
    return int(ver.lstrip("v").split(".")[1])


def flags(layout: Layout, pki: Pki, etcd: str, port: int) -> list[str]:
    """The command line kubeadm would write (``--key=value``, sorted as kubeadm sorts them), on loopback.
    One flag kubeadm does not write: on loopback the apiserver's own endpoint reconciler is off. Its
    ``kubernetes`` Endpoints would name 127.0.0.1, which 1.37 refuses at start ("cannot use public IP 127.0.0.1
    with endpoint reconciler": pkg/controlplane/instance.go, ValidateEndpointIP) and older versions write
    anyway; with it off every version starts on the same command line, so a sandbox upgrades 1.35 to 1.37."""
    args = {
        "advertise-address": "127.0.0.1",
        "allow-privileged": "true",
        "audit-log-path": layout.audit_log,
        "audit-policy-file": layout.audit_policy,
        "authorization-mode": "Node,RBAC",
        "bind-address": "127.0.0.1",
        "client-ca-file": pki.ca,
        "enable-admission-plugins": "NodeRestriction",
        "enable-bootstrap-token-auth": "true",
        "endpoint-reconciler-type": "none",
        "etcd-servers": etcd,
        "secure-port": str(port),
        "service-account-issuer": ISSUER,
        "service-account-key-file": pki.sa_pub,
        "service-account-signing-key-file": pki.sa_key,
        "service-cluster-ip-range": SERVICE_CIDR,
        "tls-cert-file": pki.serving_cert,
        "tls-private-key-file": pki.serving_key,
    }
    return [f"--{k}={v}" for k, v in sorted(args.items())]


def write_files(layout: Layout, pki: Pki, url: str) -> None:
    """The audit policy, an admin kubeconfig (client certificate in system:masters) and the directories."""
    for d in (layout.audit_log, layout.manifest):
        os.makedirs(os.path.dirname(d), mode=0o700, exist_ok=True)
    write_private(layout.audit_policy, AUDIT_POLICY.encode())
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sandbox",
        "clusters": [{"name": "sandbox", "cluster": {"server": url, "certificate-authority": pki.ca}}],
        "users": [{"name": "sandbox-admin", "user": {"client-certificate": pki.admin_cert,
                                                     "client-key": pki.admin_key}}],
        "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": "sandbox-admin"}}],
    }
    write_private(layout.kubeconfig, json.dumps(kubeconfig, indent=2).encode())


class Client:
    """Just enough REST to set a scenario up as an operator would (kubectl apply/delete), verified TLS and
    the admin client certificate; breakglass' own kubeapi path goes through the official client instead."""

    def __init__(self, url: str, pki: Pki, timeout: float = 20.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.ctx = ssl.create_default_context(cafile=pki.ca)
        self.ctx.load_cert_chain(pki.admin_cert, pki.admin_key)

    def call(self, method: str, path: str, body: object = None,
             content_type: str = "application/json") -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Accept": "application/json", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ctx) as r:  # noqa: S310
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read() if e.fp else b""
            try:
                return e.code, json.loads(raw or b"{}")
            except ValueError:
                return e.code, {"message": raw.decode("utf-8", "replace")}
        except (urllib.error.URLError, OSError) as e:
            raise Unreachable(f"apiserver {self.url}: {getattr(e, 'reason', e)}") from None

    def must(self, method: str, path: str, body: object = None, ok=(200, 201, 202)) -> dict:
        status, out = self.call(method, path, body)
        if status not in ok:
            raise Unreachable(f"apiserver {method} {path}: HTTP {status}: {out.get('message', out)}")
        return out

    def readyz(self) -> tuple[int | None, str]:
        """(status, verbose body) of /readyz, or (None, why) when nothing answers."""
        req = urllib.request.Request(self.url + "/readyz?verbose")
        try:
            with urllib.request.urlopen(req, timeout=5, context=self.ctx) as r:  # noqa: S310
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, (e.read() if e.fp else b"").decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as e:
            return None, str(getattr(e, "reason", e))


def wait_state(client: Client, want: str, seconds: float, alive=lambda: True) -> tuple[int | None, str]:
    """Poll /readyz until ``want``: "ready" (200), "serving" (any HTTP answer) or "stuck" (answers, not ready,
    and the same post-start hooks still failing after STUCK_AFTER seconds: the ones that finish on their own
    have finished). Returns the last (status, body); raises Unreachable when the process died or the time
    ran out."""
    deadline = time.monotonic() + seconds
    status, body, failing, since = None, "", None, 0.0
    while time.monotonic() < deadline:
        if not alive():
            raise Unreachable("kube-apiserver exited while starting")
        status, body = client.readyz()
        if (want == "ready" and status == 200) or (want == "serving" and status is not None):
            return status, body
        if want == "stuck":
            now_failing = sorted(line for line in body.splitlines() if line.startswith("[-]poststarthook/"))
            if status in (None, 200) or not now_failing or now_failing != failing:
                failing, since = now_failing, time.monotonic()
            elif time.monotonic() - since >= STUCK_AFTER:
                return status, body
        time.sleep(0.25)
    raise Unreachable(f"kube-apiserver not {want} after {seconds:.0f}s (last /readyz: "
                      f"{status or 'no answer'} {body.strip().splitlines()[-1:] or ''})")


STUCK_AFTER = 5.0
