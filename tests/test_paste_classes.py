"""Issue 45: one rule per class of what people paste, each on a paste written here in that class's shape (names,
namespaces and addresses made up; none is a corpus line). The corpus itself is scored by ../shared/corpus/score.py
(docs/testing.md); these pin the classes so that a rule cannot drift back to the pastes at hand."""

from __future__ import annotations

import json

import pytest

from tests.conftest import diagnose_text, run_cli

SVC = "https://{svc}.{ns}.svc:443/{path}?timeout=10s"


def _call(hook: str, cause: str, svc: str = "acme-hooks", ns: str = "acme", path: str = "mutate-pod") -> str:
    url = SVC.format(svc=svc, ns=ns, path=path)
    return f'failed calling webhook "{hook}": failed to call webhook: Post "{url}": {cause}'


NO_ENDPOINTS = 'no endpoints available for service "acme-hooks"'


# --- §2: a fail-closed webhook that refuses what its own backend needs to come back ---------------------------------

@pytest.mark.parametrize("prefix", [
    "Error creating: Internal error occurred: ",  # the controller's message alone, no controller named
    "  Warning  FailedCreate  4m (x12 over 20m)  replicaset-controller  Error creating: Internal error occurred: ",
    "W0412 08:00:00.000000       1 replica_set.go:560] sync \"acme/acme-hooks-5d9c\" failed with Internal error "
    "occurred: ",
])
def test_pods_a_controller_creates_refused_while_the_backend_is_down_is_likely_a_deadlock(prefix):
    """The controllers create the webhook's own replacement pods the same way: unless its namespace is exempt
    (which no line shows), it cannot come back. deadlock-likely, worded so, with the command that proves it."""
    d = diagnose_text(prefix + _call("pods.acme.io", NO_ENDPOINTS) + "\n")
    v = d.verdict
    assert (v.state, v.family) == ("deadlock-likely", "self-dependency"), v
    assert v.prove and "--kubeconfig" in v.prove and "--etcd-endpoints" in v.prove
    assert "waiting will not heal it" in v.explanation and "exclude acme" in v.explanation


@pytest.mark.parametrize("cause", ["dial tcp 10.0.3.7:443: connect: connection refused",
                                   "dial tcp 10.0.3.7:443: i/o timeout"])
def test_a_backend_that_cannot_be_reached_counts_as_down_for_the_cycle(cause):
    d = diagnose_text("Error creating: Internal error occurred: " + _call("pods.acme.io", cause) + "\n")
    assert d.verdict.state == "deadlock-likely", (cause, d.verdict)


def test_a_jobs_pods_or_a_missing_service_are_not_that_cycle():
    """A Job's pods run to completion and never serve a webhook; a Service that does not exist waits for no pod:
    both are degraded (the second said as not healing by waiting)."""
    job = diagnose_text("  Warning  FailedCreate  2m  job-controller  Error creating: Internal error occurred: "
                        + _call("pods.acme.io", NO_ENDPOINTS) + "\n")
    assert job.verdict.state == "degraded", job.verdict
    gone = diagnose_text("Error creating: Internal error occurred: "
                         + _call("pods.acme.io", 'service "acme-hooks" not found') + "\n")
    assert gone.verdict.state == "degraded" and "will not heal by itself" in gone.verdict.explanation


def test_a_vendor_whose_shipped_selector_exempts_its_own_pods_is_not_called_a_deadlock():
    """The shipped configuration is knowledge of the configuration: an opt-in injector never intercepts its own
    namespace, so pods refused while it is down are other namespaces' and it heals when it returns; the
    explanation says so and how to check that the selector was not changed."""
    d = diagnose_text("Error creating: Internal error occurred: "
                      + _call("sidecar-injector.istio.io", 'no endpoints available for service "istiod"',
                              svc="istiod", ns="istio-system", path="inject") + "\n")
    assert d.verdict.state == "degraded", d.verdict
    [f] = d.findings
    assert "opt-in" in f.explanation and "--kubeconfig" in f.explanation


def test_a_node_webhook_that_blocks_a_cni_agents_node_write_is_likely_node_starvation():
    """A CNI agent annotating its Node through a webhook judging Nodes (its path says so), backend down: the node
    gets no pod network, the backend's pods no address. Said as likely node and lease starvation."""
    line = ('E0412 08:00:00.000000    4242 node.go:88] "failed to set node network annotation" err="Internal error '
            'occurred: ' + _call("nodes.acme.io", NO_ENDPOINTS, path="validate/nodes").replace('"', '\\"') + '"')
    d = diagnose_text(line + "\n")
    assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "node-lease"), d.verdict


# --- §3: start-up starvation ---------------------------------------------------------------------------------------

IPADDR = ('E0705 09:00:01.500000       1 repairip.go:372] "Unhandled Error" err="the ClusterIP [IPv4]: 10.43.0.1 for '
          'Service default/kubernetes is not allocated; repairing: ipaddresses.networking.k8s.io \\"10.43.0.1\\" is '
          'forbidden: not yet ready to handle request"')


def test_a_start_up_hook_refused_by_admission_whose_controller_then_stops_is_stuck_not_a_moment():
    lines = ["I0705 09:00:00.100000       1 server.go:150] Version: v1.33.4", IPADDR,
             "I0705 09:00:01.600000       1 repairip.go:220] Shutting down ipallocator-repair-controller",
             "I0705 09:00:09.000000       1 controller.go:615] quota admission added evaluator for: leases"]
    d = diagnose_text("\n".join(lines) + "\n")
    assert d.verdict.state == "stuck" and d.verdict.needs_action, d.verdict
    assert "shut down" in d.findings[0].explanation
    # the same refusal with the controller going on is the moment at start every apiserver has
    calm = diagnose_text("\n".join(lines[:2] + lines[3:]) + "\n")
    assert calm.verdict.state == "clear", calm.verdict


# --- §4: fail-open from every witness --------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Failed calling webhook, failing open\n",  # the fragment a person quotes, no name
    "W0101 00:00:00.000000       1 dispatcher.go:199] Failed calling webhook, failing open audit.acme.io: failed "
    "calling webhook \"audit.acme.io\": failed to call webhook: Post \"https://a.acme.svc:443/v?timeout=3s\": EOF\n",
])
def test_a_webhook_failing_open_is_a_leak_named_or_not(text):
    d = diagnose_text(text)
    assert d.verdict.state == "leaking" and d.findings[0].family == "webhook-fail-open", d.verdict
    assert "failed open" in d.verdict.explanation and not d.verdict.explanation.startswith(" failed")


# --- §5: conversion ---------------------------------------------------------------------------------------------------

def test_a_conversion_webhook_failing_with_the_names_redacted_is_still_a_conversion_outage():
    d = diagnose_text("unexpected ListAndWatch error: failed to list <crd>: conversion webhook for <group/version>, "
                      "Kind=<kind> failed: Post <url>: <error>; reinitializing...\n")
    assert [f.family for f in d.findings] == ["conversion-webhook"] and d.verdict.needs_action


# --- names, however the paste carries them --------------------------------------------------------------------------

def test_names_survive_a_space_a_cut_name_a_shared_line_and_other_witnesses():
    cases = {
        # a wrap inside the quotes
        'Error creating: admission webhook "tags.acme-pol icy.io" denied the request without explanation':
            "tags.acme-policy.io",
        # Gatekeeper's events: `Admission webhook "x" denied request:`
        '5m  Warning  FailedAdmission  deployment/web  Admission webhook "check.acme.io" denied request: no':
            "check.acme.io",
        # another component's own reachability check
        'W0101 00:00:00.000000 1 degraded_webhook.go:147] failed to connect to webhook "reach.acme.io" via service '
        '"acme-hooks.acme.svc:443": dial tcp 10.0.0.9:443: connect: connection refused': "reach.acme.io",
        # a dry run the webhook cannot take
        'dry-run failed: admission webhook "side.acme.io" does not support dry run': "side.acme.io",
    }
    for text, name in cases.items():
        d = diagnose_text(text + "\n")
        named = {f.webhook for f in d.findings + d.notices}
        assert name in named, (text, named)
    # two webhooks' failures joined on one line (Helm's and Rancher's errors) are both read
    two = diagnose_text("Error: " + _call("one.acme.io", NO_ENDPOINTS) + ", " + _call("two.acme.io", NO_ENDPOINTS)
                        + "\n")
    assert {f.webhook for f in two.findings} == {"one.acme.io", "two.acme.io"}


@pytest.mark.parametrize("text", [
    'failed to call webhook: Post "https://hooks.acme.svc:443/validate?timeout=10s": dial tcp 10.0.0.9:443: '
    'connect: connection refused',
    'https://hooks.acme.svc:8443/mutate?timeout=30s": net/http: request canceled while waiting for connection '
    '(Client.Timeout exceeded while awaiting headers)',
])
def test_a_call_whose_name_was_cut_off_is_still_a_failing_webhook_named_by_its_backend(text):
    d = diagnose_text(text + "\n")
    [f] = d.findings
    assert f.webhook is None and f.service == "acme/hooks" and "its name is not in the lines" in f.title
    assert d.verdict.needs_action


def test_an_api_url_with_a_timeout_is_a_client_not_a_webhook():
    d = diagnose_text('Get "https://kubernetes.default.svc:443/api/v1/namespaces?timeout=32s": dial tcp '
                      '10.96.0.1:443: connect: connection refused\n')
    assert not d.findings and d.verdict.state == "clear"


def test_a_traced_call_that_ran_its_whole_timeout_is_a_timing_out_webhook():
    line = ('I0101 00:00:10.000000 1 trace.go:205] Trace[1]: "Call validating webhook" configuration:acme-cfg,'
            'webhook:slow.acme.io,resource:apps/v1, Resource=deployments,subresource:,operation:UPDATE,UID:x '
            '(01-Jan-2026 00:00:05.000) (total time: 10003ms):')
    d = diagnose_text(line + "\n")
    [f] = d.findings
    assert (f.webhook, f.family, f.cause_class) == ("slow.acme.io", "webhook-slow", "timeout")
    assert f.configuration == "acme-cfg" and d.verdict.needs_action
    slow = diagnose_text(line.replace("10003ms", "1700ms") + "\n")
    assert not slow.verdict.needs_action and slow.findings[0].severity == "info"


# --- §1 through the CLI: exit codes on pastes --------------------------------------------------------------------------

def test_the_cli_reads_a_one_line_paste_from_stdin_and_flags_it(tmp_path):
    p = run_cli("diagnose", "-", "-o", "json",
                stdin=("Error creating: Internal error occurred: " + _call("pods.acme.io", NO_ENDPOINTS)).encode())
    out = json.loads(p.stdout)
    assert p.returncode == 3 and out["result"]["verdict"]["state"] == "deadlock-likely", p.stderr


def test_a_lease_write_timing_out_while_etcd_says_it_is_slow_is_not_blamed_on_admission():
    """Starvation by storage looks like starvation by a webhook on the renewal alone; the lines around it tell."""
    put = ('E0312 14:57:20.000000       1 leaderelection.go:367] Failed to update lock: Put "https://10.0.0.1:6443/apis/'
           'coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler?timeout=5s": net/http: request '
           'canceled (Client.Timeout exceeded while awaiting headers)')
    assert diagnose_text(put + "\n").verdict.state == "deadlock-likely"
    for slow in ("E0312 14:57:21.000000       1 leaderelection.go:367] Failed to update lock: etcdserver: request "
                 "timed out",
                 "E0312 14:57:21.000000       1 reflector.go:1] can't list Jobs: the server was unable to return a "
                 "response in the time allotted, but may still be processing the request (get jobs.batch)"):
        d = diagnose_text(put + "\n" + slow + "\n")
        assert d.verdict.state == "clear" and [f.family for f in d.findings] == ["apiserver-slow"], (slow, d.verdict)


def test_a_k3s_node_password_refused_by_a_webhook_that_cannot_be_reached_is_likely_node_starvation():
    """k3s and RKE2 keep each node's password in a kube-system Secret `<node>.node-password.k3s`, written when the
    node joins: a webhook on Secrets that cannot answer keeps nodes from registering, and the webhook's own pods
    from a node to run on."""
    line = ('Mar 02 10:00:00 srv-1 k3s[811]: time="2026-03-02T10:00:00Z" level=error msg="unable to store '
            'agent-7.node-password.k3s: Internal error occurred: ' + _call("secrets.acme.io", NO_ENDPOINTS,
                                                                           path="validate-secrets").replace('"', '\\"')
            + '"')
    d = diagnose_text(line + "\n")
    assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "node-lease"), d.verdict
    assert "node-password" in d.verdict.explanation


# --- how a paste is mangled on its way into a ticket: the same outage, whatever the wrapping or the spaces ---------

_EVENT = ("  Warning  FailedCreate  11s (x14 over 52s)  replicaset-controller  Error creating: Internal error "
          "occurred: " + _call("pods.acme.io", NO_ENDPOINTS))


def _hard(text: str, width: int) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


@pytest.mark.parametrize("width", [60, 72, 80, 100, 120, 132, 160])
def test_an_event_hard_wrapped_at_any_terminal_width_is_the_same_outage(width):
    """A terminal cuts every line at its width, mid-word, and the first physical line keeps kubectl's leading
    columns: measured without them it looked shorter than the others, and the first cut got a space in it
    (`Error creati ng`), so the controller's words were missed and the deadlock not called."""
    d = diagnose_text(_hard(_EVENT, width) + "\n")
    assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "self-dependency"), (width, d.verdict)
    assert [f.webhook for f in d.findings] == ["pods.acme.io"], width


def test_a_short_line_a_terminal_cut_off_is_joined_before_the_hit():
    """A ticket's own wrap (`… occurred: ` then the call), cut again by a terminal, leaves a short line between
    the controller's words and the line that names the webhook: joined on the same evidence as the rest."""
    head, rest = _EVENT.split("failed calling", 1)
    text = _hard(head, 80) + "\nfailed calling" + rest + "\n"
    assert diagnose_text(text).verdict.state == "deadlock-likely"


def test_a_soft_wrapped_paste_keeps_its_words_apart():
    """An e-mail or a ticket's word wrap cuts at spaces and drops them: its lines' widths vary, and joining them
    without the space ran words together (`failed tocall`, `noendpoints`)."""
    import textwrap

    wrapped = "\n".join(textwrap.wrap(_EVENT.strip(), 72, break_on_hyphens=False))
    assert len(wrapped.splitlines()) > 2
    d = diagnose_text(wrapped + "\n")
    assert d.verdict.state == "deadlock-likely" and [f.webhook for f in d.findings] == ["pods.acme.io"], d.verdict
    assert d.findings[0].cause == "no endpoints"


@pytest.mark.parametrize("space", ["\u00a0", "\u202f", "\u2009"])
def test_a_paste_out_of_a_web_page_with_typographic_spaces_reads_as_the_log(space):
    """Chat clients and wiki pages turn a log's spaces into no-break or thin spaces: the klog header, the
    record gate and every phrase with a space in it read them as spaces."""
    line = ("E0412 08:00:00.000000       1 dispatcher.go:214] " + _call("pods.acme.io", NO_ENDPOINTS)).replace(" ", space)
    plain = diagnose_text(line.replace(space, " ") + "\n")
    d = diagnose_text("\ufeff" + line + "\n")
    assert [f.webhook for f in d.findings] == [f.webhook for f in plain.findings] == ["pods.acme.io"], space
    assert d.findings[0].cause == plain.findings[0].cause == "no endpoints"


def test_a_phrase_a_wrap_cut_at_its_space_is_still_found_in_a_paste():
    """The scanner looks for literal words; a wrap can cut a phrase at its space (`Failed to update` / `lock:`),
    and nothing else on the lines named it. A paste (a megabyte or less) is searched for each phrase's words
    too, and the line read whole; a log is not (its lines are whole)."""
    line = ('E0312 14:57:20.000000       1 leaderelection.go:367] Failed to update lock: Put "https://10.0.0.1:6443/'
            'apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler?timeout=5s": net/http: request '
            'canceled (Client.Timeout exceeded while awaiting headers)')
    assert diagnose_text(line + "\n").verdict.state == "deadlock-likely"
    head, tail = line.split(" lock: ", 1)
    cut = head + "\nlock: " + tail + "\n"
    assert diagnose_text(cut).verdict.state == "deadlock-likely"


def test_a_webhook_on_pod_bindings_that_cannot_be_reached_stops_every_new_pod_likely_a_deadlock():
    """The scheduler binds each new pod with one write (pods/binding, `running Bind plugin "DefaultBinder"`): a
    fail-closed webhook on it that cannot answer leaves every new pod unscheduled, its own backend's replacement
    pods and the system pods included. A webhook that answers and denies a binding is a notice, not that cycle."""
    row = '  Warning  FailedScheduling  12s (x9 over 3m)  default-scheduler  running Bind plugin "DefaultBinder": '
    d = diagnose_text(row + "Internal error occurred: " + _call("binding.acme.io", NO_ENDPOINTS, path="bind") + "\n")
    assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "self-dependency"), d.verdict
    assert "pod bindings" in d.findings[0].explanation
    assert any("scheduler" in step and "binding" in step for step in d.findings[0].cycle), d.findings[0].cycle
    denied = diagnose_text(row + 'admission webhook "binding.acme.io" denied the request: node pool is frozen\n')
    assert denied.verdict.state not in ("deadlocked", "deadlock-likely"), denied.verdict


# --- what tools put before each line of a paste --------------------------------------------------------------------

_TWO = ['Error from server (InternalError): error when creating "hooks.yaml": Internal error occurred: '
        + _call("pods.acme.io", NO_ENDPOINTS),
        "E0412 08:00:01.000000       1 dispatcher.go:214] " + _call("other.acme.io", "dial tcp 10.0.3.7:443: "
                                                                     "connect: connection refused", svc="other")]


@pytest.mark.parametrize("number", [
    lambda i: f"{i + 1:6d}\t",  # cat -n, nl
    lambda i: f"{i + 1:7d} ",  # less -N
    lambda i: f"{i * 40 + 1012}:",  # grep -n: increasing, not consecutive
    lambda i: f"{i + 1:3d} \u2502 ",  # a pager's or an editor's rule (bat)
    lambda i: f"{i + 1} | ",
])
def test_a_line_numbered_paste_reads_as_the_same_lines(number):
    """Line numbers in front of every line (grep -n, cat -n, less -N, an editor's gutter) left no line starting a
    record: the two lines were read as one wrapped record, and the klog header of the second hid the first."""
    plain = diagnose_text("\n".join(_TWO) + "\n")
    d = diagnose_text("\n".join(number(i) + line for i, line in enumerate(_TWO)) + "\n")
    assert sorted(f.webhook for f in d.findings) == sorted(f.webhook for f in plain.findings) \
        == ["other.acme.io", "pods.acme.io"], [f.webhook for f in d.findings]
    assert d.verdict.state == plain.verdict.state


def test_an_event_row_behind_line_numbers_or_a_timestamp_keeps_its_namespace():
    """`kubectl get events -A`'s row names the namespace before its age; behind a line number or a timestamp the
    row was not recognised, and the pods refused were no longer seen to be the webhook's own."""
    row = ("acme   4m   Warning   FailedCreate   replicaset/acme-hooks-5d9c   Error creating: Internal error occurred: "
           + _call("pods.acme.io", NO_ENDPOINTS))
    for prefix in ("", "2026-05-01T10:00:00.123456789Z ", "    12  "):
        d = diagnose_text(prefix + row + "\n")
        assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "self-dependency"), (prefix, d.verdict)
        assert "pods in acme, the namespace its own backend" in d.findings[0].explanation, prefix


def test_a_controller_message_behind_kubectl_logs_timestamps_is_still_the_controllers():
    """`kubectl logs --timestamps` puts an RFC 3339 time before the line. Read as a syslog header, the
    controller's `Error creating:` was taken for a host and a program name and dropped."""
    d = diagnose_text("2026-05-01T10:00:00.123456789Z Error creating: Internal error occurred: "
                      + _call("pods.acme.io", NO_ENDPOINTS) + "\n")
    assert (d.verdict.state, d.verdict.family) == ("deadlock-likely", "self-dependency"), d.verdict


def test_stern_s_pod_and_container_before_each_line_keep_the_lines_apart_and_the_json_read():
    """stern prints `pod container ` before every line. Each line then began with a lower-case word, which is
    what a wrapped continuation begins with, so the lines were joined into one record; and a JSON log behind the
    prefix was not read as JSON."""
    pre = "kube-apiserver-cp1 kube-apiserver "
    d = diagnose_text("".join(pre + x + "\n" for x in ("```", "Failed calling webhook, failing open", "```")))
    assert d.verdict.state == "leaking", d.verdict
    record = json.dumps({"level": "error", "ts": "2026-05-01T10:00:00Z", "logger": "setup", "msg": "failed to create",
                         "error": "Internal error occurred: " + _call("pods.acme.io", NO_ENDPOINTS)})
    for text in (record, "acme-hooks-5d9c-x2x manager " + record):
        f = diagnose_text(text + "\n").findings
        assert [x.webhook for x in f] == ["pods.acme.io"] and f[0].cause == "no endpoints", text[:40]
        assert f[0].first_seen and f[0].first_seen.startswith("2026-05-01"), f[0].first_seen  # the JSON's own time


def test_a_soft_wrap_that_broke_a_long_url_and_cut_twice_keeps_every_word():
    """An e-mail's or a ticket's word wrap cuts at spaces, but a word longer than the width (a URL) only inside
    it: that cut lost no space, and a space put there split the Service's name. With only two cuts at spaces,
    they were taken for a terminal's (`failed tocall`) unless the narrower one stopped because its next word
    would not fit. A continuation that begins with a JSON escape (`\\"https://…`) was not known as one."""
    import textwrap

    line = ('"failed to annotate node" err="Internal error occurred: ' + _call("nodes.acme.io", NO_ENDPOINTS,
                                                                              svc="acme-hooks-webhook-service")
            .replace('"', '\\"') + '"')
    # (at 72 and 80, two of this text's lines happen to end at one width: read as a terminal's cut, which the
    # widths alone cannot tell apart; measured, reading them as soft cost more terminal wraps than it won)
    for width in (60, 90, 100):
        wrapped = "\n".join(textwrap.wrap(line, width, break_on_hyphens=False))
        d = diagnose_text(wrapped + "\n")
        assert [f.webhook for f in d.findings] == ["nodes.acme.io"], width
        assert d.findings[0].service == "acme/acme-hooks-webhook-service", (width, d.findings[0].service)
        assert d.findings[0].cause == "no endpoints", width
    url = "Error creating: Internal error occurred: " + _call("pods.acme.io", "dial tcp 10.0.3.7:443: connect: "
                                                          "connection refused", svc="acme-hooks-webhook-service")
    d = diagnose_text("\n".join(textwrap.wrap(url, 72, break_on_hyphens=False)) + "\n")
    assert d.findings[0].service == "acme/acme-hooks-webhook-service" and d.verdict.state == "deadlock-likely"
