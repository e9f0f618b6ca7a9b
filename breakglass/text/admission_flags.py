"""The pure merge rules for kube-apiserver's --enable/--disable-admission-plugins.

Shared by the Talos (extraArgs) and kubeadm (static pod command line) remedies. The rules
(shared reference §5 and §4.6):

- Existing ``disable-admission-plugins`` values are kept; the plugins to disable are added.
- A plugin named in both lists stops the apiserver at start (``… overlapped``), so any
  plugin being disabled is taken out of ``enable-admission-plugins`` too, and that is
  recorded so revert can put it back.
- Values may be a comma-separated string or (Talos 1.13+) a list of strings; a list stays a
  list, anything else is written as one comma-joined string, which every version accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from breakglass.core.errors import BadInput

DISABLE = "disable-admission-plugins"
ENABLE = "enable-admission-plugins"
WEBHOOK_PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
KNOWN_PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
                 "MutatingAdmissionPolicy")

Value = Union[str, list]  # a flag value as a config holds it
ABSENT = None


def split(value: Value | None) -> list[str]:
    """Plugin names in a value: "A,B", ["A,B", "C"] or ["A"] (repeated flags)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise BadInput(f"admission plugin values must be strings, found {item!r}")
        out += [p.strip() for p in item.split(",") if p.strip()]
    return out


def _join(names: list[str], like: Value | None) -> Value:
    if isinstance(like, list):
        return list(names)
    return ",".join(names)


def check_plugins(plugins: list[str]) -> list[str]:
    out = []
    for p in plugins:
        for name in p.split(","):
            name = name.strip()
            if not name:
                continue
            if name not in KNOWN_PLUGINS:
                raise BadInput(f"{name!r} is not a plugin breakglass disables (use {', '.join(KNOWN_PLUGINS)})")
            if name not in out:
                out.append(name)
    if not out:
        raise BadInput("no admission plugins to disable")
    return out


@dataclass
class FlagChange:
    """What happens to the two flags. before/after ABSENT (None) means the key is not set."""

    before: dict[str, Value | None] = field(default_factory=dict)
    after: dict[str, Value | None] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def keys(self) -> list[str]:
        return [k for k in (DISABLE, ENABLE) if self.before.get(k) != self.after.get(k)]


def disable(args: dict[str, Value], plugins: list[str]) -> FlagChange:
    """The change that disables ``plugins`` given the current flag values ``args``."""
    plugins = check_plugins(plugins)
    cur_disable, cur_enable = args.get(DISABLE), args.get(ENABLE)
    disabled = split(cur_disable)
    new_disable = disabled + [p for p in plugins if p not in disabled]
    enabled = split(cur_enable)
    new_enable = [p for p in enabled if p not in plugins]
    ch = FlagChange(before={DISABLE: cur_disable, ENABLE: cur_enable})
    ch.after[DISABLE] = _join(new_disable, cur_disable) if new_disable != disabled else cur_disable
    if new_enable == enabled:
        ch.after[ENABLE] = cur_enable
    else:
        ch.after[ENABLE] = _join(new_enable, cur_enable) if new_enable else ABSENT
    return ch


def apply_change(args: dict[str, Value], values: dict[str, Value | None]) -> dict[str, Value]:
    out = dict(args)
    for k, v in values.items():
        if v is ABSENT:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def overlap(args: dict[str, Value]) -> list[str]:
    """Plugins in both lists: the apiserver refuses to start with them."""
    return sorted(set(split(args.get(ENABLE))) & set(split(args.get(DISABLE))))


# -- the flags as kube-apiserver reads its command line ---------------------------------------------------------
# kube-apiserver parses its arguments with pflag under component-base's WordSepNormalizeFunc: a flag's name has
# every "_" read as "-" (--enable_admission_plugins is --enable-admission-plugins); a value follows "=" or is the
# next argument (--flag value); both admission flags are string slices, so a repeated flag adds to the list.


def flag_name(arg: str) -> str | None:
    """The normalised long name of ``--name`` or ``--name=value``, else None."""
    if not isinstance(arg, str) or not arg.startswith("--") or len(arg) == 2:
        return None
    return arg[2:].split("=", 1)[0].replace("_", "-")


@dataclass
class Occurrence:
    """One admission flag on a command line: the flag's argument index, its value's (the same for --flag=value)."""

    key: str  # DISABLE or ENABLE
    at: int
    value_at: int
    value: str
    spelled: str  # the name as written (an underscore spelling is kept when the value is rewritten)


def occurrences(args: list, source: str) -> list[Occurrence]:
    """Every --enable/--disable-admission-plugins in ``args`` (the arguments after the program's name), in any
    form kube-apiserver accepts."""
    out: list[Occurrence] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":  # pflag stops reading flags here
            break
        key = flag_name(arg) if isinstance(arg, str) else None
        if key in (DISABLE, ENABLE):
            spelled, eq, value = arg[2:].partition("=")
            if eq:
                out.append(Occurrence(key, i, i, value, spelled))
            elif i + 1 < len(args):
                if not isinstance(args[i + 1], str):
                    raise BadInput(f"{source}: the value of --{spelled} is not a string ({args[i + 1]!r})")
                out.append(Occurrence(key, i, i + 1, args[i + 1], spelled))
                i += 1
            else:
                raise BadInput(f"{source}: --{spelled} has no value (kube-apiserver does not start: flag needs an "
                               f"argument)")
        i += 1
    return out


def values_of(occs: list[Occurrence]) -> dict[str, str]:
    """The flags' values as kube-apiserver sees them: a repeated flag's values joined, in order."""
    out: dict[str, str] = {}
    for o in occs:
        out[o.key] = ",".join(v for v in (out[o.key], o.value) if v) if o.key in out else o.value
    return out


def undo(now: dict[str, Value | None], before: dict[str, Value | None], plugins: list[str]) -> dict[str, Value | None]:
    """The inverse of ``disable(before, plugins)`` applied to the values ``now``: each plugin breakglass added to the
    disable list is taken out of it, each one it took out of the enable list is put back; nothing else changes.
    Used when the file changed since (or --force), so a run directory can never choose other plugins."""
    plugins = check_plugins(plugins)
    added = [p for p in plugins if p not in split(before.get(DISABLE))]
    removed = [p for p in plugins if p in split(before.get(ENABLE))]
    disabled = [p for p in split(now.get(DISABLE)) if p not in added]
    enabled = split(now.get(ENABLE))
    enabled += [p for p in removed if p not in enabled]
    out: dict[str, Value | None] = {}
    out[DISABLE] = now.get(DISABLE) if disabled == split(now.get(DISABLE)) else (
        _join(disabled, now.get(DISABLE)) if disabled else ABSENT)
    out[ENABLE] = now.get(ENABLE) if enabled == split(now.get(ENABLE)) else _join(enabled, now.get(ENABLE))
    return out


def same_plugins(a: dict[str, Value | None], b: dict[str, Value | None]) -> bool:
    """Whether two sets of flag values enable and disable the same plugins (as kube-apiserver reads them)."""
    return all(split(a.get(k)) == split(b.get(k)) for k in (DISABLE, ENABLE))
