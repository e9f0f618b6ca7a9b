"""Issue 27 §10: YAML aliases that stand for exponentially many nodes (nine aliases of nine aliases ...). The
Talos loader refuses every alias; k3s configs may use a few (k3s reads them), and textedit keeps them as it
finds them, so both count what the aliases stand for while loading and refuse past a small budget: one line,
exit 2, nothing changed."""

from __future__ import annotations

import pytest

from breakglass.core import textfile
from breakglass.core.errors import BadInput
from breakglass.k3s import config as k3s
from breakglass.text import textedit
from tests.conftest import run_cli

VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"


def laughs(levels: int) -> str:
    """Top-level keys a0..aN, each a list of nine aliases of the one before: 9**N strings in the end."""
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


K3S_TAIL = f"token: x\nkube-apiserver-arg: ['enable-admission-plugins=NodeRestriction,{VWH}']\n"
TALOS_TAIL = "version: v1alpha1\nmachine: {type: controlplane}\ncluster:\n  apiServer:\n    extraArgs: {}\n"


def test_k3s_configs_refuse_aliases_past_the_budget():
    assert 9 ** 5 > textfile.YAML_ALIAS_BUDGET
    f = k3s.ConfigFile("/c/config.yaml", laughs(5) + K3S_TAIL)
    with pytest.raises(BadInput, match=r"^/c/config.yaml: line \d+: YAML aliases stand for more than") as e:
        k3s.plan(k3s.distro("k3s"), [f], "/c/config.yaml.d", [], [VWH, MWH])
    assert "\n" not in str(e.value)
    # a recursive alias never ends: refused too
    with pytest.raises(BadInput, match="inside the node it names"):
        k3s.entries(k3s.ConfigFile("/c/config.yaml", "a: &a [1, *a]\n" + K3S_TAIL))
    # an anchor used a few times is what k3s configs do: read as k3s reads it
    few = "x-args: &args [event-ttl=2h, profiling=false]\nkube-apiserver-arg: *args\n"
    assert [i.value for i in k3s.merged([k3s.ConfigFile("/c/config.yaml", few)])] == ["event-ttl=2h", "profiling=false"]
    assert k3s.plan(k3s.distro("k3s"), [k3s.ConfigFile("/c/config.yaml", laughs(3) + K3S_TAIL)], "/c/config.yaml.d",
                    [], [VWH]).edits


def test_textedit_refuses_aliases_past_the_budget():
    with pytest.raises(BadInput, match=r"^/t/cp.yaml: line \d+: YAML aliases stand for more than"):
        textedit.apply(laughs(5) + TALOS_TAIL, textedit.LEGACY, {"disable-admission-plugins": VWH}, "/t/cp.yaml")
    # an anchor named again in a later document, its alias inside it: endless, refused (not a RecursionError)
    with pytest.raises(BadInput, match="inside the node it names"):
        textedit.apply("a: &a [1]\n---\nb: &a [*a]\n" + TALOS_TAIL, textedit.LEGACY,
                       {"disable-admission-plugins": VWH}, "/t/cp.yaml")
    out = textedit.apply(laughs(2) + TALOS_TAIL, textedit.LEGACY, {"disable-admission-plugins": VWH}, "/t/cp.yaml")
    assert f"disable-admission-plugins: {VWH}" in out


@pytest.mark.parametrize("extra", [["--dry-run"], ["--yes"], ["--dry-run", "-o", "json"]])
def test_eight_levels_through_the_cli_are_one_line_and_exit_2(tmp_path, extra):
    cfg = tmp_path / "repo" / "config.yaml"
    cfg.parent.mkdir()
    cfg.write_text(laughs(8) + K3S_TAIL)
    before = cfg.read_bytes()
    p = run_cli("recover", "--method", "k3s", "--config-file", str(cfg), *extra,
                env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
    assert p.returncode == 2, p.stderr
    assert b"YAML aliases stand for more than" in p.stderr + p.stdout and b"Traceback" not in p.stderr
    if "json" not in extra:
        assert p.stderr.count(b"\n") <= 2, p.stderr
    assert cfg.read_bytes() == before and sorted(p.name for p in cfg.parent.iterdir()) == ["config.yaml"]
