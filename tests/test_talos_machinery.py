"""What Talos' own machine-config code does with the patches breakglass writes.

go/talos-machinery is Talos' machinery module (configloader, configpatcher, validation, the config generator),
built once per version go/versions lists (`make go-components`). Each test runs the real thing: without a build
it skips with the reason, except under CI=true, where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from breakglass.core.errors import BadInput
from breakglass.text import admission_flags as flags
from breakglass.talos import machineconfig as mc
from tests import fake_talosctl as standin

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = os.path.join(HERE, "talos", "generated")
VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"
VERSIONS = standin.machinery_builds()
CONFLICT = "kube-apiserver config is already set in v1alpha1 config (.cluster.apiServer)"


def _vt(version):
    return tuple(int(x) for x in version.split("."))


def tool(version):
    problem = standin.missing_machinery(version)
    if problem:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(problem)
    return standin.machinery_binary(version)


def run(version, *args, stdin=None):
    return subprocess.run([tool(version), *args], input=stdin, capture_output=True, text=True, timeout=120)


def patch(version, config_text, *patches, mode="metal"):
    """`talos-machinery patch --json`: the parsed answer and the process."""
    args = ["patch", "--json", "--config", "-", "--mode", mode]
    for p in patches:
        args += ["--patch", p]
    p = run(version, *args, stdin=config_text)
    assert p.returncode in (0, 1), p.stderr
    res = json.loads(p.stdout)
    assert res["ok"] == (p.returncode == 0) and res["machinery"] == f"v{version}"
    return res


def generated(version, kind="controlplane"):
    with open(os.path.join(GENERATED, f"v{version}", f"{kind}.yaml")) as f:
        return f.read()


def _normalised(docs):
    """Without empty maps and lists: Talos' encoder leaves out an empty extraArgs, and the empty
    `registries: {}`, `extraManifests: []`, `inlineManifests: []` its generator writes for their comments."""
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if v not in ({}, [], None)}
        return x
    return [clean(d) for d in docs]


@pytest.mark.parametrize("version", VERSIONS)
def test_gen_then_breakglass_patch_holds_the_flags_and_revert_removes_them(version, tmp_path):
    p = run(version, "gen", "--cluster-name", "prod", "--endpoint", "https://10.0.0.10:6443",
            "--output-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "Created" in p.stderr and sorted(os.listdir(tmp_path)) == ["controlplane.yaml", "worker.yaml"]
    text = (tmp_path / "controlplane.yaml").read_text()
    assert text.startswith("version: v1alpha1 # Indicates the schema used to decode the contents.")  # with docs
    docs = mc.parse(text, "gen")
    assert (len(docs) > 1) == (_vt(version) >= (1, 12))  # 1.12 adds a HostnameConfig document

    # breakglass reads the era Talos wrote
    loc = mc.locate(docs, "gen")
    assert loc.era == (mc.DOCUMENT if _vt(version) >= (1, 14) else mc.LEGACY)
    assert loc.args == {}  # generated configs set no extraArgs
    ch = flags.disable(loc.args, [VWH, MWH])
    res = patch(version, text, mc.dump(mc.patch(loc.era, {k: ch.after[k] for k in ch.keys()})))
    assert res["ok"], res["error"]
    after = mc.locate(mc.parse(res["config"], "patched"), "patched")
    assert after.era == loc.era and after.args == {flags.DISABLE: f"{VWH},{MWH}"}
    if loc.era == mc.DOCUMENT:
        assert "apiServer" not in (mc.parse(res["config"], "patched")[0].get("cluster") or {})

    # the revert patch ($patch: delete) takes the key out again, and nothing else changed
    rev = patch(version, res["config"], mc.dump(mc.patch(loc.era, {flags.DISABLE: None})))
    assert rev["ok"], rev["error"]
    assert mc.locate(mc.parse(rev["config"], "reverted"), "reverted").args == {}
    assert _normalised(mc.parse(rev["config"], "reverted")) == _normalised(docs)


@pytest.mark.parametrize("version", VERSIONS)
def test_delete_removes_one_key_and_keeps_the_others(version):
    text = generated(version)
    era = mc.locate(mc.parse(text, "gen"), "gen").era
    res = patch(version, text, mc.dump(mc.patch(era, {"feature-gates": "ServerSideApply=true",
                                                      flags.DISABLE: f"DefaultStorageClass,{VWH}"})))
    assert res["ok"], res["error"]
    res = patch(version, res["config"], mc.dump(mc.patch(era, {flags.DISABLE: None})))
    assert res["ok"], res["error"]
    assert mc.locate(mc.parse(res["config"], "p"), "p").args == {"feature-gates": "ServerSideApply=true"}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_committed_generated_configs_are_this_versions_and_valid(version):
    assert run(version, "version").stdout.strip() == f"v{version}"
    for kind in ("controlplane", "worker"):
        p = run(version, "validate", "--config", os.path.join(GENERATED, f"v{version}", f"{kind}.yaml"),
                "--mode", "metal")
        assert p.returncode == 0, p.stderr
    # a node of this version takes it: an empty patch changes nothing but the empty fields Talos leaves out
    text = generated(version)
    res = patch(version, text, "cluster: {}")
    assert res["ok"], res["error"]
    assert _normalised([d for d in yaml.safe_load_all(res["config"]) if d]) == \
        _normalised([d for d in yaml.safe_load_all(text) if d])


@pytest.mark.parametrize("version", [v for v in VERSIONS if _vt(v) >= (1, 14)])
def test_kube_apiserver_args_in_both_places_is_refused_by_talos_and_by_breakglass(version):
    text = generated(version)
    res = patch(version, text, mc.dump(mc.patch(mc.LEGACY, {flags.DISABLE: VWH})))
    assert not res["ok"] and res["stage"] == "validate"
    assert CONFLICT in res["error"], res["error"]
    # the same config (not validated) is one breakglass refuses to touch, naming the same conflict
    docs = mc.parse(text, "gen")
    docs[0].setdefault("cluster", {})["apiServer"] = {"extraArgs": {flags.DISABLE: VWH}}
    with pytest.raises(BadInput, match=r"already set in v1alpha1 config \(\.cluster\.apiServer\)"):
        mc.locate(docs, "both")
    # and without --json Talos' message comes on stderr, every line prefixed, exit 1
    p = run(version, "validate", "--config", "-", stdin=yaml.safe_dump_all(docs, sort_keys=False))
    assert p.returncode == 1 and CONFLICT in p.stderr
    assert all(line.startswith(f"talos-machinery v{version} validate: ") for line in p.stderr.splitlines())


def _list_patch(version):
    value = [VWH, MWH]
    era = mc.DOCUMENT if _vt(version) >= (1, 14) else mc.LEGACY
    return mc.dump(mc.patch(era, {flags.DISABLE: value})), era


@pytest.mark.parametrize("version", VERSIONS)
def test_list_values_by_version(version):
    """A list per key: refused up to 1.12 (a map of strings); 1.13.0-1.13.5 cannot decode one either
    (siderolabs/gen before v0.8.7; Talos fixed it in 1.13.6); later versions take it."""
    text, (lp, era) = generated(version), _list_patch(version)
    res = patch(version, text, lp)
    if _vt(version) < (1, 13):
        assert not res["ok"] and res["stage"] == "patches"  # talosctl cannot even load the patch
        assert "cannot unmarshal !!seq into string" in res["error"], res["error"]
    elif _vt(version) < (1, 13, 6):
        assert not res["ok"] and res["stage"] == "patches"
        assert "unexpected type for yaml sequence: v1alpha1.ArgValue" in res["error"], res["error"]
    else:
        assert res["ok"], res["error"]
        assert mc.locate(mc.parse(res["config"], "p"), "p").args == {flags.DISABLE: [VWH, MWH]}


def test_the_oldest_build_refuses_a_list_value():
    version = VERSIONS[0]
    assert _vt(version) < (1, 13)
    res = patch(version, generated(version), _list_patch(version)[0])
    assert not res["ok"] and "cannot unmarshal !!seq into string" in res["error"]


@pytest.mark.parametrize("version", VERSIONS)
def test_json6902_patches_only_on_single_document_configs(version):
    op = json.dumps([{"op": "add", "path": "/cluster/apiServer/extraArgs",
                      "value": {flags.DISABLE: f"{VWH},{MWH}"}}])
    text = generated(version)
    res = patch(version, text, op)
    if len(mc.parse(text, "gen")) > 1:
        assert not res["ok"] and res["stage"] == "patch"
        assert "JSON6902 patches are not supported for multi-document machine configuration" in res["error"]
    else:
        assert res["ok"], res["error"]
        assert mc.locate(mc.parse(res["config"], "p"), "p").args == {flags.DISABLE: f"{VWH},{MWH}"}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_node_validates_at_runtime_too(version):
    """The node's apply also runs Talos' runtime checks: from Talos 1.11 on, a Kubernetes too old for this Talos
    is refused (1.10's runtime checks do not look at the component images)."""
    text = generated(version)
    if _vt(version) >= (1, 14):
        p = "{apiVersion: v1alpha1, kind: KubeAPIServerConfig, image: registry.k8s.io/kube-apiserver:v1.20.0}"
    else:
        p = "cluster: {apiServer: {image: registry.k8s.io/kube-apiserver:v1.20.0}}"
    res = patch(version, text, p)
    if _vt(version) < (1, 11):
        assert res["ok"], res["error"]
        return
    assert not res["ok"] and res["stage"] == "validate"
    assert f"version of Kubernetes 1.20.0 is too old to be used with Talos {version}" in res["error"], res["error"]


@pytest.mark.parametrize("version", VERSIONS[:1] + VERSIONS[-1:])
def test_usage_errors_exit_2(version, tmp_path):
    assert run(version).returncode == 2
    assert run(version, "frobnicate").returncode == 2
    assert run(version, "patch").returncode == 2  # no --config
    assert run(version, "patch", "--config", str(tmp_path / "missing.yaml")).returncode == 2
    assert run(version, "validate", "--config", "-", "--mode", "moon", stdin="").returncode == 2
    assert run(version, "gen", "--cluster-name", "x").returncode == 2  # no --endpoint
