"""Real excerpts pasted into public issue trackers (tests/fixtures/pastes), read by `diagnose`.

Each excerpt was copied byte for byte from the thread named in expected.yaml: kubectl and Helm output, controller
and webhook-pod logs, syslog and journald lines, Markdown quoting, YAML-wrapped status messages. expected.yaml says
what diagnose should find (webhook, cause class, mode, configuration, severity, deadlock, verdict) or `none` for
excerpts that mention webhooks but hold no failure: there every finding is a false alarm.

Recall: expected findings found with the right webhook and cause class (or the right family when no webhook is
expected). False alarms: findings no expectation accounts for. An excerpt passes when every expectation matches in
all its fields, nothing else is found and the verdict is the one expected; every excerpt not marked `known_miss`
must pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
import yaml

from tests.conftest import diagnose_text

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pastes")
_FIELDS = ("cause_class", "mode", "severity", "configuration", "bootstrap_deadlock")


def load() -> dict:
    with open(os.path.join(HERE, "expected.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@dataclass
class Outcome:
    name: str
    expected: int = 0  # expectations (findings that should be there)
    recalled: int = 0  # of those, found with the right webhook and cause class (or family)
    false_alarms: int = 0  # findings no expectation accounts for
    problems: list[str] = field(default_factory=list)
    known_miss: str | None = None
    family: str | None = None  # the deadlock family the thread shows (issue 21), "none" when it must not be named
    family_named: str | None = None  # the family diagnose named (the verdict's)
    family_miss: str | None = None  # why these lines cannot show it

    @property
    def passed(self) -> bool:
        return not self.problems


def _matches(item: dict, f) -> bool:
    if item.get("webhook") is None:
        return f.webhook is None and f.family == item.get("family")
    return f.webhook == item["webhook"]


def evaluate(name: str, spec: dict) -> Outcome:
    with open(os.path.join(HERE, name + ".txt"), "rb") as fh:
        data = fh.read()
    diag = diagnose_text(data, name=name + ".txt")
    found = list(diag.findings) + list(diag.notices)  # notices: ordinary denials, informational
    out = Outcome(name, known_miss=spec.get("known_miss"), family=spec.get("family"),
                  family_named=diag.verdict.family, family_miss=spec.get("family_miss"))
    if out.family is not None:
        want = None if out.family == "none" else out.family
        if out.family_miss and out.family_named == want:
            out.problems.append(f"named {want} although marked family_miss ({out.family_miss}): drop the mark")
        elif not out.family_miss and out.family_named != want:
            out.problems.append(f"family {out.family_named}, want {want}")
    items = [] if spec["expect"] == "none" else spec["expect"]
    out.expected = len(items)
    used: set[int] = set()
    for item in items:
        cands = [f for f in found if id(f) not in used and _matches(item, f)]
        if not cands:
            out.problems.append(f"missing {item}")
            continue
        f = next((c for c in cands if all(getattr(c, k) == item[k] for k in _FIELDS if k in item)), cands[0])
        used.add(id(f))
        if item.get("webhook") is None or f.cause_class == item.get("cause_class"):
            out.recalled += 1
        wrong = {k: (getattr(f, k), item[k]) for k in _FIELDS if k in item and getattr(f, k) != item[k]}
        if wrong:
            out.problems.append(f"{item.get('webhook') or item.get('family')}: (got, want) {wrong}")
    for f in found:
        if id(f) not in used:
            out.false_alarms += 1
            out.problems.append(f"false alarm: {f.family} {f.webhook!r} {f.cause_class} {f.title}")
    if spec.get("verdict") and diag.verdict.state != spec["verdict"]:
        out.problems.append(f"verdict {diag.verdict.state}, want {spec['verdict']}")
    if spec["expect"] == "none" and diag.verdict.state != "clear":
        out.problems.append(f"verdict {diag.verdict.state}, want clear")
    return out


def evaluate_all() -> list[Outcome]:
    return [evaluate(name, spec) for name, spec in load().items()]


def summary(outcomes: list[Outcome]) -> str:
    exp = sum(o.expected for o in outcomes)
    rec = sum(o.recalled for o in outcomes)
    fa = sum(o.false_alarms for o in outcomes)
    decoys = [o for o in outcomes if o.expected == 0]
    fa_decoys = sum(1 for o in decoys if o.false_alarms)
    passed = sum(1 for o in outcomes if o.passed)
    return (f"{len(outcomes)} excerpts ({len(decoys)} without a failure): recall {rec}/{exp} "
            f"({100.0 * rec / max(exp, 1):.1f}%), false alarms {fa} (in {fa_decoys}/{len(decoys)} excerpts without a "
            f"failure), {passed}/{len(outcomes)} excerpts read entirely right, "
            f"{sum(1 for o in outcomes if o.known_miss)} known misses")


FAMILIES = ("bootstrap", "self-dependency", "node-lease", "conversion", "none")


def family_counts(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """family -> (excerpts named as that family, excerpts collected for it); for "none": not named as any."""
    out = {}
    for fam in FAMILIES:
        mine = [o for o in outcomes if o.family == fam]
        named = sum(1 for o in mine if o.family_named == (None if fam == "none" else fam))
        out[fam] = (named, len(mine))
    return out


def family_summary(outcomes: list[Outcome]) -> str:
    parts = [f"{fam} {n}/{m}" for fam, (n, m) in family_counts(outcomes).items()]
    return "deadlock families named: " + ", ".join(parts) + " (none: named no family, as it should)"


_SPECS = load()


@pytest.mark.parametrize("name", sorted(_SPECS))
def test_paste(name):
    spec = _SPECS[name]
    out = evaluate(name, spec)
    if spec.get("known_miss"):
        if out.passed:
            pytest.fail(f"{name} is marked known_miss ({spec['known_miss']}) but now reads right: drop the mark")
        pytest.xfail(spec["known_miss"])
    assert out.passed, "\n".join(out.problems)


def test_every_fixture_has_an_expectation_and_a_source():
    files = {f[:-4] for f in os.listdir(HERE) if f.endswith(".txt")}
    assert files == set(_SPECS)
    assert len(files) >= 60
    for name, spec in _SPECS.items():
        assert spec["source"].startswith("https://github.com/"), name
        assert spec["expect"] == "none" or spec["expect"], name
    assert sum(1 for s in _SPECS.values() if s["expect"] == "none") >= 15  # decoys measure false alarms


def test_numbers(capsys):
    outcomes = evaluate_all()
    with capsys.disabled():
        print("\npastes: " + summary(outcomes))
        print("pastes: " + family_summary(outcomes))
    assert all(o.passed for o in outcomes if not o.known_miss)


def test_every_family_has_at_least_four_collected_incidents_or_decoys():
    counts = family_counts(evaluate_all())
    for fam, (named, collected) in counts.items():
        # node-lease: only two public threads with the lines found so far; bootstrap: of the excerpts issue 16
        # collected, two name no webhook and are `stuck` since issue 36 (the webhook seeds are in tests/fixtures/real)
        assert collected >= {"node-lease": 2, "bootstrap": 1}.get(fam, 4), (fam, counts)
    assert counts["conversion"][0] == counts["conversion"][1]
    assert counts["none"][0] == counts["none"][1]  # nothing that must not be named a deadlock is


# --- the misreads issue 16 lists, each on the smallest text that shows it ---------------------------------------

def _calls(text: str):
    return [(f.webhook, f.cause_class) for f in diagnose_text(text).findings if f.webhook]


def _all(text: str):
    d = diagnose_text(text)
    return d.findings + d.notices


_LONG_ERR = ('failed calling webhook "validate.kyverno.svc-fail": failed to call webhook: Post "https://kyverno-svc.kyverno.svc:443/'
             'validate/fail?timeout=10s&' + "x" * 420 + '": dial tcp 10.96.0.50:443: connect: connection refused')


@pytest.mark.parametrize("prefix", ["master1 kube-controller-manager: ", "master1 kube-apiserver[812]: ",
                                    "02:19:14      --- FAIL: TestX (0.01s) require.go:794: "])
def test_a_record_behind_an_unknown_prefix_keeps_its_whole_message(prefix):
    line = prefix + "E0405 10:11:12.123456       1 dispatcher.go:214] " + _LONG_ERR
    assert _calls(line + "\n") == [("validate.kyverno.svc-fail", "unreachable")]
    from breakglass.logs import formats
    rec = formats.parse_record(line, "f", 1, 1, 2026)
    assert rec.level == "E" and rec.message.endswith("connection refused") and rec.caller == "dispatcher.go:214"


def test_two_webhooks_on_consecutive_unrecognised_lines_stay_two():
    a = ('Internal error occurred: failed calling webhook "a.example.com": failed to call webhook: Post '
         '"https://a.a.svc:443/x?timeout=10s": dial tcp 10.0.0.1:443: connect: connection refused')
    b = ('Internal error occurred: failed calling webhook "b.example.com": failed to call webhook: Post '
         '"https://b.b.svc:443/x?timeout=10s": context deadline exceeded')
    assert sorted(_calls(a + "\n" + b + "\n")) == [("a.example.com", "unreachable"), ("b.example.com", "timeout")]


def test_a_webhook_pods_own_log_line_does_not_change_the_apiserver_lines_cause():
    text = ('E1018 20:26:55.990926       1 dispatcher.go:192] failed calling webhook "validation.gatekeeper.sh": failed '
            'to call webhook: Post "https://gatekeeper-webhook-service.cattle-gatekeeper-system.svc:443/v1/admit?timeout=3s": '
            'context deadline exceeded\n'
            '2023/10/18 20:28:36 http: TLS handshake error from 10.1.1.12:51786: remote error: tls: bad certificate\n')
    assert _calls(text) == [("validation.gatekeeper.sh", "timeout")]


def test_markdown_auto_links_are_not_the_webhooks_name():
    text = ('Error from server (InternalError): error when creating "x.yaml": Internal error occurred: failed calling '
            'webhook "[vmagent.example.com](http://vmagent.example.com/)": failed to call webhook: Post '
            '"[https://vm.vm.svc:443/validate?timeout=10s](https://vm.vm.svc/validate?timeout=10s)": '
            'dial tcp 10.1.2.3:443: connect: connection refused\n')
    [f] = diagnose_text(text).findings
    assert (f.webhook, f.cause_class, f.url) == ("vmagent.example.com", "unreachable",
                                                 "https://vm.vm.svc:443/validate?timeout=10s")


@pytest.mark.parametrize("cause", [
    "No agent available",
    "Forbidden",
    "Internal Server Error",
    "the server is currently unable to handle the request",
    "ssh: rejected: connect failed (Connection refused)",
])
def test_egress_proxy_failures_are_proxy(cause):
    line = ('W0405 10:11:12.123456       1 dispatcher.go:210] Failed calling webhook, failing closed v.example.com: '
            'failed calling webhook "v.example.com": failed to call webhook: Post '
            f'"https://v.v.svc:443/validate?timeout=10s": {cause}\n')
    [f] = diagnose_text(line).findings
    assert (f.webhook, f.cause_class, f.family) == ("v.example.com", "proxy", "webhook-unreachable")


def test_the_apiserver_not_reaching_itself_on_loopback_is_not_stuck_admission():
    text = "".join(
        f"E0514 12:48:5{i}.086989       1 storage_rbac.go:157] unable to initialize clusterroles: Get "
        f'"https://127.0.0.1:8443/apis/rbac.authorization.k8s.io/v1/clusterroles": dial tcp 127.0.0.1:8443: '
        "connect: connection refused\n"
        f"E0514 12:48:5{i}.129283       1 storage_rbac.go:187] unable to reconcile clusterrole.rbac.authorization.k8s.io/"
        'admin: Get "https://[::1]:6443/apis/rbac.authorization.k8s.io/v1/clusterroles/admin": dial tcp [::1]:6443: '
        "connect: connection refused\n" for i in range(4))
    diag = diagnose_text(text)
    assert diag.findings == [] and diag.verdict.state == "clear"
    # the same hook failing for another reason is still stuck
    other = text.replace("dial tcp 127.0.0.1:8443: connect: connection refused", "etcdserver: request timed out")
    assert [f.family for f in diagnose_text(other).findings] == ["bootstrap-stuck"]


def test_an_ordinary_denial_says_which_webhook_denied_what_and_exits_0():
    from tests.conftest import run_cli
    text = ('Error from server: error when creating "pods/echod.yaml": admission webhook '
            '"image-signature.hightowerlabs.com" denied the request: image is not signed\n')
    d = diagnose_text(text)
    assert d.findings == [] and d.verdict.state == "clear"  # nothing needs action
    [f] = d.notices
    assert (f.family, f.severity, f.webhook, f.cause_class, f.mode) == (
        "webhook-denied", "info", "image-signature.hightowerlabs.com", "rejected", "deny")
    assert 'creating "pods/echod.yaml"' in f.title and "image is not signed" in f.title
    proc = run_cli("diagnose", "-", stdin=text.encode())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert b"image-signature.hightowerlabs.com" in proc.stdout and b"image is not signed" in proc.stdout
    import json
    doc = json.loads(run_cli("diagnose", "-", "-o", "json", stdin=text.encode()).stdout)
    assert "image-signature.hightowerlabs.com" in json.dumps(doc)


def test_a_denial_printed_by_gos_percent_v_reads_as_prose():
    """The dispatcher logs the StatusError with %#v: its message keeps Kyverno's newlines as `\\n`, and the
    summary quoted them (`denied a request: \\n\\nresource …`) with the cut ending `obje.`."""
    line = ('W1204 17:55:09.986556   11188 dispatcher.go:225] rejected by webhook "validate.kyverno.svc-fail": '
            '&errors.StatusError{ErrStatus:v1.Status{Status:"Failure", Message:"admission webhook '
            '\\"validate.kyverno.svc-fail\\" denied the request: \\n\\nresource ConfigMap/default/probe was '
            'blocked due to the following policies \\n\\ndeny-labelled:\\n  no-deny-label: \'validation error: '
            + "objects labelled breakglass-deny are refused " * 6 + '\'", Reason:"", Code:400}}\n')
    d = diagnose_text(line)
    [f] = d.notices
    assert f.family == "webhook-denied" and f.webhook == "validate.kyverno.svc-fail"
    assert "\\n" not in f.title and "\\n" not in f.explanation and "  " not in f.title, f.title
    assert "the following policies deny-labelled: no-deny-label:" in f.title, f.title
    assert f.title.endswith("…") and f.title[:-1].split()[-1] in line.split(), f.title  # cut at a word
    assert not d.verdict.explanation.endswith("…."), d.verdict.explanation


@pytest.mark.parametrize("message", [
    "resource servicecidrs not found in group networking.k8s.io",
    "the resource 'servicecidrs' is not found in group networking.k8s.io",
    "failed to get the Group Version Resource for kind ServiceCIDR",
    'no matches for kind "ServiceCIDR" in version "networking.k8s.io/v1"',
])
def test_a_denial_showing_the_webhook_does_not_know_servicecidr_is_the_bootstrap_deadlock(message):
    text = ('E0405 10:11:12.123456       1 default_servicecidr_controller.go:170] Creating default ServiceCIDR with '
            'CIDRs: [10.96.0.0/12]\n'
            'E0405 10:11:12.223456       1 default_servicecidr_controller.go:190] error initializing the default '
            f'ServiceCIDR: admission webhook "validate.kyverno.svc-fail" denied the request: {message}\n')
    diag = diagnose_text(text)
    [f] = [f for f in diag.findings if f.webhook]
    assert (f.webhook, f.bootstrap_deadlock, f.severity, f.family) == (
        "validate.kyverno.svc-fail", True, "critical", "webhook-rejects-bootstrap")
    assert f.blocked == ['ServiceCIDR "kubernetes"'] and "does not know ServiceCIDR" in f.explanation
    assert diag.verdict.state == "deadlocked"
    # the same answer from a client, with no apiserver line around it, still names the outage
    alone = f'Error from server: admission webhook "validate.kyverno.svc-fail" denied the request: {message}\n'
    [g] = diagnose_text(alone).findings
    assert g.bootstrap_deadlock and g.severity == "critical"


def test_a_denial_for_an_unknown_kind_that_is_not_bootstrap_is_ordinary():
    text = ('Error: INSTALLATION FAILED: admission webhook "validate-policy.kyverno.svc" denied the request: path: '
            'spec.rules[0].generate..: failed to get the Group Version Resource for kind CiliumNetworkPolicy\n')
    [f] = _all(text)
    assert (f.family, f.severity) == ("webhook-denied", "info")


def test_a_slow_calls_trace_names_the_configuration():
    text = ('I0719 17:46:09.471881       1 trace.go:116] Trace[1869591222]: "Call validating webhook" '
            'configuration:gatekeeper-validating-webhook-configuration,webhook:validation.gatekeeper.sh,resource:/v1, '
            'Resource=pods,subresource:,operation:CREATE,UID:91264f7a (started: 2020-07-19 17:45:39.471540102 +0000 UTC '
            'm=+505595.125356740) (total time: 3.00024599s):\n'
            'W0719 17:46:09.471959       1 dispatcher.go:153] Failed calling webhook, failing closed validation.gatekeeper.sh: '
            'failed calling webhook "validation.gatekeeper.sh": failed to call webhook: Post '
            '"https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=3s": context deadline exceeded\n')
    [f] = diagnose_text(text).findings
    assert (f.configuration, f.configuration_source) == ("gatekeeper-validating-webhook-configuration", "log")


def test_a_list_item_after_a_long_line_is_not_a_continuation():
    from breakglass.logs import formats
    prev = ('Error from server (InternalError): Internal error occurred: failed calling webhook "a.b": failed to call '
            'webhook: Post "https://a.b.svc:443/x": dial tcp 10.0.0.1:443: connect: connection refused')
    assert not formats.continues(prev, "- Kubernetes version: 1.31")
    assert formats.continues(prev[:80], prev[80:])  # cut mid-word: the rest begins in lower case
    assert formats.continues('  message: "failed calling webhook \\"a.b\\": Post', '    "https://a.b.svc:443/x": EOF"')
    assert not formats.continues(prev, "2023/10/18 20:28:36 http: TLS handshake error from 10.1.1.12:51786: EOF")


def test_the_trace_pattern_is_reached_through_an_anchor_and_the_gate():
    from breakglass.diagnose.signatures import ANCHORS, TRACE_CONFIG, record_gate
    text = 'Trace[1]: "Call mutating webhook" configuration:c,webhook:w.x,resource:/v1, Resource=pods'
    assert TRACE_CONFIG.search(text)["cfg"] == "c"
    assert any(a in text.encode() for a in ANCHORS) and record_gate(text.encode())


# -- how pastes get mangled (issue 36 §4): the same two lines as a ticket, a terminal or a distribution delivers them
_DISPATCH = ('W1203 10:00:00.123456       1 dispatcher.go:217] Failed calling webhook, failing closed '
             'validate.kyverno.svc-fail: failed calling webhook "validate.kyverno.svc-fail": failed to call webhook: '
             'Post "https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s": dial tcp 10.96.0.55:443: '
             'connect: connection refused')
_UNHANDLED = ('E1203 10:00:00.123456       1 repair.go:100] "Unhandled Error" err="unable to create ConfigMap: Internal '
              'error occurred: failed calling webhook \\"validate.kyverno.svc-fail\\": failed to call webhook: Post '
              '\\"https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s\\": dial tcp 10.96.0.55:443: connect: '
              'connection refused"')


def _cut(text: str, width: int) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


_MANGLED = {
    "a terminal's hard wrap at 80 columns": lambda t: _cut(t, 80),
    "a wrap inside the quoted name": lambda t: t.replace('webhook "validate.kyv', 'webhook "validate.kyv\n', 1)
                                               .replace('webhook \\"validate.kyv', 'webhook \\"validate.kyv\n', 1),
    "a wrap drawn with Emacs' continuation mark": lambda t: _cut(t, 79).replace("\n", "\\\n"),
    "a wrap drawn with a return symbol": lambda t: _cut(t, 79).replace("\n", "\u23ce\n"),
    "escaped quotes doubled by a ticket system": lambda t: t.replace('\\"', '\\\\"'),
    "HTML entities from a Jira or chat export": lambda t: t.replace('"', "&quot;"),
    "numeric HTML entities": lambda t: t.replace('"', "&#34;"),
    "Markdown quoting of a wrapped paste": lambda t: "> " + _cut(t, 76).replace("\n", "\n> "),
    "k0s' journal (logrus around klog)": lambda t: ('Dec 03 10:00:00 cp-1 k0s[1234]: time="2026-12-03 10:00:00" '
                                                    'level=info msg="' + t.replace('"', '\\"') +
                                                    '" component=kube-apiserver stream=stderr'),
    "microk8s' kubelite journal": lambda t: "Dec 03 10:00:00 cp-1 microk8s.daemon-kubelite[1234]: " + t,
    "k3s' journal": lambda t: "Dec 03 10:00:00 cp-1 k3s[1234]: " + t,
    "RKE2's static pod through CRI": lambda t: "2026-12-03T10:00:00.123456789Z stderr F " + t,
    "OpenShift's must-gather (docker JSON)": lambda t: __import__("json").dumps(
        {"log": t + "\n", "stream": "stderr", "time": "2026-12-03T10:00:00Z"}),
}


@pytest.mark.parametrize("how", list(_MANGLED))
@pytest.mark.parametrize("line", [_DISPATCH, _UNHANDLED], ids=["dispatcher", "caller"])
def test_the_webhooks_name_survives_how_pastes_are_mangled(how, line):
    d = diagnose_text(_MANGLED[how](line) + "\n")
    webhooks = {f.webhook for f in d.findings}
    assert webhooks == {"validate.kyverno.svc-fail"}, (how, webhooks, [f.title for f in d.findings])
    assert next(f for f in d.findings).cause_class == "unreachable"


@pytest.mark.parametrize("name", ["kserve-580-kubeflow-events", "istio-describe-rs-service-not-found",
                                  "kaito-service-not-found"])
def test_a_webhook_whose_service_does_not_exist_will_not_heal_by_waiting(name):
    """`service "…" not found`: no pod, rollout or restart brings a missing Service back, so the verdict says the
    configuration outlived its backend and that this will not heal by itself (it said only "until the webhooks
    answer again", which reads as wait)."""
    with open(os.path.join(HERE, name + ".txt"), "rb") as fh:
        d = diagnose_text(fh.read())
    [f] = [f for f in d.findings if f.cause == "service not found"]
    assert d.verdict.state == "degraded"  # not over-called: nothing shows the control plane blocked
    said = d.verdict.explanation
    assert f"Service {f.service} does not exist" in said and "will not heal by itself" in said, said
