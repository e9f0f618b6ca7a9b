"""The Talos remedy against the talosctl stand-in (tests/fake_talosctl.py), for every config era.

The stand-in patches and validates with Talos' own code (go/talos-machinery), so a node must hold a config
Talos accepts: each node starts from the config Talos' generator wrote for its version
(tests/talos/generated) with the hand-written config named here laid over it as a strategic-merge patch.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

from breakglass.text import admission_flags as flags
from tests import fake_talosctl as standin
from tests.apiserver_standin import serve_readyz
from tests.conftest import ROOT, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "talos")
GENERATED = os.path.join(CONFIGS, "generated")
VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"


class FakeTalos:
    def __init__(self, tmp):
        self.dir = tmp / "talos"
        (self.dir / "nodes").mkdir(parents=True)
        bindir = tmp / "bin"
        bindir.mkdir()
        exe = bindir / "talosctl"
        exe.write_text(f"#!/bin/sh\nexec {sys.executable} {os.path.join(HERE, 'fake_talosctl.py')} \"$@\"\n")
        exe.chmod(0o755)
        self.env = {"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_TALOS_DIR": str(self.dir),
                    "BREAKGLASS_STATE_DIR": str(tmp / "state"), "TALOSCONFIG": "",
                    # no kubeconfig of this machine's: the fake nodes' cluster has no API to read (issue 33)
                    "KUBECONFIG": str(tmp / "no-kubeconfig")}
        self.initial = {}  # node -> its documents as set up

    def node(self, name, config, version="1.12", shape=None):
        """A node of this Talos version holding `config` laid over what that version's generator writes."""
        (self.dir / "nodes" / f"{name}.yaml").write_text(_real_config(config, version))
        (self.dir / "nodes" / f"{name}.version").write_text(version)
        if shape:
            (self.dir / "nodes" / f"{name}.shape").write_text(shape)
        self.initial[name] = self.docs(name)

    def docs(self, name):
        return list(yaml.safe_load_all(open(self.dir / "nodes" / f"{name}.yaml")))

    def cli(self, *args, stdin=None):
        return run_cli(*args, env=self.env, stdin=stdin)


@pytest.fixture
def talos(tmp_path):
    return FakeTalos(tmp_path)


def _orig(config):
    return [d for d in yaml.safe_load_all(open(os.path.join(CONFIGS, config))) if d]


def _machinery(version):
    """The talos-machinery build for a Talos version; skip without it, fail without it under CI."""
    build = standin.machinery_version(version)
    problem = standin.missing_machinery(build)
    if problem:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(problem)
    return build


def _real_config(config, version):
    """`config` laid over the config Talos `version` generates (controlplane or worker, as its machine.type),
    by Talos' own strategic merge; what the node stores is the bytes Talos writes."""
    build = _machinery(version)
    docs = _orig(config)
    main = next(d for d in docs if d.get("version") == "v1alpha1")
    kind = "worker" if (main.get("machine") or {}).get("type") == "worker" else "controlplane"
    base = os.path.join(GENERATED, f"v{build}", f"{kind}.yaml")
    if any(d.get("kind") == "KubeClusterConfig" for d in _orig(base)):
        # Talos 1.14 keeps the cluster name in KubeClusterConfig and refuses .cluster.clusterName as well
        (main.get("cluster") or {}).pop("clusterName", None)
    p = subprocess.run([standin.machinery_binary(build), "patch", "--config", base,
                        "--patch", yaml.safe_dump_all(docs, sort_keys=False)], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def _recover(t, *nodes, extra=()):
    return t.cli("recover", "--method", "talos", "-n", ",".join(nodes), "--yes", "--no-wait", *extra)


# issue 33: --no-wait is "applied, not verified" (exit 8): no /readyz was seen
NO_WAIT = 8


def _revert_unseen(t, *extra):
    """issue 33: the stand-in's nodes have no apiserver to read the cluster's webhooks through, so re-enabling the
    plugins is a blind re-arm: refused without --re-arm (exit 4, see test_each_era_exact_result_and_exact_revert),
    and with it reverted but not verified (exit 8)."""
    return t.cli("revert", "--yes", "--re-arm", *extra)


# -- the pure merge rules -------------------------------------------------------------------------

@pytest.mark.parametrize("args,plugins,after", [
    ({}, [VWH], {flags.DISABLE: VWH, flags.ENABLE: None}),
    ({flags.DISABLE: "DefaultStorageClass"}, [VWH, MWH],
     {flags.DISABLE: f"DefaultStorageClass,{VWH},{MWH}", flags.ENABLE: None}),
    ({flags.ENABLE: f"NodeRestriction,{VWH}"}, [VWH], {flags.DISABLE: VWH, flags.ENABLE: "NodeRestriction"}),
    ({flags.ENABLE: VWH}, [VWH], {flags.DISABLE: VWH, flags.ENABLE: None}),
    ({flags.ENABLE: ["NodeRestriction", MWH]}, [MWH], {flags.DISABLE: MWH, flags.ENABLE: ["NodeRestriction"]}),
    ({flags.DISABLE: ["A", "B"]}, [VWH], {flags.DISABLE: ["A", "B", VWH], flags.ENABLE: None}),
    ({flags.DISABLE: f"{VWH}"}, [VWH], {flags.DISABLE: VWH, flags.ENABLE: None}),
])
def test_merge_rules(args, plugins, after):
    ch = flags.disable(args, plugins)
    assert ch.after == after
    assert flags.overlap(flags.apply_change(args, ch.after)) == []


def test_unknown_plugin_is_bad_input():
    from breakglass.core.errors import BadInput
    with pytest.raises(BadInput):
        flags.disable({}, ["NamespaceLifecycle"])


# -- each era through talosctl --------------------------------------------------------------------

def _api_args(docs):
    kapi = [d for d in docs if d.get("kind") == "KubeAPIServerConfig"]
    if kapi:
        return kapi[0].get("extraArgs") or {}
    return ((docs[0].get("cluster") or {}).get("apiServer") or {}).get("extraArgs") or {}


@pytest.mark.parametrize("config,version,expect", [
    ("v1.10-single.yaml", "1.10", {flags.DISABLE: f"{VWH},{MWH}"}),
    ("v1.12-multidoc-overlap.yaml", "1.12", {"feature-gates": "ServerSideApply=true",
                                             flags.ENABLE: "NodeRestriction",
                                             flags.DISABLE: f"DefaultStorageClass,{VWH},{MWH}"}),
    ("v1.13-lists.yaml", "1.13", {"api-audiences": ["kubernetes.default.svc", "api.cluster.local"],
                                  flags.ENABLE: ["NodeRestriction"], flags.DISABLE: f"{VWH},{MWH}"}),
    ("v1.14-document.yaml", "1.14", {"feature-gates": "ServerSideApply=true", flags.DISABLE: f"{VWH},{MWH}"}),
])
def test_each_era_exact_result_and_exact_revert(talos, config, version, expect):
    talos.node("cp1", config, version)
    talos.node("cp2", config, version, shape="mapping" if version < "1.12" else None)
    p = _recover(talos, "cp1", "cp2")
    assert p.returncode == NO_WAIT, p.stderr  # issue 33
    for node in ("cp1", "cp2"):
        docs = talos.docs(node)
        assert _api_args(docs) == expect
        # nothing else in the config changed
        orig = talos.initial[node]
        strip = lambda ds: [{k: v for k, v in d.items() if k not in ("cluster", "extraArgs")} for d in ds]  # noqa: E731
        assert strip(docs) == strip(orig)
        if version == "1.14":
            assert "apiServer" not in (docs[0].get("cluster") or {})  # never both places
    # issue 33: a blind re-arm is refused, the nodes untouched; --re-arm reverts, not verified (exit 8)
    r = talos.cli("revert", "--yes")
    assert r.returncode == 4 and b"unseen" in r.stderr, r.stderr
    assert all(_api_args(talos.docs(node)) == expect for node in ("cp1", "cp2"))
    r = _revert_unseen(talos)
    assert r.returncode == 8, r.stderr
    for node in ("cp1", "cp2"):
        assert _normalised(talos.docs(node)) == _normalised(talos.initial[node])


def _normalised(docs):
    """Talos drops an empty extraArgs map; so does revert. Compare without empty maps."""
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if v not in ({}, None)}
        return x
    return [clean(d) for d in docs]


def test_diff_never_shows_secrets(talos):
    talos.node("cp1", "v1.10-single.yaml", "1.10")
    p = talos.cli("recover", "--method", "talos", "-n", "cp1", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert b"disable-admission-plugins" in p.stdout
    for secret in (b"c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1wcmludGVk", b"abcdef.0123456789abcdef", b"LS0tLS1CRUdJTi"):
        assert secret not in p.stdout + p.stderr
    assert talos.docs("cp1") == talos.initial["cp1"]  # dry run changed nothing


def test_backups_hold_the_whole_config_privately(talos):
    talos.node("cp1", "v1.12-multidoc-overlap.yaml")
    assert _recover(talos, "cp1").returncode == NO_WAIT  # issue 33
    runs = os.path.join(talos.env["BREAKGLASS_STATE_DIR"], "runs")
    [run] = os.listdir(runs)
    path = os.path.join(runs, run, "backups", "s1.machineconfig.yaml")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [d for d in yaml.safe_load_all(open(path)) if d] == talos.initial["cp1"]
    keys = json.load(open(os.path.join(runs, run, "backups", "s1.extraargs.json")))
    assert keys["before"][flags.ENABLE] == f"NodeRestriction,{VWH}"  # recorded for revert


def test_revert_refuses_to_clobber_a_later_change(talos):
    talos.node("cp1", "v1.12-multidoc-overlap.yaml")
    assert _recover(talos, "cp1").returncode == NO_WAIT  # issue 33
    docs = talos.docs("cp1")
    docs[0]["cluster"]["apiServer"]["extraArgs"][flags.DISABLE] = "SomethingElse"
    with open(talos.dir / "nodes" / "cp1.yaml", "w") as f:
        yaml.safe_dump_all(docs, f)
    p = talos.cli("revert", "--yes")
    assert p.returncode == 4 and b"changed since the run" in p.stdout + p.stderr
    assert _api_args(talos.docs("cp1"))[flags.DISABLE] == "SomethingElse"
    p = talos.cli("revert", "--yes", "--force")
    assert p.returncode == 8  # issue 33: --force re-arms unseen too: reverted, not verified
    assert _api_args(talos.docs("cp1"))[flags.DISABLE] == "DefaultStorageClass"


@pytest.mark.parametrize("setup,match,code", [
    (lambda t: t.node("cp1", "worker.yaml"), "not a control-plane node", 2),
    (lambda t: (t.dir / "nodes" / "cp1.yaml").write_text("version: v1alpha1\nmachine: [oops\n"), "invalid YAML", 2),
    (lambda t: (t.dir / "nodes" / "cp1.yaml").write_text("apiVersion: v1alpha1\nkind: HostnameConfig\n"),
     "known era", 2),
    (lambda t: None, "connection refused", 5),  # no such node
])
def test_bad_nodes_change_nothing_anywhere(talos, setup, match, code):
    talos.node("cp0", "v1.12-multidoc-overlap.yaml")
    setup(talos)
    p = _recover(talos, "cp0", "cp1")
    assert p.returncode == code and match in p.stderr.decode(), p.stderr
    assert len(p.stderr.decode().strip().splitlines()) <= 2 and b"Traceback" not in p.stderr
    assert talos.docs("cp0") == talos.initial["cp0"]  # the good node was not touched


@pytest.mark.parametrize("content,match", [(b"\x96\xff" * 100, "not UTF-8 text"), (b"\x00\x01" * 100, "binary data"),
                                           (None, "no such file")])
def test_unreadable_config_files_are_bad_input(talos, tmp_path, content, match):
    path = tmp_path / "controlplane.yaml"
    if content is not None:
        path.write_bytes(content)
    p = talos.cli("recover", "--method", "talos", "--config-file", str(path), "--yes")
    assert p.returncode == 2 and match in p.stderr.decode(), p.stderr
    assert len(p.stderr.decode().strip().splitlines()) == 1
    assert content is None or path.read_bytes() == content


def test_a_node_failing_mid_apply_leaves_the_others_revertable(talos):
    for n in ("cp1", "cp2", "cp3"):
        talos.node(n, "v1.12-multidoc-overlap.yaml")
    # breakglass dies right before patching cp3 (after cp1 and cp2 were patched)
    env = dict(talos.env, BREAKGLASS_FAULT_INJECT="applying@3")
    p = run_cli("recover", "--method", "talos", "-n", "cp1,cp2,cp3", "--yes", "--no-wait", env=env)
    assert p.returncode < 0  # killed right before patching cp3
    assert _api_args(talos.docs("cp3")) == _api_args(talos.initial["cp3"])
    assert VWH in _api_args(talos.docs("cp1"))[flags.DISABLE]
    runs = talos.cli("runs", "-o", "json")
    assert json.loads(runs.stdout)["result"][0]["status"] in ("applying", "started")
    r = _revert_unseen(talos)
    assert r.returncode == 8, r.stderr  # issue 33: re-armed unseen, not verified
    for n in ("cp1", "cp2", "cp3"):
        assert talos.docs(n) == talos.initial[n]


def test_talosctl_missing_or_failing(talos, tmp_path):
    talos.node("cp1", "v1.12-multidoc-overlap.yaml")
    p = run_cli("recover", "--method", "talos", "-n", "cp1", "--yes", "--talosctl", str(tmp_path / "nope"),
                env=talos.env)
    assert p.returncode == 2 and b"talosctl not found" in p.stderr
    p = talos.cli("recover", "--method", "talos", "-n", "cp1", "--yes", "--talosconfig", str(tmp_path / "missing"))
    assert p.returncode == 5 and b"failed to open config file" in p.stderr


def test_plugins_from_the_diagnosis(talos, tmp_path):
    talos.node("cp1", "v1.14-document.yaml", "1.14")
    log = os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")
    d = run_cli("diagnose", log, "-o", "json")
    (tmp_path / "diag.json").write_bytes(d.stdout)
    p = _recover(talos, "cp1", extra=("--diagnosis", str(tmp_path / "diag.json")))
    assert p.returncode == NO_WAIT, p.stderr  # issue 33
    assert _api_args(talos.docs("cp1"))[flags.DISABLE] == VWH  # Kyverno's validating webhook only


def test_diagnose_reads_talos_logs(talos):
    talos.node("cp1", "v1.12-multidoc-overlap.yaml")
    lines = open(os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")).read().splitlines()
    (talos.dir / "nodes" / "cp1.log").write_text("\n".join(line.split(": ", 1)[1] for line in lines) + "\n")
    p = talos.cli("diagnose", "--talos-node", "cp1", "-o", "json")
    assert p.returncode == 3, p.stderr
    f = json.loads(p.stdout)["result"]["findings"][0]
    assert f["webhook"] == "validate.kyverno.svc-fail" and f["sources"] == ["talos:cp1"]
    p = talos.cli("diagnose", "--talos-node", "cp9")
    assert p.returncode == 5 and b"Traceback" not in p.stderr


# -- files managed as code ------------------------------------------------------------------------

def test_config_file_keeps_comments_and_reverts(talos, tmp_path):
    path = tmp_path / "controlplane.yaml"
    shutil.copy(os.path.join(CONFIGS, "gitops-commented.yaml"), path)
    p = talos.cli("recover", "--method", "talos", "--config-file", str(path), "--yes")
    assert p.returncode == 8, p.stderr  # edited, not applied: only the file has it
    text = path.read_text()
    for comment in ("# Control-plane config for prod", "# pinned", "# Extra arguments for the API server.",
                    "# needed by the operator"):
        assert comment in text
    assert f"disable-admission-plugins: {VWH},{MWH}" in text
    r = _revert_unseen(talos)
    assert r.returncode == 8, r.stderr  # issue 33: re-armed unseen, not verified
    assert path.read_text() == open(os.path.join(CONFIGS, "gitops-commented.yaml")).read()


def test_write_patch_only(talos, tmp_path):
    path = tmp_path / "cp.yaml"
    shutil.copy(os.path.join(CONFIGS, "v1.14-document.yaml"), path)
    out = tmp_path / "patch.yaml"
    p = talos.cli("recover", "--method", "talos", "--config-file", str(path), "--write-patch", str(out))
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(out.read_text()) == {"apiVersion": "v1alpha1", "kind": "KubeAPIServerConfig",
                                               "extraArgs": {flags.DISABLE: f"{VWH},{MWH}"}}
    assert yaml.safe_load(open(f"{out}.revert.yaml")) == {"apiVersion": "v1alpha1", "kind": "KubeAPIServerConfig",
                                                          "extraArgs": {flags.DISABLE: {"$patch": "delete"}}}
    assert path.read_text() == open(os.path.join(CONFIGS, "v1.14-document.yaml")).read()


# -- waiting for /readyz --------------------------------------------------------------------------

def test_waits_for_readyz_and_names_failing_hooks(talos):
    talos.node("cp1", "v1.12-multidoc-overlap.yaml")
    with serve_readyz([500, 500, 200], "start-kubernetes-service-cidr-controller") as url:
        p = talos.cli("recover", "--method", "talos", "-n", "cp1", "--yes", "--apiserver", url, "--wait-timeout", "20")
        assert p.returncode == 0, p.stderr
        assert b": ready:" in p.stdout
        from breakglass.access import readyz
        assert readyz.parse("[+]ping ok\n[-]poststarthook/x failed: reason withheld\n")[1] == ["poststarthook/x"]


def test_generated_four_space_file_changes_only_the_lines_it_must(talos, tmp_path):
    import difflib
    path = tmp_path / "controlplane.yaml"
    original = open(os.path.join(CONFIGS, "v1.11-generated-4space.yaml")).read()
    path.write_text(original)
    p = talos.cli("recover", "--method", "talos", "--config-file", str(path), "--yes")
    assert p.returncode == 8, p.stderr  # edited, not applied
    changed = [line for line in difflib.unified_diff(original.splitlines(), path.read_text().splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["+        extraArgs:",
                       f"+            disable-admission-plugins: {VWH},{MWH}"], changed
    assert _revert_unseen(talos).returncode == 8  # issue 33: re-armed unseen, not verified
    assert path.read_text() == original


def test_a_node_refusing_its_real_patch_is_reported_and_the_rest_revert(talos):
    for n in ("cp1", "cp2", "cp3"):
        talos.node(n, "v1.12-multidoc-overlap.yaml")
    (talos.dir / "nodes" / "cp2.fail-apply").write_text("")
    p = _recover(talos, "cp1", "cp2", "cp3")
    assert p.returncode == 5, p.stderr
    err = p.stderr.decode()
    assert "talosctl patch on cp2 failed" in err and "touched so far: cp1, cp2" in err
    assert _api_args(talos.docs("cp3")) == _api_args(talos.initial["cp3"])
    (talos.dir / "nodes" / "cp2.fail-apply").unlink()
    assert _revert_unseen(talos).returncode == 8  # issue 33: re-armed unseen, not verified
    for n in ("cp1", "cp2", "cp3"):
        assert talos.docs(n) == talos.initial[n]
