"""Scripted recovery: plan files and `--auto`, for runbook automation.

A plan file names the way out (``method``), targets, configurations and options with the same names as
`breakglass recover WAY`'s flags (underscores or dashes), typed by the ways' own option specs (ways.registry), e.g.::

    method: etcd
    webhook_config: [validating/kyverno-resource-validating-webhook-cfg]
    etcd_endpoints: https://127.0.0.1:2379

Flags given on the command line win over the plan. `--auto` probes what is reachable and takes
the planner's first viable option.

A plan says what to change and how long to wait, never what to run or whom to trust: plans are shared in
runbooks and repositories, so an option whose registry Opt has ``trust`` (a program such as talosctl, a key, a
password, a CA or client certificate, a kubeconfig or talosconfig, the SSH config, known_hosts and host-key
policy) is refused in a plan, naming it, before anything runs; it comes from the command line or the environment.
"""

from __future__ import annotations

import os

from breakglass.flows import planner
from breakglass.ways import registry

from breakglass.core import textfile
from breakglass.core.errors import BadInput, Unreachable

# what a plan may set besides the ways' own options (ways.registry): the way, and where and whether to act
PLAN_ONLY = (registry.Opt("method", "choice", None, choices=registry.NAMES),
             registry.Opt("state_dir", "str", None), registry.Opt("dry_run", "bool", False))
COMMAND_LINE_ONLY = ("plan", "auto", "yes", "output", "verbose")


def trusted_options() -> dict[str, str]:
    """Option name -> what it makes breakglass run or trust (registry.Opt.trust), for every way that has it."""
    return {o.name: o.trust for way in registry.WAYS for o in way.options if o.trust}


def _option_types() -> dict:
    """Every option a plan may name, typed by the registry's Opt specs (the first way's spec where ways share
    one: they agree on the kind)."""
    out = {o.name: o for o in PLAN_ONLY}
    for way in registry.WAYS:
        for opt in way.options:
            out.setdefault(opt.name, opt)
    return out


def belongs(name: str, way: str) -> bool:
    """Whether ``name`` is an option of ``way`` (or one every way takes)."""
    return name in COMMAND_LINE_ONLY or name in ("method", "state_dir", "dry_run") or \
        any(o.name == name for o in registry.get(way).options)


def load_plan(path: str, allowed: set[str] | None = None) -> dict:
    """A plan file's options, typed as the flags are: YAML's own booleans and numbers only, a list for a
    repeatable option; an unknown key, or one only the command line sets, is one line of bad input."""
    import yaml  # noqa: PLC0415

    text = textfile.read(path, "a YAML plan")
    try:
        doc = textfile.load_yaml(text, path, "a plan")
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: invalid YAML ({getattr(e, 'problem', None) or str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: a plan is a mapping of recover options")
    types = _option_types()
    trusted = trusted_options()
    out = {}
    for k, v in doc.items():
        key = str(k).replace("-", "_")
        if key in COMMAND_LINE_ONLY:
            raise BadInput(f"{path}: {k} is not set from a plan (pass it on the command line)")
        if key in trusted:  # refused before any value of the plan is used, so --dry-run runs nothing of it
            raise BadInput(f"{path}: {k} is not set from a plan: pass it on the command line (it chooses "
                           f"{trusted[key]}; a plan says what to change, never what to run or trust)")
        if key not in types or (allowed is not None and key not in allowed):
            raise BadInput(f"{path}: unknown option {k!r}")
        out[key] = _typed(path, k, v, types[key])
    return out


def check_plan_way(plan: dict, way: str, path: str) -> None:
    """Every option of the plan is one of its way's: one that is not would be silently ignored otherwise."""
    foreign = [k for k in plan if not belongs(k, way)]
    if foreign:
        raise BadInput(f"{path}: {', '.join(foreign)}: not an option of the way out {way!r} "
                       f"(`breakglass recover {way} --help` lists them)")


def _typed(path: str, k, v, opt: registry.Opt):
    """A plan's value as the flag would give it: YAML's own booleans and numbers only (never the string "false"
    read as true), a list for a repeatable flag; anything else is one line of bad input."""
    what = f"{path}: {k}"
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if v is None:
        if opt.default is None and opt.kind != "bool":
            return None
        raise BadInput(f"{what}: a {'string' if opt.kind == 'str' else 'value'}, not empty")
    if opt.kind == "bool":
        if isinstance(v, bool):
            return v
        raise BadInput(f"{what}: true or false, not {v!r}")
    if opt.kind == "int":
        if number and float(v).is_integer():
            return int(v)
        raise BadInput(f"{what}: a whole number, not {v!r}")
    if opt.kind == "float":
        if number and (opt.minimum is None or v >= opt.minimum):
            return float(v)
        raise BadInput(f"{what}: a number{f' of at least {opt.minimum:g}' if opt.minimum is not None else ''}, "
                       f"not {v!r}")
    if opt.kind == "choice":
        if isinstance(v, str) and v in opt.choices:
            return v
        if isinstance(v, str):
            raise BadInput(f"{path}: unknown {k} {v!r} (use {', '.join(opt.choices)})")
        raise BadInput(f"{what}: one of {', '.join(opt.choices)}, not {v!r}")
    if opt.kind == "list":
        items = [v] if isinstance(v, str) or number else v
        if isinstance(items, list) and all(isinstance(x, str) or (isinstance(x, (int, float))
                                                                  and not isinstance(x, bool)) for x in items):
            return [str(x) for x in items]
        raise BadInput(f"{what}: a list of strings, not {v!r}")
    if isinstance(v, str) or number:
        return str(v)
    raise BadInput(f"{what}: a string, not {v!r}")


def _diagnosis(path: str) -> dict:
    """`breakglass diagnose -o json` output, read once; JSON nested too deeply for the parser (100k brackets) is
    bad input like any other file that is not a diagnosis, not a crash."""
    import json  # noqa: PLC0415

    what = f"{path}: not the JSON output of `breakglass diagnose`"
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except RecursionError:
        raise BadInput(f"{what} (nested too deeply)") from None
    except (OSError, ValueError) as e:
        raise BadInput(f"{what} ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("result"), dict):
        raise BadInput(f"{what} (no result)")
    return doc["result"]


def _diagnosis_remedies(path: str) -> list[dict]:
    remedies = _diagnosis(path).get("remedies")
    if not isinstance(remedies, list) or not all(isinstance(r, dict) for r in remedies):
        raise BadInput(f"{path}: not the JSON output of `breakglass diagnose` (result.remedies is not a list of "
                       f"remedies)")
    return remedies


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
    result = _diagnosis(path)
    if "verdict" not in result:
        raise BadInput(f"{path}: not the JSON output of `breakglass diagnose` (no result.verdict)")
    verdict = result["verdict"]
    family = verdict.get("family") if isinstance(verdict, dict) else None
    return family if isinstance(family, str) else None


def verdict_note(path: str | None) -> str | None:
    """What `recover --auto` says first when the diagnosis is not a deadlock: a DEGRADED cluster heals once the
    webhook's backend answers, so fixing the backend is the first thing to do; a STUCK one names no webhook at all
    (the way out still runs, as asked)."""
    if not path:
        return None
    verdict = _diagnosis(path).get("verdict")
    state = verdict.get("state") if isinstance(verdict, dict) else None
    if state == "stuck":  # the wizard's guard for the same verdict: say it before anything is bypassed
        return ("the diagnosis says STUCK and names no webhook: bypassing webhooks may change nothing; check "
                "`breakglass webhooks` and etcd's health first (--auto goes on, as asked)")
    if state != "degraded":
        return None
    return ("the diagnosis says DEGRADED: nothing the cluster needs to come back is blocked, so it heals once the "
            "webhook's backend answers; fixing the backend first is enough (--auto goes on, as asked)")


def auto_method(access: planner.Access, have_targets: bool, timeout: float = 3.0, family: str | None = None,
                gap: float = planner.RESTART_GAP, on_wait=None) -> str:
    """The first way out that can be used: probed (SSH also says what the nodes run), in the family's order. A
    refused apiserver is asked again for ``gap`` seconds, so a restart gap does not change the way taken."""
    probes = planner.probe(access, timeout, gap, on_wait)
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
