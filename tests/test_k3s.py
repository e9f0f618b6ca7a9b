"""recover --method k3s|rke2: k3s' config merge, the drop-in, the text edit of an enabling item, and revert,
over the real OpenSSH server; with a real kube-apiserver restarted by the `systemctl` stand-in
(tests/k3s_standin.py) from the config files."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from breakglass.core.errors import BadInput, PreconditionFailed
from breakglass.k3s import config as k3s
from breakglass.ways.base import ALREADY, CONFLICT, RESTORED

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


# -- over the real OpenSSH server -----------------------------------------------------------------------

# -- flags in the service's own command line (k3s.unit) ---------------------------------------------------

def _cat(unit_text: str, path: str = "/etc/systemd/system/k3s.service") -> str:
    return f"# {path}\n{unit_text}"


def test_the_install_scripts_unit_gives_its_kube_apiserver_args():
    # tests/k3s/k3s.service: what k3s' install.sh (its quote_indent, run as is) writes for INSTALL_K3S_EXEC=
    # "server --kube-apiserver-arg=enable-admission-plugins=... --disable=traefik" and three more arguments
    from breakglass.k3s import unit

    start = unit.exec_start(_cat(fixture("k3s.service")))
    assert start.path == "/etc/systemd/system/k3s.service" and start.argv[:2] == ["/usr/local/bin/k3s", "server"]
    assert "--node-label=it's=quoted" in start.argv
    assert unit.apiserver_args(start.argv) == [f"enable-admission-plugins=NodeRestriction,{VWH}",
                                               "audit-log-path=/var/log/k3s audit.log"]


def test_a_dropin_that_resets_execstart_decides_and_other_sections_do_not_count():
    from breakglass.k3s import unit

    text = (_cat(fixture("k3s.service")) + "# /etc/systemd/system/k3s.service.d/override.conf\n[Unit]\n"
            "ExecStart=/bin/false --kube-apiserver-arg=x=y\n[Service]\nExecStart=\n"
            "; a comment\nExecStart=-/usr/local/bin/k3s server \"--kube-apiserver-arg\" \\\n"
            "# a comment line inside the continuation\n  profiling=true -kube-apiserver-arg=a=b\n")
    start = unit.exec_start(text)
    assert start.path == "/etc/systemd/system/k3s.service.d/override.conf"
    assert unit.apiserver_args(start.argv) == ["profiling=true", "a=b"]
    assert unit.exec_start(text + "ExecStart=\n") is None  # reset and nothing after it
    assert unit.exec_start("# /x\n[Service]\nExecStart=/k3s server 'unbalanced\n").unparsed


def test_an_enable_on_the_command_line_is_refused_naming_the_unit():
    from breakglass.k3s import unit

    start = unit.exec_start(_cat(fixture("k3s.service")))
    cli = [k3s.Item(v, f"{start.path} (ExecStart)") for v in unit.apiserver_args(start.argv)]
    with pytest.raises(PreconditionFailed) as e:
        k3s.plan(k3s.distro("k3s"), [cf("/etc/rancher/k3s/config.yaml", "token: x\n")], "/etc/rancher/k3s/"
                 "config.yaml.d", [], BOTH, cli)
    msg = str(e.value)
    assert "/etc/systemd/system/k3s.service (ExecStart)" in msg and VWH in msg and "--method etcd" in msg
    assert "\n" not in msg
    # the same values in a config file are edited there instead, and unrelated command-line values pass through
    other = [k3s.Item("audit-log-path=/var/log/a.log", "/etc/systemd/system/k3s.service (ExecStart)")]
    change = k3s.plan(k3s.distro("k3s"), [cf("/etc/rancher/k3s/config.yaml", "token: x\n")],
                      "/etc/rancher/k3s/config.yaml.d", [], BOTH, other)
    assert change.dropin and change.flag == f"--disable-admission-plugins={VWH},{MWH}"


def test_reading_the_command_line_from_a_node_what_it_says_and_what_it_cannot_check():
    from types import SimpleNamespace

    from breakglass.ways.k3s_flags import read_command_line

    def node(rc: int, out: bytes):
        return SimpleNamespace(host="cp1", run=lambda cmd, timeout=None: SimpleNamespace(rc=rc, out=out, err=b""))

    unit = _cat(fixture("k3s.service")).encode()
    items, note = read_command_line(node(0, unit), "k3s")
    assert [i.value for i in items][0] == f"enable-admission-plugins=NodeRestriction,{VWH}" and not note
    assert items[0].where == "/etc/systemd/system/k3s.service (ExecStart)" and items[0].on_command_line
    items, note = read_command_line(node(1, b""), "k3s")
    assert items == [] and note == "cp1: `systemctl cat k3s` failed; flags in its ExecStart were not checked"
    items, note = read_command_line(node(0, b"\x00\x01binary" * 10), "k3s")
    assert items == [] and "binary data" in note and note.endswith("were not checked")
    with pytest.raises(PreconditionFailed, match="ExecStart does not parse"):
        read_command_line(node(0, b"# /u\n[Service]\nExecStart=/k3s server 'open\n"), "k3s")


@pytest.fixture(scope="module")
def standin_sshd(tmp_path_factory):
    """A real sshd whose sessions find the `systemctl` and `journalctl` stand-ins first on PATH."""
    if os.geteuid() != 0:
        pytest.skip("the OpenSSH fixture needs root (sshd privilege separation); CI runs as root")
    from tests import sshd_server

    bindir = str(tmp_path_factory.mktemp("standin-bin"))
    os.chmod(bindir, 0o755)
    srv = sshd_server.start(str(tmp_path_factory.mktemp("ssh")),
                            f"SetEnv PATH={bindir}:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin\n")
    srv.bindir = bindir
    yield srv
    srv.stop()


def _nodes(srv, hosts=("cp1",)):
    from breakglass.access.ssh import Node, SshOptions

    return {h: Node(h, SshOptions(config=srv.ssh_config, known_hosts=srv.known_hosts)) for h in hosts}


def _etc(tmp_path, text: str | bytes, dropins: dict | None = None, name: str = "rancher") -> Path:
    d = tmp_path / name
    (d / "config.yaml.d").mkdir(parents=True)
    (d / "config.yaml").write_bytes(text.encode() if isinstance(text, str) else text)
    for n, t in (dropins or {}).items():
        (d / "config.yaml.d" / n).write_text(t)
    return d


def _remedy(srv, etc: Path, distro="k3s", restart=False, **kw):
    from breakglass.ways.k3s_flags import K3sFlags

    return K3sFlags(distro, _nodes(srv), str(etc / "config.yaml"), plugins=BOTH, restart=restart,
                    backup_dir=str(etc.parent / "node-backup"), **kw)


def _recover(remedy, state):
    from breakglass.flows import recovery

    steps = remedy.plan()
    return recovery.execute(remedy, steps, str(state), {"hosts": list(remedy.nodes)}), steps


def _revert(remedy, state, force=False, dry_run=False):
    from breakglass.core import journal
    from breakglass.ways import driver

    return driver.revert(remedy, journal.list_runs(str(state))[-1], force=force, dry_run=dry_run)


def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p)
                                    if p.is_symlink() else None) for p in sorted(d.rglob("*"))}


def test_dropin_over_ssh_then_revert_byte_identical_and_twice_harmless(standin_sshd, tmp_path):
    etc = _etc(tmp_path, fixture("k3s-ansible.yaml"), {"10-audit.yaml": fixture("10-audit.yaml")})
    before = _snapshot(etc)
    remedy = _remedy(standin_sshd, etc)
    res, steps = _recover(remedy, tmp_path / "state")
    assert res.status == "applied", res
    dropin = etc / "config.yaml.d" / "99-breakglass.yaml"
    assert dropin.read_text() == k3s.dropin_text(BOTH, "k3s")
    assert stat.S_IMODE(dropin.stat().st_mode) == 0o600
    assert (etc / "config.yaml").read_bytes() == before["config.yaml"]  # the user's file untouched
    assert "+kube-apiserver-arg+:" in steps[0].diff and "token" not in steps[0].diff
    assert [n for n in os.listdir(etc / "config.yaml.d") if n.startswith(".")] == []  # no temp file left
    out = _revert(_remedy(standin_sshd, etc), tmp_path / "state")
    assert [o.outcome for o in out.outcomes] == [RESTORED]
    assert _snapshot(etc) == before
    out = _revert(_remedy(standin_sshd, etc), tmp_path / "state")
    assert out.status == "reverted" and [o.outcome for o in out.outcomes] == [ALREADY]
    assert _snapshot(etc) == before


def test_enable_conflict_over_ssh_edits_the_line_and_reverts_byte_identical(standin_sshd, tmp_path):
    text = fixture("rke2-hardened.yaml").replace("\n", "\r\n").rstrip("\r\n")  # CRLF, no final line break
    etc = _etc(tmp_path, text)
    before = _snapshot(etc)
    res, steps = _recover(_remedy(standin_sshd, etc, "rke2"), tmp_path / "state")
    assert res.status == "applied"
    now = (etc / "config.yaml").read_bytes()
    assert now == text.replace(f",{VWH},{MWH}\"", '"').encode()
    assert "token" not in steps[0].diff and "my-shared-secret" not in steps[0].diff
    [copy] = os.listdir(etc.parent / "node-backup")  # the node keeps its own copy, outside config.yaml.d
    assert (etc.parent / "node-backup" / copy).read_bytes() == before["config.yaml"]
    assert _revert(_remedy(standin_sshd, etc, "rke2"), tmp_path / "state").status == "reverted"
    assert _snapshot(etc) == before


def test_revert_takes_back_only_its_own_lines_when_the_file_changed_since(standin_sshd, tmp_path):
    etc = _etc(tmp_path, f"# mine\nkube-apiserver-arg:\n  - enable-admission-plugins=NodeRestriction,{VWH}\n"
                         f"  - event-ttl=2h\n")
    _recover(_remedy(standin_sshd, etc), tmp_path / "state")
    cfg = etc / "config.yaml"
    cfg.write_text("node-label: [team=a]\n" + cfg.read_text() + "kubelet-arg: [max-pods=150]\n")
    out = _revert(_remedy(standin_sshd, etc), tmp_path / "state")
    assert out.outcomes[0].outcome == RESTORED
    assert cfg.read_text() == (f"node-label: [team=a]\n# mine\nkube-apiserver-arg:\n  - enable-admission-plugins="
                               f"NodeRestriction,{VWH}\n  - event-ttl=2h\nkubelet-arg: [max-pods=150]\n")
    assert not (etc / "config.yaml.d" / "99-breakglass.yaml").exists()


def test_revert_refuses_when_its_own_lines_changed_and_force_overwrites(standin_sshd, tmp_path):
    etc = _etc(tmp_path, f"kube-apiserver-arg: [enable-admission-plugins={VWH}]\n")
    original = (etc / "config.yaml").read_bytes()
    _recover(_remedy(standin_sshd, etc), tmp_path / "state")
    dropin = etc / "config.yaml.d" / "99-breakglass.yaml"
    (etc / "config.yaml").write_text("kube-apiserver-arg: [enable-admission-plugins=PodNodeSelector]\n")
    with pytest.raises(PreconditionFailed) as e:
        _revert(_remedy(standin_sshd, etc), tmp_path / "state")
    assert "config.yaml changed since the run" in str(e.value)
    assert e.value.result.outcomes[0].outcome == CONFLICT and "+kube-apiserver-arg: [enable-admission-plugins=PodNodeSelector]" \
        in e.value.result.outcomes[0].diff
    assert dropin.exists()  # nothing on the node was reverted: every file is checked first
    out = _revert(_remedy(standin_sshd, etc), tmp_path / "state", force=True)
    assert out.outcomes[0].outcome == RESTORED
    assert (etc / "config.yaml").read_bytes() == original and not dropin.exists()


def test_a_dropin_changed_since_is_left_with_a_diff(standin_sshd, tmp_path):
    etc = _etc(tmp_path, "token: x\n")
    _recover(_remedy(standin_sshd, etc), tmp_path / "state")
    dropin = etc / "config.yaml.d" / "99-breakglass.yaml"
    dropin.write_text(dropin.read_text() + "  - event-ttl=3h\n")
    with pytest.raises(PreconditionFailed):
        _revert(_remedy(standin_sshd, etc), tmp_path / "state")
    assert dropin.exists()


def test_names_with_shell_characters(standin_sshd, tmp_path):
    weird = "etc $(touch PWNED); 'q' \"dq\" `x` & y"
    etc = _etc(tmp_path, f"kube-apiserver-arg: [enable-admission-plugins={MWH}]\n",
               {"05-a b;$(touch PWNED).yaml": f"kube-apiserver-arg+: ['enable-admission-plugins+={VWH}']\n",
                "-n.yaml": "kube-apiserver-arg+: [event-ttl=2h]\n"}, name=weird)
    before = _snapshot(etc)
    res, steps = _recover(_remedy(standin_sshd, etc), tmp_path / "state")
    assert res.status == "applied"
    assert (etc / "config.yaml.d" / "05-a b;$(touch PWNED).yaml").read_text() == "kube-apiserver-arg+: ['enable-admission-plugins+=']\n"
    assert _revert(_remedy(standin_sshd, etc), tmp_path / "state").status == "reverted"
    assert _snapshot(etc) == before
    assert not list(tmp_path.rglob("PWNED")) and not os.path.exists(os.path.expanduser("~/PWNED"))


def test_symlinked_config_and_dropin_directory_are_refused(standin_sshd, tmp_path):
    real = _etc(tmp_path, f"kube-apiserver-arg: [enable-admission-plugins={VWH}]\n", name="real")
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.yaml").symlink_to(real / "config.yaml")
    with pytest.raises(PreconditionFailed, match=r"config.yaml:1: .*symbolic link"):
        _remedy(standin_sshd, etc).plan()
    # a link k3s reads but breakglass does not write is fine; a linked drop-in directory is not
    etc2 = tmp_path / "etc2"
    etc2.mkdir()
    (etc2 / "config.yaml").symlink_to(real / "config.yaml.d" / "none.yaml")  # dangling: k3s would fail too
    (etc2 / "config.yaml").unlink()
    (etc2 / "config.yaml").write_text("token: x\n")
    (etc2 / "config.yaml.d").symlink_to(real / "config.yaml.d")
    with pytest.raises(PreconditionFailed, match="config.yaml.d is a symbolic link"):
        _remedy(standin_sshd, etc2).plan()
    assert os.listdir(real / "config.yaml.d") == []


# -- a real kube-apiserver, restarted by the `systemctl` stand-in from the config files -------------------

@pytest.fixture
def k3s_node(tmp_path, standin_sshd):
    """A k3s/RKE2 server node as far as this machine can be one: the config files in a temp dir, and the real
    kube-apiserver 1.34, deadlocked by the seed's webhook, (re)started by the `systemctl` stand-in with the flags
    k3s' merge gives (through the sandbox's kubelet stand-in)."""
    import yaml

    from breakglass import sandbox
    from tests import k3s_standin
    from tests.real_control_plane import binary_for

    _, binary = binary_for("1.34")
    d = str(tmp_path / "sandbox")
    sb = sandbox.up(d, apiserver=binary)
    manifest = sb.apiserver["manifest"]
    base = yaml.safe_load(open(manifest))["spec"]["containers"][0]["command"][1:]

    def make(distro: str, text: str, dropins: dict | None = None) -> Path:
        etc = _etc(tmp_path, text, dropins)
        settings = {"distro": distro, "service": k3s.distro(distro).service, "config": str(etc / "config.yaml"),
                    "manifest": manifest, "base": base, "journal": str(tmp_path / "journal.log"),
                    "kubeconfig": sb.apiserver["kubeconfig"]}
        k3s_standin.install(standin_sshd.bindir, settings)
        assert k3s_standin.restart(settings) == 0  # the node as it runs before the outage
        _wait_argv(d, lambda a: "--profiling=false" in a)
        return etc

    make.sandbox = d
    make.kubeconfig = sb.apiserver["kubeconfig"]
    yield make
    sandbox.down(d)


def _wait_argv(sandbox_dir: str, want, seconds: float = 60) -> list:
    import json

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            st = json.load(open(os.path.join(sandbox_dir, "kubelet.json")))
        except (OSError, ValueError):
            st = {}
        if st.get("argv") and want(st["argv"]) and st.get("pid"):
            return st["argv"]
        time.sleep(0.3)
    raise AssertionError(f"the apiserver never ran with the wanted flags: {st}")


def _ready(sandbox_dir: str, seconds: float = 120) -> dict:
    from breakglass import sandbox

    deadline = time.monotonic() + seconds
    while True:
        st = sandbox.status(sandbox_dir)["apiserver"]
        if st["ready"] or time.monotonic() > deadline:
            return st
        time.sleep(0.5)


def test_k3s_real_apiserver_dropin_restart_ready_and_revert(k3s_node, standin_sshd, tmp_path):
    """Through the CLI, as typed: recover over SSH, then revert from the journal alone.

    Cost: the real apiserver is restarted three times here (the node's own start, the recover's, the revert's),
    each step over OpenSSH to the stand-in sshd and readiness read through the node's kubectl; 5 s of /readyz polls
    first show the seed's deadlock. The sandbox itself is the fixture's (setup)."""
    import json

    from tests.conftest import run_cli

    etc = k3s_node("k3s", fixture("k3s-ansible.yaml"), {"10-audit.yaml": fixture("10-audit.yaml")})
    before = _snapshot(etc)
    assert not _ready(k3s_node.sandbox, 5)["ready"]  # the seed's deadlock
    # the node's own kubeconfig (through the real kubectl) names the stuck hook, where /readyz from outside says 401
    stuck = _remedy(standin_sshd, etc).node_readiness("cp1")
    assert stuck.reachable and stuck.ready is False, stuck
    assert "poststarthook/start-kubernetes-service-cidr-controller" in stuck.failing, stuck
    ssh = ["--ssh-config", standin_sshd.ssh_config, "--known-hosts", standin_sshd.known_hosts]
    # no kubeconfig of this machine's is read (a $KUBECONFIG that names nothing): the revert's guard finds only what
    # the test gives it (issue 33)
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    p = run_cli("recover", "--method", "k3s", "--ssh", "cp1", *ssh, "--config-path", str(etc / "config.yaml"),
                "--node-backup-dir", str(tmp_path / "node-backup"), "--verify-timeout", "90", "--wait-timeout",
                "120", "--yes", "-o", "json", env=env, timeout=400)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)["result"]
    assert res["status"] == "applied"
    [seen] = res["readiness"]  # waited for through the node's kubeconfig, not an anonymous probe
    assert seen["ready"] is True and "cp1 (the node's /etc/rancher/k3s/k3s.yaml)" == seen["url"], seen
    assert res["steps"][0]["verify"] == f"kube-apiserver runs with --disable-admission-plugins={VWH},{MWH}"
    assert _ready(k3s_node.sandbox)["ready"]  # the real apiserver got past the webhook
    argv_now = _wait_argv(k3s_node.sandbox, lambda a: True)
    assert "--event-ttl=2h" in argv_now and "--audit-log-maxage=30" in argv_now  # the user's flags kept
    # issue 33: re-enabling the plugins re-arms the seed's webhook: with nothing to read the cluster through it is
    # refused (a blind re-arm), and through the sandbox's kubeconfig while the backend is down; with the backend
    # running it reverts, exit 0 (the canary through the apiserver passed)
    r = run_cli("revert", "--yes", *ssh, "-o", "json", env=env, timeout=300)
    assert r.returncode == 4 and b"unseen" in r.stderr, r.stderr
    kube = ["--kubeconfig", k3s_node.kubeconfig]
    r = run_cli("revert", "--yes", *ssh, *kube, "-o", "json", env=env, timeout=300)
    assert r.returncode == 4 and b"backend is not ready" in r.stderr, r.stderr
    from breakglass import sandbox
    assert sandbox.backend(k3s_node.sandbox, True)["running"]
    r = run_cli("revert", "--yes", *ssh, *kube, "-o", "json", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    [o] = json.loads(r.stdout)["result"]["outcomes"]
    assert o["outcome"] == RESTORED and "k3s restarted" in o["detail"]
    assert _snapshot(etc) == before
    _wait_argv(k3s_node.sandbox, lambda a: not any(x.startswith("--disable-admission") for x in a))
    assert _revert(_remedy(standin_sshd, etc, restart=True), tmp_path / "state").outcomes[0].outcome == ALREADY


def test_rke2_real_apiserver_enable_conflict_is_edited_and_reverted(k3s_node, standin_sshd, tmp_path):
    text = fixture("rke2-hardened.yaml").replace("\n", "\r\n")
    etc = k3s_node("rke2", text)
    before = _snapshot(etc)
    # what a drop-in alone would do: the real apiserver refuses the overlap and never starts
    lone = etc / "config.yaml.d" / "99-hand.yaml"
    lone.write_text(k3s.dropin_text(BOTH, "rke2-server"))
    from tests import k3s_standin
    import json
    settings = json.load(open(os.path.join(standin_sshd.bindir, "standin.json")))
    assert k3s_standin.restart(settings) == 0
    deadline = time.monotonic() + 60
    while "overlapped" not in open(os.path.join(k3s_node.sandbox, "kube-apiserver.log"), errors="replace").read():
        assert time.monotonic() < deadline, "the apiserver did not refuse the overlap"
        time.sleep(0.5)
    lone.unlink()
    res, steps = _recover(_remedy(standin_sshd, etc, "rke2", restart=True, verify_timeout=90), tmp_path / "state")
    assert res.status == "applied", res
    assert (etc / "config.yaml").read_bytes() == text.replace(f",{VWH},{MWH}\"", '"').encode()
    assert _ready(k3s_node.sandbox)["ready"]
    assert _revert(_remedy(standin_sshd, etc, "rke2", restart=True), tmp_path / "state").status == "reverted"
    assert _snapshot(etc) == before


def test_config_file_mode_through_the_cli_makes_and_removes_the_dropin_directory(tmp_path):
    """--config-file: a copy here (a repository's), no SSH and no restart; a drop-in directory breakglass made
    goes again on revert, and the file comes back byte for byte."""
    from tests.conftest import run_cli

    cfg = tmp_path / "repo" / "config.yaml"
    cfg.parent.mkdir()
    original = fixture("rke2-hardened.yaml").replace("\n", "\r\n").encode()
    cfg.write_bytes(original)
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    p = run_cli("recover", "--method", "rke2", "--config-file", str(cfg), "--dry-run", env=env)
    assert p.returncode == 0 and b'+kube-apiserver-arg+:' in p.stdout and b"my-shared-secret" not in p.stdout
    assert not (tmp_path / "repo" / "config.yaml.d").exists()
    p = run_cli("recover", "--method", "rke2", "--config-file", str(cfg), "--yes", env=env)
    assert p.returncode == 8, p.stderr  # edited, not applied: no server has it
    assert (tmp_path / "repo" / "config.yaml.d" / "99-breakglass.yaml").exists()
    assert b"enable-admission-plugins=NodeRestriction\"" in cfg.read_bytes()
    # issue 33: no apiserver to read the cluster's webhooks through: a blind re-arm, refused (exit 4); --re-arm
    # reverts, not verified (exit 8)
    r = run_cli("revert", "--yes", env=env)
    assert r.returncode == 4 and b"unseen" in r.stderr, r.stderr
    assert (tmp_path / "repo" / "config.yaml.d" / "99-breakglass.yaml").exists()
    assert run_cli("revert", "--yes", "--re-arm", env=env).returncode == 8
    assert cfg.read_bytes() == original and os.listdir(tmp_path / "repo") == ["config.yaml"]
    assert run_cli("revert", "--yes", env=env).returncode == 0  # twice: nothing left, harmless
    p = run_cli("recover", "--method", "k3s", env=env)
    assert p.returncode == 2 and b"--ssh HOSTS" in p.stderr


def test_over_ssh_through_the_cli_dry_run_and_a_refused_conflict(standin_sshd, tmp_path):
    from tests.conftest import run_cli

    etc = _etc(tmp_path, "kube-apiserver-arg:\n  - |-\n    enable-admission-plugins=ValidatingAdmissionWebhook\n")
    args = ["recover", "--method", "k3s", "--ssh", "cp1", "--ssh-config", standin_sshd.ssh_config,
            "--known-hosts", standin_sshd.known_hosts, "--config-path", str(etc / "config.yaml")]
    env = {"BREAKGLASS_STATE_DIR": str(tmp_path / "state")}
    p = run_cli(*args, "--dry-run", env=env)
    assert p.returncode == 4 and p.stderr.count(b"\n") <= 2, p.stderr
    assert f"{etc}/config.yaml:2: ".encode() in p.stderr
    (etc / "config.yaml").write_text("token: x\n")
    p = run_cli(*args, "--dry-run", "-o", "json", env=env)
    assert p.returncode == 0, p.stderr
    assert b"99-breakglass.yaml" in p.stdout and not (etc / "config.yaml.d" / "99-breakglass.yaml").exists()


def test_over_ssh_a_unit_that_enables_the_plugin_refuses_the_plan_and_changes_nothing(standin_sshd, tmp_path):
    import json

    from tests import k3s_standin
    from tests.conftest import run_cli

    etc = _etc(tmp_path, "token: x\n")
    unit_path = tmp_path / "k3s.service"
    unit_path.write_text(fixture("k3s.service"))
    settings = {"distro": "k3s", "service": "k3s", "config": str(etc / "config.yaml"), "unit": str(unit_path),
                "manifest": str(tmp_path / "none.yaml"), "base": [], "journal": str(tmp_path / "journal.log")}
    saved = os.path.join(standin_sshd.bindir, "standin.json")
    previous = open(saved).read() if os.path.exists(saved) else None
    k3s_standin.install(standin_sshd.bindir, settings)
    try:
        before = _snapshot(etc)
        args = ["recover", "--method", "k3s", "--ssh", "cp1", "--ssh-config", standin_sshd.ssh_config,
                "--known-hosts", standin_sshd.known_hosts, "--config-path", str(etc / "config.yaml"), "--yes"]
        p = run_cli(*args, env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
        assert p.returncode == 4 and p.stderr.count(b"\n") <= 2, p.stderr
        assert f"{unit_path} (ExecStart)".encode() in p.stderr and b"enables ValidatingAdmissionWebhook" in p.stderr
        assert _snapshot(etc) == before
        # without the enable on the command line the plan goes ahead (dry run)
        unit_path.write_text(fixture("k3s.service").replace(",ValidatingAdmissionWebhook", ""))
        p = run_cli(*args[:-1], "--dry-run", env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
        assert p.returncode == 0 and b"99-breakglass.yaml" in p.stdout and b"note:" not in p.stderr, p.stderr
    finally:
        if previous is not None:
            with open(saved, "w") as f:
                f.write(previous)
        else:
            os.unlink(saved)
    # a node whose systemctl cannot show the unit: the plan says what it did not check
    p = run_cli(*args[:-1], "--dry-run", env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
    assert p.returncode == 0 and b"note: cp1: `systemctl cat k3s` failed" in p.stderr, p.stderr
    p = run_cli(*args[:-1], "--dry-run", "-o", "json", env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
    assert json.loads(p.stdout)["exitCode"] == 0 and b"systemctl cat k3s" in p.stderr


def test_the_runbooks_config_file_commands_run(tmp_path):
    """runbooks/k3s.md and rke2.md: every command parses (tests/test_runbooks.py); the ones on a config file in
    git run here, on a copy of a real-looking config."""
    import shlex

    from tests.conftest import run_cli
    from tests.test_runbooks import COMMANDS

    ran = 0
    for runbook, command in COMMANDS:
        tokens = shlex.split(command)[1:]
        if runbook not in ("k3s.md", "rke2.md") or "--config-file" not in tokens:
            continue
        cfg = tmp_path / runbook / "config.yaml"
        cfg.parent.mkdir()
        cfg.write_text(fixture("rke2-hardened.yaml" if runbook == "rke2.md" else "k3s-ansible.yaml"))
        tokens[tokens.index("--config-file") + 1] = str(cfg)
        p = run_cli(*tokens, env={"BREAKGLASS_STATE_DIR": str(tmp_path / "state")})
        assert p.returncode == 0, f"{runbook}: {command}: {p.stderr[-300:]}"
        assert b"99-breakglass.yaml" in p.stdout and b"dry run: nothing was changed" in p.stdout
        ran += 1
    assert ran == 2
