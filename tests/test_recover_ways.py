"""`breakglass recover WAY`: one subcommand per way out, generated from ways.registry, with only its own options and
examples; `recover --method WAY`, plan files and `--auto` drive the same body and give the same plan.

The targets are real: etcd (tests/etcd_server.py), OpenSSH (tests/sshd_server.py), the session's kube-apiserver
(tests/real_apiserver_session.py), and copies of the repository's own config files for the file variants.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys

import pytest
import yaml

from breakglass.flows import scripted
from breakglass.ways import registry
from tests.conftest import ROOT, run_cli
from tests.real_apiserver_session import kube, real_apiserver  # noqa: F401 - the fixtures
from tests.test_codec import KYVERNO

HERE = os.path.dirname(os.path.abspath(__file__))
CFG = KYVERNO["metadata"]["name"]
COMMON = {"--state-dir", "--dry-run", "--yes", "--output", "--verbose", "--help"}
RANKED = [w.name for w in sorted(registry.WAYS, key=lambda w: w.rank)]


def _env(tmp_path, **extra) -> dict:
    # no ambient cluster: --auto must choose from what the test gives, nothing from the caller's shell
    return {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": "", "ETCDCTL_ENDPOINTS": "",
            "ETCDCTL_CACERT": "", "ETCDCTL_CERT": "", "ETCDCTL_KEY": "", **extra}


def _argv(way: str, opts: dict) -> list[str]:
    """The flags for ``opts`` (option name -> value), spelled as the registry's Opt says."""
    spec = {o.name: o for o in registry.get(way).options}
    out = []
    for name, value in opts.items():
        opt = spec[name]
        if opt.kind == "bool":
            out.append(opt.flag if value else "--no-" + name.replace("_", "-"))
        elif opt.kind == "list":
            for v in value:
                out += [opt.flag, str(v)]
        else:
            out += [opt.flag, str(value)]
    return out


def _plan_json(env, *args) -> dict:
    p = run_cli(*args, "--dry-run", "-o", "json", env=env, timeout=180)
    assert p.returncode == 0, (args, p.stderr.decode())
    doc = json.loads(p.stdout)
    assert doc["kind"] == "RecoverResult" and doc["result"]["dry_run"] is True, doc
    return doc


def _same_plan_every_way(tmp_path, env, way: str, opts: dict, auto: bool = False) -> dict:
    """`recover WAY`, `recover --method WAY` (both spellings, anywhere), a plan file, and optionally --auto: one
    plan."""
    flags = _argv(way, opts)
    want = _plan_json(env, "recover", way, *flags)
    assert want["result"]["method"] == way and want["result"]["steps"], want
    assert _plan_json(env, "recover", "--method", way, *flags) == want
    assert _plan_json(env, "recover", *flags, f"--method={way}") == want
    plan = tmp_path / f"{way}-plan.yaml"
    # what a plan cannot carry (a program, a key, known_hosts: registry.Opt.trust) goes on the command line with it
    trusted = {k: v for k, v in opts.items() if k in scripted.trusted_options()}
    plan.write_text(yaml.safe_dump({"method": way, **{k: v for k, v in opts.items() if k not in trusted}}))
    assert _plan_json(env, "recover", "--plan", str(plan), *_argv(way, trusted)) == want
    if auto:
        assert _plan_json(env, "recover", "--auto", *flags) == want
    return want


# -- help: the ways in rank order with their cost; each way only its own options ----------------------------------

def test_recover_help_lists_the_ways_in_rank_order_with_their_cost():
    p = run_cli("recover", "--help", env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    section = p.stdout.decode().partition("Ways out")[2].splitlines()[1:]
    rows: list = []
    for ln in section:  # a row is "  NAME  COST", its cost wrapped onto deeper-indented lines
        if ln.startswith("  ") and not ln.startswith("   "):
            rows.append(ln.split(None, 1))
        elif ln.strip():
            rows[-1][1] += " " + ln.strip()
    assert [r[0] for r in rows] == RANKED == ["kubeapi", "static-manifests", "talos", "kubeadm", "k3s", "rke2", "etcd"]
    for name, cost in rows:
        assert cost.strip() == registry.get(name).cost


def _printed_flags(way: str) -> set[str]:
    p = run_cli("recover", way, "--help", env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    text = p.stdout.decode()
    for example in registry.get(way).examples:
        assert any(ln.strip() == example for ln in text.splitlines()), f"{way}: example not printed whole: {example}"
    options = text.partition("\nOptions:\n")[2]
    return {f for ln in options.splitlines() if ln.startswith("  -")
            for f in re.findall(r"--[a-z0-9-]+", re.split(r"\s{2,}", ln.strip())[0])}


@pytest.mark.parametrize("way", RANKED)
def test_each_way_help_lists_only_its_own_options_and_its_examples(way):
    expected = set(COMMON)
    for opt in registry.get(way).options:
        expected |= {f for f in (opt.flags or (opt.flag,)) if f.startswith("--")}
        if opt.kind == "bool":
            expected.add("--no-" + opt.name.replace("_", "-"))
    assert _printed_flags(way) == expected


def test_etcd_help_has_no_talos_or_ssh_host_options_and_talos_has_no_etcd_ones():
    etcd, talos = _printed_flags("etcd"), _printed_flags("talos")
    assert "--nodes" not in etcd and "--ssh" not in etcd and "--manifest" not in etcd and "--action" not in etcd
    assert "--snapshot" in etcd and "--etcd-endpoints" in etcd
    assert not any(f.startswith("--etcd") or f.startswith("--ssh") for f in talos) and "--snapshot" not in talos


@pytest.mark.parametrize("way,example", [(w.name, e) for w in registry.WAYS for e in w.examples])
def test_every_example_of_every_way_parses(way, example):
    """The examples `recover WAY --help` prints are commands of today's CLI, parsed by that way's own command."""
    import typer.main

    from breakglass.cli import app

    tokens = shlex.split(example)
    tokens = tokens[1:] if tokens[0] == "sudo" else tokens
    assert tokens[:3] == ["breakglass", "recover", way], example
    cmd = typer.main.get_group(app).commands["recover"].commands[way]
    cmd.make_context(way, tokens[3:])  # raises a usage error for an option the way does not take


def test_an_option_of_another_way_is_refused_by_name(tmp_path):
    p = run_cli("recover", "etcd", "-w", CFG, "--nodes", "cp1", "--dry-run", env=_env(tmp_path))
    assert p.returncode == 2 and b"no such option: --nodes" in p.stderr, p.stderr
    p = run_cli("recover", "--nodes", "cp1", "etcd", "-w", CFG, "--dry-run", env=_env(tmp_path))
    err = p.stderr.decode()
    assert p.returncode == 2 and "--nodes: not an option of `breakglass recover etcd`" in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["--method", "teleport"], ["--method=teleport", "--dry-run"], ["teleport"]])
def test_an_unknown_way_is_one_line_exit_2_naming_the_ways(tmp_path, args):
    p = run_cli("recover", *args, env=_env(tmp_path))
    err = p.stderr.decode()
    assert p.returncode == 2, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("breakglass: error:")]
    assert "unknown way out 'teleport'" in line and all(n in line for n in registry.NAMES), err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2  # the error, and the --help hint


# -- the same plan, however the way is named ----------------------------------------------------------------------

def _copy(tmp_path, src: str, name: str) -> str:
    dst = tmp_path / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return str(dst)


@pytest.mark.parametrize("way,opts", [
    ("talos", lambda t: {"config_file": [_copy(t, os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml"),
                                               "cp.yaml")], "plugins": ["ValidatingAdmissionWebhook"]}),
    ("talos", lambda t: {"config_file": [_copy(t, os.path.join(HERE, "talos", "v1.14-document.yaml"), "cp.yaml")]}),
    ("kubeadm", lambda t: {"manifest": _copy(t, os.path.join(HERE, "kubeadm", "kube-apiserver.yaml"), "m.yaml"),
                           "verify_timeout": 30.0, "wait": False}),
    ("k3s", lambda t: {"config_file": [_copy(t, os.path.join(HERE, "k3s", "k3s-ansible.yaml"), "k3s/config.yaml")],
                       "plugins": ["ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"]}),
    ("rke2", lambda t: {"config_file": [_copy(t, os.path.join(HERE, "k3s", "rke2-hardened.yaml"),
                                              "rke2/config.yaml")]}),
], ids=["talos-file", "talos-file-1.14", "kubeadm-manifest", "k3s-file", "rke2-file"])
def test_file_variants_give_the_same_plan_as_method_plan_and_subcommand(tmp_path, way, opts):
    _same_plan_every_way(tmp_path, _env(tmp_path), way, opts(tmp_path))


def _seed_etcd(srv):
    from breakglass.webhooks import codec, sources
    from tests import backend_seed
    from tests import etcd_server as es

    c = es.raw_client(srv)
    es.put_many(c, [(sources.etcd_key("validating", CFG), codec.encode_value(KYVERNO))] + backend_seed.healthy())
    c.close()


def test_etcd_gives_the_same_plan_as_method_plan_auto_and_subcommand(tmp_path, etcd_clean):
    _seed_etcd(etcd_clean)
    env = _env(tmp_path)
    want = _same_plan_every_way(tmp_path, env, "etcd", {"webhook_config": [f"validating/{CFG}"],
                                                        "etcd_endpoints": etcd_clean.endpoint, "timeout": 5.0},
                                auto=True)
    assert want["result"]["steps"][0]["target"] == f"/registry/validatingwebhookconfigurations/{CFG}"
    # what was typed before the way's name counts as typed after it
    p = run_cli("recover", "-o", "json", "--dry-run", "etcd", "-w", f"validating/{CFG}", "--etcd-endpoints",
                etcd_clean.endpoint, "--timeout", "5", env=env)
    assert p.returncode == 0 and json.loads(p.stdout) == want, p.stderr


def test_a_flag_typed_with_its_default_value_still_wins_over_the_plan(tmp_path, etcd_clean):
    """Typed is typed (click's parameter source), not 'differs from the default': `--etcd-prefix /registry`
    overrides the plan's prefix although /registry is the default."""
    _seed_etcd(etcd_clean)
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"method: etcd\nwebhook_config: [validating/{CFG}]\netcd_prefix: /elsewhere\n")
    doc = _plan_json(_env(tmp_path), "recover", "--plan", str(plan), "--etcd-prefix", "/registry",
                     "--etcd-endpoints", etcd_clean.endpoint)
    assert doc["result"]["steps"][0]["target"] == f"/registry/validatingwebhookconfigurations/{CFG}"


@pytest.mark.parametrize("way", ["kubeadm", "k3s", "rke2"])
def test_ssh_variants_give_the_same_plan_as_method_plan_and_subcommand(tmp_path, sshd, way):
    ssh = {"ssh": ["cp1"], "ssh_config": sshd.ssh_config, "known_hosts": sshd.known_hosts}
    if way == "kubeadm":
        opts = {**ssh, "manifest_path": _copy(tmp_path, os.path.join(HERE, "kubeadm", "kube-apiserver.yaml"),
                                              "node/kube-apiserver.yaml"),
                "node_backup_dir": str(tmp_path / "node-backup")}
    else:
        src = os.path.join(HERE, "k3s", "rke2-hardened.yaml" if way == "rke2" else "k3s-ansible.yaml")
        opts = {**ssh, "config_path": _copy(tmp_path, src, "node/config.yaml")}
    want = _same_plan_every_way(tmp_path, _env(tmp_path), way, opts)
    assert all(s["target"].startswith("cp1:") for s in want["result"]["steps"]), want


def test_kubeapi_gives_the_same_plan_as_method_plan_auto_and_subcommand(tmp_path, kube):
    from tests.real_apiserver_session import ADMISSION
    from tests.test_kubeapi import manifest

    kube.client.must("POST", f"{ADMISSION}validatingwebhookconfigurations?fieldManager=kyverno", manifest(KYVERNO))
    kc = kube.kubeconfig(str(tmp_path / "kubeconfig"))
    want = _same_plan_every_way(tmp_path, _env(tmp_path), "kubeapi",
                                {"webhook_config": [CFG], "kubeconfig": kc, "action": "exclude"}, auto=True)
    assert all(CFG in s["target"] for s in want["result"]["steps"]), want


def test_talosctl_gives_the_same_plan_as_method_plan_and_subcommand(tmp_path):
    from tests.test_talos import FakeTalos

    talos = FakeTalos(tmp_path)
    talos.node("cp1", "v1.12-multidoc-overlap.yaml")  # skips without Talos' own machinery (make go-components)
    _same_plan_every_way(tmp_path, {**_env(tmp_path), **talos.env}, "talos", {"nodes": ["cp1"], "wait": False})


# -- plan files: typed from the registry, each way's own options only ---------------------------------------------

@pytest.mark.parametrize("name", sorted(os.listdir(os.path.join(ROOT, "examples", "plans"))))
def test_every_example_plan_loads_as_its_ways_options(name):
    from breakglass.flows import scripted

    path = os.path.join(ROOT, "examples", "plans", name)
    plan = scripted.load_plan(path)
    assert plan["method"] == name.split(".")[0]
    scripted.check_plan_way(plan, plan["method"], path)
    way = registry.get(plan["method"])
    assert set(plan) - {"method"} <= {o.name for o in way.options}


def test_plan_typing_does_not_import_the_command_line():
    """flows.scripted types plans from the registry: the core never imports the CLI (tests/test_layers.py)."""
    import subprocess

    code = ("import sys; from breakglass.flows import scripted; "
            "scripted.load_plan(sys.argv[1]); print(sorted(m for m in sys.modules if m.startswith('breakglass.cli')))")
    p = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "examples", "plans", "etcd.yaml")],
                       capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == b"[]", p.stdout + p.stderr


@pytest.mark.parametrize("content,typed,named", [
    ("method: etcd\nwebhook_config: [x]\nnodes: [cp1]\n", [], "nodes"),
    ("method: kubeapi\nwebhook_config: [x]\nsnapshot: /tmp/s.db\n", [], "snapshot"),
    ("method: talos\nconfig_file: [cp.yaml]\netcd_endpoints: https://127.0.0.1:2379\n", [], "etcd_endpoints"),
    ("method: etcd\nwebhook_config: [x]\n", ["--manifest", "m.yaml"], "--manifest"),
])
def test_an_option_that_is_not_the_plans_ways_is_one_line_naming_the_way(tmp_path, content, typed, named):
    plan = tmp_path / "plan.yaml"
    plan.write_text(content)
    p = run_cli("recover", "--plan", str(plan), *typed, "--dry-run", env=_env(tmp_path))
    err = p.stderr.decode()
    way = content.split("\n")[0].split(": ")[1]
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and named in err and "not an option of" in err and way in err, err


# -- revert asks about a run and reverts that one ------------------------------------------------------------------

def test_revert_reverts_the_run_it_asked_about_even_if_another_started_meanwhile(tmp_path):
    """Issue 27 §3: `revert` with no run id asked "Revert run A?" and, when run B started before the answer,
    reverted B."""
    import pexpect

    original = open(os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml"), "rb").read()
    a, b = _copy(tmp_path, os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml"), "a/cp.yaml"), \
        _copy(tmp_path, os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml"), "b/cp.yaml")
    env = _env(tmp_path)
    p = run_cli("recover", "talos", "--config-file", a, "--yes", "-o", "json", env=env)
    assert p.returncode == 8, p.stderr  # issue 33: edited, not applied (exit 8)
    run_a = json.loads(p.stdout)["result"]["run"]
    # issue 33: a Talos file run's revert has nothing to read the cluster's webhooks through: refused (exit 4)
    # without --re-arm; this test is about which run is reverted, so it re-arms unseen (and exits 8, below)
    child = pexpect.spawn(sys.executable, ["-m", "breakglass", "revert", "--re-arm"], cwd=ROOT,
                          env={**os.environ, **env}, timeout=120)
    try:
        child.expect(r"Revert run (\S+)\? Type yes")
        assert child.match.group(1).decode() == run_a
        p = run_cli("recover", "talos", "--config-file", b, "--yes", "-o", "json", env=env)  # run B, meanwhile
        assert p.returncode == 8, p.stderr  # issue 33: edited, not applied (exit 8)
        run_b = json.loads(p.stdout)["result"]["run"]
        child.sendline("yes")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 8, child.before  # issue 33: reverted, backends not checked (was 0)
    runs = {r["run"]: r["status"] for r in json.loads(run_cli("runs", "-o", "json", env=env).stdout)["result"]}
    assert runs[run_a] == "reverted" and runs[run_b] == "edited-not-applied", runs
    assert open(a, "rb").read() == original and open(b, "rb").read() != original


# -- a diagnosis file nested beyond the parser ---------------------------------------------------------------------

def test_a_diagnosis_nested_100k_deep_is_one_line_exit_2(tmp_path):
    deep = tmp_path / "diag.json"
    deep.write_text('{"result": ' + "[" * 100_000 + "]" * 100_000 + "}")
    cp = _copy(tmp_path, os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml"), "cp.yaml")
    for args in (["recover", "talos", "--config-file", cp, "--dry-run", "--diagnosis", str(deep)],
                 ["recover", "--auto", "--diagnosis", str(deep), "--etcd-endpoints", "http://127.0.0.1:1",
                  "--timeout", "1", "--dry-run"]):
        p = run_cli(*args, env=_env(tmp_path))
        err = p.stderr.decode()
        assert p.returncode == 2, err
        assert len(err.strip().splitlines()) == 1 and "nested too deeply" in err and "Recursion" not in err, err


@pytest.mark.parametrize("args,content,match", [
    (["etcd", "-w", "x", "--timeout", "0"], None, "greater than or equal to 0.1"),
    ([], "method: etcd\nwebhook_config: [x]\ntimeout: 0\n", "timeout: a number of at least 0.1"),
    ([], "method: talos\nconfig_file: [cp.yaml]\nwait_timeout: 0.5\n", "wait_timeout: a number of at least 1"),
])
def test_an_options_minimum_holds_on_the_command_line_and_in_a_plan(tmp_path, args, content, match):
    if content is not None:
        (tmp_path / "plan.yaml").write_text(content)
        args = ["--plan", str(tmp_path / "plan.yaml")]
    p = run_cli("recover", *args, "--dry-run", env=_env(tmp_path))
    err = p.stderr.decode()
    assert p.returncode == 2 and match in err and "Traceback" not in err, err


def test_the_cli_confirmation_asks_for_what_it_changes_as_the_wizard_does(tmp_path):
    """`recover` without --yes goes ahead only on the exact word the wizard asks for (here the plugins it turns
    off): "yes", a "y" or Enter change nothing (exit 7, the file as it was)."""
    import pexpect

    src = os.path.join(HERE, "talos", "v1.12-multidoc-overlap.yaml")
    original = open(src, "rb").read()
    env = {**os.environ, **_env(tmp_path), "COLUMNS": "80"}
    for answer, code in (("yes", 7), ("", 7), ("ValidatingAdmissionWebhook,MutatingAdmissionWebhook", 8)):
        path = _copy(tmp_path, src, f"{code}-{len(answer)}/cp.yaml")
        child = pexpect.spawn(sys.executable, ["-m", "breakglass", "recover", "talos", "--config-file", path],
                              cwd=ROOT, env=env, timeout=120)
        try:
            child.expect(r"Type (\S+) to go on: ")
            assert child.match.group(1).decode() == "ValidatingAdmissionWebhook,MutatingAdmissionWebhook"
            child.sendline(answer)
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == code, child.before
        assert (open(path, "rb").read() == original) == (code == 7)
