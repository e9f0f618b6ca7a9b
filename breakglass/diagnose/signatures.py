"""The signature catalog: what apiserver (and controller-manager/scheduler) lines mean.

Every pattern is built from the format strings in the Kubernetes sources (shared
reference §1-§3), never from a single incident, and tolerates the ways copies differ:
quoting is normalised before matching (formats.normalise) and ``\\s*`` stands between
words that a wrapped paste may have split. File:line callers change between versions
and are never matched.

``ANCHORS`` are the literals the scanner looks for; every signature's text contains at
least one of them (a test checks this), so nothing a signature could match is skipped.
"""

from __future__ import annotations

import re

from breakglass.heal import bootstrap

from breakglass.webhooks import vendors
from breakglass.diagnose import causes
from breakglass.diagnose.model import Event
from breakglass.logs.record import LogRecord

ANCHORS: tuple[bytes, ...] = (
    b"ebhook",  # Webhook / webhook: every webhook call, denial, fail-open line
    # a webhook Service's URL, the rest of a call's error whose name a paste cut off (NAMELESS_CALL)
    b".svc:", b".svc/",
    b"AdmissionPolicy", b"denied request",
    b"PostStartHook", b"poststarthook",
    b"not yet ready to handle",
    b"ServiceCIDR",
    b"system namespace", b"system Namespace",
    b"PriorityClass", b"priority classes",
    b"unable to initialize clusterroles", b"unable to initialize roles", b"unable to reconcile ",
    b"APF bootstrap",
    b"kubernetes service",
    b"IP and Port allocation", b"failed to allocate a serviceIP",
    b"client CA configmap",
    # "ailed to update lease": kubelet's and the apiserver's `failed to update lease` and the structured
    # `"Failed to update lease"` with one literal (the same count of anchors as before).
    b"ensure lease exists", b"ailed to update lease", b"renew lease",
    b"election lost", b"stopped leading", b"resource lock", b"leader election record", b"to update lock",
    # an upgrade's or an installer's word that the apiserver did not come back (kubeadm's static Pod hash wait, a
    # managed control plane's `component "kube-apiserver" … is unhealthy`)
    b"did not change", b"apiserver unhealthy", b"apiserver is not healthy", b"apiserver did not become",
    b"is unhealthy",
    # a post-start hook's controller giving up (`Shutting down ipallocator-repair-controller`, 1.33+)
    b"Shutting down",
    # the apiserver timing a request out itself (what starves a lease as well as a slow webhook does). Not etcd's
    # own words: `etcdserver: request timed out` fills noisy logs (one line in eight of bench/genlog.py's), and a
    # lease write failing on etcd says so in its own, anchored, line
    b"in the time allotted",
    # kube-apiserver's first line of a start (cmd/kube-apiserver/app/server.go: `Version: v1.37.2`)
    b"Version: v",
)

# A paste is wrapped, and a wrap can cut a phrase anchor at one of its spaces (`Failed to update` / `lock: Put …`):
# pastes (engine.PASTE_MAX and smaller) are searched for each phrase's longer words as well. The gate (which drops
# whitespace, newlines included) and the signatures decide as for any candidate; only what is looked at grows,
# and on a paste that is a few hundred lines.
PASTE_ANCHORS: tuple[bytes, ...] = ANCHORS + tuple(sorted(
    {w for a in ANCHORS if b" " in a for w in a.split() if len(w) >= 5} - set(ANCHORS)))

# A second, cheaper gate on the bytes of each candidate: lines that merely mention a webhook (request logs for
# /validatingwebhookconfigurations, say) stop here. Every signature's text holds one of these phrases, in any case,
# with its words split by whitespace or run together as a wrapped paste leaves them (the signatures' ``\s*``).
GATE_PHRASES: tuple[str, ...] = (
    "failed calling", "failing open", "failing closed", "denied request", "denied the request", "rejected by webhook",
    "calling webhook", "poststarthook", "not yet ready", "servicecidr", "system namespace", "priorityclass",
    "priority classes", "unable to", "apf bootstrap", "allocation check", "serviceip", "lease", "election",
    "stopped leading", "resource lock", "update lock", "webhook.admission", "call mutating webhook",
    "call validating webhook", "conversion webhook", "did not change", "apiserver unhealthy",
    "apiserver is not healthy", "apiserver did not become", "is unhealthy", "version:v", ".svc:", ".svc/",
    "shutting down", "time allotted", "support dry run", "connect to webhook")
_GATE_NEEDLES = tuple(p.replace(" ", "").encode() for p in GATE_PHRASES)
# what \s is in a bytes pattern, and the two bytes of a no-break space (a paste out of a web page or a chat
# client; the records are read with it as a space: formats.plain_spaces). Dropping them from other characters
# too joins nothing ASCII a needle could match across.
_WHITESPACE = b" \t\n\r\f\v\xc2\xa0"


def record_gate(text: bytes) -> bool:
    """Might this candidate hold a signature? Lowercased and with all whitespace dropped, it must contain a phrase
    without its spaces. That lets through everything the phrases with ``\\s*`` between words would match (and a
    little more, which parsing then drops) at a sixth of the cost of that regex, whose case-insensitive
    alternation is tried at every offset (profiled on a 256 MiB log: ~9 µs per candidate)."""
    flat = text.lower().translate(None, _WHITESPACE)
    return any(n in flat for n in _GATE_NEEDLES)


class Guarded:
    """A signature's regex behind words that every match of it contains, looked for first: on a line without them
    ``in`` answers ~20 times sooner than the regex fails (profiled on a 256 MiB log: most of classify's time went to
    searches that found nothing). tests/test_newlines_and_gate.py checks each word list against strings generated
    from its regex, so a pattern edited without its words fails there."""

    __slots__ = ("regex", "words")
    all_words: dict[str, int] = {}  # every Guarded's words, for _Present

    def __init__(self, regex: re.Pattern, *words: str) -> None:
        self.regex, self.words = regex, words
        for w in words:
            Guarded.all_words.setdefault(w, len(Guarded.all_words))

    def _may(self, text: str) -> bool:
        if len(text) >= _Present.BIG:
            present = _PRESENT.words_in(text)
            if present is not None:
                return any(w in present for w in self.words)
        for w in self.words:
            if w in text:
                return True
        return False

    def search(self, text: str, *bounds: int) -> re.Match | None:
        return self.regex.search(text, *bounds) if self._may(text) else None

    def finditer(self, text: str, *bounds: int):
        return self.regex.finditer(text, *bounds) if self._may(text) else iter(())


class _Present:
    """Which of all Guarded words a long text holds, found in one Hyperscan pass: ``in`` for each of ~30 words over a
    64 KiB record (the windows of a huge line) took 30 times as long. The answer for the last text is kept, as
    classify asks about one message again and again. None without Hyperscan: each word is looked for then."""

    BIG = 16 << 10

    def __init__(self) -> None:
        self._db = self._words = None
        self._last: tuple[str, frozenset[str]] | None = None
        self._broken = False

    def words_in(self, text: str) -> frozenset[str] | None:
        if self._last is not None and self._last[0] is text:
            return self._last[1]
        if self._db is None and not self._build():
            return None
        found: set[int] = set()

        def on_match(i, _frm, _to, _flags, _ctx):
            found.add(i)

        self._db.scan(text.encode("utf-8", "surrogatepass"), match_event_handler=on_match)
        present = frozenset(self._words[i] for i in found)
        self._last = (text, present)
        return present

    def _build(self) -> bool:
        if self._broken:
            return False
        try:
            import hyperscan  # noqa: PLC0415 - optional, as for the scanner

            words = list(Guarded.all_words)
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(expressions=[w.encode() for w in words], ids=list(range(len(words))), elements=len(words),
                       flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(words), literal=True)
        except Exception:  # noqa: BLE001 - no wheel, no literal API, no SSSE3: each word is looked for with ``in``
            self._broken = True
            return False
        self._db, self._words = db, words
        return True


_PRESENT = _Present()


# The mutation audit annotation names a webhook's configuration (shared reference §2).
CONFIG_OF = Guarded(re.compile(r'"configuration"\s*:\s*"(?P<cfg>[^"]+)"\s*,\s*"webhook"\s*:\s*"(?P<hook>[^"]+)"'),
                    '"configuration"')
# So does the trace of a slow call (utiltrace, logged past its threshold): `Trace[…]: "Call mutating webhook"
# configuration:X,webhook:Y,resource:…` (`configuration="X" webhook="Y"` in structured traces).
TRACE_CONFIG = re.compile(r'"Call\s*(?P<type>mutating|validating)\s*webhook"\s*configuration[:=]"?(?P<cfg>[^,"\s]+)"?'
                          r'[,\s]\s*webhook[:=]"?(?P<hook>[^,"\s]+)')

_WS = r"\s*"
# A webhook's name is a DNS name: one space inside the quotes is a paste's wrap (`"image-tag-controll er.ns.svc"`),
# joined back by _hook(); more than one is prose, not a name.
_NAME = r'"(?P<hook>[^"\s]{1,253}(?:[ \t][^"\s]{1,253})?)"'
_URL = re.compile(r'(?:Post|POST|post)\s*"?(?P<url>https?://[^\s"]+)"?:?\s*(?P<cause>.*)$', re.S)
_SVC_HOST = re.compile(r"^https?://(?P<svc>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.(?P<ns>[a-z0-9]([-a-z0-9]*[a-z0-9])?)"
                       r"\.svc(?:\.[\w.-]+)?(?::(?P<port>\d+))?(?P<path>/[^?\s\"]*)?")
_URL_PATH = re.compile(r"^https?://[^/?\s\"]+(?P<path>/[^?\s\"]*)?")

# The dispatcher's own line. A fragment quoted alone (`Failed calling webhook, failing open`) has no name and no
# error, and still says what happened: a webhook failed and the request went through (or was refused).
FAIL_MODE = Guarded(re.compile(r"Failed\s*calling\s*webhook,\s*failing\s*(?P<mode>open|closed)(?:\s*(?P<hook>\S+?):\s*"
                               r"(?P<err>.*)$|\W*$)", re.S), "failing")
CALL_FAILED = Guarded(re.compile(r"failed\s*calling\s*(?:admission\s*)?webhook\s*" + _NAME +
                                 r"(?:\s*[:;]\s*(?P<err>.*))?$", re.S), "calling")
# The message ends at a closing quote (%q, %#v, JSON), at the ` >` closing a klog multi-line value, or the line's end.
DENIED = Guarded(re.compile(r"[Aa]dmission\s*webhook\s*" + _NAME + r"\s*denied\s*(?:the\s*)?request(?:\s*:\s*(?P<msg>.*?)"
                            r"(?=\"[,}]|\s>(?:\s|$)|$)|\s*without\s*explanation)?", re.S), "denied")
REJECTED = Guarded(re.compile(r"rejected\s*by\s*webhook\s*" + _NAME + r":?\s*(?P<detail>.*)$", re.S), "rejected")
CANCELED = Guarded(re.compile(r"Context\s*canceled\s*when\s*calling\s*webhook\s*(?P<hook>\S+)"), "canceled")
PANIC = Guarded(re.compile(r"Panic\s*calling\s*webhook,\s*failing\s*open\s*(?P<hook>\S+?):\s*(?P<err>.*)$", re.S), "Panic")
DRY_RUN = Guarded(re.compile(r"does\s*not\s*support\s*dry\s*run"), "support")
# `admission webhook "x" does not support dry run`: a dry run (kubectl --dry-run=server, Flux and Argo CD diffs)
# refused because the webhook's sideEffects are not None or NoneOnDryRun; the webhook itself works
NO_DRY_RUN = Guarded(re.compile(r"webhook\s*" + _NAME + r"\s*does\s*not\s*support\s*dry\s*run"), "support")
# Another component's own check that it can reach a webhook (OpenShift's kube-apiserver-operator:
# `failed to connect to webhook "x" via service "svc.ns.svc:443": dial tcp …: connection refused`)
CONNECT_FAILED = Guarded(re.compile(r"failed\s*to\s*connect\s*to\s*webhook\s*" + _NAME +
                                    r"(?:\s*via\s*service\s*\"(?P<svc>[^\"]{1,300})\")?:?\s*(?P<err>.*)$", re.S),
                         "connect")
# A webhook call's error whose name was cut off: the apiserver's `failed to call webhook: Post "URL": cause`, or only
# the URL of a webhook Service (`https://svc.ns.svc:443/path?timeout=30s": cause`). A Service URL with the
# `?timeout=` every admission call carries, and not an API path, is a webhook's; what follows it is why it failed.
NAMELESS_CALL = Guarded(re.compile(r"failed\s*to\s*call\s*webhook:\s*(?P<err>.*)$"
                                   r"|(?P<url>https://[a-z0-9][-a-z0-9]{0,62}\.[a-z0-9][-a-z0-9]{0,62}\.svc"
                                   r"(?:\.[\w.-]{1,200})?(?::\d{1,5})?(?!/apis?/)(?:/[^?\s\"]{0,300})?\?timeout=\d+s)"
                                   r"\"?:?\s*(?P<cause>.*)$", re.S), "call", "timeout=")
# An admission policy's refusal (shared reference §1.2). ValidatingAdmissionPolicy names itself; the generic policy
# dispatcher that MutatingAdmissionPolicy uses says only `policy 'NAME' with binding 'B' denied request: …` or
# `policy "NAME" denied request: …` (k8s.io/apiserver policy/generic PolicyError), so those are mutating.
POLICY_DENIED = Guarded(re.compile(r"(?:(?P<kind>Validating|Mutating)AdmissionPolicy\s*'(?P<policy>[^']{1,253})'"
                                   r"|(?<![\w-])policy\s*(?:'(?P<policy2>[^']{1,253})'|\"(?P<policy3>[^\"]{1,253})\"))"
                                   r"(?:\s*with\s*binding\s*'(?P<binding>[^']{1,253})')?\s*denied\s*request:?\s*(?P<msg>.*)$",
                                   re.S), "AdmissionPolicy", "denied")
# An admission policy that could not be evaluated: with failurePolicy Fail the request is refused with this in the
# policy's message (policy/validating and policy/generic dispatchers: a paramKind not yet synced or not known, a
# param missing, a binding that cannot match; an expression that errors on this object). Nothing answered "no": the
# policy is broken for this write, or not ready yet.
POLICY_CONFIG_ERROR = re.compile(r"failed\s*to\s*configure\s*(?:policy|binding)|paramKind\s*kind\s*`"
                                 r"|resulted\s*in\s*error|failed\s*expression"
                                 r"|failed\s*to\s*find\s*REST\s*mapping|unrecognized\s*failure\s*policy")
# audit annotations logs.formats appends to an audit event's message (`KEY=VALUE` of the webhook invocations)
_AUDIT_NOTES = re.compile(r"\s[\w.-]*webhook\.admission\.k8s\.io/\S*=")
# A CRD's conversion webhook (apiextensions-apiserver's webhook converter): `conversion webhook for
# GROUP/VERSION, Kind=KIND failed: Post "https://…": …` in the apiserver's cacher, the namespace and garbage
# collectors and every client reading the resource. Not an admission webhook: the admission flags do not touch it.
CONVERSION = re.compile(r"conversion\s*webhook\s*for\s*(?:(?P<gv>[\w.-]{1,253}/[\w.-]{1,63}),\s*Kind=(?P<kind>[\w.-]{1,253}?)"
                        r"|(?P<what>[^\s:][^\n:]{0,299}?))\s*failed:?\s*(?P<err>.*)$", re.S)
# The CRD's resource, when the line names it: the cacher's `cacher (plural.group)` / `storage/cacher.go:/group/plural`.
_CONVERSION_CRD = re.compile(r"cacher\s*\((?P<crd>[a-z0-9-]{1,63}\.[a-z0-9.-]{1,253})\)"
                             r"|storage/cacher\.go:/(?P<group>[a-z0-9.-]{1,253})/(?P<plural>[a-z0-9-]{1,63})")
HOOK_FATAL = Guarded(re.compile(r"PostStartHook\s*\"(?P<hook>[^\"]+)\"\s*failed:?\s*(?P<err>.*)$", re.S), "PostStartHook")
READYZ_ITEM = Guarded(re.compile(r"\[-\]\s*poststarthook/(?P<hook>[\w./-]+)\s*failed:?\s*(?P<why>[\w ]*)"), "poststarthook/")
# Both are anchored on their literal tail and read backwards from it (see _before): a
# leading [\w…]* searched forwards is quadratic on long junk lines.
READYZ_LOG = Guarded(re.compile(r"check\s*failed:?\s*(?P<probe>readyz|livez|healthz)?"), "check")
_READYZ_CHECKS = re.compile(r"(?P<checks>[\w./,-]*poststarthook/[\w./,-]*)\s*$")
NOT_READY = Guarded(re.compile(r"not\s*yet\s*ready\s*to\s*handle\s*request"), "handle")
_NOT_READY_OBJ = re.compile(r"(?P<res>[a-z0-9-]{1,63})(?:\.(?P<group>[a-z0-9][a-z0-9.-]{0,252}))?\s*\"(?P<name>[^\"]*)\"\s*"
                            r"is\s*forbidden:\s*$")
# A write refused as invalid (StatusReasonInvalid: `Kind "name" is invalid: field: Invalid value: …`) was refused
# by the registry's validation, which runs before validating admission: no webhook can be blamed for it. (A real
# apiserver advertising a loopback address logs `unable to sync kubernetes service: Endpoints "kubernetes" is
# invalid: …` every 10 s.)
INVALID = Guarded(re.compile(r"\"[^\"]*\"\s*is\s*invalid:"), "invalid:")
# The apiserver failing to reach itself: its post-start hooks write through a loopback client, and while the
# secure port is not serving yet (or the process is going down) they log `dial tcp 127.0.0.1:6443: connect:
# connection refused`. No admission was involved; a hook that really stays stuck says so in other lines.
SELF_UNREACHABLE = Guarded(re.compile(r"dial\s*tcp\s*(?:127\.\d+\.\d+\.\d+|\[::1\]|\[?::ffff:127\.\d+\.\d+\.\d+\]?|"
                                      r"localhost):\d+:\s*(?:\w+:\s*)?connection\s*refused"), "refused")
MAX_MATCH = 128 << 10  # a bound for the regexes; the scanner already caps records at 64 KiB

# Bootstrap steps: (pattern, bootstrap kind, what the line says: attempt | failure | ok)
def _boot(words: str | tuple[str, ...], pattern: str, flags: int = 0) -> Guarded:
    return Guarded(re.compile(pattern, flags), *((words,) if isinstance(words, str) else words))


_BOOT: tuple[tuple[Guarded, str, str], ...] = (
    (_boot("ServiceCIDR", r"Creating\s*default\s*ServiceCIDR"), "ServiceCIDR", "attempt"),
    (_boot("ServiceCIDR", r"KubernetesDefaultServiceCIDRError|default\s*ServiceCIDR\s*can\s*not\s*be\s*created|"
                          r"error\s*initializing\s*the\s*default\s*ServiceCIDR|"
                          r"error\s*trying\s*to\s*sync\s*the\s*default\s*ServiceCIDR|"
                          r"default\s*ServiceCIDR\s*Status\s*can\s*not\s*be\s*set|"
                          r"default\s*ServiceCIDR\s*condition\s*Ready\s*is\s*not"),
     "ServiceCIDR", "failure"),
    (_boot("ServiceCIDR", r"Setting\s*default\s*ServiceCIDR\s*condition\s*Ready\s*to\s*True"), "ServiceCIDR", "ok"),
    (_boot("required", r"[Uu]nable\s*to\s*create\s*required\s*kubernetes\s*system\s*[Nn]amespace"
                       r"(?:\s+(?P<name>[a-z0-9-]+)(?=[:\s]|$))?(?:.*?namespace=\"(?P<name2>[a-z0-9-]+)\")?", re.S),
     "Namespace", "failure"),
    # A name is at most 253 characters: bounded, a run of name characters is not rescanned from every start in it
    # ("unabletocreatePriorityClass" repeated over 64 KB took a second).
    (_boot(("PriorityClass", "classes"), r"unable\s*to\s*create\s*PriorityClass\s*(?P<name>[\w.-]{1,253}?):"
                                         r"|unable\s*to\s*add\s*default\s*system\s*priority\s*classes"),
     "PriorityClass", "failure"),
    (_boot("classes", r"all\s*system\s*priority\s*classes\s*are\s*created\s*successfully"), "PriorityClass", "ok"),
    (_boot("reconcile", r"unable\s*to\s*reconcile\s*(?P<rbac>clusterrolebinding|clusterrole|rolebinding|role)\.[\w.]+/"
                        r"(?P<name>[\w:.-]+?)(?=:?\s|:?$)"),
     "ClusterRole", "failure"),
    (_boot("initialize", r"unable\s*to\s*initialize\s*(?P<rbac2>clusterroles|roles)"), "ClusterRole", "failure"),
    (_boot("APF", r"unable\s*to\s*initialize\s*APF\s*bootstrap\s*configuration"), "FlowSchema", "failure"),
    (_boot("sync", r"unable\s*to\s*sync\s*kubernetes\s*service"), "Service", "failure"),
    (_boot(("allocation", "serviceIP"), r"unable\s*to\s*perform\s*initial\s*IP\s*and\s*Port\s*allocation\s*check|"
                                        r"failed\s*to\s*allocate\s*a\s*serviceIP"),
     "IPAddress", "failure"),
    (_boot("configmap", r"unable\s*to\s*initialize\s*client\s*CA\s*configmap"), "ConfigMap", "failure"),
    (_boot("lease", r"failed\s*to\s*(?:ensure\s*lease\s*exists|update\s*lease)"), "Lease", "failure"),
)
_RBAC_KIND = {"clusterrole": "ClusterRole", "clusterrolebinding": "ClusterRoleBinding", "role": "Role",
              "rolebinding": "RoleBinding", "clusterroles": "ClusterRole", "roles": "Role"}

# etcd timing out or slow, or the apiserver timing out a request itself: load and storage, which starve a lease
# renewal exactly as a slow webhook does; with these in the lines a renewal's timeout is not blamed on admission
STORAGE_SLOW = Guarded(re.compile(r"etcdserver:\s*(?:request\s*timed\s*out|leader\s*changed|too\s*many\s*requests|"
                                  r"no\s*leader)|unable\s*to\s*return\s*a\s*response\s*in\s*the\s*time\s*allotted|"
                                  r"apply\s*request\s*took\s*too\s*long"),
                       "etcdserver", "allotted", "too")

# The controller a post-start hook starts, stopping (repairip.go: `Shutting down ipallocator-repair-controller`): after
# its writes were refused at start, the hook never finishes on its own (kubernetes#136288).
HOOK_CONTROLLER_STOPPED = Guarded(re.compile(r"Shutting\s*down\s*(?P<ctl>ipallocator-repair|ipaddress-repair|"
                                             r"service-?cidr|kubernetes-service-cidr)[\w-]*"), "Shutting")


def _stopped_hook(controller: str) -> str:
    """The post-start hook whose controller this is: the IP repair controllers', or the ServiceCIDR one's."""
    return ("start-service-ip-repair-controllers" if "repair" in controller
            else "start-kubernetes-service-cidr-controller")

# kubeadm upgrade's `static Pod hash for component kube-apiserver on Node N did not change after 5m0s`, and the
# installers' and upgrade tools' `kube-apiserver unhealthy` / `is not healthy` / `did not become ready`: the apiserver
# did not come back from a restart, which these lines alone cannot explain
UNHEALTHY = Guarded(re.compile(r"static\s*Pod\s*hash\s*for\s*component\s*kube-apiserver\s*on\s*Node\s*"
                               r"(?P<node>[\w.-]{1,253})\s*did\s*not\s*change|"
                               r"kube-apiserver\s*(?:is\s*not\s*healthy|unhealthy|did\s*not\s*become\s*(?:ready|healthy))|"
                               # a managed control plane's health report (GKE: `component "kube-apiserver" from
                               # endpoint "gke-…" is unhealthy`)
                               r"component\s*\"kube-apiserver\"[^\n]{0,200}?\s*is\s*unhealthy"),
                    "change", "healthy", "become")

# `server.go] Version: v1.37.2`: a kube-apiserver process starts (cmd/kube-apiserver/app/server.go logs it first
# thing). What its post-start hooks did before is the previous process's start, not this one's.
STARTED = Guarded(re.compile(r"^Version:\s*(?P<version>v\d+\.\d+\.\d+\S*)\s*$"), "Version")

LEADER = Guarded(re.compile(r"leaderelection\s*lost|[Ll]eader\s*election\s*lost|stopped\s*leading|"
                            r"failed\s*to\s*renew\s*lease\s*(?P<lease>[\w./-]+)|"
                            r"error\s*retrieving\s*resource\s*lock\s*(?P<lease2>[\w./-]+)|"
                            r"error\s*initially\s*creating\s*leader\s*election\s*record|"
                            # leader election's write of its lock (client-go: `Failed to update lock: %v`)
                            r"Failed\s*to\s*update\s*lock"),
                 "lost", "leading", "renew", "lock", "record")

# Denial texts that show the webhook itself cannot reach the apiserver (a policy engine
# that must read Namespaces or its own config from the API to decide).
WEBHOOK_BLIND = re.compile(r"connection\s*refused|i/o\s*timeout|dial\s*tcp|no\s*route\s*to\s*host|"
                           r"context\s*deadline\s*exceeded|the\s*server\s*is\s*currently\s*unable|"
                           r"failed\s*to\s*(?:get|list|fetch|load)\b(?!\s*the\s*Group\s*Version\s*Resource)|"
                           r"Unauthorized|TLS\s*handshake|"
                           r"not\s*yet\s*ready|Service\s*Unavailable|apiserver\s*not\s*ready")

# A denial that shows the webhook does not know a kind: a policy engine whose discovery lacks the resource (an
# older engine, or a new kind such as ServiceCIDR it was never told about) refuses every write of it. For a kind
# the apiserver writes at start that is the seed's outage: the bootstrap write is denied until the engine changes.
# Kind and resource names are bounded (at most 253 characters) so that no run of word characters is rescanned from
# every position in it.
UNKNOWN_KIND = re.compile(
    r"(?:the\s*)?(?:resource|kind)\s*[\"'`]?(?P<k1>[A-Za-z][\w.]{0,252}?)[\"'`]?\s*(?:is\s*)?not\s*found\s*in\s*"
    r"(?:group|api\s*group|apiVersion|the\s*group)"
    r"|failed\s*to\s*get\s*the\s*Group\s*Version\s*Resource\s*for\s*kind\s*[\"'`]?(?P<k2>\w{1,253})"
    r"|no\s*matches\s*for\s*kind\s*[\"'`]?(?P<k3>\w{1,253})"
    r"|could\s*not\s*find\s*(?:the\s*)?(?:requested\s*)?resource\s*[\"'`(]?(?P<k4>[a-z][\w.]{0,252})"
    r"|unable\s*to\s*(?:find|map|convert)\s*(?:resource|kind|GVR|GVK)\s*(?:for\s*)?[\"'`]?(?P<k5>[A-Za-z][\w./]{0,252})")
# What a denied request was writing, as kubectl or the apiserver put it before the denial.
_DENIED_TARGET = re.compile(r"error\s*when\s*(?P<verb>creating|replacing|patching|applying\s*patch|deleting|"
                            r"retrieving\s*current\s*configuration\s*of)[:\s]*\"(?P<file>[^\"]+)\""
                            r"|(?P<res>[a-z0-9][a-z0-9.-]{0,252})\s*\"(?P<name>[^\"]+)\"\s*is\s*forbidden:"
                            r"|Error\s*(?P<verb2>creating|updating|deleting):")

# What a bootstrap error line reveals about the object it failed to write.
_OBJ_IN_TEXT = Guarded(re.compile(r"(?P<res>servicecidrs|ipaddresses|namespaces|priorityclasses|clusterroles|"
                                  r"clusterrolebindings|roles|rolebindings|flowschemas|prioritylevelconfigurations|leases|services|endpoints|"
                                  r"endpointslices|configmaps)(?:\.[a-z0-9.-]+)?\s*\"(?P<name>[^\"]+)\""), '"')


# --- the request a webhook failed or denied (issue 21: which deadlock family it is) --------------------------------
# Only the text before the webhook's own message is read: the webhook's URL path is not the request.
_OWNER_KINDS = {"replicaset": "ReplicaSet", "daemonset": "DaemonSet", "statefulset": "StatefulSet", "job": "Job",
                "deployment": "Deployment", "pod": "Pod", "pods": "Pod", "leases": "Lease", "lease": "Lease",
                "nodes": "Node", "node": "Node", "bind": "Binding"}
_CALLER_KIND = (("replica_set", "ReplicaSet"), ("daemon_controller", "DaemonSet"), ("stateful_set", "StatefulSet"),
                ("job_controller", "Job"), ("kubelet_node_status", "Node"), ("leaderelection", "Lease"))
_REQUEST = (
    # client-go's event recorder: Event(v1.ObjectReference{Kind:"ReplicaSet", Namespace:"default", Name:"x", …
    re.compile(r'ObjectReference\{Kind:"(?P<kind>\w{1,63})",\s*Namespace:"(?P<ns>[a-z0-9-]{0,63})",\s*Name:"(?P<name>[^"]{0,253})"'),
    # structured: "Event occurred" object="ns/name" fieldPath="" kind="ReplicaSet"
    re.compile(r'object="(?P<ns>[a-z0-9-]{1,63})/(?P<name>[^"/]{1,253})"[^\n]{0,300}?kind="(?P<kind>\w{1,63})"'),
    # an audit event (formats: `audit VERB RESOURCE[.group] "name" namespace=NS`)
    re.compile(r'^audit\s+\w+\s+(?P<kind>[a-z0-9-]{1,63})(?:\.[\w.-]{0,253})?\s+"(?P<name>[^"\s]{0,253})"?'
               r'(?:\s+namespace=(?P<ns>[a-z0-9-]{1,63}))?'),
    # kubectl get events [-A] / kubectl events: [NS] AGE TYPE FailedCreate replicaset/NAME …, the row as printed or
    # behind whatever a paste put before it (line numbers, a timestamp, a tool's columns); NS, a DNS label, has a
    # letter, so a line number before AGE is not taken for one
    re.compile(r'(?:^|(?<=[\s>`*|-]))(?:(?P<ns>(?=[a-z0-9-]{0,62}[a-z])[a-z0-9][a-z0-9-]{0,62})\s+)?'
               r'(?:<unknown>|\d+[smhd][\w()]*)\s+'
               r'(?:\S+\s+){0,3}?(?:Warning|Normal)\s+FailedCreate\s+(?:\S+\s+){0,2}?'
               r'(?P<kind>replicaset|daemonset|statefulset|job)(?:\.apps|\.batch)?/(?P<name>[\w.-]{1,253})'),
    # the same row without its AGE (a console's or a dashboard's copy): TYPE FailedCreate replicaset/NAME …
    re.compile(r'\b(?:Warning|Normal)\s+FailedCreate\s+(?:\S+\s+){0,2}?'
               r'(?P<kind>replicaset|daemonset|statefulset|job)(?:\.apps|\.batch)?/(?P<name>[\w.-]{1,253})'),
    # a controller's sync error: sync "ns/name" failed with … (kind from the caller's file)
    re.compile(r'[Ss]ync(?:ing)?\s*\\?"(?P<ns>[a-z0-9-]{1,63})/(?P<name>[^"\\/]{1,253})\\?"\s*failed'),
    # the scheduler's Bind (`running Bind plugin "DefaultBinder": …`, a FailedScheduling event): pods/binding, the
    # write that puts every new pod on a node
    re.compile(r'running\s*(?P<kind>Bind)\s*plugin'),
    # kubectl describe's events: `replicaset-controller  Error creating: …`
    re.compile(r'(?P<kind>replicaset|daemonset|statefulset|job)-controller\s+Error\s*creating'),
    re.compile(r'create\s*Pod\s*(?P<name>[\w.-]{1,253})\s*in\s*(?P<kind>StatefulSet)\s'),
    # kubelet heartbeats: its node Lease, its Node's status; leader election's lock
    re.compile(r'/namespaces/(?P<ns>[a-z0-9-]{1,63})/(?P<kind>leases|pods)(?:/(?P<name>[\w.-]{1,253}))?'),
    re.compile(r'(?P<kind>lease)s?\s*(?P<ns>kube-node-lease)'),
    re.compile(r'to\s*(?:update|ensure|renew)\s*(?:node\s*)?(?P<kind>lease)\b'),
    re.compile(r'Failed\s*to\s*update\s*(?P<kind>lease)|update\s*(?:the\s*)?(?P<kind2>lock)\b'
               r'|resource\s*(?P<kind3>lock)\s*(?P<ns>[a-z0-9-]{1,63})/(?P<name>[\w.-]{1,253})'),
    re.compile(r'(?:Error\s*updating|Unable\s*to\s*update|Unable\s*to\s*register)\s*(?P<kind>node)\b'),
    # `pods "x" is forbidden`, `leases.coordination.k8s.io "n" is forbidden`
    re.compile(r'(?P<kind>pods|leases|nodes)(?:\.[\w.-]{1,253})?\s*\\?"(?P<name>[^"\\]{1,253})\\?"\s*is\s*forbidden'),
    # k3s' and RKE2's node password, a kube-system Secret `<node>.node-password.k3s` the server writes when a node
    # joins or rejoins: refused, the node never registers
    re.compile(r'(?P<name>[a-z0-9][\w.-]{0,200}\.node-password\.(?:k3s|rke2))'),
    # `Error creating: …` alone: the FailedCreate message of the controllers that create pods (ReplicaSet, DaemonSet,
    # StatefulSet, Job: pkg/controller), pasted without the event's row; which controller, the line does not say
    re.compile(r'Error\s*creating:\s*(?:Internal\s*error\s*occurred:?\s*)?$'),
)


_NODE_LEASE = Guarded(re.compile(r"node\s*lease|kube-node-lease"), "lease")


def request_of(before: str, rec: LogRecord | None = None) -> tuple | None:
    """(namespace, kind, name) of the request whose admission failed, from the text before the webhook's
    message; any part may be None. Kinds are Pod owners (ReplicaSet, DaemonSet, …), Pod, Lease or Node."""
    before = before[-1500:]
    for pat in _REQUEST:
        m = pat.search(before)
        if not m:
            continue
        g = m.groupdict()
        if not g:  # the controllers' `Error creating:`: pods, created by a controller the line does not name
            return None, "Controller", None
        raw = g.get("kind") or g.get("kind2") or g.get("kind3")
        kind = _OWNER_KINDS.get(raw.lower(), raw) if raw else None
        if raw is None and "node-password" in m.group(0):
            return "kube-system", "Secret", g["name"]
        if raw in ("lock",):
            kind = "Lease"
        if kind is None and rec is not None:  # a controller's sync key: its file says which controller
            caller = rec.caller or ""
            kind = next((k for f, k in _CALLER_KIND if f in caller), None)
        if kind is None and g.get("ns") and "ync" in m.group(0):
            kind = "ReplicaSet" if rec is None or not rec.caller else None
        ns = g.get("ns") or None
        if kind == "Lease" and ns is None and re.search(r"node\s*lease|kubelet", before):
            ns = "kube-node-lease"
        return ns, kind, g.get("name") or None
    return None


def _hook(name: str) -> str:
    """A webhook's name as the configuration has it: whitespace inside the quotes is a paste's wrap."""
    return re.sub(r"\s+", "", name)


def _before(msg: str, end: int, span: int = 400) -> str:
    """The text just before ``end``, where a literal's subject is."""
    return msg[max(0, end - span):end]


def _url_parts(err: str) -> tuple[str | None, str | None, str]:
    """(url, namespace/service, cause text) from the error after the webhook name."""
    err = re.sub(r"^failed\s*to\s*call\s*webhook:\s*", "", err)
    m = _URL.search(err)
    if not m:
        return None, None, err
    url = m["url"].rstrip(":")
    svc = None
    h = _SVC_HOST.match(url)
    if h:
        svc = f"{h['ns']}/{h['svc']}"
    return url, svc, m["cause"]


def _object_in(text: str) -> bootstrap.BlockedObject | None:
    m = _OBJ_IN_TEXT.search(text)
    if not m:
        return None
    kind = bootstrap.by_resource(m["res"])
    if kind is None:
        return None
    name = m["name"]
    if kind.names and name not in kind.names and kind.kind not in ("IPAddress", "ClusterRole", "Lease"):
        return None  # e.g. an ordinary Namespace create rejected: not the apiserver's own
    return bootstrap.blocked(kind, name)


def _webhook_type(hook: str | None, rec: LogRecord, url: str | None = None) -> str | None:
    caller = rec.caller or ""
    if caller.startswith("mutating/"):
        return "mutating"
    if caller.startswith("validating/"):
        return "validating"
    # Webhook servers route by path (/mutate…, /validate…): cert-manager uses one name for both kinds.
    # The path is the webhook's whether it is called through a Service or at a url: (any host).
    path = _URL_PATH.match(url or "")
    path = (path["path"] or "") if path else ""
    if re.search(r"/mutat", path):
        return "mutating"
    if re.search(r"/validat|/admit", path):
        return "validating"
    return vendors.guess_type(hook) if hook else None


# A webhook whose own path says it judges Nodes (`/validate-nodes`, `/mutate--v1-node`, `/validate/node`): the
# dispatcher's line names no request, but the webhook's path says what it was called for
_NODE_PATH = re.compile(r"https?://[^/\s\"]+/(?:[\w.-]*[/-])?nodes?(?:[/?#\"]|$)", re.I)


def _request_from_path(url: str | None) -> tuple | None:
    return (None, "Node", None) if url and _NODE_PATH.match(url) else None


def _call_event(rec: LogRecord, hook: str, err: str, mode: str | None, echo: bool) -> Event:
    url, svc, cause_text = _url_parts(err or "")
    cause = causes.classify(cause_text if url else err or "")
    if svc is None and cause.service:
        svc = cause.service
    return Event("webhook-call", rec, webhook=hook, mode=mode, echo=echo, url=url, service=svc, cause=cause,
                 webhook_type=_webhook_type(hook, rec, url), detail=(err or "")[:2000])


def unknown_bootstrap_kind(detail: str) -> bootstrap.BlockedObject | None:
    """The bootstrap object a denial shows the webhook cannot handle (it does not know the kind), if any."""
    m = UNKNOWN_KIND.search(detail)
    if not m:
        return None
    name = next(g for g in m.groups() if g)
    kind = bootstrap.by_resource(name.rsplit("/", 1)[-1])
    if kind is None and "/" in name:
        kind = bootstrap.by_resource(name.split("/", 1)[0])
    return bootstrap.blocked(kind) if kind is not None and kind.blocks_readiness else None


def _denied_target(before: str) -> str | None:
    t = None
    for m in _DENIED_TARGET.finditer(before[-600:]):
        t = m
    if t is None:
        return None
    if t["file"]:
        return f'{t["verb"]} "{t["file"]}"'
    if t["res"]:
        return f'{t["res"]} "{t["name"]}"'
    return f'{t["verb2"]} an object'


def _boot_context(msg: str, user: str | None) -> tuple[bootstrap.BlockedObject | None, str | None]:
    """The bootstrap object or hook a composite error line names, if any. An audit event says who wrote (``user``):
    an object of a bootstrap kind written by anyone but the apiserver (a user's ClusterRole) is not its bootstrap."""
    if user not in (None, "", "system:apiserver"):
        return None, None
    m = HOOK_FATAL.search(msg)
    hook = m["hook"] if m else None
    for pat, kind_name, what in _BOOT:
        b = pat.search(msg)
        if b and what != "ok":
            return _boot_object(kind_name, b), hook
    obj = _object_in(msg)
    if obj is None and hook:
        kinds = bootstrap.by_hook(hook)
        if len(kinds) >= 1:
            obj = bootstrap.blocked(kinds[0])
    return obj, hook


def _boot_object(kind_name: str, m: re.Match) -> bootstrap.BlockedObject:
    g = m.groupdict()
    if g.get("rbac") or g.get("rbac2"):
        kind_name = _RBAC_KIND[g.get("rbac") or g.get("rbac2")]
    kind = bootstrap.by_resource(kind_name)
    assert kind is not None
    name = g.get("name") or g.get("name2")
    return bootstrap.blocked(kind, name)


def classify(rec: LogRecord) -> list[Event]:
    """Every event one record holds (usually zero or one)."""
    msg = rec.message if len(rec.message) <= MAX_MATCH else rec.message[:MAX_MATCH]
    events: list[Event] = []
    call_hooks: set[str] = set()

    m = FAIL_MODE.search(msg)
    if m:
        err = m["err"] or ""
        inner = CALL_FAILED.search(err)
        events.append(_call_event(rec, _hook(m["hook"]) if m["hook"] else None,
                                  (inner["err"] if inner and inner["err"] else err) or "", m["mode"], echo=False))
        events[-1].request = request_of(msg[:m.start()], rec) or _request_from_path(events[-1].url)
        call_hooks.add(events[-1].webhook)
    else:
        pos = 0
        while (m := CALL_FAILED.search(msg, pos)) is not None:
            # each match's error runs to the record's end: the next webhook's failure is looked for after this name
            pos = m.end("hook")
            hook = _hook(m["hook"])
            if hook in call_hooks:
                continue
            call_hooks.add(hook)
            before = msg[:m.start()]
            if re.search(r"Internal\s*error\s*occurred:?\s*$", before):
                mode, echo = "closed", True  # the dispatcher logged this call already; this is its 500 echoed
            elif "Unhandled Error" in before or rec.level == "E":
                mode, echo = "open", True  # utilruntime.HandleError after a fail-open warning
            else:
                mode, echo = None, False
            ev = _call_event(rec, hook, m["err"] or "", mode, echo)
            ev.request = request_of(before, rec) or _request_from_path(ev.url)
            if mode == "open" and ev.cause is not None and ev.cause.cls == causes.CANCELED:
                # HandleError after "Context canceled when calling webhook": the caller went away. The
                # dispatchers log no fail-open for a canceled call and admit nothing (they return a timeout).
                ev = Event("webhook-canceled", rec, webhook=hook, echo=True)
            events.append(ev)
            # One line may hold several webhooks' failures (Helm's and Rancher's joined errors): each is read.
        if not call_hooks:
            m = CONNECT_FAILED.search(msg)
            if m:
                hook = _hook(m["hook"])
                ev = _call_event(rec, hook, m["err"] or "", None, echo=False)
                if ev.service is None and m["svc"]:
                    h = _SVC_HOST.match("https://" + re.sub(r"\s+", "", m["svc"]))
                    ev.service = f"{h['ns']}/{h['svc']}" if h else None
                events.append(ev)
                call_hooks.add(hook)
        if not call_hooks and not ("onversion" in msg and CONVERSION.search(msg)):  # a CRD's: its own event
            m = NAMELESS_CALL.search(msg)
            if m:
                err = m["err"] if m["err"] is not None else f'Post "{m["url"]}": {m["cause"]}'
                ev = _call_event(rec, None, err, None, echo=False)
                if ev.url and ev.cause.cls != causes.OTHER:
                    ev.request = request_of(msg[:m.start()], rec) or _request_from_path(ev.url)
                    events.append(ev)

    rej = REJECTED.search(msg)
    if rej:
        d = DENIED.search(rej["detail"])
        # The validating dispatcher's own line (`rejected by webhook "x": &errors.StatusError{…}`): mode "deny"
        # marks the apiserver's log, as the failing-closed line does for a call.
        events.append(Event("webhook-denied", rec, webhook=rej["hook"], webhook_type="validating", mode="deny",
                            detail=(d["msg"] if d and d["msg"] else rej["detail"])[:2000],
                            request=request_of(msg[:rej.start()], rec)))
    else:
        for d in DENIED.finditer(msg):
            if DRY_RUN.search(msg):
                break
            events.append(Event("webhook-denied", rec, webhook=_hook(d["hook"]), webhook_type=vendors.guess_type(d["hook"]),
                                detail=(d["msg"] or "without explanation")[:2000],
                                target=_denied_target(msg[:d.start()]), request=request_of(msg[:d.start()], rec)))
            break

    m = NO_DRY_RUN.search(msg)
    if m:
        events.append(Event("webhook-no-dry-run", rec, webhook=_hook(m["hook"]), target=_denied_target(msg[:m.start()])))
    m = CANCELED.search(msg)
    if m:
        events.append(Event("webhook-canceled", rec, webhook=m["hook"]))
    m = PANIC.search(msg)
    if m:
        events.append(Event("webhook-panic", rec, webhook=m["hook"], mode="open", detail=m["err"][:2000]))
    m = POLICY_DENIED.search(msg)
    if m:
        detail = m["msg"][:2000]
        notes = _AUDIT_NOTES.search(detail)
        detail = detail[:notes.start()] if notes else detail
        events.append(Event("policy-denied", rec, policy=m["policy"] or m["policy2"] or m["policy3"],
                            binding=m["binding"], webhook_type=(m["kind"] or "Mutating").lower(), detail=detail,
                            cause=causes.Cause("policy-config", detail[:300]) if POLICY_CONFIG_ERROR.search(detail)
                            else None))

    # Tie webhook and policy events to the bootstrap object the same line names.
    if events:
        obj, hook = _boot_context(msg, rec.user)
        for ev in events:
            if ev.kind in ("webhook-call", "webhook-denied", "policy-denied"):
                ev.obj, ev.hook = obj, hook or (obj.hook if obj else None)
            if ev.kind == "webhook-denied" and ev.obj is None and ev.detail:
                unknown = unknown_bootstrap_kind(ev.detail)
                if unknown is not None:
                    ev.obj, ev.hook = unknown, unknown.hook

    m = HOOK_FATAL.search(msg)
    if m:
        events.append(Event("hook-fatal", rec, hook=m["hook"], detail=m["err"][:2000]))
    for m in READYZ_ITEM.finditer(msg):
        events.append(Event("readyz-hook", rec, hook=m["hook"], detail=m["why"].strip() or None))
    if not any(e.kind == "readyz-hook" for e in events):
        m = READYZ_LOG.search(msg)
        c = _READYZ_CHECKS.search(_before(msg, m.start())) if m else None
        if m and c:
            for check in c["checks"].split(","):
                if check.startswith("poststarthook/"):
                    events.append(Event("readyz-hook", rec, hook=check[len("poststarthook/"):],
                                        detail=m["probe"] or "readyz"))
    m = NOT_READY.search(msg)
    if m:
        o = _NOT_READY_OBJ.search(_before(msg, m.start()))
        kind = bootstrap.by_resource(o["res"]) if o else None
        obj = bootstrap.blocked(kind, o["name"]) if kind and o else None
        events.append(Event("not-ready", rec, obj=obj, hook=obj.hook if obj else None,
                            detail=(f"{o['res']}.{o['group']}" if o["group"] else o["res"]) if o else None))

    if not any(e.kind in ("webhook-call", "webhook-denied", "policy-denied") for e in events):
        for pat, kind_name, what in _BOOT:
            b = pat.search(msg)
            if b and what == "failure" and (INVALID.search(msg) or SELF_UNREACHABLE.search(msg)):
                break  # refused by validation, or the apiserver not reaching itself: nothing a webhook did
            if b and kind_name == "Lease" and _NODE_LEASE.search(msg):
                break  # a kubelet's node lease (same lease controller, same words): not the apiserver's own write
            if b:
                obj = _boot_object(kind_name, b)
                events.append(Event("bootstrap-" + what, rec, obj=obj, hook=obj.hook))
                break

    m = CONVERSION.search(msg) if "onversion" in msg else None
    if m:
        url, svc, cause_text = _url_parts(m["err"])
        cause = causes.classify(cause_text if url else m["err"])
        if svc is None and cause.service:
            svc = cause.service
        c = _CONVERSION_CRD.search(msg[:m.start()])
        crd = (c["crd"] or f'{c["plural"]}.{c["group"]}') if c else None
        events.append(Event("conversion-failed", rec, url=url, service=svc, cause=cause,
                            detail=f'{m["gv"]}, Kind={m["kind"]}' if m["gv"] else m["what"].strip(), hook=crd))

    m = HOOK_CONTROLLER_STOPPED.search(msg)
    if m:
        events.append(Event("hook-stopped", rec, hook=_stopped_hook(m["ctl"])))
    m = UNHEALTHY.search(msg)
    if m:
        events.append(Event("apiserver-unhealthy", rec, detail=m["node"]))
    if rec.caller is not None and rec.caller.rsplit("/", 1)[-1].startswith("server.go"):
        m = STARTED.search(msg)
        if m:
            events.append(Event("apiserver-started", rec, detail=m["version"]))
    if STORAGE_SLOW.search(msg):
        events.append(Event("storage-slow", rec))
    m = LEADER.search(msg)
    if m:
        lease = m["lease"] or m["lease2"]
        if lease is None and (u := _LEASE_URL.search(msg)):
            lease = f'{u["ns"]}/{u["name"]}'
        events.append(Event("leader-lost", rec, detail=lease, obj=None))
    for m in CONFIG_OF.finditer(msg):
        events.append(Event("config-named", rec, webhook=m["hook"], detail=m["cfg"], webhook_type="mutating"))
    m = TRACE_CONFIG.search(msg) if "Call" in msg else None
    if m:
        r = _TRACE_RESOURCE.search(msg, m.end())
        events.append(Event("config-named", rec, webhook=m["hook"], detail=m["cfg"], webhook_type=m["type"],
                            request=(None, _OWNER_KINDS.get(r["res"], r["res"]), None) if r else None))
        t = _TRACE_TOTAL.search(msg, m.end())
        if t and int(t["ms"]) >= SLOW_CALL_MS:
            events.append(Event("webhook-slow", rec, webhook=m["hook"], webhook_type=m["type"], detail=t["ms"],
                                request=events[-1].request))
    return events


# The dispatcher traces each call and logs the trace past 500 ms (utiltrace LogIfLong): `(total time: 5000ms)`.
_TRACE_TOTAL = re.compile(r"\(total\s*time:\s*(?P<ms>\d{1,9})(?:\.\d+)?ms\)")
SLOW_CALL_MS = 1000  # a second or more on one admission call: every request it intercepts waits that long


# The Lease a leader-election request names in its URL (`…/namespaces/kube-system/leases/kube-scheduler?timeout=5s`)
_LEASE_URL = re.compile(r"/namespaces/(?P<ns>[a-z0-9-]{1,63})/leases/(?P<name>[\w.-]{1,253}?)(?=[?\"\s:]|$)")
# The resource a slow webhook call's trace names: `resource:coordination.k8s.io/v1, Resource=leases`.
_TRACE_RESOURCE = re.compile(r"resource[:=]\s*\S*,?\s*Resource=(?P<res>[a-z0-9-]{1,63})")



# Exposed for the test that every pattern is reachable through an anchor.
PATTERNS: dict[str, Guarded] = {
    "fail-mode": FAIL_MODE, "call-failed": CALL_FAILED, "denied": DENIED, "rejected": REJECTED,
    "canceled": CANCELED, "panic": PANIC, "policy-denied": POLICY_DENIED, "hook-fatal": HOOK_FATAL,
    "readyz-item": READYZ_ITEM, "readyz-log": READYZ_LOG, "not-ready": NOT_READY, "leader": LEADER,
    "unhealthy": UNHEALTHY, "started": STARTED,
    **{f"boot-{i}": p for i, (p, _, _) in enumerate(_BOOT)},
}
