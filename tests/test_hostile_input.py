"""Input an attacker shapes (their own requests are in the audit log, their pods write the logs) and output an
engineer pastes into a shell or a spreadsheet: issue 17's findings 4, 10, 11 and 12, each reproduced as the
attacker would try it."""

from __future__ import annotations

import csv
import io
import shlex

import pytest

from breakglass import leaks, render
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


@pytest.mark.xfail(strict=True, reason="check_name lives in breakglass/remedies/etcd_delete.py, outside this "
                                      "change's files: its _DNS_SUBDOMAIN ends in $ (use fullmatch)")
def test_check_name_refuses_a_trailing_newline():
    from breakglass.errors import BadInput
    from breakglass.remedies.etcd_delete import check_name

    with pytest.raises(BadInput):
        check_name("kyverno\n")
