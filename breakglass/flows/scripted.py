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

from breakglass.flows import planner

from breakglass.core import textfile
from breakglass.core.errors import BadInput, Unreachable

LISTS = {"webhook_config", "kind", "nodes", "plugins", "config_file", "apiserver", "ssh", "webhook"}


def load_plan(path: str, allowed: set[str]) -> dict:
    import yaml  # noqa: PLC0415

    text = textfile.read(path, "a YAML plan")
    try:
        doc = textfile.load_yaml(text, path, "a plan")
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: invalid YAML ({getattr(e, 'problem', None) or str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: a plan is a mapping of recover options")
    types = _option_types()
    out = {}
    for k, v in doc.items():
        key = str(k).replace("-", "_")
        if key in ("plan", "auto", "yes", "output", "verbose"):
            raise BadInput(f"{path}: {k} is not set from a plan (pass it on the command line)")
        if key not in allowed:
            raise BadInput(f"{path}: unknown option {k!r}")
        if key in types:
            v = _typed(path, k, v, types[key])
        elif key in LISTS and isinstance(v, str):
            v = [v]
        out[key] = v
    return out


def _option_types() -> dict:
    """recover's options and their types (bool, int, float, str, an Enum, List[str]; Optional or not)."""
    import inspect  # noqa: PLC0415
    import typing  # noqa: PLC0415

    from breakglass.cli.recover import recover  # noqa: PLC0415

    hints = typing.get_type_hints(recover, include_extras=True)
    out = {}
    for name in inspect.signature(recover).parameters:
        t = hints.get(name)
        if typing.get_origin(t) is typing.Annotated:
            t = typing.get_args(t)[0]
        args = typing.get_args(t)
        optional = typing.get_origin(t) is typing.Union and type(None) in args
        if optional:
            t = next(a for a in args if a is not type(None))
        out[name] = (t, optional)
    return out


def _typed(path: str, k, v, hint):
    """A plan's value as the flag would give it: YAML's own booleans and numbers only (never the string "false"
    read as true), a list for a repeatable flag; anything else is one line of bad input."""
    import enum  # noqa: PLC0415
    import typing  # noqa: PLC0415

    t, optional = hint
    what = f"{path}: {k}"
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if v is None:
        if optional:
            return None
        raise BadInput(f"{what}: a {'string' if t is str else 'value'}, not empty")
    if t is bool:
        if isinstance(v, bool):
            return v
        raise BadInput(f"{what}: true or false, not {v!r}")
    if t is int:
        if number and float(v).is_integer():
            return int(v)
        raise BadInput(f"{what}: a whole number, not {v!r}")
    if t is float:
        if number:
            return float(v)
        raise BadInput(f"{what}: a number, not {v!r}")
    if isinstance(t, type) and issubclass(t, enum.Enum):
        values = [e.value for e in t]
        if isinstance(v, str) and v in values:
            return v
        if isinstance(v, str):
            raise BadInput(f"{path}: unknown {k} {v!r} (use {', '.join(values)})")
        raise BadInput(f"{what}: one of {', '.join(values)}, not {v!r}")
    if typing.get_origin(t) in (list, typing.List):
        items = [v] if isinstance(v, str) or number else v
        if isinstance(items, list) and all(isinstance(x, str) or (isinstance(x, (int, float))
                                                                  and not isinstance(x, bool)) for x in items):
            return [str(x) for x in items]
        raise BadInput(f"{what}: a list of strings, not {v!r}")
    if isinstance(v, str) or number:
        return str(v)
    raise BadInput(f"{what}: a string, not {v!r}")


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
    """What the diagnosis (`breakglass diagnose -o json`) says to act on, as -w references: a configuration the
    log itself named; otherwise the webhook, as ``webhook:NAME``, so the configuration holding it is read from
    the cluster (etcd or the API) rather than guessed from a vendor's naming convention."""
    if not path:
        return []
    try:
        refs = []
        for r in _diagnosis_remedies(path):  # every way out lists the culprits it knows (etcd: named ones only)
            for t in r.get("targets") or []:
                if t.get("configuration") and (t.get("configuration_source") == "log" or not t.get("webhook")):
                    refs.append(f"{t['kind']}/{t['configuration']}")
                elif t.get("webhook"):
                    refs.append(f"webhook:{t['webhook']}")
        return list(dict.fromkeys(refs))
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


def family_from_diagnosis(path: str | None) -> str | None:
    """The deadlock family that leads the diagnosis's verdict (bootstrap, self-dependency, node-lease,
    conversion), which orders the ways out; None without a diagnosis or a family."""
    if not path:
        return None
    import json  # noqa: PLC0415

    try:
        with open(path, encoding="utf-8") as f:
            verdict = json.load(f)["result"]["verdict"]
        family = verdict.get("family") if isinstance(verdict, dict) else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{path}: not the JSON output of `breakglass diagnose` ({e})") from None
    return family if isinstance(family, str) else None


def auto_method(access: planner.Access, have_targets: bool, timeout: float = 3.0, family: str | None = None) -> str:
    """The first way out that can be used: probed (SSH also says what the nodes run), in the family's order."""
    probes = planner.probe(access, timeout)
    opts = planner.options(probes, have_targets, family, access.distros)
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
