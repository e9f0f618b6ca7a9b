"""Issue 33 §5: a file edited here is "edited, not applied".

A Talos machine-config file (`recover talos --config-file`) and a k3s/RKE2 config.yaml (`recover k3s|rke2
--config-file`) are changed here only: no node has the change until it is applied. The run ends in its own state
(`edited-not-applied`, exit 8), never `applied`; the outcome says the file is edited, not applied, and `next` holds
the commands that apply it and check /readyz, then the revert, which works as it always did. The wizard says the
same and asks whether it is applied (and which apiserver to watch). A config.yaml's distribution is read from the
file: only its own way takes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from breakglass.core import runstates
from breakglass.core.errors import EXIT_CODE_MEANINGS, ExitCode
from breakglass.flows import planner, wizard
from breakglass.k3s import which
from breakglass.present.prompts import ScriptedPrompter
from breakglass.ways.base import Step
from breakglass.ways.k3s_flags import K3sFlags
from tests.conftest import ROOT, run_cli

TALOS = os.path.join(ROOT, "tests", "talos", "v1.12-multidoc-overlap.yaml")
K3S = os.path.join(ROOT, "tests", "k3s")
LOG = os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")


def unfolded(text: str) -> str:
    """Text as one line of words: a command's ` \\` continuations and a path's ↪ rest joined back."""
    return " ".join(re.sub(r"\n\s*↪ ", "", re.sub(r" \\\n\s*", " ", text)).split())
VWH = "ValidatingAdmissionWebhook"


def _copy(src: str, dst) -> str:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return str(dst)


def _env(tmp_path) -> dict:
    return {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}


def _events(tmp_path, run: str) -> list[dict]:
    with open(tmp_path / "state" / "runs" / run / "journal.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def _ends_saying_edited_not_applied(text: str) -> bool:
    """The text output's last line (folded to the terminal's width) says it was edited, not applied."""
    lines = text.strip().splitlines()
    at = max(i for i, ln in enumerate(lines) if ln.startswith("edited, not applied:"))
    return " ".join(lines[at:]).endswith("(exit 8)") and not any(ln[:1].isspace() for ln in lines[at:])


def _revert(tmp_path, run: str):
    # --force: whether the revert guard can read the webhook's backend is its own tests' business; the file goes
    # back the same way with it or without it
    return run_cli("revert", run, "--yes", "--force", "-o", "json", env=_env(tmp_path))


# -- Talos: a machine-config file -------------------------------------------------------------------------------

def test_a_talos_file_is_edited_not_applied_in_json_with_the_commands_that_apply_it(tmp_path):
    cfg = _copy(TALOS, tmp_path / "repo" / "cp.yaml")
    original = open(cfg, "rb").read()
    p = run_cli("recover", "talos", "--config-file", cfg, "--yes", "-o", "json", env=_env(tmp_path))
    assert p.returncode == int(ExitCode.NOT_VERIFIED) == 8, p.stderr
    doc = json.loads(p.stdout)
    run = doc["result"]["run"]
    assert doc["exitCode"] == 8 and doc["result"]["status"] == "edited-not-applied"
    [step] = doc["result"]["steps"]
    assert step["status"] == "edited" and step["files"] == [cfg]
    out = doc["outcome"]
    assert out["status"] == "edited-not-applied" and out["run"] == run
    assert f"{cfg} edited here, not applied to any node" in out["notVerified"]
    assert out["verified"] == []  # the file reads back, but nothing in the cluster is verified
    assert out["next"][0].startswith(f"talosctl apply-config -n NODE -f {cfg} --mode=no-reboot")
    assert out["next"][1].startswith("kubectl get --raw='/readyz?verbose'")
    assert out["next"][-1].startswith(f"breakglass revert {run}")
    assert len(out["next"]) == 3
    assert open(cfg, "rb").read() != original
    # the journal entries revert relies on are as before; the step's check is "edited", the run's end says so
    events = [e for e in _events(tmp_path, run) if e.get("step") == "s1"]
    assert [e["event"] for e in events] == ["backing-up", "backed-up", "applying", "applied", "edited"]
    assert events[3]["result"]["written"]["sha256"] and events[1]["backup"]["config_sha256"]
    assert events[4]["apply"] == [out["next"][0]] and events[4]["files"] == [cfg]
    finished = [e for e in _events(tmp_path, run) if e["event"] == "run-finished"]
    assert finished[-1]["status"] == "edited-not-applied"
    # revert: byte for byte, from the journal alone, exactly as before
    r = _revert(tmp_path, run)
    assert json.loads(r.stdout)["result"]["status"] == "reverted", r.stdout
    assert open(cfg, "rb").read() == original


def test_a_talos_file_in_text_ends_saying_edited_not_applied(tmp_path):
    cfg = _copy(TALOS, tmp_path / "cp.yaml")
    p = run_cli("recover", "--method", "talos", "--config-file", cfg, "--yes", env=_env(tmp_path))
    assert p.returncode == 8, p.stderr
    text = p.stdout.decode()
    assert re.search(r"^run \S+: edited-not-applied$", text, re.M)
    assert "applied, verified" not in text and not re.search(r"^run \S+: applied$", text, re.M)
    flat = unfolded(text)  # prose and commands fold to the terminal's width
    assert "not verified: " in text and f"{cfg} edited here, not applied to any node" in flat
    assert f"talosctl apply-config -n NODE -f {cfg} --mode=no-reboot" in flat
    assert _ends_saying_edited_not_applied(text), text
    # runs and report.md say the same
    listed = json.loads(run_cli("runs", "-o", "json", env=_env(tmp_path)).stdout)
    [r] = listed["result"]
    assert r["status"] == "edited-not-applied"
    assert f"run {r['run']}: edited here, not applied to any node" in listed["outcome"]["notVerified"]
    assert f"breakglass revert {r['run']}" in listed["outcome"]["next"]
    report = open(tmp_path / "state" / "runs" / r["run"] / "report.md").read()
    assert "status: **edited-not-applied**" in report and "- last transition: edited" in report
    outcome = report.split("## Outcome", 1)[1]
    assert f"{cfg} edited here, not applied to any node" in outcome and "talosctl apply-config -n NODE" in outcome


def test_the_nodes_given_with_a_talos_file_are_in_its_apply_command(tmp_path):
    cfg = _copy(TALOS, tmp_path / "cp.yaml")
    p = run_cli("recover", "talos", "--config-file", cfg, "-n", "10.0.0.2,10.0.0.3", "--yes", "-o", "json",
                env=_env(tmp_path))
    assert p.returncode == 8, p.stderr
    nxt = json.loads(p.stdout)["outcome"]["next"]
    assert nxt[0] == f"talosctl apply-config -n 10.0.0.2,10.0.0.3 -f {cfg} --mode=no-reboot"


# -- k3s and RKE2: a config.yaml --------------------------------------------------------------------------------

def test_a_k3s_file_is_edited_not_applied_with_the_copy_restart_and_check(tmp_path):
    cfg = _copy(os.path.join(K3S, "k3s-ansible.yaml"), tmp_path / "repo" / "config.yaml")
    original = open(cfg, "rb").read()
    p = run_cli("recover", "k3s", "--config-file", cfg, "--yes", "-o", "json", env=_env(tmp_path))
    assert p.returncode == 8, p.stderr
    doc = json.loads(p.stdout)
    run, out = doc["result"]["run"], doc["outcome"]
    dropin = str(tmp_path / "repo" / "config.yaml.d" / "99-breakglass.yaml")
    assert doc["result"]["status"] == out["status"] == "edited-not-applied"
    assert f"{dropin} edited here, not applied to any node" in out["notVerified"]
    assert out["next"] == [
        "ssh SERVER sudo mkdir -p /etc/rancher/k3s/config.yaml.d   # SERVER: each k3s server node, in turn",
        f"ssh SERVER sudo tee /etc/rancher/k3s/config.yaml.d/99-breakglass.yaml < {dropin} > /dev/null",
        "ssh SERVER sudo systemctl restart k3s",
        "ssh SERVER \"sudo k3s kubectl get --raw='/readyz?verbose'\"",
        f"breakglass revert {run}   (puts the file back here; if you applied it, apply it again the same way)"]
    assert open(cfg, "rb").read() == original and os.path.exists(dropin)
    r = _revert(tmp_path, run)
    assert json.loads(r.stdout)["result"]["status"] == "reverted", r.stdout
    assert open(cfg, "rb").read() == original and os.listdir(tmp_path / "repo") == ["config.yaml"]


def test_an_rke2_file_whose_own_item_is_edited_is_copied_whole_with_its_dropin(tmp_path):
    cfg = _copy(os.path.join(K3S, "rke2-hardened.yaml"), tmp_path / "fleet" / "config.yaml")
    original = open(cfg, "rb").read()
    p = run_cli("recover", "rke2", "--config-file", cfg, "--yes", env=_env(tmp_path))
    assert p.returncode == 8, p.stderr
    text = p.stdout.decode()
    dropin = str(tmp_path / "fleet" / "config.yaml.d" / "99-breakglass.yaml")
    assert f"{cfg} and {dropin} edited here, not applied to any node" in unfolded(text)
    for line in (f"ssh SERVER sudo tee /etc/rancher/rke2/config.yaml < {cfg} > /dev/null",
                 f"ssh SERVER sudo tee /etc/rancher/rke2/config.yaml.d/99-breakglass.yaml < {dropin} > /dev/null",
                 "ssh SERVER sudo systemctl restart rke2-server",
                 "ssh SERVER \"sudo /var/lib/rancher/rke2/bin/kubectl --kubeconfig /etc/rancher/rke2/rke2.yaml "
                 "get --raw='/readyz?verbose'\""):
        assert " ".join(line.split()) in unfolded(text), line
    assert _ends_saying_edited_not_applied(text), text
    assert b"my-shared-secret" not in p.stdout  # the commands name the files, never their text
    run = re.search(r"^run (\S+): edited-not-applied$", text, re.M).group(1)
    r = _revert(tmp_path, run)
    assert json.loads(r.stdout)["result"]["status"] == "reverted", r.stdout
    assert open(cfg, "rb").read() == original


def test_a_config_in_the_servers_own_place_needs_only_the_restart():
    """On the server itself (/etc/rancher/k3s/config.yaml and its drop-ins): nothing to copy, k3s reads it once
    restarted; the check asks the node's own kubectl."""
    remedy = K3sFlags("k3s", {}, "/etc/rancher/k3s/config.yaml", local=True, restart=False)
    step = Step("s1", "localhost:/etc/rancher/k3s/config.yaml", "edit", "", "",
                {"files": [{"kind": "dropin", "path": "/etc/rancher/k3s/config.yaml.d/99-breakglass.yaml"}]})
    commands, checks = remedy.apply_commands(step)
    assert commands == ["sudo systemctl restart k3s   # k3s reads /etc/rancher/k3s/config.yaml and its drop-ins only "
                        "at start"]
    assert checks == ["sudo k3s kubectl get --raw='/readyz?verbose'"]


# -- the exit code and the run state, documented --------------------------------------------------------------

def test_edited_not_applied_is_a_documented_run_state_and_exit_8():
    assert runstates.EDITED in runstates.FINAL and "exit 8" in runstates.FINAL[runstates.EDITED]
    assert runstates.exit_code("edited-not-applied") == 8 and runstates.exit_code("applied") == 0
    assert runstates.exit_code("applied-unverified") == 8
    meaning = EXIT_CODE_MEANINGS[ExitCode.NOT_VERIFIED]
    assert "edited, not applied" in meaning
    from tests.conftest import manual

    readme = manual("exit-codes.md")
    rows = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|$", readme, re.M))
    assert rows["8"] == meaning


# -- whose config.yaml: k3s' or RKE2's ---------------------------------------------------------------------------

@pytest.mark.parametrize("fixture, name", [("k3s-ansible.yaml", "k3s"), ("rke2-hardened.yaml", "rke2"),
                                           ("k3s-scalar.yaml", None), ("10-audit.yaml", None)])
def test_the_fixtures_distribution_is_read_from_the_file(tmp_path, fixture, name):
    path = _copy(os.path.join(K3S, fixture), tmp_path / "x" / "config.yaml")
    reading = which.read(path)
    assert reading.name == name, reading
    if name is None:
        assert "both are offered" in reading.line()


@pytest.mark.parametrize("path, text, name, why", [
    ("/etc/rancher/rke2/config.yaml", "token: x\n", "rke2", "under /etc/rancher/rke2/"),
    ("/etc/rancher/k3s/config.yaml", "token: x\n", "k3s", "under /etc/rancher/k3s/"),
    ("/repo/config.yaml", "cni: [multus, cilium]\n", "rke2", "cni: only RKE2 reads it"),
    ("/repo/config.yaml", "cni: canal\n", "rke2", "cni: only RKE2 reads it"),
    ("/repo/config.yaml", "control-plane-resource-requests: kube-apiserver-cpu=500m\n", "rke2",
     "control-plane-resource-requests"),
    ("/repo/config.yaml", "kube-apiserver-image: registry/kube-apiserver:v1.34\n", "rke2", "kube-apiserver-image"),
    ("/repo/config.yaml", "pod-security-admission-config-file: /etc/psa.yaml\n", "rke2", "pod-security"),
    ("/repo/config.yaml", "disable:\n  - rke2-ingress-nginx\n", "rke2", "an RKE2 chart"),
    ("/repo/config.yaml", "disable: traefik,servicelb\n", "k3s", "a k3s packaged component"),
    ("/repo/config.yaml", "flannel-backend: wireguard-native\n", "k3s", "flannel-backend"),
    ("/repo/config.yaml", "data-dir: /var/lib/rancher/rke2\n", "rke2", "data-dir"),
    # keys both read: not evidence
    ("/repo/config.yaml", "etcd-expose-metrics: true\nwrite-kubeconfig-mode: '0644'\nselinux: true\n", None, ""),
    # markers of both: not told
    ("/etc/rancher/k3s/config.yaml", "profile: cis\n", None, "cannot be told"),
    ("/repo/k3s/config.yaml", "profile: cis\n", "rke2", "profile"),  # a directory named k3s is not evidence
])
def test_what_tells_k3s_and_rke2_apart(path, text, name, why):
    reading = which.of(path, [(path, text)])
    assert reading.name == name, reading
    assert why in reading.line()


def test_a_dropin_beside_the_config_counts_too(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("token: x\n")
    (tmp_path / "config.yaml.d").mkdir()
    (tmp_path / "config.yaml.d" / "10-cis.yaml").write_text("profile: cis\n")
    assert which.read(str(cfg)).name == "rke2"


def test_recover_k3s_refuses_an_rke2_file_in_one_line_naming_its_way(tmp_path):
    cfg = _copy(os.path.join(K3S, "rke2-hardened.yaml"), tmp_path / "repo" / "config.yaml")
    original = open(cfg, "rb").read()
    for extra in ([], ["-o", "json"]):
        p = run_cli("recover", "k3s", "--config-file", cfg, "--yes", *extra, env=_env(tmp_path))
        assert p.returncode == 2, p.stderr
        lines = [ln for ln in p.stderr.decode().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("breakglass: error: "), lines
        assert "RKE2's config" in lines[0] and f"breakglass recover rke2 --config-file {cfg}" in lines[0]
    p = run_cli("recover", "rke2", "--config-file", _copy(os.path.join(K3S, "k3s-ansible.yaml"),
                                                          tmp_path / "k3s" / "config.yaml"), "--dry-run",
                env=_env(tmp_path))
    assert p.returncode == 2 and b"breakglass recover k3s --config-file" in p.stderr, p.stderr
    assert open(cfg, "rb").read() == original and not os.path.exists(tmp_path / "state" / "runs")


def test_only_the_files_own_way_is_offered_and_both_when_it_cannot_be_told(tmp_path):
    rke2 = _copy(os.path.join(K3S, "rke2-hardened.yaml"), tmp_path / "a" / "config.yaml")
    opts = {o.method: o for o in planner.options(planner.probe(planner.Access(k3s_files=[rke2])))}
    assert opts["rke2"].available and not opts["k3s"].available
    assert opts["k3s"].reason.startswith("the file is RKE2's config, not k3s'")
    plain = _copy(os.path.join(K3S, "k3s-scalar.yaml"), tmp_path / "b" / "config.yaml")
    opts = {o.method: o for o in planner.options(planner.probe(planner.Access(k3s_files=[plain])))}
    assert opts["rke2"].available and opts["k3s"].available


# -- the wizard ----------------------------------------------------------------------------------------------------

def _said_after_the_change(p) -> str:
    text = "\n".join(p.transcript)
    return text[text.index("edited-not-applied"):]


def test_the_wizard_says_edited_not_applied_and_ends_with_the_commands_when_not_applied(tmp_path):
    cfg = _copy(TALOS, tmp_path / "cp.yaml")
    p = ScriptedPrompter([LOG, "talos-file", cfg, "talos", VWH, False])
    assert wizard.run(p, str(tmp_path / "state")) == 8
    after = _said_after_the_change(p)
    assert "Edited, not applied" in after and "? Have you applied it" in after
    assert f"talosctl apply-config -n NODE -f {cfg} --mode=no-reboot" in unfolded(after)
    assert "Revert the temporary change now" not in after and "is ready" not in after
    last = [ln for ln in "\n".join(p.transcript).splitlines() if ln.strip()][-3:]
    assert last[0].strip().startswith("$ talosctl apply-config") and "kubectl get --raw" in last[1]
    assert last[2].strip().startswith("$ breakglass revert ")


def test_the_wizard_watches_the_apiserver_named_once_the_file_is_applied(tmp_path):
    from tests.apiserver_standin import serve_readyz

    cfg = _copy(TALOS, tmp_path / "cp.yaml")
    with serve_readyz([500], "start-kubernetes-service-cidr-controller") as url:
        p = ScriptedPrompter([LOG, "talos-file", cfg, "talos", VWH, True, url, False])
        assert wizard.run(p, str(tmp_path / "state")) == 0
    after = _said_after_the_change(p)
    assert "? Apiserver to watch:" in after and "Waiting for /readyz after you applied it" in after
    assert f"{url}/readyz?verbose: ready" in after and f"Applied by you, and {url} is ready." in after
    assert "? Revert the temporary change now?" in after


def test_the_wizard_says_not_verified_when_the_apiserver_named_is_not_ready(tmp_path, monkeypatch):
    from tests.apiserver_standin import serve_readyz

    monkeypatch.setattr(wizard, "WAIT_SECONDS", 3.0)  # the apiserver never gets ready: stop waiting soon
    cfg = _copy(TALOS, tmp_path / "cp.yaml")
    with serve_readyz([500] * 100, "start-kubernetes-service-cidr-controller") as url:
        p = ScriptedPrompter([LOG, "talos-file", cfg, "talos", VWH, True, url])
        assert wizard.run(p, str(tmp_path / "state")) == 8
    after = _said_after_the_change(p)
    assert "NOT READY" in after and "the apiserver was not seen ready" in after
    assert "Revert the temporary change now" not in after and "is ready" not in after
    assert "\n".join(p.transcript).strip().splitlines()[-1].strip().startswith("$ breakglass revert ")


def test_the_wizard_offers_only_rke2_for_an_rke2_file(tmp_path):
    cfg = _copy(os.path.join(K3S, "rke2-hardened.yaml"), tmp_path / "config.yaml")
    p = ScriptedPrompter([LOG, "k3s-file", cfg, "rke2", VWH, False])
    assert wizard.run(p, str(tmp_path / "state")) == 8
    text = "\n".join(p.transcript)
    assert "is RKE2's config (profile: only RKE2 reads it)" in text
    assert re.search(r"^  - k3s: .*\(the file is RKE2's", text, re.M), text
    assert "ssh SERVER sudo systemctl restart rke2-server" in text
