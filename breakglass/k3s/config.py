"""The k3s/RKE2 configuration model: which kube-apiserver flags a set of config files gives, where
breakglass' drop-in goes, and which of the user's lines must change.

What k3s does (pkg/configfilearg/parser.go, pkg/util/args.go; RKE2 embeds the same code):

- It reads ``config.yaml`` (``/etc/rancher/k3s/`` or ``/etc/rancher/rke2/``), then every ``*.yaml``/``*.yml``
  in ``config.yaml.d/`` in file-name order. Per top-level key, ``key+:`` appends to the value so far (lists
  concatenate; a scalar is a one-item list) and a plain ``key:`` replaces it. So breakglass' drop-in says
  ``kube-apiserver-arg+:`` (a plain key would drop the user's whole list) and is named to sort last (a later
  drop-in with a plain key would drop ours); the merge is simulated to check that our flag survives.
- Each ``kube-apiserver-arg`` item ``name=value`` becomes a flag (``GetArgs``): it replaces the
  distribution's own default for ``name`` (k3s enables ``NodeRestriction`` itself); a repeated name gives the
  flag several times (kube-apiserver's list flags accumulate); ``name+=value`` comes after the default,
  ``name-=value`` before it. Flags come out sorted by name.
- kube-apiserver refuses to start when a plugin is both enabled and disabled, so an item that enables a
  plugin being disabled is edited in its own file (only that scalar's text), or the plan is refused naming
  the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from breakglass.access.layouts import DISTROS, Distro
from breakglass.core.errors import BadInput, PreconditionFailed
from breakglass.text import admission_flags as flags
from breakglass.text import textedit

KEY = "kube-apiserver-arg"


RKE2_MANIFEST = "/var/lib/rancher/rke2/agent/pod-manifests/kube-apiserver.yaml"
DROPIN_NAMES = ("99-breakglass.yaml", "zz-breakglass.yaml", "~breakglass.yaml")


def distro(name: str) -> Distro:
    try:
        return DISTROS[name]
    except KeyError:
        raise BadInput(f"unknown distribution {name!r} (k3s or rke2)") from None


def dropin_dir(config: str) -> str:
    return config + ".d"


def is_dropin(name: str) -> bool:
    """Whether k3s reads this directory entry (its suffix test ignores case)."""
    return name.lower().endswith((".yaml", ".yml"))


@dataclass
class ConfigFile:
    path: str
    text: str | None  # None: no such file
    link: bool = False  # a symbolic link (k3s reads through it; breakglass never writes through it)


@dataclass
class Item:
    """One kube-apiserver-arg value and where it is written."""

    value: str
    path: str | None  # None: the distribution's own
    node: yaml.Node | None = None
    flow: bool = False  # inside a flow list [..]

    @property
    def line(self) -> int | None:
        return self.node.start_mark.line + 1 if self.node is not None else None

    @property
    def where(self) -> str:
        if self.path is None:
            return "the distribution's default"
        return f"{self.path}:{self.line}" if self.line else self.path

    @property
    def on_command_line(self) -> bool:
        """Given in the service's ExecStart (k3s.unit), not in a config file: breakglass never edits it."""
        return self.path is not None and self.node is None


def _compose(f: ConfigFile):
    try:
        return yaml.compose(f.text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise BadInput(f"{f.path}:{where}: invalid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}") \
            from None


def entries(f: ConfigFile) -> list[tuple[bool, list[Item]]]:
    """The file's kube-apiserver-arg entries in order: (appends, items)."""
    if f.text is None:
        return []
    root = _compose(f)
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        return []
    if not isinstance(root, yaml.MappingNode):
        raise BadInput(f"{f.path}: a k3s config file is a mapping of option names, not a "
                       f"{'list' if isinstance(root, yaml.SequenceNode) else 'scalar'}")
    out = []
    for k, v in root.value:
        name = k.value if isinstance(k, yaml.ScalarNode) else None
        if name not in (KEY, KEY + "+"):
            continue
        out.append((name.endswith("+"), _items(f.path, v)))
    return out


def _items(path: str, v) -> list[Item]:
    if isinstance(v, yaml.ScalarNode):
        if v.tag.endswith(":null") and not v.style:
            return []
        return [Item(v.value, path, v)]
    if isinstance(v, yaml.SequenceNode):
        out = []
        for it in v.value:
            if not isinstance(it, yaml.ScalarNode):
                raise BadInput(f"{path}:{it.start_mark.line + 1}: a {KEY} item must be a string (name=value)")
            out.append(Item(it.value, path, it, flow=bool(v.flow_style)))
        return out
    raise BadInput(f"{path}:{v.start_mark.line + 1}: {KEY} must be a list of name=value strings")


def merged(files: list[ConfigFile]) -> list[Item]:
    """kube-apiserver-arg after k3s' merge of these files, in order (``+`` appends, a plain key replaces)."""
    value: list[Item] | None = None
    for f in files:
        for appends, items in entries(f):
            value = (value or []) + items if appends else items
    return value or []


def split_arg(arg: str) -> tuple[str, str, str]:
    """(name, op, value) of a GetArgs extra arg: op is '', '+' (after the default) or '-' (before it)."""
    name, _, value = arg.removeprefix("--").partition("=")
    if "=" not in arg:
        value = "true"
    clean = name.rstrip("+-")
    op = name[len(clean):][-1:] if name != clean else ""
    return clean, op, value


def get_args(d: Distro, items: list[Item]) -> list[tuple[str, str, Item]]:
    """kube-apiserver's flags (name, value, where from), as k3s' GetArgs orders them: sorted by name, a repeated
    name's values in order."""
    initial = {k: Item(v, None) for k, v in d.defaults}
    extra = [Item(a, None) for a in d.prepended] + list(items)
    multi: dict[str, list[Item]] = {}
    for it in extra:
        name, op, value = split_arg(it.value)
        vit = Item(value, it.path, it.node, it.flow)
        init = initial.pop(name, None)
        have = multi.get(name, [])
        if op == "+":
            new = ([init] if init else []) + have + [vit]
        elif op == "-":
            new = [vit] + ([init] if init else []) + have
        else:
            new = have + [vit]
        multi[name] = new
    for name, it in initial.items():
        multi[name] = [it]
    return [(name, it.value, it) for name in sorted(multi) for it in multi[name]]


def plugin_values(args: list[tuple[str, str, Item]], flag: str) -> list[str]:
    return flags.split([v for n, v, _ in args if n == flag])


def apiserver_argv(d: Distro, files: list[ConfigFile], command_line: list[str] = ()) -> list[str]:
    """The ``--name=value`` flags these config files and the service's own ``--kube-apiserver-arg`` values give
    kube-apiserver (beside the ones k3s computes)."""
    items = merged(files) + [Item(v, "ExecStart") for v in command_line]
    return [f"--{n}={v}" for n, v, _ in get_args(d, items)]


# -- the change --------------------------------------------------------------------------------------

@dataclass
class FileEdit:
    path: str
    before: str
    after: str


@dataclass
class Change:
    disabled: list[str]  # the plugins the drop-in disables (empty: already disabled)
    dropin: str | None  # its path
    dropin_text: str | None
    edits: list[FileEdit] = field(default_factory=list)
    flag: str = ""  # the --disable-admission-plugins flag that shows the change is in effect


def dropin_text(plugins: list[str], service: str) -> str:
    return ("# Written by breakglass: the admission webhooks stay off until `breakglass revert`.\n"
            f"# By hand: delete this file, then `systemctl restart {service}`.\n"
            f"{KEY}+:\n"
            f"  - {flags.DISABLE}={','.join(plugins)}\n")


def choose_dropin(directory: str, names: list[str]) -> str:
    """A drop-in name that sorts after every drop-in there, so nothing read after it can replace our list."""
    present = [n for n in names if is_dropin(n)]
    for name in DROPIN_NAMES:
        if name in names:
            continue
        if all(n < name for n in present):
            return f"{directory.rstrip('/')}/{name}"
    raise PreconditionFailed(f"{directory}: drop-ins sort after any name breakglass could give its own "
                             f"({max(present)!r}); add {KEY}+: by hand in the last one")


def plan(d: Distro, files: list[ConfigFile], directory: str, names: list[str], plugins: list[str],
         command_line: list[Item] = ()) -> Change:
    """What to change so that ``plugins`` are disabled: a drop-in, and edits of items that enable them.

    ``files``: config.yaml then the drop-ins in k3s' order (``names``: every entry of the drop-in directory).
    ``command_line``: the service's own ``--kube-apiserver-arg`` values (k3s.unit), which k3s appends after the
    config files'."""
    plugins = flags.check_plugins(plugins)
    command_line = list(command_line)
    items = merged(files) + command_line
    args = get_args(d, items)
    disabled = plugin_values(args, flags.DISABLE)
    missing = [p for p in plugins if p not in disabled]
    change = Change(missing, None, None)
    # items that enable a plugin being disabled: the apiserver would refuse to start
    by_file: dict[str, list[tuple[Item, str]]] = {}
    for name, value, it in args:
        if name != flags.ENABLE:
            continue
        names_on = flags.split(value)
        if not any(p in plugins for p in names_on):
            continue
        if it.path is None:
            raise PreconditionFailed(f"{d.name} enables {value} by default; breakglass cannot disable it")
        if it.on_command_line:
            raise PreconditionFailed(
                f"{it.path}: the {d.service} service is started with --{KEY}={flags.ENABLE}={value}, which enables "
                f"{', '.join(p for p in plugins if p in names_on)}; breakglass does not edit systemd units: remove "
                f"it from ExecStart (then systemctl daemon-reload), or take the webhook out with --method etcd or "
                f"kubeapi")
        keep = [p for p in names_on if p not in plugins]
        raw_name = split_arg(it.node.value)
        by_file.setdefault(it.path, []).append((it, f"{flags.ENABLE}{raw_name[1]}={','.join(keep)}"))
    texts = {f.path: f for f in files}
    for path, edits in by_file.items():
        f = texts[path]
        if f.link:
            raise PreconditionFailed(f"{path}:{edits[0][0].line}: enables {', '.join(plugins)}, and {path} is a "
                                     f"symbolic link; breakglass never writes through one: edit that line by hand")
        change.edits.append(FileEdit(path, f.text, edit_items(f.text, edits, path)))
    if missing:
        change.dropin = choose_dropin(directory, names)
        change.dropin_text = dropin_text(missing, d.service)
    # the merge with every change in place: our flag must survive and nothing may overlap
    after = [ConfigFile(f.path, next((e.after for e in change.edits if e.path == f.path), f.text), f.link)
             for f in files]
    if change.dropin:
        after.append(ConfigFile(change.dropin, change.dropin_text))
    args_after = get_args(d, merged(after) + command_line)
    still = [p for p in plugins if p not in plugin_values(args_after, flags.DISABLE)]
    both = sorted(set(plugin_values(args_after, flags.DISABLE)) & set(plugin_values(args_after, flags.ENABLE)))
    if still or both:
        raise PreconditionFailed(f"the merged {d.name} config would still {'enable' if both else 'not disable'} "
                                 f"{', '.join(both or still)}; edit it by hand")
    # what shows the change in effect: our flag, or (only edits) a disable flag already there
    shown = [v for n, v, _ in args_after if n == flags.DISABLE and set(flags.split(v)) & set(plugins)]
    change.flag = f"--{flags.DISABLE}={','.join(missing) if missing else shown[0]}"
    return change


# -- editing items in a file's text -----------------------------------------------------------------

def edit_items(text: str, edits: list[tuple[Item, str]], path: str) -> str:
    """``text`` with each item's scalar rewritten to its new value (quote style kept where it was a choice),
    every other byte unchanged; checked by parsing the result."""
    spans = []
    for it, new in edits:
        node = it.node
        if node.style in ("|", ">"):
            raise PreconditionFailed(f"{path}:{it.line}: enables a plugin being disabled in a block scalar; "
                                     f"breakglass edits only plain or quoted items: edit that line by hand")
        if getattr(node, "anchor", None) or _aliased(text, node):
            raise PreconditionFailed(f"{path}:{it.line}: enables a plugin being disabled through a YAML anchor or "
                                     f"alias; edit that line by hand")
        style = node.style if node.style in ("'", '"') else None
        spans.append((node.start_mark.index, node.end_mark.index, textedit._scalar(new, style, flow=it.flow)))  # noqa: SLF001
    out = text
    for a, b, s in sorted(spans, reverse=True):
        out = out[:a] + s + out[b:]
    _check(text, out, {it.node.start_mark.index: new for it, new in edits}, path)
    return out


def _aliased(text: str, node) -> bool:
    return text[node.start_mark.index:node.start_mark.index + 1] == "*"


def _check(old: str, new: str, changes: dict[int, str], path: str) -> None:
    """The edit changed exactly those items (``changes``: start offset -> new value): everything else in the
    file reads as before."""
    loader = yaml.SafeLoader(old)
    try:
        root = loader.get_single_node()
        for node in _walk(root):
            if isinstance(node, yaml.ScalarNode) and node.start_mark.index in changes:
                node.value, node.tag = changes[node.start_mark.index], "tag:yaml.org,2002:str"
        want = loader.construct_document(root)
        got = yaml.safe_load(new)
    except yaml.YAMLError:
        want, got = 0, 1
    finally:
        loader.dispose()
    if want != got:
        raise PreconditionFailed(f"{path}: breakglass could not edit {KEY} in place (the edit would change more "
                                 f"than those items); edit it by hand")


def _walk(node):
    yield node
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _walk(k)
            yield from _walk(v)
    elif isinstance(node, yaml.SequenceNode):
        for it in node.value:
            yield from _walk(it)
