"""Input an attacker shapes (their own requests are in the audit log, their pods write the logs) and output an
engineer pastes into a shell or a spreadsheet: issue 17's findings 4, 10, 11 and 12, each reproduced as the
attacker would try it."""

from __future__ import annotations

import csv
import io
import shlex

import pytest

from breakglass import leaks

from breakglass.present import render
from breakglass.leaks import audit
from tests.conftest import run_cli
from tests.test_leaks import event, fo

# ---------------------------------------------------------------------------------------------------------------
# 11. Output pasted into shells and spreadsheets

HOSTILE_NAMES = [
    "x$(touch /tmp/PWNED)",
    "x`id`",
    "a;rm -rf ~",
    "it's",
    "a\nrm -rf ~",
    "a\rrm -rf ~",
    "--kubeconfig=/tmp/evil",
]


def _leak_log(tmp_path, name, ns="default", resource="configmaps"):
    p = tmp_path / "audit.log"
    p.write_text(event("a1", "create", resource, ns, name, fo(), 201) + "\n")
    return p


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_recheck_commands_quote_object_names(tmp_path, name):
    rep = audit.scan([str(_leak_log(tmp_path, name, ns="prod$(id)"))])
    [r] = rep.recheck
    cmd = r.kubectl
    assert "\n" not in cmd and "\r" not in cmd
    if any(c in name for c in "\r\n"):
        assert cmd.startswith("#")  # no such object can exist: a comment, never a command
        return
    assert shlex.quote(name) in cmd and shlex.quote("prod$(id)") in cmd
    argv = shlex.split(cmd)
    assert argv[:3] == ["kubectl", "get", "configmaps"]
    assert name in argv and "prod$(id)" in argv
    assert argv[argv.index("prod$(id)") - 1] == "-n"
    if name.startswith("-"):
        assert argv.index("--") < argv.index(name)  # after --: never read as an option
    text = render.leak_report(rep)
    assert cmd in text
    assert "\r" not in text and not any(line.lstrip().startswith("rm -rf") for line in text.splitlines())


@pytest.mark.parametrize("name", ["cm\u202egnp.exe", "cm\u2066x\u2069", "cm\u200bx", "cm\x1b[2Jx"])
def test_recheck_of_a_name_that_reorders_or_hides_what_is_read_is_a_comment(tmp_path, name):
    """A bidi override, an isolate, a zero-width space or ESC would make the shown command differ from the one
    pasted: no object can carry them, so the re-check is a comment with each character escaped."""
    rep = audit.scan([str(_leak_log(tmp_path, name))])
    [r] = rep.recheck
    assert r.kubectl.startswith("# not re-checkable")
    assert r.kubectl.isprintable() and "\\u" in r.kubectl or "\\x1b" in r.kubectl
    assert render.leak_report(rep).count(r.kubectl) == 1


def test_recheck_text_report_does_not_split_on_cr_lf(tmp_path):
    rep = audit.scan([str(_leak_log(tmp_path, "a\nkubectl delete ns prod"))])
    text = render.leak_report(rep)
    assert not any(line.startswith("kubectl delete") for line in text.splitlines())
    assert "\r" not in text


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://evil\",\"x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_cells_are_neutralised(tmp_path, cell):
    p = tmp_path / "audit.log"
    p.write_text(event("a1", "create", "configmaps", "default", "cm", fo(), 201, user=cell) + "\n")
    out = io.StringIO()
    leaks.to_csv(audit.scan([str(p)]), out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    user = rows[1][leaks.CSV_FIELDS.index("user")]
    assert user == "'" + cell
    assert rows[1][leaks.CSV_FIELDS.index("code")] == "201"  # numbers stay numbers


def test_csv_from_the_command_line_is_neutralised(tmp_path):
    p = tmp_path / "audit.log"
    p.write_text(event("a1", "create", "configmaps", "default", "=cmd|' /C calc'!A0", fo(), 201) + "\n")
    c = run_cli("leaks", "--audit-log", str(p), "-o", "csv").stdout.decode()
    assert "'=cmd|" in c and ",=cmd" not in c


def test_check_name_refuses_a_trailing_newline():
    from breakglass.core.errors import BadInput
    from breakglass.ways.etcd_delete import check_name

    with pytest.raises(BadInput):
        check_name("kyverno\n")


# ---------------------------------------------------------------------------------------------------------------
# 12. YAML and plan files

LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))


def _recover_plan(tmp_path, text: str):
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    return run_cli("recover", "--plan", str(plan), "--dry-run", env={"BREAKGLASS_STATE_DIR": str(tmp_path / "st")},
                   timeout=60)


def _allowed():
    import inspect

    from breakglass.cli.recover import recover

    return set(inspect.signature(recover).parameters) - {"plan", "auto"}


@pytest.mark.parametrize("load", [
    lambda t: __import__("breakglass.flows.scripted", fromlist=["x"]).load_plan(t, _allowed()),
    lambda t: __import__("breakglass.talos.machineconfig", fromlist=["x"]).parse(open(t).read(), t),
    lambda t: __import__("breakglass.ways.kubeadm_flags", fromlist=["x"])._command_flags(open(t).read(), t),
    lambda t: __import__("breakglass.webhooks.sources", fromlist=["x"])._documents(open(t).read(), t),
], ids=["plan", "machineconfig", "manifest", "webhook-file"])
def test_billion_laughs_is_refused_before_it_expands(tmp_path, load):
    from breakglass.core.errors import BadInput

    p = tmp_path / "laughs.yaml"
    p.write_text(LAUGHS)
    with pytest.raises(BadInput, match="anchors and aliases"):
        load(str(p))


@pytest.mark.parametrize("load", [
    lambda t: __import__("breakglass.talos.machineconfig", fromlist=["x"]).parse(open(t).read(), t),
    lambda t: __import__("breakglass.webhooks.sources", fromlist=["x"])._documents(open(t).read(), t),
], ids=["machineconfig", "webhook-file"])
def test_yaml_nested_thousands_deep_is_bad_input(tmp_path, load):
    from breakglass.core.errors import BadInput

    p = tmp_path / "deep.yaml"
    p.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(BadInput, match="nested"):
        load(str(p))


def test_billion_laughs_plan_from_the_command_line(tmp_path):
    p = _recover_plan(tmp_path, "method: etcd\n" + LAUGHS.replace("a:", "x_a:"))
    assert p.returncode == 2, p.stderr
    assert "anchors and aliases" in p.stderr.decode() and len(p.stderr.decode().strip().splitlines()) == 1


@pytest.mark.parametrize("content,match", [
    ("method: etcd\ndry_run: \"false\"\n", "dry_run: true or false"),
    ("method: etcd\nwait: yes please\n", "wait: true or false"),
    ("method: etcd\nwebhook_config: {validating: x}\n", "webhook_config: a list"),
    ("method: etcd\nnodes: [[10.0.0.1]]\n", "nodes: a list"),
    ("method: etcd\nwait_timeout: soon\n", "wait_timeout: a number"),
    ("method: etcd\nssh_port: 22.5\n", "ssh_port: a whole number"),
    ("method: etcd\netcd_endpoints: [a, b]\n", "etcd_endpoints: a string"),
    ("method: etcd\netcd_prefix:\n", "etcd_prefix: a string"),
    ("method: [etcd]\n", "method: one of"),
    ("method: etcd\naction: bogus\n", "unknown action 'bogus'"),
])
def test_malformed_plans_are_one_line_and_exit_2(tmp_path, content, match):
    p = _recover_plan(tmp_path, content)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert match in err and "unexpected" not in err and len(err.strip().splitlines()) == 1, err


def test_plan_values_of_the_right_type_still_load(tmp_path):
    from breakglass.flows import scripted

    p = tmp_path / "plan.yaml"
    p.write_text("method: etcd\ndry_run: true\nwait_timeout: 60\nssh_port: 2222\nwebhook_config: validating/x\n"
                 "nodes: [10.0.0.2, 10.0.0.3]\netcd_endpoints: https://127.0.0.1:2379\nsnapshot:\n")
    got = scripted.load_plan(str(p), _allowed())
    assert got["dry_run"] is True and got["wait_timeout"] == 60.0 and got["ssh_port"] == 2222
    assert got["webhook_config"] == ["validating/x"] and got["nodes"] == ["10.0.0.2", "10.0.0.3"]
    assert got["snapshot"] is None


# ---------------------------------------------------------------------------------------------------------------
# 10. Regexes over text an attacker shapes are linear

# Used only with .match (at a line's start), or only on a bounded window before a literal (_before: 400 characters,
# _denied_target: 600): their cost per line is bounded however long the line. classify() is checked whole below.
ANCHORED_OR_WINDOWED = {"formats._OWN_START", "formats.RECORD_START", "formats._CONT_HEAD", "formats._KLOG_HEAD",
                        "formats._NODE_PREFIX", "scanner._RECORD_START", "scanner._CRI_PARTIAL",
                        "signatures._READYZ_CHECKS", "signatures._NOT_READY_OBJ", "signatures._DENIED_TARGET",
                        # read only on a source's first 64 KiB (engine.kubernetes_words); its ~60 words make ~7,000
                        # near misses, whose 32 KB copies alone took this test minutes to build
                        "engine._K8S_WORDS"}
# Quadratic on long near misses, in files outside this change (issue 17, finding 10: left to their owners).
OUTSIDE: dict[str, str] = {}  # none left: causes' dial tcp and leaks' Go durations are bounded now


def _regexes():
    from bench.regex_worst import patterns

    return [pytest.param(p, id=name, marks=[pytest.mark.xfail(reason=OUTSIDE[name], strict=False)]
                         if name in OUTSIDE else []) for name, p in patterns() if name not in ANCHORED_OR_WINDOWED]


def _best_of(f, n: int = 3) -> float:
    """The least CPU time this process spent in ``f`` over ``n`` runs: CPU time, not the wall clock, so another
    process on the same cores (a parallel test worker, a build) does not count (one such run on 2 cores made a
    linear pattern look 64x slower at 16x the input)."""
    import time

    best = float("inf")
    for _ in range(n):
        t0 = time.process_time()
        f()
        best = min(best, time.process_time() - t0)
    return best


def _growth(run, small: list, big: list) -> tuple[float, float, str]:
    """(time at 16x, its growth over 1x) for the worst of the three inputs slowest at 1x; min of three runs."""
    import time

    times = []
    for i, text in enumerate(small):
        t0 = time.process_time()
        run(text)
        times.append((time.process_time() - t0, i))
    out = (0.0, 0.0, "")
    for _, i in sorted(times, reverse=True)[:3]:
        t_big = _best_of(lambda: run(big[i]))
        growth = t_big / max(_best_of(lambda: run(small[i])), 1e-6)
        out = max(out, (t_big if growth >= 64 else 0.0, growth, big[i][:40]), key=lambda x: (x[0], x[1]))
    return out


@pytest.mark.parametrize("pattern", _regexes())
def test_every_log_regex_is_linear_on_long_near_misses(pattern):
    """A near miss (the pattern's own words, then filler that keeps a run going) 16 times as long takes about 16
    times as long, never 256 (quadratic). Under 1 ms at 32 KB passes whatever the ratio (timer noise)."""
    from bench.regex_worst import near_misses

    def enc(xs):
        return [x.encode("latin-1", "replace") for x in xs] if isinstance(pattern.pattern, bytes) else xs

    small = enc(near_misses(pattern, 2 << 10, dedupe=False))
    big = enc(near_misses(pattern, 32 << 10, dedupe=False))
    t_big, growth, which = _growth(pattern.search, small, big)
    assert t_big < 0.001 or growth < 64, f"{growth:.0f}x for 16x the input ({t_big:.3f} s at 32 KB): {which!r}"


@pytest.mark.parametrize("line", [
    "unabletocreatePriorityClass",  # the line: \\s* matches nothing, the name run never ends
    "unable to create PriorityClass a",
    "is forbidden: not yet ready to handle request " + "a-" * 8,
    "check failed: readyz poststarthook/" + "a," * 8,
    "error when creating " + "a" * 8 + " admission webhook \"x\" denied the request",
    "theresource",
])
def test_classify_is_linear_on_long_hostile_lines(line):
    from breakglass.diagnose import signatures
    from breakglass.logs.record import LogRecord

    def run(msg):
        signatures.classify(LogRecord("x", 1, 1, msg, msg))

    def fill(n):
        return [(line * (n // len(line) + 1))[:n], line + "a" * n, line + " " * n]

    t_big, growth, which = _growth(run, fill(2 << 10), fill(32 << 10))
    assert t_big < 0.003 or growth < 64, f"{growth:.0f}x for 16x the input ({t_big:.3f} s at 32 KB): {which!r}"


# ---------------------------------------------------------------------------------------------------------------
# 4. One nested audit event (the attacker's own request) must not hide every leak

def _deep(n: int) -> str:
    """JSON text nested ``n`` deep (json.dumps itself cannot write it)."""
    opens = ['{"a":' if i % 2 else "[" for i in range(n)]
    return "".join(opens) + '"x"' + "".join("}" if o.startswith("{") else "]" for o in reversed(opens))


def _deep_event(n: int) -> str:
    e = event("evil", "create", "configmaps", "default", "evil", fo(), 201)
    return e[:-1] + ',"requestObject":' + _deep(n) + "}"


@pytest.mark.parametrize("depth", [300, 1200, 5000])
def test_a_deeply_nested_event_is_skipped_and_the_rest_reported(tmp_path, depth):
    p = tmp_path / "audit.log"
    p.write_text(event("a1", ann=fo()) + "\n" + _deep_event(depth) + "\n"
                 + event("a2", "update", "deployments", "prod", "web", fo(), 200) + "\n")
    rep = audit.scan([str(p)])
    assert [x.audit_id for x in rep.leaks] == ["a1", "a2"]
    assert rep.lines_skipped == 1 and rep.lines_too_deep == (depth > 256)


def test_a_deeply_nested_event_from_the_command_line(tmp_path):
    p = tmp_path / "audit.log"
    p.write_text(event("a1", ann=fo()) + "\n" + _deep_event(1200) + "\n")
    r = run_cli("leaks", "--audit-log", str(p))
    assert r.returncode == 3, r.stderr
    assert b"unexpected" not in r.stderr and b"1 request(s) admitted" in r.stdout
    assert b"warning: 1 line(s) of JSON nested deeper than 256 levels were skipped" in r.stderr


def test_a_deeply_nested_element_of_a_json_array_is_skipped(tmp_path):
    import json

    p = tmp_path / "entries.json"
    good = json.loads(event("a1", ann=fo()))
    p.write_text("[" + json.dumps(good) + ",\n" + _deep(1200) + ",\n" + _deep(400) + ",\n"
                 + json.dumps(good | {"auditID": "a2"}) + "]")
    rep = audit.scan([str(p)])
    assert [x.audit_id for x in rep.leaks] == ["a1", "a2"] and rep.lines_too_deep == 2


def test_a_deeply_nested_json_log_line_does_not_stop_diagnose(tmp_path):
    import json
    import os

    src = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "logs",
                       "kubeadm-priorityclass-gatekeeper.log")
    clean = run_cli("diagnose", src, "-o", "json")
    p = tmp_path / "apiserver.log"
    with open(src) as f:
        text = f.read()
    p.write_text('{"msg":"failed calling webhook","x":' + _deep(1200) + "}\n" + text)
    r = run_cli("diagnose", str(p), "-o", "json")
    assert b"unexpected" not in r.stderr and r.returncode == clean.returncode, r.stderr
    got, want = json.loads(r.stdout)["result"], json.loads(clean.stdout)["result"]
    assert [(f["id"], f["webhook"]) for f in got["findings"]] == [(f["id"], f["webhook"]) for f in want["findings"]]
