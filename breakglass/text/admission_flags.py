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
