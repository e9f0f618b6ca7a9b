"""Names and paths an attacker chooses, printed as text: a webhook named with a right-to-left override
(U+202E) or an isolate (U+2066) would reorder the line the engineer reads, an ANSI escape would recolour or
rewrite the screen, a newline in a file name would start a line that looks like breakglass' own. In text
output every one of them is shown escaped (\\u202e, \\x1b, \\n), never raw; the JSON keeps the real string.
Issue 26 §7 and issue 27 §10."""

from __future__ import annotations

import json
import os

import pytest

from breakglass.core.safetext import printable
from tests.conftest import ROOT, run_cli
from tests.test_leaks import event

NEWLINE_TAIL = "then-a-line-of-its-own"
HOSTILE = f"ev\u202eil\u2066iso\u2069\x1b[31mred\x1b[0m\n{NEWLINE_TAIL}"  # in names that can hold a newline
IN_A_LINE = "ev\u202eil\u2066iso\u2069\x1b[31mred\x1b[0m"  # in a log line, which a newline would end
RAW = ("\u202e", "\u2066", "\u2069", "\x1b")


def _assert_shown_escaped(p, *, escaped_in_stdout: bool = True) -> str:
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    for stream, text in (("stdout", out), ("stderr", err)):
        raw = [c for c in RAW if c in text]
        assert not raw, (stream, raw, text[:3000])
        # the name's newline never starts a line of its own
        assert not any(line.startswith(NEWLINE_TAIL) for line in text.splitlines()), (stream, text[:3000])
    if escaped_in_stdout:
        assert "\\u202e" in out and "\\x1b[31m" in out, out[:3000]
    return out + err


def _env():
    return {"COLUMNS": "80"}


def _strings(doc):
    """Every string in a JSON document, decoded."""
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from _strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _strings(v)


def test_printable_escapes_what_would_reorder_or_rewrite_a_line():
    assert printable("a\u202eb\u2066c\u2069d\u200fe\x1b[31mf\ng\x85h\u2028i\x00j\x7fk") == \
        "a\\u202eb\\u2066c\\u2069d\\u200fe\\x1b[31mf\\ng\\x85h\\u2028i\\x00j\\x7fk"
    assert printable("ordinary text: é, ü, 日本, → and … stay") == "ordinary text: é, ü, 日本, → and … stay"
    assert printable("undecodable \udcff byte") == "undecodable \\udcff byte"  # os.fsdecode's surrogateescape


@pytest.fixture
def hostile_log(tmp_path):
    """The kubeadm example with its webhook renamed (in the log line) and a file name holding a newline."""
    src = open(os.path.join(ROOT, "examples", "logs", "kubeadm-priorityclass-gatekeeper.log")).read()
    assert "validation.gatekeeper.sh" in src
    path = tmp_path / f"apiserver-{HOSTILE}.log"
    path.write_text(src.replace("validation.gatekeeper.sh", f"validation.{IN_A_LINE}.sh"))
    return str(path)


def test_diagnose_text_escapes_webhook_and_file_names(hostile_log):
    p = run_cli("diagnose", hostile_log, env=_env())
    assert p.returncode == 3, p.stderr
    text = _assert_shown_escaped(p)
    assert f"validation.{printable(IN_A_LINE)}.sh" in text  # the culprit, named visibly
    assert printable(os.path.basename(hostile_log)) in text.replace("\n", "")  # the evidence's file, on one line
    p = run_cli("diagnose", hostile_log, "-v", env=_env())  # full evidence lines
    _assert_shown_escaped(p)
    # JSON keeps the real strings (its own escapes are JSON's, decoded back here)
    doc = json.loads(run_cli("diagnose", hostile_log, "-o", "json", env=_env()).stdout)
    assert any(f"validation.{IN_A_LINE}.sh" in x for x in _strings(doc))


@pytest.fixture
def hostile_webhooks(tmp_path):
    """gatekeeper-risky.yaml with the configuration, a webhook and a service path renamed: YAML's double-quoted
    escapes (\\u, \\e, \\n) put the characters in, as kubectl's YAML would carry them."""
    yaml_escaped = 'ev\\u202eil\\u2066iso\\u2069\\e[31mred\\e[0m\\n' + NEWLINE_TAIL
    src = open(os.path.join(ROOT, "examples", "webhooks", "gatekeeper-risky.yaml")).read()
    for old, new in (("- name: validation.gatekeeper.sh", f'- name: "validation.{yaml_escaped}.sh"'),
                     ("name: gatekeeper-validating-webhook-configuration", f'name: "gk-{yaml_escaped}"'),
                     ("path: /v1/admit}", f'path: "/v1/{yaml_escaped}"}}')):
        assert old in src
        src = src.replace(old, new)
    path = tmp_path / f"webhooks-{HOSTILE}.yaml"
    path.write_text(src)
    return str(path)


def test_webhooks_table_escapes_names_paths_and_file_names(hostile_webhooks):
    p = run_cli("webhooks", "-f", hostile_webhooks, env=_env())
    assert p.returncode == 0, p.stderr
    text = _assert_shown_escaped(p)
    assert f"gk-{printable(HOSTILE)}" in text and f"validation.{printable(HOSTILE)}.sh" in text
    doc = json.loads(run_cli("webhooks", "-f", hostile_webhooks, "-o", "json", env=_env()).stdout)
    assert f"validation.{HOSTILE}.sh" in [r["webhook"] for r in doc["result"]["rows"]]


def test_audit_text_escapes_names_and_file_names(hostile_webhooks):
    p = run_cli("audit", "-f", hostile_webhooks, "-v", env=_env())
    assert p.returncode == 3, p.stderr
    text = _assert_shown_escaped(p)
    assert f"validation.{printable(HOSTILE)}.sh" in text


def test_leaks_text_escapes_webhook_user_and_object_names(tmp_path):
    ann = {"failed-open.validating.webhook.admission.k8s.io/round_0_index_0": f"validation.{HOSTILE}.sh",
           "authorization.k8s.io/decision": "allow"}
    log = tmp_path / f"audit-{HOSTILE}.log"
    log.write_text(event("a1", "create", "configmaps", "prod", f"cm-{HOSTILE}", ann, 201, user=f"eve-{HOSTILE}")
                   + "\n" + event("a2", "update", "configmaps", "prod", "cm", ann, 200) + "\n")
    p = run_cli("leaks", "--audit-log", str(log), env=_env())
    assert p.returncode == 3, p.stderr
    text = _assert_shown_escaped(p)
    assert f"validation.{printable(HOSTILE)}.sh" in text and f"eve-{printable(HOSTILE)}" in text


def test_an_error_line_escapes_the_file_name_it_names(tmp_path):
    missing = str(tmp_path / f"missing-{HOSTILE}.log")
    p = run_cli("diagnose", missing, env=_env())
    assert p.returncode == 2
    _assert_shown_escaped(p, escaped_in_stdout=False)
    err = p.stderr.decode()
    errors = [line for line in err.splitlines() if line.startswith("breakglass: error:")]
    assert len(errors) == 1 and printable(missing) in errors[0], err
    # the JSON error keeps the real name
    p = run_cli("diagnose", missing, "-o", "json", env=_env())
    assert missing in json.loads(p.stdout)["error"]["message"]


def test_a_usage_error_escapes_the_option_it_quotes():
    p = run_cli("webhooks", f"--{IN_A_LINE}", env=_env())
    assert p.returncode == 2
    _assert_shown_escaped(p, escaped_in_stdout=False)
    assert "\\u202e" in p.stderr.decode()


def test_leaks_warning_about_a_hostile_file_name_is_escaped(tmp_path):
    """A file in the audit-log directory named by someone else: the warning that names it (a line past the 4 MiB
    cut) shows the name escaped, on one line."""
    path = tmp_path / f"audit-{HOSTILE}.log"
    with open(path, "w", encoding="utf-8") as f:
        f.write(event("a1", "create", "configmaps", "default", "cm", {}, 201) + "\n")
        f.write('{"annotations": {"failed-open.validating.webhook.admission.k8s.io/round_0_index_0": "' +
                "x" * (5 << 20) + '"}}\n')
    p = run_cli("leaks", "--audit-log", str(path), env=_env())
    _assert_shown_escaped(p, escaped_in_stdout=False)
    err = p.stderr.decode("utf-8", "surrogateescape")
    assert "\\u202e" in err and "longer than 4 MiB" in err, err
