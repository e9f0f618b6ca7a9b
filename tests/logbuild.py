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
