"""recover --method k3s|rke2: k3s' config merge, the drop-in, the text edit of an enabling item, and revert,
over the real OpenSSH server; with a real kube-apiserver restarted by the `systemctl` stand-in
(tests/k3s_standin.py) from the config files."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from breakglass.errors import BadInput, PreconditionFailed
from breakglass.k3s import config as k3s
from breakglass.remedies.base import ALREADY, CONFLICT, RESTORED

HERE = Path(__file__).parent / "k3s"
VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"
BOTH = [VWH, MWH]
K3S, RKE2 = k3s.distro("k3s"), k3s.distro("rke2")


def fixture(name: str) -> str:
    return (HERE / name).read_bytes().decode()


def cf(path: str, text: str) -> k3s.ConfigFile:
    return k3s.ConfigFile(path, text)


def argv(d, *files) -> list[str]:
    return k3s.apiserver_argv(d, list(files))


# -- the merge, as k3s does it ------------------------------------------------------------------------

def test_plus_appends_and_a_plain_key_replaces():
    base = cf("/c/config.yaml", "kube-apiserver-arg:\n  - a=1\n")
    plus = cf("/c/config.yaml.d/10.yaml", "kube-apiserver-arg+:\n  - b=2\n")
    plain = cf("/c/config.yaml.d/20.yaml", "kube-apiserver-arg:\n  - c=3\n")
    assert [i.value for i in k3s.merged([base, plus])] == ["a=1", "b=2"]
    assert [i.value for i in k3s.merged([base, plus, plain])] == ["c=3"]
    # a scalar is a one-item list; `+` on a key not seen yet starts it
    assert [i.value for i in k3s.merged([cf("/x", "kube-apiserver-arg+: a=1"), cf("/y", "kube-apiserver-arg+: [b=2]")])] \
        == ["a=1", "b=2"]
    assert k3s.merged([cf("/x", "kube-apiserver-arg: [a=1]"), cf("/y", "kube-apiserver-arg:\n")]) == []


def test_get_args_replaces_the_default_repeats_names_and_orders_plus_minus():
    assert argv(K3S) == ["--anonymous-auth=false", "--enable-admission-plugins=NodeRestriction", "--profiling=false"]
    assert "--enable-admission-plugins=PodNodeSelector" in argv(K3S, cf("/c", "kube-apiserver-arg: [enable-admission-plugins=PodNodeSelector]"))
    assert "--enable-admission-plugins=NodeRestriction" not in argv(K3S, cf("/c", "kube-apiserver-arg: [enable-admission-plugins=X]"))
    got = argv(K3S, cf("/c", "kube-apiserver-arg: [enable-admission-plugins+=A, enable-admission-plugins-=B, x=1, x=2, flag]"))
    assert got == ["--anonymous-auth=false", "--enable-admission-plugins=B", "--enable-admission-plugins=NodeRestriction",
                   "--enable-admission-plugins=A", "--flag=true", "--profiling=false", "--x=1", "--x=2"]
    # RKE2 puts enable-admission-plugins=NodeRestriction before the user's items
    assert [a for a in argv(RKE2, cf("/c", "kube-apiserver-arg: [enable-admission-plugins=X]"))
            if "enable" in a] == ["--enable-admission-plugins=NodeRestriction", "--enable-admission-plugins=X"]


def test_dropin_appends_keeps_the_users_list_and_sorts_last():
    files = [cf("/e/config.yaml", fixture("k3s-ansible.yaml")), cf("/e/config.yaml.d/10-audit.yaml", fixture("10-audit.yaml"))]
    ch = k3s.plan(K3S, files, "/e/config.yaml.d", ["10-audit.yaml"], BOTH)
    assert ch.edits == [] and ch.dropin == "/e/config.yaml.d/99-breakglass.yaml"
    assert "kube-apiserver-arg+:\n  - disable-admission-plugins=ValidatingAdmissionWebhook,MutatingAdmissionWebhook\n" \
        in ch.dropin_text
    after = argv(K3S, *files, cf(ch.dropin, ch.dropin_text))
    assert after == sorted(argv(K3S, *files) + [f"--disable-admission-plugins={VWH},{MWH}"],
                           key=lambda a: a[2:].split("=")[0])
    assert "--event-ttl=2h" in after and "--audit-log-maxage=30" in after  # nothing of the user's is lost
    # names that sort after ours: a later one is chosen, and "~" sorts after letters
    assert k3s.choose_dropin("/e/d", ["99-zz.yaml"]) == "/e/d/zz-breakglass.yaml"
    assert k3s.choose_dropin("/e/d", ["zz-late.yml", "notes.txt"]) == "/e/d/~breakglass.yaml"
    with pytest.raises(PreconditionFailed, match="sort after"):
        k3s.choose_dropin("/e/d", ["~~last.yaml"])


def test_a_later_replacing_dropin_decides_what_is_in_effect():
    """50-replace.yaml's plain key drops config.yaml's list: its enable item is not in effect, so nothing is
    edited, and our drop-in, read after it, survives."""
    text = fixture("rke2-hardened.yaml")
    files = [cf("/r/config.yaml", text), cf("/r/config.yaml.d/50-replace.yaml", fixture("50-replace.yaml"))]
    assert not any(VWH in a for a in argv(RKE2, *files))
    ch = k3s.plan(RKE2, files, "/r/config.yaml.d", ["50-replace.yaml"], BOTH)
    assert ch.edits == [] and ch.dropin.endswith("/99-breakglass.yaml")


def test_already_disabled_changes_nothing():
    files = [cf("/c/config.yaml", f"kube-apiserver-arg: [disable-admission-plugins={VWH}]\n")]
    ch = k3s.plan(K3S, files, "/c/config.yaml.d", [], [VWH])
    assert ch.dropin is None and ch.edits == []
    ch = k3s.plan(K3S, files, "/c/config.yaml.d", [], BOTH)
    assert ch.disabled == [MWH] and ch.dropin_text.endswith(f"disable-admission-plugins={MWH}\n")


# -- the enable/disable conflict: the enabling item is edited as text ----------------------------------

@pytest.mark.parametrize("crlf", [False, True])
def test_enable_item_in_a_flow_list_is_edited_in_place(crlf):
    text = fixture("rke2-hardened.yaml")
    if crlf:
        text = text.replace("\n", "\r\n")
    ch = k3s.plan(RKE2, [cf("/r/config.yaml", text)], "/r/config.yaml.d", [], BOTH)
    [e] = ch.edits
    want = text.replace('"enable-admission-plugins=NodeRestriction,ValidatingAdmissionWebhook,MutatingAdmissionWebhook"',
                        '"enable-admission-plugins=NodeRestriction"')
    assert e.after == want and e.after != text  # one scalar's bytes, quotes and line endings kept
    assert ch.dropin  # and the drop-in disables them


def test_enable_item_as_a_scalar_without_final_newline():
    text = fixture("k3s-scalar.yaml")
    assert not text.endswith("\n")
    ch = k3s.plan(K3S, [cf("/k/config.yaml", text)], "/k/config.yaml.d", [], BOTH)
    assert ch.edits[0].after == text.replace(",ValidatingAdmissionWebhook", "")
    # every enabled plugin taken out: the item stays, empty, so k3s' own default (NodeRestriction) stays off as
    # the user had it (kube-apiserver reads an empty list)
    ch = k3s.plan(K3S, [cf("/k/config.yaml", f"kube-apiserver-arg:\n- enable-admission-plugins+={VWH}\n# end\n")],
                  "/k/config.yaml.d", [], BOTH)
    assert ch.edits[0].after == "kube-apiserver-arg:\n- enable-admission-plugins+=\n# end\n"


def test_enable_item_in_a_dropin_is_edited_there():
    files = [cf("/c/config.yaml", fixture("k3s-ansible.yaml")),
             cf("/c/config.yaml.d/20-policy.yml", f"kube-apiserver-arg+:\n  - enable-admission-plugins+={MWH} # policy\n")]
    ch = k3s.plan(K3S, files, "/c/config.yaml.d", ["20-policy.yml"], BOTH)
    assert [e.path for e in ch.edits] == ["/c/config.yaml.d/20-policy.yml"]
    assert ch.edits[0].after == "kube-apiserver-arg+:\n  - enable-admission-plugins+= # policy\n"


def test_an_enable_item_breakglass_cannot_edit_is_refused_with_its_file_and_line():
    text = "kube-apiserver-arg:\n  - event-ttl=2h\n  - >-\n    enable-admission-plugins=NodeRestriction,ValidatingAdmissionWebhook\n"
    with pytest.raises(PreconditionFailed, match=r"/c/config.yaml:3: .*block scalar"):
        k3s.plan(K3S, [cf("/c/config.yaml", text)], "/c/config.yaml.d", [], BOTH)
    link = k3s.ConfigFile("/c/config.yaml", fixture("rke2-hardened.yaml"), link=True)
    with pytest.raises(PreconditionFailed, match=r"/c/config.yaml:7: .*symbolic link"):
        k3s.plan(RKE2, [link], "/c/config.yaml.d", [], BOTH)


def test_bad_config_is_one_line():
    with pytest.raises(BadInput, match=r"/c/config.yaml: line 2"):
        k3s.plan(K3S, [cf("/c/config.yaml", "a: 1\n b: [\n")], "/c/config.yaml.d", [], BOTH)
    with pytest.raises(BadInput, match="must be a string"):
        k3s.plan(K3S, [cf("/c/config.yaml", "kube-apiserver-arg:\n  - {a: b}\n")], "/c/config.yaml.d", [], BOTH)
