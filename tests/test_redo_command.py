"""The command a failed canary offers to make a run's change again: it must name what the run changed, so it
runs as pasted (a command without its webhooks or nodes is refused by `recover`)."""

import shlex
from types import SimpleNamespace

from breakglass.flows.rearm_check import redo_command


def _run(method, target, steps=()):
    return SimpleNamespace(method=method, target=target, steps=list(steps))


def test_static_manifests_over_ssh_names_the_webhooks_and_nodes():
    cmd = redo_command(_run("static-manifests", {"hosts": ["cp1", "cp2"], "webhooks": ["deny.guard.example.com"],
                                                 "dirs": ["/etc/kubernetes/admission/static"], "local": False}))
    assert shlex.split(cmd) == ["breakglass", "recover", "static-manifests", "--webhook", "deny.guard.example.com",
                                "--ssh", "cp1,cp2", "--static-manifests", "/etc/kubernetes/admission/static", "--yes"]


def test_static_manifests_here_names_the_directory_and_quotes_it():
    cmd = redo_command(_run("static-manifests", {"hosts": ["localhost"], "webhooks": ["a;b"],
                                                 "dirs": ["/srv/static dir"], "local": True}))
    assert shlex.split(cmd) == ["breakglass", "recover", "static-manifests", "--webhook", "a;b",
                                "--static-manifests", "/srv/static dir", "--yes"]


def test_static_manifests_found_from_the_flags_leaves_the_directory_to_them():
    cmd = redo_command(_run("static-manifests", {"hosts": ["cp1"], "webhooks": ["w"], "dirs": [], "local": False}))
    assert "--static-manifests" not in cmd and "--ssh cp1" in cmd


def test_kubeadm_over_ssh_keeps_its_plugins():
    cmd = redo_command(_run("kubeadm", {"hosts": ["cp1"], "plugins": ["ValidatingAdmissionWebhook"]}))
    assert shlex.split(cmd) == ["breakglass", "recover", "kubeadm", "--ssh", "cp1", "--plugins",
                                "ValidatingAdmissionWebhook", "--yes"]
