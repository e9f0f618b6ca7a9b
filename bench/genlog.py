"""Generate a large, realistic kube-apiserver log: mostly ordinary klog noise, a few hundred
webhook failures, and decoys that mention webhooks without being failures."""

from __future__ import annotations

import random
import sys

NOISE = [
    'I{d} {t}       1 httplog.go:134] "HTTP" verb="GET" URI="/api/v1/namespaces/{ns}/pods?limit=500&resourceVersion=0" '
    'latency="{l}ms" userAgent="kube-controller-manager/v1.34.1 (linux/amd64) kubernetes/abc1234/system:serviceaccount:'
    'kube-system:generic-garbage-collector" audit-ID="{a}" srcIP="10.0.0.{n}:{p}" apf_pl="workload-high" '
    'apf_fs="kube-system-service-accounts" apf_iseats=1 apf_fseats=0 apf_additionalLatency="0s" resp=200',
    'I{d} {t}       1 httplog.go:134] "HTTP" verb="PUT" URI="/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/'
    'leases/node-{n}?timeout=10s" latency="{l}ms" userAgent="kubelet/v1.34.1 (linux/amd64) kubernetes/abc1234" '
    'audit-ID="{a}" srcIP="10.0.1.{n}:{p}" resp=200',
    "I{d} {t}       1 controller.go:615] quota admission added evaluator for: leases.coordination.k8s.io",
    "W{d} {t}       1 reflector.go:561] k8s.io/client-go/informers/factory.go:160: failed to list *v1.Secret: "
    "etcdserver: request timed out",
    'I{d} {t}       1 alloc.go:330] "allocated clusterIPs" service="{ns}/svc-{n}" clusterIPs={{"IPv4":"10.96.{n}.{n}"}}',
    "E{d} {t}       1 status.go:71] apiserver received an error that is not an metav1.Status: "
    '&errors.errorString{{s:"context canceled"}}: context canceled',
    "I{d} {t}       1 cacher.go:847] cacher (pods): {n} objects queued in incoming channel.",
    "I{d} {t}       1 trace.go:236] Trace[{a}]: \"Update\" accept:application/vnd.kubernetes.protobuf,application/json,"
    "audit-id:{a},client:10.0.0.{n},api-group:apps,api-version:v1,name:web-{n},subresource:status,namespace:{ns},"
    "protocol:HTTP/2.0,resource:deployments,scope:resource,url:/apis/apps/v1/namespaces/{ns}/deployments/web-{n}/status,"
    "user-agent:kube-controller-manager/v1.34.1,verb:PUT (24-Feb-2026 15:32:50.000) (total time: {l}ms):",
]
DECOYS = [
    'I{d} {t}       1 httplog.go:134] "HTTP" verb="LIST" URI="/apis/admissionregistration.k8s.io/v1/'
    'validatingwebhookconfigurations?limit=500" latency="{l}ms" userAgent="kyverno/v1.13.0" audit-ID="{a}" resp=200',
    'I{d} {t}       1 admission.go:47] "webhook configuration reloaded" name="kyverno-resource-validating-webhook-cfg"',
]
FAILURES = [
    'W{d} {t}       1 dispatcher.go:217] Failed calling webhook, failing closed validate.kyverno.svc-fail: failed calling '
    'webhook "validate.kyverno.svc-fail": failed to call webhook: Post "https://kyverno-svc.kyverno.svc:443/validate/'
    'fail?timeout=10s": dial tcp 10.96.118.30:443: connect: connection refused',
    'W{d} {t}       1 dispatcher.go:210] Failed calling webhook, failing open mutation.gatekeeper.sh: failed calling '
    'webhook "mutation.gatekeeper.sh": failed to call webhook: Post "https://gatekeeper-webhook-service.gatekeeper-system'
    '.svc:443/v1/mutate?timeout=1s": context deadline exceeded',
    "I{d} {t}       1 default_servicecidr_controller.go:166] Creating default ServiceCIDR with CIDRs: [10.96.0.0/12]",
]
NAMESPACES = ["default", "kube-system", "payments", "web", "monitoring", "ingress-nginx"]


def generate(path: str, size: int, failures: int = 400, seed: int = 7) -> None:
    rnd = random.Random(seed)
    lines_estimate = size // 230
    fail_every = max(1, lines_estimate // failures)
    written = i = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size:
            buf = []
            for _ in range(20000):
                i += 1
                s = i // 3000
                t = "%02d:%02d:%02d.%06d" % (15 + s // 3600 % 9, s // 60 % 60, s % 60, (i * 37) % 1000000)
                if i % fail_every == 0:
                    tmpl = FAILURES[(i // fail_every) % len(FAILURES)]
                elif i % 5003 == 0:
                    tmpl = DECOYS[i % len(DECOYS)]
                else:
                    tmpl = NOISE[rnd.randrange(len(NOISE))]
                buf.append(tmpl.format(d="0224", t=t, ns=NAMESPACES[i % 6], l=1 + i % 900, a="%032x" % i,
                                       n=i % 250, p=40000 + i % 20000))
            chunk = "\n".join(buf) + "\n"
            out.write(chunk)
            written += len(chunk)


if __name__ == "__main__":
    generate(sys.argv[1], int(float(sys.argv[2]) * (1 << 30)) if len(sys.argv) > 2 else 1 << 30)
