"""kube-apiserver health: probe /readyz?verbose and name the checks that still fail.

Shared by every remedy that waits for recovery. No credentials are sent and the serving
certificate is not verified: /readyz reveals only check names, and at 3 a.m. the CA may be
exactly what is broken. An apiserver that answers 401/403 is serving but keeps its readiness
to authenticated callers; that is reported as such.
"""

from __future__ import annotations

import re
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

_CHECK = re.compile(r"^\[(?P<ok>[+-])\](?P<name>[\w./:-]+)\s+(?:ok|failed(?::\s*(?P<why>.*))?)\s*$")


@dataclass
class Readiness:
    url: str
    reachable: bool
    ready: bool | None  # None: serving, but readiness needs credentials
    status: int | None = None
    failing: list[str] = field(default_factory=list)  # e.g. poststarthook/start-kubernetes-service-cidr-controller
    detail: str = ""
    # times a wait saw it go from answering to not answering: a restart (1.33+ exits when a post-start hook has
    # not finished within 60 s, and its kubelet starts it again). At least that many: a short gap can fall
    # between two probes.
    restarts: int = 0

    @property
    def failing_hooks(self) -> list[str]:
        return [c.split("/", 1)[1] for c in self.failing if c.startswith("poststarthook/")]


def parse(body: str) -> tuple[list[str], list[str]]:
    """(passing checks, failing checks) from a verbose /readyz or /livez body."""
    ok, bad = [], []
    for line in body.splitlines():
        m = _CHECK.match(line.strip())
        if m:
            (ok if m["ok"] == "+" else bad).append(m["name"])
    return ok, bad


def url_for(host: str) -> str:
    """https://HOST:6443/readyz?verbose for a node name or IP; URLs and host:port kept as given."""
    if host.startswith(("http://", "https://")):
        base = host.rstrip("/")
    elif re.search(r"^(\[.*\]|[^:]+):\d+$", host):
        base = f"https://{host}"
    elif ":" in host:  # a bare IPv6 address
        base = f"https://[{host}]:6443"
    else:
        base = f"https://{host}:6443"
    return base if base.endswith("/readyz?verbose") else base + "/readyz?verbose"


def probe(url: str, timeout: float = 3.0) -> Readiness:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:  # noqa: S310 - http(s) only
            body = r.read(1 << 20).decode("utf-8", "replace")
            return Readiness(url, True, True, r.status, parse(body)[1], "ready")
    except urllib.error.HTTPError as e:
        body = e.read(1 << 20).decode("utf-8", "replace") if e.fp else ""
        if e.code in (401, 403):
            return Readiness(url, True, None, e.code, [], "serving; readiness is only shown to authenticated callers")
        failing = parse(body)[1]
        return Readiness(url, True, False, e.code, failing,
                         "not ready: " + (", ".join(failing) if failing else body.strip().splitlines()[-1:][0]
                                          if body.strip() else f"HTTP {e.code}"))
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return Readiness(url, False, False, None, [], f"not answering ({reason})")


def waiting_text(states: list[Readiness]) -> str:
    """One line for a progress display: who is not ready yet, and why."""
    waiting = [f"{s.url.split('/readyz')[0]}: {s.detail}" for s in states if s.ready is False]
    return "waiting for /readyz: " + ("; ".join(waiting)[:150] or "ready")


# A restarting kube-apiserver answers 403 to anonymous /readyz until its RBAC caches sync (seen on a real
# 1.34), so a 401/403 counts as "serving behind auth" only once it has lasted this long.
AUTH_SETTLE = 15.0


def from_kubectl(label: str, rc: int, out: str, err: str) -> Readiness:
    """Readiness from `kubectl get --raw '/readyz?verbose'` run with a node's own admin kubeconfig (k3s, RKE2):
    authenticated, so it says ready or names what fails, where an anonymous probe only gets 401."""
    if rc == 0:
        return Readiness(label, True, True, 200, parse(out)[1], "ready")
    # `Error from server (InternalError): an error on the server ("[+]ping ok\n[-]poststarthook/x failed: …")`
    text = err.replace("\\n", "\n")
    failing = parse(text)[1]
    if failing or "Error from server" in err:
        return Readiness(label, True, False, None, failing,
                         "not ready: " + (", ".join(failing) if failing else err.strip().splitlines()[-1][:200]))
    last = err.strip().splitlines()[-1:] or [f"exit {rc}"]
    return Readiness(label, False, False, None, [], f"not answering ({last[0][:200]})")


def wait(urls: list[str], timeout: float, interval: float = 2.0, on_tick=None) -> list[Readiness]:
    """Poll until every apiserver is ready (or has kept its readiness behind auth for AUTH_SETTLE seconds), or
    the timeout passes."""
    return wait_for([lambda u=u: probe(u) for u in urls], timeout, interval, on_tick)


def wait_for(probes: list, timeout: float, interval: float = 2.0, on_tick=None) -> list[Readiness]:
    """``wait`` with any probes (each a function returning a Readiness): a node's own kubectl, say."""
    deadline = time.monotonic() + timeout
    behind_auth_since: dict[str, float] = {}
    answering: dict[int, bool] = {}  # per probe: did the last probe get an answer
    gaps: dict[int, int] = {}
    while True:
        now = time.monotonic()
        states = [p() for p in probes]
        for i, s in enumerate(states):
            if answering.get(i) and not s.reachable:
                gaps[i] = gaps.get(i, 0) + 1
            answering[i] = s.reachable
            s.restarts = gaps.get(i, 0)
        for s in states:
            if s.ready is None:
                behind_auth_since.setdefault(s.url, now)
            else:
                behind_auth_since.pop(s.url, None)
        if on_tick:
            on_tick(states)
        settled = all(s.ready or (s.ready is None and now - behind_auth_since[s.url] >= AUTH_SETTLE)
                      for s in states)
        if settled or now >= deadline:
            return states
        time.sleep(interval)
