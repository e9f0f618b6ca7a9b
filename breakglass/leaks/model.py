"""What a leak report holds, whichever log it was read from, and the summaries over it."""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

from breakglass.core.errors import BadInput
from breakglass.core.safetext import printable
from breakglass.logs.timestamps import parse_iso

WRITES = ("create", "update", "patch")


@dataclass
class Leak:
    time: str
    user: str
    verb: str
    resource: str  # resource[.group][/subresource]; "" when the log does not say
    namespace: str
    name: str
    webhooks: list[str]
    kind: str  # validating | mutating | both
    code: int | None
    audit_id: str
    source: str
    cause: str = ""  # apiserver logs: why the call failed (audit events do not say)


@dataclass
class Window:
    start: str
    end: str
    requests: int
    webhooks: list[str]


@dataclass
class Recheck:
    resource: str
    namespace: str
    name: str
    last_write: str
    webhooks: list[str]
    kubectl: str


@dataclass
class LeakReport:
    basis: str = "audit-log"  # audit-log | apiserver-log
    leaks: list[Leak] = field(default_factory=list)
    by_webhook: dict[str, int] = field(default_factory=dict)
    by_resource: dict[str, int] = field(default_factory=dict)
    by_user: dict[str, int] = field(default_factory=dict)
    by_cause: dict[str, int] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    recheck: list[Recheck] = field(default_factory=list)
    unnamed_writes: int = 0  # admitted writes whose object the log does not name
    traced: int = 0  # apiserver logs: fail-open calls tied to a slow-call trace (resource, operation)
    caveat: str = ""
    lines_skipped: int = 0  # matched the byte search but were not audit events (truncated, other JSON)
    outside_window: int = 0  # leaks the log holds outside --since/--until
    lines_too_deep: int = 0  # JSON nested past jsonarray.MAX_DEPTH: skipped unread (an attacker's request can be)
    sources: list[str] = field(default_factory=list)
    rechecked: list = field(default_factory=list)  # leaks.recheck.Verdict per object asked again (--recheck)

    def to_json(self) -> dict:
        return asdict(self)  # Verdicts are dataclasses too


def parse_time(text: str) -> datetime:
    """RFC 3339 as audit events write it (MicroTime, 'Z'), through the log readers' one parser."""
    epoch = parse_iso(text.strip())
    if epoch is None:
        raise BadInput(f"{text!r}: not an RFC 3339 time (e.g. 2026-11-30T03:10:00Z)")
    return datetime.fromtimestamp(epoch, timezone.utc)


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_bound(text: str, now: datetime | None = None) -> datetime:
    """An RFC 3339 time, or a duration before now as kubectl's --since takes it (90m, 2h, 1h30m)."""
    m = _DURATION.match(text.strip())
    if m and any(m.groups()):
        h, mi, s = (int(x or 0) for x in m.groups())
        return (now or datetime.now(timezone.utc)) - timedelta(hours=h, minutes=mi, seconds=s)
    if re.fullmatch(r"\d{4}-\d\d-\d\d", text.strip()):  # a day: from its start, UTC
        return parse_time(text.strip() + "T00:00:00Z")
    try:
        return parse_time(text)
    except BadInput:
        raise BadInput(f"{text!r}: not an RFC 3339 time (2026-11-30T03:10:00Z) or a duration (90m, 2h)") from None


class TimeRange:
    """--since/--until; a bound excludes whatever has no time."""

    def __init__(self, since: str | None, until: str | None) -> None:
        self.since = parse_bound(since) if since else None
        self.until = parse_bound(until) if until else None

    def __contains__(self, at: datetime | None) -> bool:
        if self.since is None and self.until is None:
            return True
        return at is not None and not ((self.since and at < self.since) or (self.until and at > self.until))


class Rechecks:
    """The distinct objects written while a webhook failed open and not deleted since."""

    def __init__(self) -> None:
        self._items: dict[tuple, tuple[str, set[str]]] = {}  # (resource, ns, name) -> (last write, webhooks)
        self.names: set[bytes] = set()  # for a cheap byte test before parsing a delete

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, leak: Leak) -> bool:
        """Record an admitted write; False when the log does not name its object."""
        if not leak.name:
            return False
        resource = leak.resource.split("/", 1)[0]  # a write to pods/status re-checks the pod
        key = (resource, leak.namespace, leak.name)
        prev = self._items.get(key)
        hooks = prev[1] | set(leak.webhooks) if prev else set(leak.webhooks)
        self._items[key] = (leak.time, hooks)  # the Recheck (and its command) is made once, in sorted()
        self.names.add(leak.name.encode())
        return True

    def deleted(self, resource: str, namespace: str, name: str) -> None:
        self._items.pop((resource, namespace, name), None)

    def sorted(self) -> list[Recheck]:
        return [Recheck(res, ns, name, last, sorted(hooks), kubectl_get(res, ns, name))
                for (res, ns, name), (last, hooks) in sorted(self._items.items())]


def admitted_write(leak: Leak) -> bool:
    return leak.verb in WRITES and (leak.code is None or 200 <= leak.code < 300)


# Characters that end or rewrite a line on a terminal or in a paste: C0 and C1 controls, DEL, Unicode line breaks.
def kubectl_get(resource: str, namespace: str, name: str) -> str:
    """The re-check command, for pasting into a shell: every word from the log shell-quoted, a name that starts
    with '-' after '--'. A name with a character no object name can have (a control, a bidi override or
    isolate, a zero-width mark: the ones that rewrite or reorder what the engineer reads) is a comment with
    those characters escaped, never a command: what would be pasted is not what was shown."""
    if not (resource + namespace + name).isprintable():
        return (f"# not re-checkable, unprintable characters in the name: {printable(resource)} "
                f"'{printable(name)}'" + (f" -n '{printable(namespace)}'" if namespace else ""))
    ns = f" -n {shlex.quote(namespace)}" if namespace else ""
    if name.startswith("-"):
        return f"kubectl get {shlex.quote(resource)}{ns} -o yaml -- {shlex.quote(name)}"
    return f"kubectl get {shlex.quote(resource)} {shlex.quote(name)}{ns} -o yaml"


def finish(rep: LeakReport, rechecks: Rechecks, gap: float) -> LeakReport:
    """Fill in the summaries and the failing-open windows (runs of leaks less than ``gap`` seconds apart)."""
    for leak in rep.leaks:
        for w in leak.webhooks:
            rep.by_webhook[w] = rep.by_webhook.get(w, 0) + 1
        rep.by_resource[leak.resource] = rep.by_resource.get(leak.resource, 0) + 1
        rep.by_user[leak.user] = rep.by_user.get(leak.user, 0) + 1
        if leak.cause:
            rep.by_cause[leak.cause] = rep.by_cause.get(leak.cause, 0) + 1
    for d in (rep.by_webhook, rep.by_resource, rep.by_user, rep.by_cause):
        ordered = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))
        d.clear()
        d.update(ordered)
    timed = []
    for leak in rep.leaks:
        try:
            timed.append((parse_time(leak.time), leak))
        except BadInput:
            continue
    timed.sort(key=lambda x: x[0])
    cur: list = []
    for at, leak in timed:
        if cur and (at - cur[-1][0]).total_seconds() > gap:
            rep.windows.append(_window(cur))
            cur = []
        cur.append((at, leak))
    if cur:
        rep.windows.append(_window(cur))
    rep.recheck = rechecks.sorted()
    return rep


def _window(items: list) -> Window:
    hooks = sorted({w for _, leak in items for w in leak.webhooks})
    return Window(items[0][1].time, items[-1][1].time, len(items), hooks)


CSV_FIELDS = ("time", "user", "verb", "resource", "namespace", "name", "webhooks", "kind", "code", "audit_id",
              "cause")


def csv_cell(value) -> str:
    """A cell a spreadsheet shows as text: one starting with = + - @ (or a tab or CR, which some strip first) is a
    formula there, so it gets a leading single quote (OWASP's CSV injection advice). Numbers stay numbers."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return str(value)
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def to_csv(rep: LeakReport, out) -> None:
    import csv  # noqa: PLC0415

    w = csv.writer(out)
    w.writerow(CSV_FIELDS)
    for leak in rep.leaks:  # getattr, not asdict: asdict deep-copies every field, 40% of a 266 MB scan (profiled)
        w.writerow([csv_cell(";".join(leak.webhooks) if f == "webhooks" else getattr(leak, f)) for f in CSV_FIELDS])


def recheck_yaml(rep: LeakReport) -> str:
    """The objects to re-validate, as a YAML list a controller or policy engine can read."""
    import yaml  # noqa: PLC0415

    items = [{"resource": r.resource, "namespace": r.namespace or None, "name": r.name, "lastWrite": r.last_write,
              "failedOpenWebhooks": r.webhooks} for r in rep.recheck]
    return yaml.safe_dump({"apiVersion": "breakglass/v1alpha1", "kind": "RecheckList", "items": items},
                          sort_keys=False)
