"""Regenerate the example logs in this directory (deterministic).

The logs are constructed from the kube-apiserver format strings (see the shared
reference), not copied from real clusters. Run: python examples/logs/generate.py
"""

from __future__ import annotations

import gzip
import json
import os
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = datetime(2026, 2, 24, 15, 32, 50, 100000, tzinfo=timezone.utc)


def klog(level: str, t: datetime, caller: str, msg: str, pid: int = 1) -> str:
    return f"{level}{t:%m%d %H:%M:%S.%f} {pid:>7} {caller}] {msg}"


def cri(t: datetime, line: str, tag: str = "F") -> str:
    return f"{t:%Y-%m-%dT%H:%M:%S.%f}123Z stderr {tag} {line}"


def noise(t: datetime, i: int) -> str:
    kinds = [
        ("I", "httplog.go:134", f'"HTTP" verb="GET" URI="/api/v1/namespaces/kube-system/pods?limit=500" '
                                f'latency="{1 + i % 7}.2ms" userAgent="kubelet/v1.34.1" resp=200'),
        ("I", "controller.go:615", "quota admission added evaluator for: leases.coordination.k8s.io"),
        ("W", "reflector.go:561", "k8s.io/client-go/informers/factory.go:160: failed to list *v1.Secret: "
                                  "the server is currently unable to handle the request"),
        ("I", "cacher.go:847", f"cacher (pods): {i % 50} objects queued in incoming channel."),
    ]
    lvl, caller, msg = kinds[i % len(kinds)]
    return klog(lvl, t, caller, msg)


KYVERNO_FAIL = ('Failed calling webhook, failing closed validate.kyverno.svc-fail: failed calling webhook '
                '"validate.kyverno.svc-fail": failed to call webhook: Post '
                '"https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s": dial tcp 10.96.118.30:443: '
                'connect: connection refused')


def talos_servicecidr() -> list[str]:
    """Talos 1.10 node after the 1.32 -> 1.34 upgrade: `talosctl logs -k` output, node-prefixed CRI."""
    node = "172.20.0.2"
    out = []
    t = T0
    out.append(klog("I", t, "options.go:238", "external host was not specified, using 172.20.0.2"))
    out.append(klog("I", t, "server.go:175", "Version: v1.34.1"))
    out.append(klog("I", t + timedelta(milliseconds=5), "plugins.go:157",
                    "Loaded 13 mutating admission controller(s) successfully in the following order: "
                    "NamespaceLifecycle,LimitRanger,ServiceAccount,NodeRestriction,TaintNodesByCondition,Priority,"
                    "DefaultTolerationSeconds,DefaultStorageClass,StorageObjectInUseProtection,RuntimeClass,"
                    "DefaultIngressClass,MutatingAdmissionPolicy,MutatingAdmissionWebhook."))
    out.append(klog("I", t + timedelta(seconds=1), "default_servicecidr_controller.go:110",
                    "Starting kubernetes-service-cidr-controller"))
    t = t + timedelta(seconds=1, milliseconds=200)
    for i in range(40):
        out.append(klog("I", t, "default_servicecidr_controller.go:166",
                        "Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]"))
        out.append(klog("W", t + timedelta(milliseconds=5), "dispatcher.go:217", KYVERNO_FAIL))
        out.append(klog("I", t + timedelta(milliseconds=6), "event.go:389",
                        '"Event occurred" object="kubernetes" fieldPath="" kind="ServiceCIDR" '
                        'apiVersion="networking.k8s.io/v1" type="Warning" reason="KubernetesDefaultServiceCIDRError" '
                        'message="The default ServiceCIDR can not be created"'))
        out.append(noise(t + timedelta(milliseconds=40), i))
        if i % 10 == 9:
            out.append(klog("I", t + timedelta(milliseconds=50), "healthz.go:280",
                            "poststarthook/start-kubernetes-service-cidr-controller,"
                            "poststarthook/start-service-ip-repair-controllers check failed: readyz"))
            out.append("[+]ping ok")
            out.append("[-]poststarthook/start-kubernetes-service-cidr-controller failed: reason withheld")
        t += timedelta(milliseconds=100) if i < 30 else timedelta(seconds=10)
    return [f"{node}: {cri(T0 + timedelta(milliseconds=i), line)}" for i, line in enumerate(out)]


def kubeadm_priorityclass() -> list[str]:
    """kubeadm 1.29 node: Gatekeeper times out on PriorityClass creation, the apiserver exits (crash loop)."""
    out = []
    t = T0
    err = ('unable to add default system priority classes: Internal error occurred: failed calling webhook '
           '"validation.gatekeeper.sh": failed to call webhook: Post '
           '"https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=3s": '
           'context deadline exceeded')
    for restart in range(3):
        out.append(klog("I", t, "server.go:151", "Version: v1.29.4"))
        for i in range(6):
            out.append(noise(t + timedelta(milliseconds=10 * i), i + restart))
        t += timedelta(seconds=3)
        out.append(klog("W", t, "dispatcher.go:205",
                        'Failed calling webhook, failing closed validation.gatekeeper.sh: failed calling webhook '
                        '"validation.gatekeeper.sh": failed to call webhook: Post '
                        '"https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=3s": '
                        'context deadline exceeded'))
        out.append(klog("F", t + timedelta(milliseconds=2), "hooks.go:203",
                        f'PostStartHook "scheduling/bootstrap-system-priority-classes" failed: {err}'))
        t += timedelta(seconds=20 * (restart + 1))
    return out


def gke_fail_open() -> list[str]:
    """GKE-style JSON logging: Gatekeeper (failurePolicy Ignore) during a konnectivity-agent rollout."""
    out = []
    ts = T0.timestamp() * 1000
    for i in range(30):
        cause = "Address is not allowed" if i % 3 else "EOF"
        url = "https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=3s"
        out.append(json.dumps({"ts": ts + i * 250.5, "caller": "validating/dispatcher.go:205",
                               "msg": f'Failed calling webhook, failing open validation.gatekeeper.sh: failed calling '
                                      f'webhook "validation.gatekeeper.sh": failed to call webhook: Post "{url}": {cause}',
                               "v": 0}))
        out.append(json.dumps({"ts": ts + i * 250.5 + 0.2, "caller": "validating/dispatcher.go:213",
                               "msg": "Unhandled Error",
                               "err": f'failed calling webhook "validation.gatekeeper.sh": failed to call webhook: '
                                      f'Post "{url}": {cause}', "logger": "UnhandledError"}))
        out.append(json.dumps({"ts": ts + i * 250.5 + 9, "caller": "httplog/httplog.go:134", "msg": "HTTP",
                               "verb": "POST", "URI": "/api/v1/namespaces/payments/pods", "resp": 201, "v": 3}))
    return out


def pods_dir() -> dict[str, list[str]]:
    """/var/log/pods copy: cert-manager's CA rotated, every webhook call fails TLS (fail closed, degraded)."""
    base = "pods/kube-system_kube-apiserver-cp1_9f1c2e4b7a1d4c3e8f0a6b5d2c1e0f9a/kube-apiserver"
    x509 = ('Failed calling webhook, failing closed webhook.cert-manager.io: failed calling webhook '
            '"webhook.cert-manager.io": failed to call webhook: Post '
            '"https://cert-manager-webhook.cert-manager.svc:443/validate?timeout=30s": tls: failed to verify '
            'certificate: x509: certificate signed by unknown authority (possibly because of "crypto/rsa: '
            'verification error" while trying to verify candidate authority certificate "cert-manager-webhook-ca")')
    rotated, live = [], []
    t = T0
    for i in range(12):
        rotated.append(cri(t, noise(t, i)))
        rotated.append(cri(t, klog("W", t, "dispatcher.go:225", x509)))
        t += timedelta(seconds=30)
    for i in range(8):
        line = klog("W", t, "dispatcher.go:225", x509)
        if i == 3:  # kubelet splits long lines into partial (P) pieces
            live.append(cri(t, line[:150], "P"))
            live.append(cri(t, line[150:], "F"))
        else:
            live.append(cri(t, line))
        live.append(cri(t, noise(t, i)))
        t += timedelta(seconds=30)
    return {f"{base}/0.log.20260224-153250.gz": rotated, f"{base}/0.log": live}


def ticket_paste() -> str:
    """What lands in an incident ticket: kubectl output wrapped at 80 columns, curly and escaped quotes."""
    msg = ('E0224 15:40:12.000000       1 controller.go:145] unable to create required kubernetes system '
           'namespace kube-system: admission webhook \u201cvalidate.kyverno.svc-fail\u201d denied the request: '
           'failed to get namespace: Get \u201chttps://10.96.0.1:443/api/v1/namespaces/kube-system\u201d: dial tcp '
           '10.96.0.1:443: connect: connection refused')
    wrapped = [msg[i:i + 80] for i in range(0, len(msg), 80)]
    lines = [
        "Incident 4711 - control plane down after upgrade",
        "",
        "Saw this in the apiserver log on cp-2:",
        "",
        *wrapped,
        "",
        "and kubectl says:",
        "",
        '> Error from server (InternalError): error when creating "ns.yaml": Internal error occurred: failed '
        'calling webhook \\"validate.kyverno.svc-fail\\": failed to call webhook: Post '
        '\\"https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s\\": dial tcp 10.96.118.30:443: '
        'connect: connection refused',
        "",
        "Any ideas?",
    ]
    return "\n".join(lines) + "\n"


def k3s_journald() -> list[str]:
    """k3s (apiserver in-process) via `journalctl -u k3s`: Istio injector times out, the controller-manager loses its lease."""
    out = []
    t = T0
    for i in range(20):
        stamp = f"{t:%b %d %H:%M:%S}"
        inner = klog("W", t, "dispatcher.go:225",
                     'Failed calling webhook, failing closed namespace.sidecar-injector.istio.io: failed calling webhook '
                     '"namespace.sidecar-injector.istio.io": failed to call webhook: Post '
                     '"https://istiod.istio-system.svc:443/inject?timeout=10s": context deadline exceeded', pid=812)
        out.append(f"{stamp} k3s-server k3s[812]: {inner}")
        if i == 12:
            out.append(f"{stamp} k3s-server k3s[812]: " + klog(
                "E", t, "leaderelection.go:340",
                "Failed to update lock optimitically: Internal error occurred: failed calling webhook "
                '"namespace.sidecar-injector.istio.io": context deadline exceeded, falling back to slow path', pid=812))
            out.append(f"{stamp} k3s-server k3s[812]: " + klog(
                "E", t, "leaderelection.go:436",
                "error retrieving resource lock kube-system/kube-controller-manager: context deadline exceeded", pid=812))
            out.append(f"{stamp} k3s-server k3s[812]: " + klog(
                "I", t, "leaderelection.go:297", "failed to renew lease kube-system/kube-controller-manager: "
                "timed out waiting for the condition", pid=812))
            out.append(f"{stamp} k3s-server k3s[812]: " + klog(
                "E", t, "controllermanager.go:337", '"leaderelection lost"', pid=812))
        t += timedelta(seconds=11)
    return out


def ipaddress_not_ready() -> list[str]:
    """1.33 structured klog: admission informers not synced, the IP repair hook cannot finish (k8s#136288 shape)."""
    out = []
    t = T0
    for i in range(5):
        out.append(klog("E", t, "repairip.go:523",
                        f'"Unhandled Error" err="the ClusterIP [IPv4]: 10.211.95.{180 + i} for Service default/svc-{i} '
                        f'is not allocated; repairing: ipaddresses.networking.k8s.io \\"10.211.95.{180 + i}\\" is '
                        f'forbidden: not yet ready to handle request" logger="UnhandledError"'))
        t += timedelta(milliseconds=300)
    out.append(klog("F", t, "hooks.go:203", 'PostStartHook "start-service-ip-repair-controllers" failed: unable to '
                                            'perform initial IP and Port allocation check'))
    return out


def healthy() -> list[str]:
    t = T0
    return [noise(t + timedelta(milliseconds=37 * i), i) for i in range(400)]


def main() -> None:
    def write(name: str, lines: list[str] | str) -> None:
        path = os.path.join(HERE, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        text = lines if isinstance(lines, str) else "\n".join(lines) + "\n"
        if name.endswith(".gz"):
            with gzip.GzipFile(path, "wb", mtime=0) as f:
                f.write(text.encode())
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

    write("talos-servicecidr-kyverno.log", talos_servicecidr())
    write("kubeadm-priorityclass-gatekeeper.log", kubeadm_priorityclass())
    write("gke-gatekeeper-fail-open.jsonl", gke_fail_open())
    for name, lines in pods_dir().items():
        write(name, lines)
    write("ticket-paste.txt", ticket_paste())
    write("k3s-journald-istio.log", k3s_journald())
    write("ipaddress-not-ready.log", ipaddress_not_ready())
    write("healthy-apiserver.log", healthy())


if __name__ == "__main__":
    main()
