"""Benchmark `breakglass audit --all-contexts` over 20 clusters against auditing one.

Each "cluster" is a small HTTPS server on loopback (its own port, its own TLS certificate from the sandbox's
PKI) that answers what a kube-apiserver answers to the audit's reads: /version, the admission configuration
lists (the seed's Kyverno configuration from examples/webhooks/kyverno-risky.yaml, as the API lists it), the
Namespaces; the API versions a 1.34 apiserver does not serve are 404. Every response waits DELAY seconds
first (default 0.1), as a remote apiserver would. Timed, each as a whole command, median of 3:
  audit --context c00                      one cluster
  audit --all-contexts                     twenty, --parallel 16 (the default)
  audit --all-contexts --parallel 20       twenty, all at once
  audit --all-contexts --parallel 1        twenty, one after another (what the parallel run saves)
and the audit's own time (the JUnit report's time, without the CLI's start) of each, as a ratio to one cluster.
Usage: python bench/fleet.py [clusters] [delay-seconds]
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BREAKGLASS, ROOT, run  # noqa: E402
from breakglass.sandbox import pki  # noqa: E402

ADM = "/apis/admissionregistration.k8s.io/v1/"


def recorded() -> dict[str, bytes]:
    """path -> body, as a kube-apiserver 1.34 lists the seed's Kyverno configuration."""
    import yaml  # noqa: PLC0415

    with open(os.path.join(ROOT, "examples", "webhooks", "kyverno-risky.yaml"), encoding="utf-8") as f:
        items = [d for d in yaml.safe_load_all(f) if d]

    def listing(kind: str, objs: list) -> bytes:
        return json.dumps({"kind": kind + "List", "apiVersion": "admissionregistration.k8s.io/v1",
                           "metadata": {"resourceVersion": "1"}, "items": objs}).encode()

    ns = [{"metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}}
          for n in ("default", "kube-system", "kube-public", "kube-node-lease", "kyverno")]
    return {
        "/version": json.dumps({"major": "1", "minor": "34", "gitVersion": "v1.34.4"}).encode(),
        ADM + "validatingwebhookconfigurations": listing(
            "ValidatingWebhookConfiguration", [i for i in items if i["kind"] == "ValidatingWebhookConfiguration"]),
        ADM + "mutatingwebhookconfigurations": listing(
            "MutatingWebhookConfiguration", [i for i in items if i["kind"] == "MutatingWebhookConfiguration"]),
        ADM + "validatingadmissionpolicies": listing("ValidatingAdmissionPolicy", []),
        ADM + "validatingadmissionpolicybindings": listing("ValidatingAdmissionPolicyBinding", []),
        "/api/v1/namespaces": json.dumps({"kind": "NamespaceList", "apiVersion": "v1", "items": ns}).encode(),
    }


def serve(keys, responses: dict[str, bytes], delay: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver: one TLS handshake per client, not per GET

        def do_GET(self):  # noqa: N802 - http.server's name
            time.sleep(delay)
            body = responses.get(self.path.split("?")[0])
            self.send_response(200 if body is not None else 404)
            body = body if body is not None else b'{"kind":"Status","code":404}'
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(keys.serving_cert, keys.serving_key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def kubeconfig(path: str, keys, ports: list[int]) -> None:
    import yaml  # noqa: PLC0415

    names = [f"c{i:02d}" for i in range(len(ports))]
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": names[0],
           "clusters": [{"name": n, "cluster": {"server": f"https://127.0.0.1:{p}", "certificate-authority": keys.ca}}
                        for n, p in zip(names, ports)],
           "users": [{"name": "u", "user": {"token": "bench"}}],
           "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in names]}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f)


def audit_seconds(cmd: list[str], env: dict) -> float:
    """The audit's own time, without the CLI's start: the JUnit report's total time (one cluster takes the fleet
    path too with -o junit, so both are measured the same way)."""
    import xml.etree.ElementTree as ET  # noqa: PLC0415

    p = subprocess.run(cmd + ["-o", "junit"], capture_output=True, env=env, cwd=ROOT)
    return float(ET.fromstring(p.stdout).get("time"))


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
    with tempfile.TemporaryDirectory() as d:
        keys = pki.make(os.path.join(d, "pki"))
        responses = recorded()
        servers = [serve(keys, responses, delay) for _ in range(n)]
        kc = os.path.join(d, "kubeconfig")
        kubeconfig(kc, keys, [s.server_address[1] for s in servers])
        env = {**os.environ, "KUBECONFIG": kc}
        base = BREAKGLASS + ["audit"]
        rows = [("one cluster", base + ["--context", "c00"]),
                (f"{n} clusters, --parallel 16", base + ["--all-contexts"]),
                (f"{n} clusters, --parallel {n}", base + ["--all-contexts", "--parallel", str(n)]),
                (f"{n} clusters, --parallel 1", base + ["--all-contexts", "--parallel", "1"])]
        print(f"{n} clusters on loopback HTTPS, {delay * 1000:g} ms per response; median of 3 whole commands")
        first_wall = first_own = None
        for label, cmd in rows:
            wall, rss, code = run(cmd, 3, env=env)
            own = audit_seconds(cmd, env)
            first_wall, first_own = first_wall or wall, first_own or own
            print(f"  {label:<28} {wall:6.2f} s wall ({wall / first_wall:4.1f}x)   audit itself {own:6.2f} s "
                  f"({own / first_own:4.1f}x)   exit {code}   peak RSS {rss // 1024} MiB")
        for s in servers:
            s.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
