"""Issue 27 §6 (k3s part): kube-apiserver-arg as k3s and kube-apiserver really read it.

- k3s reads its config with gopkg.in/yaml.v2: a ``!!binary`` item is its decoded string;
- a top-level merge key (``<<: *base``) is dropped by yaml.v2's MapSlice (go-yaml issues #91, #438) but kept by
  a fixed library: breakglass works the flags out both ways and makes its change hold both ways;
- kube-apiserver reads ``_`` in a flag's name as ``-``;
- systemd puts ``$VAR`` / ``${VAR}`` from Environment= and EnvironmentFile= into ExecStart (systemd.service(5)
  "Command lines"), so a ``--kube-apiserver-arg`` can come from the unit's environment file."""

from __future__ import annotations

import base64
import shlex
from types import SimpleNamespace

import pytest

from breakglass.access.local import LocalNode
from breakglass.core.errors import PreconditionFailed
from breakglass.k3s import config as k3s
from breakglass.k3s import unit

VWH, MWH = "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"
K3S = k3s.distro("k3s")


def _plan(text: str, plugins=(VWH, MWH), command_line=()):
    return k3s.plan(K3S, [k3s.ConfigFile("/c/config.yaml", text)], "/c/config.yaml.d", [], list(plugins),
                    list(command_line))


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def test_binary_items_are_read_decoded():
    enabling = f"token: x\nkube-apiserver-arg:\n  - event-ttl=2h\n  - !!binary {_b64('enable-admission-plugins=' + VWH)}\n"
    with pytest.raises(PreconditionFailed, match=r"^/c/config.yaml:4: enables ValidatingAdmissionWebhook in a !!binary"):
        _plan(enabling)
    disabling = f"kube-apiserver-arg: [!!binary {_b64(f'disable-admission-plugins={VWH},{MWH}')}]\n"
    ch = _plan(disabling)
    assert ch.disabled == [] and ch.dropin is None and not ch.edits  # already disabled: nothing to do
    assert f"--disable-admission-plugins={VWH},{MWH}" in k3s.apiserver_argv(K3S, [k3s.ConfigFile("/c", disabling)])


def test_underscore_spellings_are_the_same_flags():
    text = f"kube-apiserver-arg:\n  - 'enable_admission_plugins=NodeRestriction,{VWH}'\n"
    ch = _plan(text)
    # edited where it is, spelled as it was (k3s keeps its own enable-admission-plugins default beside it)
    assert ch.edits[0].after == "kube-apiserver-arg:\n  - 'enable_admission_plugins=NodeRestriction'\n"
    assert ch.dropin and ch.flag == f"--disable-admission-plugins={VWH},{MWH}"
    done = f"kube-apiserver-arg:\n  - 'disable_admission_plugins={VWH},{MWH}'\n  - enable-admission-plugins={VWH}\n"
    ch = _plan(done)
    assert ch.dropin is None and [e.after for e in ch.edits] == [
        f"kube-apiserver-arg:\n  - 'disable_admission_plugins={VWH},{MWH}'\n  - enable-admission-plugins=\n"]
    assert ch.flag == f"--disable_admission_plugins={VWH},{MWH}"  # as kube-apiserver's command line shows it


def test_merge_keys_are_taken_both_ways():
    merged_enable = (f"x-base: &base\n  kube-apiserver-arg: ['enable-admission-plugins=NodeRestriction,{VWH}']\n"
                     f"token: x\n<<: *base\n")
    # yaml.v2 (k3s) drops the merge: the item is not in effect; a fixed library keeps it: the apiserver would
    # refuse to start beside our drop-in. Edited in place, it is right both ways.
    ch = _plan(merged_enable)
    assert [e.after for e in ch.edits] == [merged_enable.replace(f"NodeRestriction,{VWH}", "NodeRestriction")]
    assert ch.dropin
    # a disable that only the merge brings is not counted as done (k3s drops it)
    merged_disable = f"x-base: &base\n  kube-apiserver-arg: ['disable-admission-plugins={VWH},{MWH}']\n<<: *base\n"
    ch = _plan(merged_disable)
    assert ch.disabled == [VWH, MWH] and ch.dropin
    # a merge key whose value is not a mapping: k3s does not start; one line
    with pytest.raises(Exception, match="merge key"):
        _plan("<<: [a, b]\n")


UNIT = """# /etc/systemd/system/k3s.service
[Unit]
Description=Lightweight Kubernetes

[Service]
Type=notify
Environment="ARG=profiling=false" "EMPTY="
EnvironmentFile=-/etc/default/%N
EnvironmentFile={envfile}
ExecStart=/usr/local/bin/k3s \\
    server $K3S_EXTRA \\
    '--kube-apiserver-arg=${{ARG}}' '--node-label=price=$$5'
"""


class _UnitNode:
    """`systemctl cat` answers with the unit; everything else runs on this machine (LocalNode)."""

    host = "cp1"

    def __init__(self, unit_text: str):
        self.unit_text = unit_text.encode()
        self.local = LocalNode()

    def run(self, command, stdin=None, timeout=None):
        if command.startswith("systemctl cat"):
            return SimpleNamespace(rc=0, out=self.unit_text, err=b"")
        return self.local.run(command, stdin=stdin, sudo=False, timeout=timeout)


def test_execstart_variables_come_from_the_units_environment(tmp_path):
    from breakglass.ways.k3s_flags import read_command_line

    envfile = tmp_path / "k3s.service.env"
    envfile.write_text("# written by install.sh\nK3S_TOKEN='K10secret-in-the-env-file'\n"
                       f"K3S_EXTRA=\"--kube-apiserver-arg=enable-admission-plugins=NodeRestriction,{VWH} "
                       f"--kube-apiserver-arg 'audit-log-path=/var/log/a b.log'\"\n"
                       "ARG=profiling=true\n")
    text = UNIT.format(envfile=shlex.quote(str(envfile)))
    start = unit.exec_start(text, {str(envfile): envfile.read_text(), "/etc/default/k3s": None}, "k3s.service")
    # $K3S_EXTRA split at whitespace (quotes respected), ${ARG} as it is (the file overrides Environment=), $$ is $
    assert start.argv == ["/usr/local/bin/k3s", "server", f"--kube-apiserver-arg=enable-admission-plugins="
                          f"NodeRestriction,{VWH}", "--kube-apiserver-arg", "audit-log-path=/var/log/a b.log",
                          "--kube-apiserver-arg=profiling=true", "--node-label=price=$5"]
    assert unit.environment_files(text, "k3s.service") == [("/etc/default/k3s", True), (str(envfile), False)]

    items, note = read_command_line(_UnitNode(text), "k3s")
    assert [i.value for i in items] == [f"enable-admission-plugins=NodeRestriction,{VWH}",
                                        "audit-log-path=/var/log/a b.log", "profiling=true"]
    assert note == ""
    with pytest.raises(PreconditionFailed) as e:
        _plan("token: x\n", command_line=items)
    assert "/etc/systemd/system/k3s.service (ExecStart)" in str(e.value) and VWH in str(e.value)
    assert "K10secret" not in str(e.value)

    # a variable the unit does not set is empty, and said so; a missing required file too
    envfile.unlink()
    items, note = read_command_line(_UnitNode(text), "k3s")
    assert [i.value for i in items] == ["profiling=false"]
    assert "$K3S_EXTRA" in note and "does not exist" in note
