"""Text output fits the terminal (issue 26 §7, issue 27 §10, issue 37 §4): at 80 columns no line is wider except
one that holds a single word longer than its line; a command breaks only between its words, with ` \\` so it
pastes; a diff or code line, a key or a URL breaks at a space or after a separator, the rest marked with ↪,
never inside a word; YAML is emitted once at the width; tables fold their cells or become one block per row. The wizard shows a refused
answer's whole reason, and its echoed answers and error hints break at words."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import tempfile

import pytest

from tests.real_control_plane import builds_settled, later_build
from tests.conftest import ROOT, run_cli, unfold_lines

LOGS = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "logs", "*"))
              if p.endswith((".log", ".txt", ".jsonl")))
WEBHOOKS = os.path.join(ROOT, "examples", "webhooks")
AUDIT_LOGS = sorted(glob.glob(os.path.join(ROOT, "examples", "audit", "gke-*")))
# a lead (indent, "key:", a prompt) and one word that cannot fit after it (a command's word keeps its ` \`)
ONE_WORD = re.compile(r"\s*(\S+:\s+|\$ )?\S+( \\)?")
COMMAND = re.compile(r"\s*(\$ |# |kubectl )")


def _one_shell_word(line: str) -> bool:
    """A folded command's line that is one quoted word (a JSON value with spaces inside its quotes)."""
    from breakglass.present.layout import _words

    text = line.strip().removeprefix("$ ").removesuffix(" \\")
    return text[:1] in "'\"" and len(_words(text)) == 1


def too_wide(text: str, columns: int = 80, whole=lambda ln: False) -> list[str]:
    return [ln for ln in text.splitlines()
            if len(ln) > columns and not whole(ln) and not ONE_WORD.fullmatch(ln) and not _one_shell_word(ln)]


def squash(text: str) -> str:
    """The text without what folding adds or moves: spaces, line breaks, a command's `` \\`` continuations and
    the ↪ of a continued line."""
    return re.sub(r"\s+", "", re.sub(r" \\\n", "\n", text).replace("↪", ""))


def joined(lines: list[str]) -> list[str]:
    return unfold_lines(lines)


def _cli(*args: str, columns: int) -> str:
    p = run_cli(*args, env={"COLUMNS": str(columns)})
    assert p.returncode in (0, 3), p.stderr
    return p.stdout.decode()


@pytest.mark.parametrize("log", LOGS, ids=os.path.basename)
@pytest.mark.parametrize("verbose", [False, True])
def test_a_diagnosis_fits_80_columns_and_breaks_only_between_words(log, verbose, monkeypatch):
    from breakglass.diagnose.engine import diagnose_paths
    from breakglass.present import render

    diag, warnings = diagnose_paths([log])
    monkeypatch.setenv("COLUMNS", "80")
    narrow = render.diagnosis(diag, warnings, verbose)
    monkeypatch.setenv("COLUMNS", "200")
    wide = render.diagnosis(diag, warnings, verbose)
    assert too_wide(narrow) == []
    assert squash(narrow) == squash(wide)  # the same text in the same order: only the line breaks moved
    if narrow != wide:
        assert max(map(len, wide.splitlines())) > 80  # and the wide terminal is used


def test_the_webhooks_table_fits_80_columns_with_every_name_whole():
    text = _cli("webhooks", "-f", WEBHOOKS, columns=80)
    assert [ln for ln in text.splitlines() if len(ln) > 80] == []
    words = set(re.split(r"[\s,]+", text))
    rows = json.loads(_cli("webhooks", "-f", WEBHOOKS, "-o", "json", columns=80))["result"]["rows"]
    assert len(rows) > 5
    for r in rows:
        values = [r["kind"], r["configuration"], r["webhook"], r["backend"], *r["bootstrap"], *r["intercepts"]]
        for v in values:
            for word in re.split(r"[\s,]+", v or ""):
                assert not word or word in words, (word, v)


@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_audit_fits_80_columns_but_its_patches_and_commands_stay_whole(verbose):
    narrow = _cli("audit", "-f", WEBHOOKS, *verbose, columns=80)
    wide = _cli("audit", "-f", WEBHOOKS, *verbose, columns=200)
    assert too_wide(narrow) == [], too_wide(narrow)[:3]
    assert squash(narrow) == squash(wide)
    # the patch is its YAML, emitted once at the width, then the short command that applies it from a file
    import yaml

    doc = json.loads(_cli("audit", "-f", WEBHOOKS, "-o", "json", columns=80))["result"]
    patches = [yaml.safe_load(f["fix"]["patch_yaml"]) for f in doc["findings"] if f.get("fix")]
    shown = re.findall(r"fix: add these matchConditions \(strategic merge patch, saved as fix.yaml\):\n(.*?)\n    "
                       r"then:\n      \$ kubectl patch .*?--patch-file=fix.yaml", narrow, re.S)
    assert shown and all(yaml.safe_load(block) in patches for block in shown)



def _owned_configurations(tmp_path) -> str:
    """Kyverno's configuration (its label) and Gatekeeper's (its label, name and webhook), both failing closed on
    everything: their lasting fixes are Kyverno's ConfigMap and Gatekeeper's Helm values."""
    from tests.test_codec import KYVERNO

    gk = json.loads(json.dumps(KYVERNO))
    gk["metadata"].update(name="gatekeeper-validating-webhook-configuration", labels={"gatekeeper.sh/system": "yes"})
    gk["webhooks"][0].update(name="validation.gatekeeper.sh", clientConfig={"service": {
        "namespace": "gatekeeper-system", "name": "gatekeeper-webhook-service", "path": "/v1/admit"}})
    path = tmp_path / "owned.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [KYVERNO, gk]}))
    return str(path)


def test_an_owners_long_lasting_command_is_a_file_and_a_short_command_at_80_columns(tmp_path):
    """Kyverno's ConfigMap patch was one 6,000-character line (75 rows of an 80-column terminal) and Gatekeeper's
    helm --set-json another: the text gives the patch as YAML to save and `--patch-file`, and the values above
    to `helm upgrade -f`; -o json keeps the one-line commands, and both forms are the same change."""
    import shlex

    import yaml

    owned = _owned_configurations(tmp_path)
    text = _cli("audit", "-f", owned, columns=80)
    assert [ln for ln in text.splitlines() if len(ln) > 80] == [], text
    text = "\n".join(unfold_lines(text.splitlines()))  # the folded commands read back as one line each
    doc = json.loads(_cli("audit", "-f", owned, "-o", "json", columns=80))["result"]
    lasting = {f["fix"]["lasting"]["form"]: f["fix"]["lasting"] for f in doc["findings"] if f.get("fix")}
    assert set(lasting) == {"kyverno-config", "gatekeeper-values"}, lasting
    assert all(len(x["command"]) > 400 for x in lasting.values())  # the case: too long to read in a terminal
    # one webhook's findings share its fix: shown under the first, named by the others
    fixes = [f for f in doc["findings"] if f.get("fix") and f["webhook"] == "validation.gatekeeper.sh"]
    assert len(fixes) == 3 and text.count("lasting fix, where Gatekeeper keeps it") == 1, text
    assert text.count(f"fix: the same as [{fixes[0]['id']}]'s") == 2, text
    block = re.search(r"by \(this patch, saved as kyverno-config\.yaml\):\n(.*?)\n    then:\n"
                      r"      \$ kubectl -n kyverno patch configmap kyverno --type=merge "
                      r"--patch-file=kyverno-config\.yaml\n", text, re.S)
    assert block, text
    from_file = yaml.safe_load(block.group(1))
    one_line = json.loads(shlex.split(lasting["kyverno-config"]["command"].split(" -p ", 1)[1])[0])
    assert json.loads(from_file["data"]["matchConditions"]) == json.loads(one_line["data"]["matchConditions"])
    helm = re.search(r"by \(the YAML above saved as values\.yaml\):\n      \$ (helm upgrade .*?)\n", text)
    assert helm and helm.group(1) == lasting["gatekeeper-values"]["command"].split(" --set-json ")[0] + " -f values.yaml"
    keep = re.search(r"keep \(YAML\):\n(.*?)\n    by \(the YAML above", text, re.S)
    conds = json.loads(lasting["gatekeeper-values"]["command"].split("validatingWebhookMatchConditions=", 1)[1][:-1])
    assert yaml.safe_load(keep.group(1)) == {"validatingWebhookMatchConditions": conds}


@pytest.mark.parametrize("log", AUDIT_LOGS, ids=os.path.basename)
def test_leaks_fit_80_columns_with_every_name_whole(log):
    text = _cli("leaks", "--audit-log", log, columns=80)
    assert too_wide(text) == [], text
    words = set(text.split())
    doc = json.loads(_cli("leaks", "--audit-log", log, "-o", "json", columns=80))["result"]
    for x in doc["leaks"][:20]:
        for v in (x["time"], x["user"], x["verb"], x["resource"], x["namespace"], x["name"], *x["webhooks"]):
            assert not v or v in words, v
    lines = joined(text.splitlines())
    for r in doc["recheck"][:50]:
        assert "  " + r["kubectl"] in lines  # commands to paste: folded between words only


def test_a_recover_plan_fits_80_columns_and_keeps_its_diff_whole(tmp_path):
    config = tmp_path / "controlplane.yaml"
    shutil.copy(os.path.join(ROOT, "examples", "sandbox", "talos-controlplane.yaml"), config)
    args = ("recover", "--method", "talos", "--config-file", str(config), "--dry-run")
    narrow, wide = _cli(*args, columns=80), _cli(*args, columns=200)
    diff = [ln for ln in joined(narrow.splitlines()) if re.match(r"     [-+@ ]", ln)]
    assert any(ln.startswith("     +") for ln in diff) and all(ln in wide.splitlines() for ln in diff)
    assert too_wide(narrow) == []
    assert squash(narrow) == squash(wide)


def test_a_table_folds_its_cells_and_becomes_blocks_only_when_a_word_cannot_fit():
    from breakglass.present import layout

    kinds = "ServiceCIDR,IPAddress,Namespace,PriorityClass,ClusterRole,ClusterRoleBinding,FlowSchema"
    rows = [["cfg-a", "Fail", kinds, "a webhook that fails closed on what the apiserver writes at start"],
            ["cfg-b", "Ignore", "-", "fails open"]]
    headers = ["NAME", "POLICY", "BOOTSTRAP KINDS", "NOTE"]
    flat = layout.table(headers, rows, 200)
    assert len(flat) == 3 and flat[1].split()[:3] == ["cfg-a", "Fail", kinds]
    folded = layout.table(headers, rows, 60)
    assert max(map(len, folded)) <= 60 and len(folded) > 3
    assert folded[0].startswith("NAME") and folded[1].startswith("cfg-a  Fail")  # still columns
    assert set(re.split(r"[\s,]+", " ".join(folded))) >= set(kinds.split(",")) | set(rows[0][3].split())
    blocks = layout.table(headers, rows + [["x" * 40, "Fail", "-", "-"]], 60)  # 40 + 19 + ...: no columns fit
    assert "NAME:            cfg-a" in blocks and "POLICY:          Ignore" in blocks
    assert blocks[blocks.index("POLICY:          Ignore") - 2] == ""  # a blank line between rows
    assert max(map(len, blocks)) <= 60 and all(k in " ".join(blocks).replace(",", " ") for k in kinds.split(","))


# -- the wizard, in a real pseudo-terminal of 80 columns -----------------------------------------------------

@pytest.fixture
def state(tmp_path):
    from breakglass import sandbox

    yield str(tmp_path / "state")
    sandbox.down(sandbox.default_dir(str(tmp_path / "state")))


def _screen(seen: str, columns: int) -> list[str]:
    import pyte

    screen = pyte.Screen(columns, 60)
    pyte.ByteStream(screen).feed(seen.encode())
    return [ln.rstrip() for ln in screen.display]


def _split_words(lines: list[str], columns: int, vocabulary: set) -> list[tuple[str, str]]:
    """Lines the terminal broke inside a word: one filled to the edge, the next going on with letters that
    make a known word together."""
    out = []
    for a, b in zip(lines, lines[1:]):
        if len(a) == columns and a[-1:].isalpha() and b[:1].isalpha():
            joined = re.search(r"[A-Za-z]+$", a).group() + re.match(r"[A-Za-z]+", b).group()
            if joined in vocabulary:
                out.append((a, b))
    return out


def _rehearsal_titles():
    """The choices of "Rehearse on:", as the wizard offers them."""
    from breakglass.present.prompts import ScriptedPrompter
    from breakglass.flows import wizard

    p = ScriptedPrompter([""])  # etcd only
    wizard._rehearsal_binary(p)
    return [(None, line[4:]) for line in p.transcript if line.startswith("  - ")]


@later_build  # it counts the built apiservers the wizard lists: after the background build
def test_a_refused_answer_shows_its_whole_reason_and_echoes_break_at_words(state, tmp_path):
    builds_settled()
    from breakglass import sandbox
    from breakglass.flows import wizard
    from breakglass.present.prompts import fit
    from tests.test_wizard_pty import DOWN, LOG, Wizard

    bad = "/nonexistent/kube-apiserver-logs/control-plane-" + "q" * 12 + ".log"
    reason = wizard._readable(bad)
    assert reason and len(reason) > 80  # too long for questionary's one-line toolbar
    # an answer that fits a line of its own, not after the question
    short = tempfile.mkdtemp(prefix="bgw-", dir="/tmp")
    try:
        good = os.path.join(short, "kube-apiserver-" + "k" * (70 - len(short) - len("/kube-apiserver-.log")) + ".log")
        shutil.copy(LOG, good)
        assert len(good) == 70 and len("? Logs to diagnose: " + good) > 80
        w = Wizard(state, columns=80)
        w.expect("Logs to diagnose")
        w.answer(bad)
        w.expect(r"! /nonexistent")  # the reason, printed above the question, which stays open
        w.expect(reason.split()[-1])  # to its last word
        w.answer(good, erase=True)
        w.expect("BOOTSTRAP DEADLOCK")
        w.way_in("sandbox")
        w.expect("Rehearse on")  # a choice too long to be echoed after its question
        w.child.send(DOWN * (len(sandbox.built_apiservers()) + 1) + "\r")
        w.expect("kube-apiserver binary")
        w.child.sendcontrol("c")
        assert w.end() == 130
    finally:
        shutil.rmtree(short)
    lines = _screen(w.seen, 80)
    shown = " ".join(" ".join(lines).split())
    assert " ".join(reason.split()) in shown, lines  # the whole reason is on the screen
    assert any(ln.strip() == good for ln in lines), lines  # the echoed answers, whole on a line of their own
    other = fit(next(t for _v, t in _rehearsal_titles() if t.startswith("another kube-apiserver")), 80, 4)
    assert any(ln.strip() == other for ln in lines), lines
    assert any(ln.startswith("hint: ") for ln in lines), lines  # the error's hint is on the screen too
    vocabulary = set(re.findall(r"[A-Za-z]{3,}", w.text() + reason + good + open(LOG).read()))
    assert _split_words(lines, 80, vocabulary) == [], lines



def test_the_wizards_plan_at_80_columns_keeps_the_etcd_key_whole_or_marked(state):
    """The plan the wizard shows before the typed word, in a real terminal of 80 columns: the etcd key in the
    diff's header broke mid-word (`…-webho` / `ok-cfg`). Now every line fits, a key longer than a line breaks
    after a / with the rest marked ↪ (read back joined, it is the key), and no word is split by the terminal."""
    import subprocess

    from breakglass import sandbox
    from tests.conftest import unfold_lines
    from tests.test_wizard_pty import CFG, LOG, Wizard

    sb = sandbox.up(sandbox.default_dir(state))
    key = f"/registry/validatingwebhookconfigurations/{CFG}"

    def stored() -> bytes:
        return subprocess.run(["etcdctl", f"--endpoints={sb.endpoint}", "get", key, "--print-value-only"],
                              capture_output=True, check=True, timeout=30).stdout

    before = stored()
    assert before  # the seed's configuration is there to be deleted
    w = Wizard(state, columns=80)
    w.expect("Logs to diagnose")
    w.answer(LOG)
    w.expect("BOOTSTRAP DEADLOCK")
    w.way_in("sandbox")
    w.expect("Which way out")
    w.child.send("\r")  # etcd: the only way the etcd-only sandbox offers
    w.expect(r"Type (\S+) to apply:")
    assert w.child.match.group(1) == CFG
    seen = w.seen
    w.child.sendcontrol("c")  # before the word: nothing changes
    assert w.end() == 130
    assert stored() == before
    lines = _screen(seen, 80)
    assert len(key) > 80 - len("     --- etcd ")  # the case: a key that cannot fit after its header
    header = [ln for ln in unfold_lines(lines) if ln.lstrip().startswith("--- etcd ")]
    assert len(header) == 1 and header[0].lstrip().startswith(f"--- etcd {key} (mod_revision "), lines
    at = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("--- etcd "))
    assert lines[at].endswith("/") and lines[at + 1].lstrip().startswith(f"↪ {CFG} "), lines[at:at + 3]
    vocabulary = set(re.findall(r"[A-Za-z]{3,}", w.text() + open(LOG).read()))
    assert _split_words(lines, 80, vocabulary) == [], lines


def _bash_words(script: str) -> list[str]:
    import subprocess

    out = subprocess.run(["bash", "-c", f"set -f; words() {{ printf '%s\\0' \"$@\"; }}; words {script.split(' ', 1)[1]}"],
                         capture_output=True, check=True).stdout.decode()
    return out.split("\0")[:-1]


def test_a_folded_command_pastes_as_the_same_words():
    """Folded at 80 columns between its words with ` \\`: bash reads back exactly the words of the one line."""
    from breakglass.present import layout

    key = "/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/kyverno-resource-validating-webhook-cfg"
    cmd = (f"etcdctl --endpoints=https://10.0.0.2:2379,https://10.0.0.3:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt "
           f"get {key} -w json --prefix=false 'a b  c' \"d \\\"e\\\" f\"")
    lines = layout.fold_command(cmd, 80, "  ")
    assert len(lines) > 2 and all(len(ln) <= 80 or key in ln for ln in lines), lines
    assert all(ln.endswith(" \\") for ln in lines[:-1]) and lines[0].startswith("  $ etcdctl ")
    pasted = "\n".join(ln.removeprefix("  $ ") for ln in lines)
    assert _bash_words(pasted) == _bash_words(cmd)
    assert any(ln.strip() == key + " \\" or ln.strip() == key for ln in lines)  # the key whole on its own line


def test_a_long_key_in_prose_or_a_diff_breaks_after_a_slash_with_a_mark_never_mid_word():
    from breakglass.present import layout

    key = "/registry/validatingwebhookconfigurations/kyverno-resource-validating-webhook-cfg-of-team-a"
    lines = layout.fold(f"changed: deleted {key} (backup s1.value)", 80, "  ", "    ")
    assert all(len(ln) <= 80 for ln in lines), lines
    assert lines == ["  changed: deleted /registry/validatingwebhookconfigurations/",
                     "    ↪ kyverno-resource-validating-webhook-cfg-of-team-a (backup s1.value)"], lines
    diff = layout.fold_line(f"+++ cp1:/etc/kubernetes/manifests/kube-apiserver.yaml (new) {key}", 80, "     ")
    assert all(len(ln) <= 80 for ln in diff) and diff[1].startswith("      ↪ "), diff
    assert joined(diff) == [f"     +++ cp1:/etc/kubernetes/manifests/kube-apiserver.yaml (new) {key}"], diff
    # what fits stays one line, whatever it holds
    assert layout.fold_line("+  - --disable-admission-plugins=ValidatingAdmissionWebhook", 80, "  ") == [
        "  +  - --disable-admission-plugins=ValidatingAdmissionWebhook"]


def test_a_fleet_summary_is_one_line_per_cluster_at_80_columns(monkeypatch):
    from types import SimpleNamespace as NS

    from breakglass.present import fleet_report

    monkeypatch.setenv("COLUMNS", "80")
    crit = NS(severity="critical")
    clusters = [NS(name="prod-eu-west-1-payments", status="audited", version="v1.34.4", target_version="1.35",
                   report=NS(findings=[crit, crit, NS(severity="low")], worst="critical"), error=None, server=None,
                   warnings=[]),
                NS(name="staging", status="audited", version="v1.35.1", target_version="1.36",
                   report=NS(findings=[], worst=None), error=None, server=None, warnings=[]),
                NS(name="dr", status="unreachable", version=None, target_version=None, report=None, server=None,
                   warnings=[], error="apiserver https://10.20.30.40:6443 did not answer within 10 s: connection "
                                      "refused (is the context's server right, or the VPN up?)")]
    rep = NS(clusters=clusters, fail_on="high", target_version=None, seconds=1.5)
    lines = fleet_report.text(rep).splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("CLUSTER"))
    rows = lines[head + 1:head + 4]
    assert [r.split()[0] for r in rows] == ["prod-eu-west-1-payments", "staging", "dr"], lines
    assert all(len(ln) <= 80 for ln in lines), lines
    assert re.search(r"v1\.34\.4 → 1\.35 +NEEDS ACTION: 2 critical, 1 low$", rows[0]), rows
    assert rows[1].endswith("ok: no risks") and rows[2].split()[1:3] == ["-", "unreachable:"], rows
    assert rows[2].endswith("…")
    assert not lines[head + 4].strip()  # nothing else under the table


def test_an_error_after_a_spinner_starts_on_a_line_of_its_own(monkeypatch):
    """`^Cbreakglass: er|ror:` landed on the spinner's line: after a progress or spinner line left open, the error
    begins on a new line; after a finished one, no blank line is added."""
    import io
    import pty
    import select

    from breakglass.cli import _base
    from breakglass.cli.prompter import QuestionaryPrompter
    from breakglass.present import layout

    master, slave = pty.openpty()
    try:
        tty = io.TextIOWrapper(io.FileIO(slave, "w", closefd=False), write_through=True)
        monkeypatch.setattr(sys, "stderr", tty)
        monkeypatch.setattr(sys, "stdout", tty)
        QuestionaryPrompter.progress(QuestionaryPrompter.__new__(QuestionaryPrompter), "waiting for /readyz")
        _base._print_err("breakglass: error: interrupted")
        _base._progress_bytes(5 << 20, 10 << 20)
        _base._line_open(False)
        _base._print_err("breakglass: error: second")
        seen = b""
        while select.select([master], [], [], 0.2)[0]:  # a pty hands over what was written in pieces
            seen += os.read(master, 65536)
        seen = seen.decode()
    finally:
        os.close(master)
        os.close(slave)
    assert "waiting for /readyz\r\r\nbreakglass: error: interrupted" in seen or \
        "waiting for /readyz\r\nbreakglass: error: interrupted" in seen, repr(seen)
    assert "(50%)breakglass: error: second" in seen, repr(seen)
    assert layout.open_line is False
