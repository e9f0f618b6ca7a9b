"""Runbooks cannot rot: every breakglass command in them must parse with today's CLI, and the ones
that can run on the sandbox run there."""

from __future__ import annotations

import glob
import os
import shlex

import pytest

from tests.conftest import ROOT


def _commands():
    out = []
    for md in sorted(glob.glob(os.path.join(ROOT, "docs", "runbooks", "*.md"))):
        in_block = False
        pending = ""
        for line in open(md, encoding="utf-8"):
            if line.startswith("```"):
                in_block = not in_block
                continue
            if not in_block:
                continue
            line = pending + line.rstrip("\n")
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            for part in line.replace("&&", ";").replace("|", ";").split(";"):
                part = part.split("#")[0].strip()
                if part.startswith("sudo "):
                    part = part[5:]
                if part.startswith("breakglass "):
                    out.append((os.path.basename(md), part))
    return out


COMMANDS = _commands()


def test_runbooks_have_commands():
    assert len(COMMANDS) > 20


def test_a_stale_flag_is_caught():
    with pytest.raises(Exception, match="No such option"):
        test_every_runbook_command_parses("x.md", "breakglass recover --method etcd --no-such-flag")


@pytest.mark.parametrize("runbook,command", COMMANDS, ids=[f"{r}:{c[:50]}" for r, c in COMMANDS])
def test_every_runbook_command_parses(runbook, command):
    import typer.main

    from breakglass.cli import app
    command = command.split(" > ")[0]  # shell redirection is not breakglass's
    tokens = shlex.split(command)[1:]
    group = typer.main.get_group(app)
    cmd, name = group, "breakglass"
    while tokens and hasattr(cmd, "commands"):
        tokens = getattr(cmd, "expand_alias", list)(tokens)  # `recover --method WAY` is `recover WAY`
        if tokens[0] not in cmd.commands:
            break
        name = tokens.pop(0)
        cmd = cmd.commands[name]
    assert not hasattr(cmd, "commands") or cmd.invoke_without_command, f"{runbook}: `{command}` names no command"
    flags = {o for p in cmd.params if getattr(p, "is_flag", False) for o in p.opts}
    args = []
    for a in tokens:
        if a == "…" and not (args and args[-1].startswith("-") and args[-1] not in flags):
            continue  # "…" for "your other flags": nothing to parse
        args.append("VALUE" if "…" in a or "$" in a else a)
    cmd.make_context(name, list(args))  # raises a usage error for an unknown option or a bad value


# -- and the ones that can run against the sandbox, run there -------------------------------------

SANDBOXABLE = ("diagnose", "audit", "webhooks", "recover", "revert", "runs", "etcd", "leaks")
# leaks reads no cluster: its runbook commands run on the bundled example logs of the Gatekeeper story
LEAK_LOGS = {"--audit-log": os.path.join(ROOT, "examples", "audit", "gke-gatekeeper-rollout.audit.log"),
             "--apiserver-log": os.path.join(ROOT, "examples", "logs", "gke-gatekeeper-fail-open.jsonl")}


def _sandbox_args(tokens, sb, log):
    """Point a runbook command at the sandbox: its etcd, its log, its culprit; changes become dry runs."""
    out, skip = [], False
    drop_with_value = {"--etcd-cacert", "--etcd-cert", "--etcd-key", "--etcd-via-ssh", "--snapshot",
                       "--target-version", "--diagnosis"}
    for i, t in enumerate(tokens):
        if skip:
            skip = False
            continue
        if t in drop_with_value:
            skip = True
            continue
        if t == "--etcd-endpoints":
            out += [t, sb.endpoint]
            skip = True
            continue
        if t in LEAK_LOGS:
            out += [t, LEAK_LOGS[t]]
            skip = True
            continue
        if t in ("-o", "--output"):
            skip = True  # and its value: the output format is the runbook's business, not the test's
            continue
        if t == "…" or t.startswith("-o"):
            continue
        out.append(t.replace("validating/NAME", "validating/kyverno-resource-validating-webhook-cfg")
                   .replace("NAME", "kyverno-resource-validating-webhook-cfg"))
    if out[0] == "diagnose":
        out = ["diagnose", log]
    if out[0] in ("audit", "webhooks", "recover", "revert") and "--etcd-endpoints" not in out and "-f" not in out \
            and not any(m in out for m in ("kubeapi", "talos", "kubeadm")):
        out += ["--etcd-endpoints", sb.endpoint]
    if out[0] in ("recover", "revert") and "--dry-run" not in out:
        out.append("--dry-run")
    if out[0] == "etcd" and "--etcd-endpoints" not in out:
        out += ["--etcd-endpoints", sb.endpoint]
    return out


def test_runbook_commands_run_against_the_sandbox(tmp_path):
    from breakglass import sandbox
    from tests.conftest import run_cli
    state = str(tmp_path / "state")
    sb = sandbox.up(sandbox.default_dir(state))
    ran = 0
    env = {"BREAKGLASS_STATE_DIR": state, "ETCDCTL_CACERT": "", "ETCDCTL_CERT": "", "ETCDCTL_KEY": ""}
    try:
        # one real run first, so the runbooks' revert commands have something to (dry-)revert; issue 33: this
        # sandbox is etcd alone, no apiserver's /readyz to see: applied, not verified (exit 8)
        assert run_cli("recover", "--method", "etcd", "-w", "validating/kyverno-resource-validating-webhook-cfg",
                       "--etcd-endpoints", sb.endpoint, "--yes", env=env).returncode == 8
        # the policy engine is back (rehearse.md §5), so the runbooks' reverts may re-arm its webhook
        assert run_cli("sandbox", "backend", "start", env=env).returncode == 0
        for runbook, command in COMMANDS:
            tokens = shlex.split(command.split(" > ")[0])[1:]
            if tokens[0] not in SANDBOXABLE or any(t in tokens for t in (
                    "--method", "--ssh", "--talos-node", "--kubeconfig", "--context", "--all-contexts", "--plan",
                    "--recheck", "--static-manifests", "--static-manifests-via-ssh", "--static-manifests-via-talos")) \
                        and "etcd" not in tokens:
                continue
            if tokens[0] in ("audit", "webhooks") and "-f" in tokens or "--diagnosis" in tokens:
                continue  # names the user's own files
            args = _sandbox_args(tokens, sb, sb.files["apiserver_log"])
            if args[0] == "recover" and "etcd" in args:
                # the culprit was deleted by the run above; rehearse on an innocent configuration
                args = [a.replace("validating/kyverno-resource-validating-webhook-cfg", "validating/cert-manager-webhook")
                        .replace("validate.kyverno.svc-fail", "webhook.cert-manager.io") for a in args]
            p = run_cli(*args, env=env)
            assert p.returncode in (0, 3), f"{runbook}: breakglass {' '.join(args)} -> {p.returncode}: {p.stderr[-300:]}"
            ran += 1
    finally:
        sandbox.down(sandbox.default_dir(state))
    assert ran >= 5
