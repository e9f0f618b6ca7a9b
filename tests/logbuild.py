"""Build apiserver log lines from the format strings in the Kubernetes sources.

Each helper mirrors one format of shared reference §1.5, so tests exercise what real
files contain rather than what our own regexes expect.
"""

from __future__ import annotations

import json

SVC_URL = "https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s"


def call_error(hook: str, cause: str, url: str = SVC_URL, era: str = "1.22+") -> str:
    """ErrCallingWebhook.Error() text in each version's shape (reference §1.1 table)."""
    if era == "1.22+":
        return f'failed calling webhook "{hook}": failed to call webhook: Post "{url}": {cause}'
    if era == "1.18-1.21":
        return f'failed calling webhook "{hook}": Post "{url}": {cause}'
    if era == "go<1.14":
        return f'failed calling webhook "{hook}": Post {url}: {cause}'
    if era == "<=1.10":
        return f'failed calling admission webhook "{hook}": Post {url}: {cause}'
    raise ValueError(era)


def fail_closed(hook: str, cause: str, **kw) -> str:
    return f"Failed calling webhook, failing closed {hook}: {call_error(hook, cause, **kw)}"


def fail_open(hook: str, cause: str, **kw) -> str:
    return f"Failed calling webhook, failing open {hook}: {call_error(hook, cause, **kw)}"


def klog(msg: str, level: str = "W", caller: str = "dispatcher.go:217", t: str = "0224 15:32:50.984784") -> str:
    return f"{level}{t}       1 {caller}] {msg}"


def structured(msg: str, err: str, caller: str = "dispatcher.go:213", t: str = "0301 10:00:00.000000") -> str:
    esc = err.replace("\\", "\\\\").replace('"', '\\"')
    return f'E{t} 1 {caller}] "{msg}" err="{esc}" logger="UnhandledError"'


def json_line(msg: str, caller: str = "validating/dispatcher.go:217", ts: float = 1771947170984.784, **extra) -> str:
    return json.dumps({"ts": ts, "caller": caller, "msg": msg, "v": 0, **extra})


def cri(line: str, tag: str = "F", ts: str = "2026-02-24T15:32:50.984784123Z") -> str:
    return f"{ts} stderr {tag} {line}"


def talos(line: str, node: str = "172.20.0.2") -> str:
    return f"{node}: {cri(line)}"


def kubectl_prefix(line: str) -> str:
    return f"[pod/kube-apiserver-cp1/kube-apiserver] {line}"


def journald(line: str) -> str:
    return f"Feb 24 15:32:50 cp1 kube-apiserver[1234]: {line}"


def journald_iso(line: str) -> str:
    return f"2026-02-24T15:32:50+0000 cp1 kube-apiserver[1234]: {line}"


def doubled_quotes(line: str) -> str:
    return line.replace('"', '""')


def escaped_quotes(line: str) -> str:
    return line.replace('"', '\\"')


def curly_quotes(line: str) -> str:
    out, open_ = [], True
    for ch in line:
        if ch == '"':
            out.append("\u201c" if open_ else "\u201d")
            open_ = not open_
        else:
            out.append(ch)
    return "".join(out)


def hard_wrap(line: str, width: int = 80) -> str:
    return "\n".join(line[i:i + width] for i in range(0, len(line), width))


def ticket_quote(text: str) -> str:
    return "\n".join("> " + x for x in text.split("\n"))


WRAPPERS = {
    "klog": lambda m: klog(m),
    "cri": lambda m: cri(klog(m)),
    "talos": lambda m: talos(klog(m)),
    "kubectl-prefix": lambda m: kubectl_prefix(klog(m)),
    "journald": lambda m: journald(klog(m)),
    "journald-iso": lambda m: journald_iso(klog(m)),
    "json": lambda m: json_line(m),
    "json-in-cri": lambda m: cri(json_line(m)),
    "doubled-quotes": lambda m: doubled_quotes(klog(m)),
    "escaped-quotes": lambda m: escaped_quotes(klog(m)),
    "curly-quotes": lambda m: curly_quotes(klog(m)),
    "hard-wrapped": lambda m: hard_wrap(klog(m), 80),
    "quoted-wrapped": lambda m: ticket_quote(hard_wrap(klog(m), 72)),
    "bare": lambda m: m,
}


# utiltrace (k8s.io/utils/trace): Trace.logTrace and writeTraceItemSummary, field by field.
def handler_fields(audit_id: str, url: str, verb: str = "POST", resource: str = "pods") -> str:
    """handlers/trace_util.go traceFields (1.27+): accept, audit-id, client, protocol, resource, scope, url,
    user-agent, verb. The accept and user-agent values hold commas, spaces and parentheses, as real ones do."""
    ua = "kube-controller-manager/v1.34.1 (linux/amd64) kubernetes/8e0d0c4/system:serviceaccount:kube-system:rs"
    return (f"accept:application/vnd.kubernetes.protobuf, */*,audit-id:{audit_id},client:10.0.0.5,"
            f"protocol:HTTP/2.0,resource:{resource},scope:namespace,url:{url},user-agent:{ua},verb:{verb}")


def webhook_fields(cfg: str, hook: str, gvr: str = "/v1, Resource=pods", sub: str = "", op: str = "CREATE",
                   uid: str = "5f0e8a64-2b1c-4c57-9f43-0d7c1e2a9b11") -> str:
    """The dispatchers' "Call validating|mutating webhook" fields; gvr is GroupVersionResource.String()."""
    return f"configuration:{cfg},webhook:{hook},resource:{gvr},subresource:{sub},operation:{op},UID:{uid}"


def trace(n: int, name: str, fields: str, start: str, total_ms: int, nested: list[str] = ()) -> str:
    """The message klog.Info gets: header, nested items, END. The buffer ends in a newline, so klog adds
    none: the trailing newline is left to the caller's line join."""
    out = f'Trace[{n}]: "{name}" {fields} ({start}) (total time: {total_ms}ms):'
    for item in nested:
        out += f"\nTrace[{n}]: {item}"
    secs = f"{total_ms / 1000:.3f}s"
    return out + f"\nTrace[{n}]: [{secs}] [{secs}] END"


def nested_call(kind: str, fields: str, ms: int, tod: str) -> str:
    """A nested trace as Trace.writeItem prints it (no steps over the threshold)."""
    return f'["Call {kind} webhook" {fields} {ms}ms ({tod})]'


def trace_started(n: int, name: str, fields: str, started: str, total: str) -> str:
    """k8s.io/utils before 2020 (Kubernetes ~1.16-1.19): `(started: %v) (total time: %v)` with Go's default
    time.Time and time.Duration formats, e.g. started "2026-11-30 03:10:00.000123456 +0000 UTC m=+1234.5",
    total "10.001234567s"."""
    return f'Trace[{n}]: "{name}" {fields} (started: {started}) (total time: {total}):\nTrace[{n}]: [{total}] [{total}] END'
