"""Every way out (ways.registry.WAYS) against every way in: offered as usable only if it can act, and then it acts
(a plan with steps) or says in one true line why not; never an empty plan called done.

The ways in are the wizard's (WAYS_IN and the rehearsal sandbox) and the CLI's accesses (--kubeconfig,
-n/--talosconfig, --config-file for Talos, --ssh, --manifest, --config-file for k3s/RKE2, --etcd-endpoints): each
is built as the front ends build it (a planner.Access), on a real target where the project has one (a real etcd,
a real kube-apiserver, a real sshd, copies of the test manifests and machine configs, the talosctl stand-in
whose patches are Talos' own code). planner.options(planner.probe(access)) is what the wizard lists, and a usable
way is planned through the wizard's own ``_plan``.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from breakglass import sandbox
from breakglass.access.etcd import EtcdSettings
from breakglass.core.errors import BreakglassError
from breakglass.flows import planner, recovery, wizard
from breakglass.present.prompts import ScriptedPrompter
from breakglass.text.admission_flags import WEBHOOK_PLUGINS
from breakglass.ways import registry
from tests.conftest import ROOT
from tests.real_apiserver_session import ADMISSION, kube, real_apiserver  # noqa: F401 - the fixtures
from tests.test_codec import KYVERNO

NAME = KYVERNO["metadata"]["name"]
TARGETS = [{"kind": "validating", "configuration": NAME, "configuration_source": "log",
            "webhook": KYVERNO["webhooks"][0]["name"]}]
NEEDS = {"kubeapi": ("apiserver",), "talos": ("talos",), "kubeadm": ("ssh", "manifest"), "k3s": ("ssh",),
         "rke2": ("ssh",), "etcd": ("etcd",)}  # what a reason may name when an access lacks what a way needs


def _seed_etcd(endpoint: str) -> None:
    from breakglass.access.etcd import Etcd
    from breakglass.webhooks import codec, sources

    etcd = Etcd(EtcdSettings(endpoints=(endpoint,)), tuple(sources.etcd_prefixes().values()))
    try:
        etcd.put_if_absent(sources.etcd_key("validating", NAME), codec.encode_value(KYVERNO))
    finally:
        etcd.close()


def _copy(src: str, dst_dir, name: str | None = None) -> str:
    dst = os.path.join(str(dst_dir), name or os.path.basename(src))
    shutil.copy(src, dst)
    os.chmod(dst, 0o600)
    return dst


# -- the ways in: each gives (access, the ways that can act with it) ----------------------------------------------

def _etcd(request, tmp_path):
    srv = request.getfixturevalue("etcd_clean")
    _seed_etcd(srv.endpoint)
    return planner.Access(etcd=recovery.EtcdTarget(EtcdSettings(endpoints=(srv.endpoint,), timeout=5))), {"etcd"}


def _sandbox(request, tmp_path):
    """The wizard's REHEARSAL without a kube-apiserver: the sandbox's etcd, as the wizard reaches it."""
    d = str(tmp_path / "sandbox")
    request.addfinalizer(lambda: sandbox.down(d))
    sb = sandbox.up(d)
    return planner.Access(etcd=recovery.EtcdTarget(EtcdSettings(endpoints=(sb.endpoint,), timeout=5))), {"etcd"}


def _kubeconfig(request, tmp_path):
    api = request.getfixturevalue("kube")
    api.client.must("POST", ADMISSION + "validatingwebhookconfigurations",
                    {k: v for k, v in KYVERNO.items() if k != "status"} | {
                        "metadata": {"name": NAME, "labels": KYVERNO["metadata"]["labels"]}})
    return planner.Access(kubeconfig=api.kubeconfig(str(tmp_path / "kubeconfig")), wants_kubeconfig=True), {"kubeapi"}


def _kubeconfig_refused(request, tmp_path):
    """A kubeconfig whose apiserver does not answer: nothing can act through it."""
    port = sandbox.free_port()
    path = tmp_path / "kubeconfig"
    path.write_text(f"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:"
                    f"{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n"
                    f"    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n")
    return planner.Access(kubeconfig=str(path), wants_kubeconfig=True), set()


def _talosctl(request, tmp_path):
    """-n/--talosconfig (the wizard's "Talos nodes"): the talosctl stand-in, a node holding the config Talos
    1.12 generates."""
    from breakglass.access.talos import Talos

    nodes = tmp_path / "talos" / "nodes"
    nodes.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "tests", "talos", "generated", "v1.12.6", "controlplane.yaml"), nodes / "cp1.yaml")
    (nodes / "cp1.version").write_text("1.12")
    exe = tmp_path / "talosctl"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {os.path.join(ROOT, 'tests', 'fake_talosctl.py')} \"$@\"\n")
    exe.chmod(0o755)
    cfg = tmp_path / "talosconfig"
    cfg.write_text("context: c\ncontexts:\n  c:\n    endpoints: [127.0.0.1]\n    nodes: [cp1]\n")
    request.getfixturevalue("monkeypatch").setenv("FAKE_TALOS_DIR", str(tmp_path / "talos"))
    talos = Talos(talosctl=str(exe), talosconfig=str(cfg))
    return planner.Access(talos=talos, talos_nodes=["cp1"]), {"talos"}


def _talos_file(request, tmp_path):
    """--config-file for Talos (the wizard's "a Talos machine-config file")."""
    path = _copy(os.path.join(ROOT, "tests", "talos", "v1.10-single.yaml"), tmp_path)
    return planner.Access(talos_files=[path]), {"talos"}


def _manifest(request, tmp_path):
    """--manifest (the wizard's "a kubeadm manifest on this machine")."""
    path = _copy(os.path.join(ROOT, "tests", "kubeadm", "kube-apiserver.yaml"), tmp_path)
    return planner.Access(manifest=path), {"kubeadm"}


def _k3s_file(request, tmp_path):
    """--config-file for k3s/RKE2, and the wizard's "a k3s or RKE2 config.yaml": both read the same format."""
    path = _copy(os.path.join(ROOT, "tests", "k3s", "k3s-scalar.yaml"), tmp_path, "config.yaml")
    return planner.Access(k3s_files=[path]), {"k3s", "rke2"}


def _ssh(request, tmp_path):
    """--ssh (the wizard's "SSH to control-plane nodes"): a real sshd on this machine, whatever it runs: the
    distribution the probe finds decides which node way fits (none known: each may try, and says why not)."""
    from breakglass.access.ssh import Node, SshOptions

    srv = request.getfixturevalue("sshd")
    a = planner.Access(ssh_nodes={"cp1": Node("cp1", SshOptions(config=srv.ssh_config, known_hosts=srv.known_hosts))})
    return a, None  # known after the probe


ACCESSES = {"etcd": _etcd, "sandbox": _sandbox, "kubeconfig": _kubeconfig, "kubeconfig-refused": _kubeconfig_refused,
            "talosctl": _talosctl, "talos-file": _talos_file, "manifest": _manifest, "k3s-file": _k3s_file,
            "ssh": _ssh}


def test_every_way_in_of_the_wizard_and_the_cli_is_in_the_table():
    wizard_ways = {k for k, _t, _h in wizard.WAYS_IN} | {"sandbox"}
    covered = {"etcd": "etcd", "kubeconfig": "kubeconfig", "talos": "talosctl", "talos-file": "talos-file",
               "ssh": "ssh", "manifest": "manifest", "k3s-file": "k3s-file", "sandbox": "sandbox"}
    assert wizard_ways == set(covered) and set(covered.values()) <= set(ACCESSES)
    needs = {v.needs for w in registry.WAYS for v in w.variants}
    # static-dir: a staticManifestsDir here, for `recover static-manifests` on the node; the wizard offers that way
    # only for manifest-based culprits (registry.assess), so it has no way in of its own
    assert needs == {"apiserver", "talos", "talos-file", "ssh", "manifest", "k3s-file", "etcd", "static-dir"}


def _plan(way: str, variant: str, access: planner.Access):
    p = ScriptedPrompter(["ignore"] if way == "kubeapi" else [])
    return wizard._plan(p, way, variant, access, [dict(t) for t in TARGETS], list(WEBHOOK_PLUGINS), wizard.Typed())


def _planned_by_the_cli(way: str, config: str, tmp_path) -> None:
    import json

    from tests.conftest import run_cli

    p = run_cli("recover", way, "--config-file", config, "--dry-run", "-o", "json",
                env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
    out = json.loads(p.stdout)
    assert p.returncode == 0, (way, p.stderr.decode())
    steps = out["result"]["steps"]
    assert steps and all(s["diff"].strip() for s in steps), (way, out)
    assert out["result"]["method"] == way and out["result"]["dry_run"] is True


@pytest.mark.parametrize("way_in", list(ACCESSES))
def test_a_way_is_usable_only_if_it_can_act_and_then_it_plans_or_says_why(way_in, request, tmp_path):
    access, expected = ACCESSES[way_in](request, tmp_path)
    probes = planner.probe(access, 5.0)
    if expected is None:  # SSH: what the node runs, as the probe found it
        found = {d.name for d in access.distros.values()} - {"unknown"}
        expected = found & {"kubeadm", "k3s", "rke2"} if found else {"kubeadm", "k3s", "rke2"}
    opts = planner.options(probes, have_targets=True, distros=access.distros)
    # every way, in its order, usable or not; the manifest-based one only for manifest-based culprits
    assert [o.method for o in opts] == [n for n in registry.NAMES if not registry.BY_NAME[n].static_only]
    usable = {o.method for o in opts if o.available}
    assert usable == expected, (way_in, [(o.method, o.available, o.reason) for o in opts], probes)
    for o in opts:
        if not o.available:
            assert o.reason and "\n" not in o.reason, (way_in, o)
            why = o.reason.lower()
            said_need = any(f"no {n} access" in why for n in ("apiserver", "talos", "ssh", "etcd"))
            assert (not said_need or any(f"no {n} access" in why for n in NEEDS[o.method])
                    or (o.method == "kubeadm" and "no ssh access" in why)), (way_in, o)  # a true reason
            continue
        if access.k3s_files:  # the CLI's --config-file plans it too (and the wizard's plan follows)
            _planned_by_the_cli(o.method, access.k3s_files[0], tmp_path)
        try:
            remedy, steps, word, _refs = _plan(o.method, o.variant, access)
        except BreakglassError as e:  # cannot act after all: one line that says why
            assert str(e).strip() and "\n" not in str(e), (way_in, o.method, str(e))
            continue
        assert steps, (way_in, o.method, "an empty plan for a change nothing has made")
        assert word and remedy.method == o.method, (way_in, o.method, word)
        assert all(s.diff.strip() for s in steps), (way_in, o.method, [s.summary for s in steps])
