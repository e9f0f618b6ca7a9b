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
- k3s reads each file with gopkg.in/yaml.v2 into a ``yaml.MapSlice``: an item ``!!binary <base64>`` is the
  decoded string; a top-level merge key (``<<: *base``) is dropped by that library (its mappingSlice overwrites
  what the merge put in, go-yaml issues #91 and #438), but a fixed library would honour it. So the flags are
  worked out both ways: an enabling item either way is edited, a plugin counts as disabled only if it is
  disabled both ways, and the result is checked both ways.
- kube-apiserver reads every ``_`` in a flag's name as ``-`` (component-base's WordSepNormalizeFunc), so
  ``enable_admission_plugins=...`` enables plugins too; k3s itself compares names as written (an underscore
  spelling does not replace its own ``enable-admission-plugins`` default, both reach kube-apiserver).
- A config file holds the cluster token, the agent token and the datastore's password: `shown_diff` shows
  only kube-apiserver-arg lines (and of them only the admission items' text), never the rest.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

import yaml

from breakglass.access.layouts import DISTROS, Distro
from breakglass.core import textfile
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

    @property
    def binary(self) -> bool:
        return self.node is not None and self.node.tag == _BINARY


_BINARY = "tag:yaml.org,2002:binary"
_MERGE = "tag:yaml.org,2002:merge"


def _compose(f: ConfigFile):
    loader = textfile.budgeted_loader(f.text, f.path, "a k3s config file")
    try:
        return loader.get_single_node()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise BadInput(f"{f.path}:{where}: invalid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}") \
            from None
    finally:
        loader.dispose()


def _root(f: ConfigFile):
    if f.text is None:
        return None
    root = _compose(f)
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        return None
    if not isinstance(root, yaml.MappingNode):
        raise BadInput(f"{f.path}: a k3s config file is a mapping of option names, not a "
                       f"{'list' if isinstance(root, yaml.SequenceNode) else 'scalar'}")
    return root


def _pairs(f: ConfigFile, root, merges: bool) -> list:
    """The root mapping's (key, value) nodes in order; with ``merges``, a ``<<`` key's mappings in its place
    (YAML's merge rules: a key written in the mapping wins, then the earlier merged mapping)."""
    if not merges:
        return [(k, v) for k, v in root.value if not _is_merge(k)]
    return _flatten(f, root, set())


def _is_merge(k) -> bool:
    return isinstance(k, yaml.ScalarNode) and k.tag == _MERGE


def _flatten(f: ConfigFile, mapping, seen: set) -> list:
    if id(mapping) in seen:
        raise BadInput(f"{f.path}:{mapping.start_mark.line + 1}: a YAML merge key (<<) merges a mapping into itself")
    seen = seen | {id(mapping)}
    own = {k.value for k, _ in mapping.value if isinstance(k, yaml.ScalarNode) and not _is_merge(k)}
    out, taken = [], set(own)
    for k, v in mapping.value:
        if not _is_merge(k):
            out.append((k, v))
            continue
        sources = v.value if isinstance(v, yaml.SequenceNode) else [v]
        for src in sources:
            if not isinstance(src, yaml.MappingNode):
                raise BadInput(f"{f.path}:{k.start_mark.line + 1}: a YAML merge key (<<) needs a mapping or a list of "
                               f"mappings (k3s does not start: map merge requires map or sequence of maps)")
            for mk, mv in _flatten(f, src, seen):
                name = mk.value if isinstance(mk, yaml.ScalarNode) else None
                if name in taken:
                    continue
                taken.add(name)
                out.append((mk, mv))
    return out


def entries(f: ConfigFile, merges: bool = False) -> list[tuple[bool, list[Item]]]:
    """The file's kube-apiserver-arg entries in order: (appends, items). ``merges``: with the top-level merge keys'
    entries too (k3s' YAML library drops them; see the module's notes)."""
    root = _root(f)
    if root is None:
        return []
    out = []
    for k, v in _pairs(f, root, merges):
        name = k.value if isinstance(k, yaml.ScalarNode) else None
        if name not in (KEY, KEY + "+"):
            continue
        out.append((name.endswith("+"), _items(f.path, v)))
    return out


def file_items(f: ConfigFile) -> list[Item]:
    """Every kube-apiserver-arg item written in the file, merged in or not, once each, in the file's order: what
    an edit can change (the journal names an edited item by its place in this list)."""
    found = {}
    for merges in (False, True):
        for _, items in entries(f, merges):
            for it in items:
                found.setdefault(it.node.start_mark.index, it)
    return [found[i] for i in sorted(found)]


def _value(path: str, node) -> str:
    """A scalar item's string as k3s reads it: a ``!!binary`` one is its decoded bytes."""
    if node.tag != _BINARY:
        return node.value
    try:
        data = base64.b64decode("".join(node.value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{path}:{node.start_mark.line + 1}: a !!binary {KEY} item is not base64 (k3s does not start: "
                       f"!!binary value contains invalid base64 data)") from None
    return data.decode("utf-8", "surrogateescape")


def _items(path: str, v) -> list[Item]:
    if isinstance(v, yaml.ScalarNode):
        if v.tag.endswith(":null") and not v.style:
            return []
        return [Item(_value(path, v), path, v)]
    if isinstance(v, yaml.SequenceNode):
        out = []
        for it in v.value:
            if not isinstance(it, yaml.ScalarNode):
                raise BadInput(f"{path}:{it.start_mark.line + 1}: a {KEY} item must be a string (name=value)")
            out.append(Item(_value(path, it), path, it, flow=bool(v.flow_style)))
        return out
    raise BadInput(f"{path}:{v.start_mark.line + 1}: {KEY} must be a list of name=value strings")


def merged(files: list[ConfigFile], merges: bool = False) -> list[Item]:
    """kube-apiserver-arg after k3s' merge of these files, in order (``+`` appends, a plain key replaces);
    ``merges``: counting the YAML merge keys' entries too."""
    value: list[Item] | None = None
    for f in files:
        for appends, items in entries(f, merges):
            value = (value or []) + items if appends else items
    return value or []


def _has_merged_entries(files: list[ConfigFile]) -> bool:
    return any(len(entries(f, True)) != len(entries(f)) for f in files)


def normalised(name: str) -> str:
    """A flag's name as kube-apiserver reads it (``_`` is ``-``)."""
    return name.replace("_", "-")


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
    return flags.split([v for n, v, _ in args if normalised(n) == flag])


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
    config files'. Where a top-level merge key brings kube-apiserver-arg entries, the flags are worked out with
    and without them (module notes), and the change must hold both ways."""
    plugins = flags.check_plugins(plugins)
    command_line = list(command_line)
    ways = (False, True) if _has_merged_entries(files) else (False,)
    args_ways = [get_args(d, merged(files, m) + command_line) for m in ways]
    missing = [p for p in plugins if any(p not in plugin_values(args, flags.DISABLE) for args in args_ways)]
    change = Change(missing, None, None)
    # items that enable a plugin being disabled (either way): the apiserver would refuse to start
    by_file: dict[str, dict[int, tuple[Item, str]]] = {}
    for name, value, it in (a for args in args_ways for a in args):
        if normalised(name) != flags.ENABLE:
            continue
        names_on = flags.split(value)
        if not any(p in plugins for p in names_on):
            continue
        if it.path is None:
            raise PreconditionFailed(f"{d.name} enables {value} by default; breakglass cannot disable it")
        if it.on_command_line:
            raise PreconditionFailed(
                f"{it.path}: the {d.service} service is started with --{KEY}={name}={value}, which enables "
                f"{', '.join(p for p in plugins if p in names_on)}; breakglass does not edit systemd units: remove "
                f"it from ExecStart (then systemctl daemon-reload), or take the webhook out with --method etcd or "
                f"kubeapi")
        if it.binary:
            raise PreconditionFailed(f"{it.where}: enables {', '.join(p for p in plugins if p in names_on)} in a "
                                     f"!!binary item; breakglass edits only plain or quoted items: edit that line by "
                                     f"hand")
        keep = [p for p in names_on if p not in plugins]
        # the name as written (with its +/- and any underscores): k3s matches its own defaults by that spelling
        spelled = it.node.value.partition("=")[0]
        by_file.setdefault(it.path, {})[it.node.start_mark.index] = (it, f"{spelled}={','.join(keep)}")
    texts = {f.path: f for f in files}
    for path, edits in by_file.items():
        f = texts[path]
        todo = [edits[i] for i in sorted(edits)]
        if f.link:
            raise PreconditionFailed(f"{path}:{todo[0][0].line}: enables {', '.join(plugins)}, and {path} is a "
                                     f"symbolic link; breakglass never writes through one: edit that line by hand")
        change.edits.append(FileEdit(path, f.text, edit_items(f.text, todo, path)))
    if missing:
        change.dropin = choose_dropin(directory, names)
        change.dropin_text = dropin_text(missing, d.service)
    # the merge with every change in place, each way: our flag must survive and nothing may overlap
    after = [ConfigFile(f.path, next((e.after for e in change.edits if e.path == f.path), f.text), f.link)
             for f in files]
    if change.dropin:
        after.append(ConfigFile(change.dropin, change.dropin_text))
    for m in ways:
        args_after = get_args(d, merged(after, m) + command_line)
        still = [p for p in plugins if p not in plugin_values(args_after, flags.DISABLE)]
        both = sorted(set(plugin_values(args_after, flags.DISABLE)) & set(plugin_values(args_after, flags.ENABLE)))
        if still or both:
            how = " (counting its YAML merge keys)" if m else ""
            raise PreconditionFailed(f"the merged {d.name} config{how} would still {'enable' if both else 'not disable'}"
                                     f" {', '.join(both or still)}; edit it by hand")
    # what shows the change in effect (as k3s reads the files): our flag, or (only edits) a disable flag already
    # there, spelled as kube-apiserver gets it
    args_after = get_args(d, merged(after) + command_line)
    shown = [(n, v) for n, v, _ in args_after if normalised(n) == flags.DISABLE and set(flags.split(v)) & set(plugins)]
    change.flag = f"--{flags.DISABLE}={','.join(missing)}" if missing else f"--{shown[0][0]}={shown[0][1]}"
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
        if _aliased(text, node):
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
    """An anchored item (``&a value``: its node starts at the anchor), or one an alias stands for (the node handed
    back for ``*a`` is the anchored one)."""
    return text[node.start_mark.index:node.start_mark.index + 1] in ("*", "&")


def _check(old: str, new: str, changes: dict[int, str], path: str) -> None:
    """The edit changed exactly those items (``changes``: start offset -> new value): everything else in the
    file reads as before."""
    loader = textfile.budgeted_loader(old, path, "a k3s config file")
    reader = textfile.budgeted_loader(new, path, "a k3s config file")
    try:
        root = loader.get_single_node()
        for node in _walk(root):
            if isinstance(node, yaml.ScalarNode) and node.start_mark.index in changes:
                node.value, node.tag = changes[node.start_mark.index], "tag:yaml.org,2002:str"
        want = loader.construct_document(root)
        got = reader.get_single_data()
    except yaml.YAMLError:
        want, got = 0, 1
    finally:
        loader.dispose()
        reader.dispose()
    if want != got:
        raise PreconditionFailed(f"{path}: breakglass could not edit {KEY} in place (the edit would change more "
                                 f"than those items); edit it by hand")


def _walk(node, seen=None):
    """Every node once (an alias hands back a node already seen)."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    yield node
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _walk(k, seen)
            yield from _walk(v, seen)
    elif isinstance(node, yaml.SequenceNode):
        for it in node.value:
            yield from _walk(it, seen)


# -- the journal's record of an edit, and redoing it -------------------------------------------------------

def edited_items(before: str, after: str, path: str) -> list[tuple[int, str, str]]:
    """(place in `file_items`, value before, value after) of each item an edit changed."""
    old = file_items(ConfigFile(path, before))
    new = file_items(ConfigFile(path, after))
    if len(old) != len(new):
        raise PreconditionFailed(f"{path}: the edit changed how many {KEY} items there are; edit it by hand")
    return [(i, a.value, b.value) for i, (a, b) in enumerate(zip(old, new)) if a.value != b.value]


def redo_items(text: str, changes: list[tuple[int, str, str]], path: str) -> str:
    """``text`` with the items at those places set from their values before to their values after (what
    `edited_items` recorded), or PreconditionFailed when an item there no longer holds its value before."""
    items = file_items(ConfigFile(path, text))
    todo = []
    for at, before, after in changes:
        if not (0 <= at < len(items)) or items[at].value != before:
            raise PreconditionFailed(f"{path}: the {KEY} item breakglass edits is no longer where it was; nothing "
                                     f"was written")
        todo.append((items[at], after))
    return edit_items(text, todo, path)


# -- showing a change: kube-apiserver-arg lines only --------------------------------------------------------

HIDDEN_LINE = "<not shown: not a kube-apiserver-arg line>"
HIDDEN_ITEM = "<not shown>"


def shown_diff(path: str, old: str | None, new: str | None) -> str:
    """A unified diff of exactly the changed lines (no context), ``None`` for no file. A config file holds the
    cluster token, the agent token and the datastore's password, so a changed line is shown only when it is
    kube-apiserver-arg's own (its key, its items): other lines are masked, and within those lines an item that
    is not an admission flag, and any comment, is masked too."""
    a, b = _shown_lines(old, path), _shown_lines(new, path)
    la = [] if old is None else textedit._lines(old)  # noqa: SLF001
    lb = [] if new is None else textedit._lines(new)  # noqa: SLF001
    return textedit.masked_diff(la, lb, a.__getitem__, b.__getitem__, '/dev/null' if old is None else path,
                                '/dev/null' if new is None else path + ' (new)')


def _shown_lines(text: str | None, path: str) -> list[str]:
    """Each line of ``text`` as a diff may show it."""
    if text is None:
        return []
    lines = textedit._lines(text)  # noqa: SLF001
    try:
        entries_at, scalars = _visible(ConfigFile(path, text))
    except (BadInput, PreconditionFailed):
        entries_at, scalars = [], []  # not YAML k3s reads: nothing of it is shown
    out, pos = [], 0
    for line in lines:
        body = line.rstrip("\r\n")
        out.append(_show(text, pos, pos + len(body), entries_at, scalars))
        pos += len(line)
    return out


def _visible(f: ConfigFile) -> tuple[list[tuple[int, int]], list[tuple[int, int, bool]]]:
    """The character spans of the kube-apiserver-arg entries (from their key to their value's end) and, in
    them, of each scalar: (start, end, shown) where only the key and the admission items are shown."""
    root = _root(f)
    if root is None:
        return [], []
    spans, scalars = [], []
    for merges in (False, True):
        for k, v in _pairs(f, root, merges):
            if not isinstance(k, yaml.ScalarNode) or k.value not in (KEY, KEY + "+"):
                continue
            start, end = k.start_mark.index, _entry_end(f.text, k, v)
            spans.append((start, end))
            scalars.append((k.start_mark.index, k.end_mark.index, True))
            for it in _items(f.path, v) if end > k.end_mark.index else []:
                if start <= it.node.start_mark.index < end:
                    name = normalised(split_arg(it.value)[0])
                    scalars.append((it.node.start_mark.index, it.node.end_mark.index,
                                    name in (flags.DISABLE, flags.ENABLE)))
    return spans, sorted(set(scalars))


def _entry_end(text: str, k, v) -> int:
    """Where the entry ``k: v`` ends in the text; just past its colon when its value is written elsewhere (an
    alias hands back the anchored node) or is empty."""
    colon = text.find(":", k.end_mark.index)
    colon = k.end_mark.index if colon < 0 else colon + 1
    if v.start_mark.index < colon:
        return colon
    if isinstance(v, yaml.SequenceNode) and not v.flow_style and v.value:
        return max(colon, max(it.end_mark.index for it in v.value))
    return max(colon, v.end_mark.index)


def _show(text: str, a: int, b: int, entries_at, scalars) -> str:
    """The line text[a:b] as shown: as it is when blank; masked unless everything on it before a comment is
    inside a kube-apiserver-arg entry; else with the masked scalars and the comment replaced."""
    body = text[a:b]
    if not body.strip():
        return body
    out, i = [], a
    while i < b:
        sc = next(((s, e, ok) for s, e, ok in scalars if s <= i < e), None)
        if sc is not None:
            stop = min(sc[1], b)
            out.append(text[i:stop] if sc[2] else HIDDEN_ITEM)
            i = stop
            continue
        if text[i] == "#" and (i == a or text[i - 1] in " \t"):
            out.append("# " + HIDDEN_ITEM)
            break
        if not text[i].isspace() and not any(s <= i < e for s, e in entries_at):
            return body[:len(body) - len(body.lstrip(" \t"))] + HIDDEN_LINE
        out.append(text[i])
        i += 1
    return "".join(out)
