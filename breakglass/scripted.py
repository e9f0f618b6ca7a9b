"""Scripted recovery: plan files and `--auto`, for runbook automation.

A plan file names the method, targets, configurations and options with the same names as
`breakglass recover`'s flags (underscores or dashes), e.g.::

    method: etcd
    webhook_config: [validating/kyverno-resource-validating-webhook-cfg]
    etcd_endpoints: https://127.0.0.1:2379

Flags given on the command line win over the plan. `--auto` probes what is reachable and takes
the planner's first viable option.
"""

from __future__ import annotations

import os

from breakglass import planner, textfile
from breakglass.errors import BadInput, Unreachable

LISTS = {"webhook_config", "kind", "nodes", "plugins", "config_file", "apiserver", "ssh", "webhook"}


def load_plan(path: str, allowed: set[str]) -> dict:
    import yaml  # noqa: PLC0415

    text = textfile.read(path, "a YAML plan")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: invalid YAML ({getattr(e, 'problem', None) or str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: a plan is a mapping of recover options")
    out = {}
    for k, v in doc.items():
        key = str(k).replace("-", "_")
        if key in ("plan", "auto", "yes", "output", "verbose"):
            raise BadInput(f"{path}: {k} is not set from a plan (pass it on the command line)")
        if key not in allowed:
            raise BadInput(f"{path}: unknown option {k!r}")
        if key in LISTS and isinstance(v, str):
            v = [v]
        out[key] = v
    return out


def _diagnosis_remedies(path: str) -> list[dict]:
    import json  # noqa: PLC0415

    try:
        with open(path, encoding="utf-8") as f:
            remedies = json.load(f)["result"]["remedies"]
        if not isinstance(remedies, list) or not all(isinstance(r, dict) for r in remedies):
            raise TypeError("result.remedies is not a list of remedies")
        return remedies
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{path}: not the JSON output of `breakglass diagnose` ({e})") from None


def targets_from_diagnosis(path: str | None) -> list[str]:
    """The configurations the diagnosis names (from `breakglass diagnose -o json`)."""
    if not path:
        return []
    try:
        return [f"{t['kind']}/{t['configuration']}" for r in _diagnosis_remedies(path) if r.get("method") == "etcd"
                for t in r.get("targets") or [] if t.get("configuration")]
    except (KeyError, TypeError, AttributeError) as e:
        raise BadInput(f"{path}: not the JSON output of `breakglass diagnose` ({e})") from None


def plugins_from_diagnosis(path: str | None) -> list[str]:
    """The plugins the diagnosis says to disable (from `breakglass diagnose -o json`)."""
    if not path:
        return []
    for r in _diagnosis_remedies(path):
        if r.get("method") == "talos" and isinstance(r.get("plugins"), list) and r["plugins"]:
            return [str(x) for x in r["plugins"]]
    raise BadInput(f"{path}: the diagnosis names no plugins to disable")


def auto_method(access: planner.Access, have_targets: bool, timeout: float = 3.0) -> str:
    probes = planner.probe(access, timeout)
    opts = planner.options(probes, have_targets)
    for o in opts:
        if o.available:
            return o.method
    reasons = "; ".join(f"{o.method}: {o.reason}" for o in opts)
    raise Unreachable(f"no way out is reachable ({reasons})")


def access_from(args: dict, talos_factory, ssh_factory, etcd_factory) -> planner.Access:
    a = planner.Access()
    if args.get("kubeconfig") or os.environ.get("KUBECONFIG"):
        a.kubeconfig, a.context, a.wants_kubeconfig = args.get("kubeconfig"), args.get("context"), True
    if args.get("nodes") and not args.get("config_file"):
        a.talos, a.talos_nodes = talos_factory(), [n for v in args["nodes"] for n in v.split(",") if n]
    if args.get("ssh"):
        a.ssh_nodes = ssh_factory([h for v in args["ssh"] for h in v.split(",") if h])
    if args.get("etcd_endpoints") or args.get("etcd_via_ssh") or os.environ.get("ETCDCTL_ENDPOINTS"):
        a.etcd = etcd_factory()
    return a
