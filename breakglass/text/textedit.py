"""Edit kube-apiserver's extraArgs in a machine-config file's text, leaving every other byte as it was.

A YAML round trip re-indents what `talosctl gen config` writes (it mixes a 4-space layout with a 2-space
``configuration`` block inside a list, and has lines of trailing spaces), so the file is never re-dumped.
PyYAML's composer gives each node's exact character offsets; from them this module finds the era's extraArgs
mapping (or where it must be created) and inserts, changes or deletes only the lines of the given keys:

- in the file's own layout: a new key takes its siblings' column, a new mapping the file's usual step, a new
  list its usual dash offset (talosctl writes 4 for both; both are counted over the whole file, so a 2-space
  block inside a 4-space file does not decide), a changed value keeps its quotes where they were a choice
  rather than a need, a changed list keeps its unchanged items' lines;
- new lines end as the line before them does (CRLF stays CRLF); a file without a final newline keeps none;
- flow mappings (``extraArgs: {}``, ``{a: b}``) and flow lists are edited inside their brackets;
- a comment line is never dropped and nothing is put between a key and its same-line comment; talosctl's
  commented-out examples (``# extraArgs:``) are comments and stay as they are;
- deleting the last key of a block extraArgs removes the ``extraArgs:`` line too (and an ``apiServer:`` or
  ``cluster:`` left empty by that), unless a comment lives there: Talos treats an empty map as no map.

Every edit is checked by parsing the result: exactly these keys changed and nothing else did, or BadInput.
`unapply` reverses an earlier `apply` by its own lines (a three-way merge against the backed-up original), and
`diff` shows an edit's changed lines with everything but the admission keys' lines masked: the rest of a
machine config holds secrets.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter

import yaml

from breakglass.core import textfile
from breakglass.core.errors import BadInput
from breakglass.text.admission_flags import DISABLE, ENABLE, Value, apply_change

# Where an era keeps kube-apiserver's flags: the v1alpha1 document's cluster.apiServer.extraArgs (Talos up to 1.13),
# or the KubeAPIServerConfig document (1.14 on).
LEGACY = "cluster.apiServer.extraArgs"
DOCUMENT = "KubeAPIServerConfig.extraArgs"

_PATHS = {LEGACY: ("cluster", "apiServer", "extraArgs"), DOCUMENT: ("extraArgs",)}
_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # for reading values back: the same rules, in C when built

ADMISSION_KEYS = (DISABLE, ENABLE)


def apply(text: str, era: str, values: dict[str, Value | None], source: str = "the machine config") -> str:
    """``text`` with these extraArgs keys set (None: deleted), every other byte unchanged."""
    if era not in _PATHS:
        raise ValueError(era)
    ed = _Editor(text, source)
    ed.set(era, values)
    out = ed.result()
    if out != text:
        _verify(text, out, era, values, source)
    return out


def unapply(current: str, original: str, era: str, after: dict[str, Value | None],
            before: dict[str, Value | None], source: str = "the machine config") -> str:
    """Put these keys back to ``before`` in ``current``, which `apply(original, era, after)` once wrote.

    The lines that edit changed are changed back where they are still intact in ``current`` (so everything
    else that happened to the file since stays, and our own lines come back byte for byte); where they are not,
    the keys are set to ``before`` by `apply`. Either way the result is checked like any edit.
    """
    written = apply(original, era, after, source)
    if current == written:
        return original
    merged = _reverse_lines(current, written, original)
    if merged is not None:
        try:
            _verify(current, merged, era, before, source)
            return merged
        except BadInput:
            pass
    return apply(current, era, before, source)


def diff(old: str, new: str, old_label: str, new_label: str, keys=ADMISSION_KEYS) -> str:
    """A unified diff of exactly the changed lines (no context). A changed line that is not one of these keys'
    own lines (or an extraArgs/apiServer/cluster line holding nothing else) is masked, never printed."""
    a, b = _lines(old), _lines(new)
    return masked_diff(a, b, lambda i: _shown(a, i, keys), lambda j: _shown(b, j, keys), old_label, new_label)


def masked_diff(a: list, b: list, shown_a, shown_b, old_label: str, new_label: str) -> str:
    """A unified diff of exactly the changed lines of ``a`` -> ``b`` (no context), each line printed as
    ``shown_a(i)``/``shown_b(j)`` say (masked where it could hold a secret); "" when nothing changed."""
    out = [f"--- {old_label}\n", f"+++ {new_label}\n"]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        out += [f"-{shown_a(i)}\n" for i in range(i1, i2)]
        out += [f"+{shown_b(j)}\n" for j in range(j1, j2)]
    return "".join(out) if len(out) > 2 else ""


# -- reading the text ---------------------------------------------------------------------------------

class _Alias(yaml.Node):
    """Where the text says *name: the composer would hand back the anchored node itself."""

    id = "alias"

    def __init__(self, target, name, start_mark, end_mark):
        super().__init__(target.tag, target, start_mark, end_mark)
        self.name = name


class _Loader(textfile.AliasBudget, yaml.SafeLoader):
    """Nodes with their anchors, and aliases as where they are written; alias expansion beyond the budget is
    refused (core.textfile.AliasBudget), before anything walks or compares what it expands to."""

    bg_what = "a machine config"

    def compose_node(self, parent, index):
        event = self.peek_event()
        node = super().compose_node(parent, index)
        if isinstance(event, yaml.AliasEvent):
            return _Alias(node, event.anchor, event.start_mark, event.end_mark)
        node.anchor = getattr(event, "anchor", None)
        return node


def _compose(text: str, source: str) -> list:
    loader = _Loader(text)
    loader.bg_source = source
    try:
        docs = []
        while loader.check_node():
            docs.append(loader.get_node())
        return docs
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise BadInput(f"{source}:{where}: invalid YAML in the machine config: "
                       f"{getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    finally:
        loader.dispose()


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _is_null(node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL and not node.style


def _scalar_value(node):
    """A str or list of str as a config holds it, or a marker that it is something else."""
    if isinstance(node, yaml.ScalarNode) and node.tag == _STR:
        return node.value
    if isinstance(node, yaml.SequenceNode) and all(isinstance(i, yaml.ScalarNode) and i.tag == _STR
                                                   for i in node.value):
        return [i.value for i in node.value]
    return _OTHER


_OTHER = object()


def _plain_ok(s: str, flow: bool) -> bool:
    if not s or s != s.strip() or any(c in s for c in "\n\r\t"):
        return False
    try:
        ok = yaml.safe_load(f"k: {s}\n") == {"k": s}
        return ok and (not flow or (yaml.safe_load(f"{{k: {s}}}") == {"k": s} and yaml.safe_load(f"[{s}]") == [s]))
    except yaml.YAMLError:
        return False


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def _double(s: str) -> str:
    """A YAML double-quoted scalar; anything not printable as an escape (\\x, \\u or \\U: YAML's, not JSON's
    surrogate pairs)."""
    out = []
    for c in s:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return '"' + "".join(out) + '"'


def _scalar(s: str, style: str | None = None, flow: bool = False) -> str:
    """``s`` as a YAML scalar: in the given quote style, else plain where that reads back as the same string."""
    if style == '"' or not s.isprintable():
        return _double(s)
    if style == "'":
        return "'" + s.replace("'", "''") + "'"
    if _plain_ok(s, flow):
        return s
    return "'" + s.replace("'", "''") + "'"


def _chosen_style(node, flow: bool) -> str | None:
    """A scalar's quotes when they were a choice (the value reads the same without them), else None: quotes a
    value needed are not kept for a value that needs none, so an edit and its reverse give back the same bytes."""
    if isinstance(node, yaml.ScalarNode) and node.style in ("'", '"') and _plain_ok(node.value, flow):
        return node.style
    return None


def _key(name: str) -> str:
    return _scalar(name)


# -- the editor -----------------------------------------------------------------------------------------

class _Editor:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.docs = _compose(text, source)
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the original text
        crlf = text.count("\r\n")
        self.nl = "\r\n" if crlf > text.count("\n") - crlf else "\n"
        self.step, self.dash = self._layout()

    # -- positions ----------------------------------------------------------------------------------
    def line_start(self, i: int) -> int:
        return self.text.rfind("\n", 0, i) + 1

    def after_line(self, i: int) -> int:
        """Where the line holding position i ends (after its line break), or i itself at a line start."""
        if i > 0 and self.text[i - 1] == "\n":
            return i
        j = self.text.find("\n", i)
        return len(self.text) if j < 0 else j + 1

    def end(self, node) -> int:
        """Just past the last character that belongs to the node (never its trailing comments or blank lines)."""
        if isinstance(node, yaml.MappingNode) and not node.flow_style:
            k, v = node.value[-1]
            return self.entry_end(k, v)
        if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
            return self.end(node.value[-1])
        if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            i = node.end_mark.index
            header = self.text[node.start_mark.index:self.after_line(node.start_mark.index)].split("#", 1)[0]
            if re.search(r"[|>][0-9]?\+", header):  # keep chomping: the trailing line breaks are the value's
                return i
            while i > node.start_mark.index and self.text[i - 1] in " \t\r\n":
                i -= 1
            return i
        return node.end_mark.index

    def stop(self, node) -> int:
        """`end`, before any line breaks a kept block scalar ends with: where a replacement may stop."""
        i = self.end(node)
        while i > node.start_mark.index and self.text[i - 1] in "\r\n":
            i -= 1
        return i

    def entry_end(self, k, v) -> int:
        return self.end(v) if v.end_mark.index > v.start_mark.index else self.colon_end(k)

    def colon_end(self, k) -> int:
        i = k.end_mark.index
        while i < len(self.text) and self.text[i] in " \t":
            i += 1
        if self.text[i:i + 1] != ":":
            raise BadInput(f"{self.source}: line {k.start_mark.line + 1}: breakglass cannot edit a complex mapping "
                           f"key ('? key') there; edit the file by hand or use --write-patch")
        return i + 1

    def next_line(self, i: int) -> int:
        """The start of the line after the one holding position i (the end of the text on the last line)."""
        j = self.text.find("\n", i)
        return len(self.text) if j < 0 else j + 1

    def line_nl(self, pos: int) -> str:
        """The line break of the line that ends at ``pos`` (a line start)."""
        if pos > 0 and self.text[pos - 1] == "\n":
            return "\r\n" if self.text[pos - 2:pos] == "\r\n" else "\n"
        return self.nl

    def starts_line(self, node) -> bool:
        i = node.start_mark.index
        return self.text[self.line_start(i):i].strip(" ") == ""

    # -- the file's own layout ------------------------------------------------------------------------
    def _layout(self) -> tuple[int, int]:
        steps, dashes = Counter(), Counter()

        def walk(node, seen):
            if id(node) in seen or isinstance(node, _Alias):
                return
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if not node.flow_style and isinstance(v, yaml.MappingNode) and not v.flow_style and v.value:
                        if v.value[0][0].start_mark.column > k.start_mark.column:
                            steps[v.value[0][0].start_mark.column - k.start_mark.column] += 1
                    if not node.flow_style and isinstance(v, yaml.SequenceNode) and not v.flow_style and v.value:
                        dashes[v.start_mark.column - k.start_mark.column] += 1
                    walk(v, seen)
            elif isinstance(node, yaml.SequenceNode):
                for item in node.value:
                    walk(item, seen)

        seen: set = set()
        for d in self.docs:
            walk(d, seen)
        step = steps.most_common(1)[0][0] if steps else 2
        dash = dashes.most_common(1)[0][0] if dashes else (0 if step == 2 else step)
        return step, dash

    # -- the path to extraArgs --------------------------------------------------------------------------
    def _doc(self, era: str):
        for d in self.docs:
            if not isinstance(d, yaml.MappingNode):
                continue
            keys = {k.value: v for k, v in d.value if isinstance(k, yaml.ScalarNode)}
            if era == DOCUMENT:
                kind = keys.get("kind")
                if isinstance(kind, yaml.ScalarNode) and kind.value == "KubeAPIServerConfig":
                    return d
            else:
                version = keys.get("version")
                if isinstance(version, yaml.ScalarNode) and version.value == "v1alpha1" and "kind" not in keys:
                    return d
        what = "no KubeAPIServerConfig document" if era == DOCUMENT else "no v1alpha1 document"
        raise BadInput(f"{self.source}: the config has {what} to edit")

    def _refuse(self, where: str, why: str):
        raise BadInput(f"{self.source}: {where} {why}; breakglass edits only plain YAML there: edit the file by "
                       f"hand or use --write-patch")

    def _mapping(self, node, where: str):
        if isinstance(node, _Alias):
            self._refuse(where, f"is an alias (*{node.name})")
        if not isinstance(node, yaml.MappingNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a scalar"
            raise BadInput(f"{self.source}: line {node.start_mark.line + 1}: {where} is {kind}, not a mapping")
        if getattr(node, "anchor", None):
            self._refuse(where, f"carries an anchor (&{node.anchor})")
        for k, _ in node.value:
            if isinstance(k, yaml.ScalarNode) and k.tag == _MERGE:
                self._refuse(where, "has a merge key (<<)")
            if not isinstance(k, yaml.ScalarNode):
                self._refuse(where, "has a key that is not a plain string")
        return node

    def _entry(self, mapping, name: str, where: str):
        """The (key, value) of ``name`` in ``mapping`` (``where`` names it for people), or None."""
        found = [(k, v) for k, v in mapping.value if k.value == name]
        if len(found) > 1:
            raise BadInput(f"{self.source}: {where} appears {len(found)} times (lines "
                           f"{', '.join(str(k.start_mark.line + 1) for k, _ in found)})")
        return found[0] if found else None

    def set(self, era: str, values: dict[str, Value | None]) -> None:
        path = _PATHS[era]
        adds = {k: v for k, v in values.items() if v is not None}
        node = self._doc(era)
        where = "the v1alpha1 document" if era == LEGACY else "the KubeAPIServerConfig document"
        parents = []  # (mapping, key, value) from the document down to extraArgs
        for depth, name in enumerate(path):
            self._mapping(node, where)
            where = ".".join(path[:depth + 1]) if era == LEGACY else f"KubeAPIServerConfig.{name}"
            entry = self._entry(node, name, where)
            if entry is None:
                if adds:
                    self._create(node, list(path[depth:]), adds)
                return
            k, v = entry
            if isinstance(v, _Alias):
                self._refuse(where, f"is an alias (*{v.name})")
            if getattr(v, "anchor", None):
                self._refuse(where, f"carries an anchor (&{v.anchor})")
            if _is_null(v):
                if adds:
                    self._fill(node, k, v, list(path[depth + 1:]), adds)
                return
            parents.append((node, k, v))
            node = v
        self._mapping(node, where)
        self._edit_args(node, values, parents, where)

    # -- creating what is missing -----------------------------------------------------------------------
    def _block(self, rest: list[str], adds: dict, col: int) -> list[str]:
        """The lines of the missing path ``rest`` at column ``col``, in the file's step, and the keys below."""
        lines = [" " * (col + i * self.step) + _key(name) + ":" for i, name in enumerate(rest)]
        kcol = col + len(rest) * self.step
        for k, v in adds.items():
            lines += self._entry_lines(k, v, kcol, self.dash)
        return lines

    @staticmethod
    def _entry_lines(k: str, v: Value, col: int, dash: int) -> list[str]:
        if isinstance(v, list):
            if not v:
                return [f"{' ' * col}{_key(k)}: []"]
            return [f"{' ' * col}{_key(k)}:"] + [f"{' ' * (col + dash)}- {_scalar(x)}" for x in v]
        return [f"{' ' * col}{_key(k)}: {_scalar(v)}"]

    @staticmethod
    def _flow_value(v: Value, style=None) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(_scalar(x, style, flow=True) for x in v) + "]"
        return _scalar(v, style, flow=True)

    def _flow_entries(self, rest: list[str], adds: dict) -> str:
        if rest:
            return f"{_key(rest[0])}: {{{self._flow_entries(rest[1:], adds)}}}"
        return ", ".join(f"{_key(k)}: {self._flow_value(v)}" for k, v in adds.items())

    def insert_lines(self, pos: int, lines: list[str]) -> None:
        if pos == len(self.text) and not self.text.endswith("\n"):
            self.edits.append((pos, pos, "".join(self.nl + line for line in lines)))
        else:
            nl = self.line_nl(pos)
            self.edits.append((pos, pos, "".join(line + nl for line in lines)))

    def _create(self, mapping, rest: list[str], adds: dict) -> None:
        """Create rest[0] (and below it the rest of the path, then the keys) as the last entry of ``mapping``."""
        if mapping.flow_style:
            self._flow_insert(mapping, [self._flow_entries(rest, adds)], kept=bool(mapping.value))
            return
        first = mapping.value[0][0] if mapping.value else None
        if first is None or not self.starts_line(first):
            self._refuse(rest[0], "would go into a mapping that does not start its own line")
        k, v = mapping.value[-1]
        self.insert_lines(self.after_line(self.entry_end(k, v)), self._block(rest, adds, first.start_mark.column))

    def _fill(self, parent, k, v, rest: list[str], adds: dict) -> None:
        """``k:`` holds null (nothing, ``null`` or ``~``): give it the rest of the path and the keys."""
        if parent.flow_style:
            body = "{" + self._flow_entries(rest, adds) + "}"
            if v.end_mark.index > v.start_mark.index:
                self.edits.append((v.start_mark.index, v.end_mark.index, body))
            else:
                self.edits.append((v.start_mark.index, v.start_mark.index, " " + body))
            return
        if not self.starts_line(k):
            self._refuse(k.value, "does not start its own line")
        colon = self.colon_end(k)
        if v.end_mark.index > v.start_mark.index:  # `null` or `~`: take the word out, keep a comment after it
            self.edits.append((colon, v.end_mark.index, ""))
        self.insert_lines(self.after_line(max(colon, v.end_mark.index)),
                          self._block(rest, adds, k.start_mark.column + self.step))

    def _flow_insert(self, mapping, entries: list[str], kept: bool) -> None:
        if kept:
            k, v = mapping.value[-1]
            self.edits.append((self.end(v), self.end(v), "".join(", " + e for e in entries)))
        else:
            close = mapping.end_mark.index - 1
            if self.text[close] != "}":
                self._refuse("a flow mapping", "does not end in '}'")
            self.edits.append((close, close, ", ".join(entries)))

    # -- the extraArgs mapping itself -------------------------------------------------------------------
    def _edit_args(self, mapping, values: dict, parents: list, where: str) -> None:
        present = {}
        for k, v in mapping.value:
            if k.value in present:
                raise BadInput(f"{self.source}: {where}.{k.value} appears twice (line {k.start_mark.line + 1})")
            present[k.value] = (k, v)
        for name in values:
            if name in present:
                k, v = present[name]
                if isinstance(v, _Alias):
                    self._refuse(f"{where}.{name}", f"is an alias (*{v.name})")
                if getattr(v, "anchor", None) or getattr(k, "anchor", None):
                    self._refuse(f"{where}.{name}", "carries an anchor")
        deleted = [n for n in present if n in values and values[n] is None]
        changed = [n for n in present if values.get(n) is not None and _scalar_value(present[n][1]) != values[n]]
        new = {n: v for n, v in values.items() if v is not None and n not in present}
        kept = [n for n in present if n not in deleted]
        if mapping.flow_style:
            self._edit_flow(mapping, present, deleted, changed, new, values)
            return
        if not kept and not new:
            self._remove_emptied(parents)
            return
        for name in changed:
            self._replace(*present[name], values[name], flow=False)
        for name in deleted:
            self._delete_entry(*present[name])
        if new:
            col = mapping.value[0][0].start_mark.column
            dash = next((v.start_mark.column - k.start_mark.column for k, v in mapping.value
                         if isinstance(v, yaml.SequenceNode) and not v.flow_style and v.value), None)
            k, v = mapping.value[-1]
            lines = []
            for n, val in new.items():
                lines += self._entry_lines(n, val, col, self.dash if dash is None else dash)
            self.insert_lines(self.after_line(self.entry_end(k, v)), lines)

    def _edit_flow(self, mapping, present, deleted, changed, new, values) -> None:
        for name in changed:
            self._replace(*present[name], values[name], flow=True)
        entries = list(present)
        first_kept = next((i for i, n in enumerate(entries) if n not in deleted), None)
        for i, n in enumerate(entries):
            if n not in deleted:
                continue
            k, v = present[n]
            if first_kept is None:  # all go: from the first key to the last value
                if i == 0:
                    self.edits.append((k.start_mark.index, self.end(present[entries[-1]][1]), ""))
            elif i < first_kept:  # a leading run goes up to the first kept key
                if i == 0:
                    self.edits.append((k.start_mark.index, present[entries[first_kept]][0].start_mark.index, ""))
            else:
                self.edits.append((self.end(present[entries[i - 1]][1]), self.end(v), ""))
        if new:
            items = [f"{_key(n)}: {self._flow_value(v)}" for n, v in new.items()]
            self._flow_insert(mapping, items, kept=first_kept is not None)

    def _scalar_spans(self, node, out: list) -> list:
        if isinstance(node, (yaml.ScalarNode, _Alias)):
            out.append((node.start_mark.index, node.end_mark.index))
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                self._scalar_spans(k, out)
                self._scalar_spans(v, out)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self._scalar_spans(item, out)
        return out

    def _comment_lines(self, a: int, b: int, spans) -> list[int]:
        """Starts of the comment-only lines in [a, b) (a '#' first on its line, not inside a scalar)."""
        out = []
        pos = a
        while pos < b:
            nxt = self.next_line(pos)
            line = self.text[pos:nxt]
            hash_at = pos + len(line) - len(line.lstrip(" \t"))
            if line.lstrip(" \t").startswith("#") and not any(s <= hash_at < e for s, e in spans):
                out.append(pos)
            pos = nxt
        return out

    def _has_comment(self, line_at: int, spans) -> bool:
        """Whether the line holding line_at carries a comment outside the scalars on it."""
        a, b = self.line_start(line_at), self.after_line(line_at)
        for m in re.finditer(r"(?:^|(?<=[ \t]))#", self.text[a:b]):
            if not any(s <= a + m.start() < e for s, e in spans):
                return True
        return False

    def _delete_lines(self, a: int, b: int, keep: list[int] = ()) -> None:
        """Delete the lines in [a, b) (a and b at line starts, or b at the end of the text) except the lines
        starting at the positions in ``keep``."""
        runs, start = [], a
        for c in sorted(keep):
            if start < c:
                runs.append((start, c))
            start = self.next_line(c)
        if start < b:
            runs.append((start, b))
        for s, e in runs:
            if e == len(self.text) and not self.text.endswith("\n") and s > 0:
                # the file ends without a line break: so must it after its last line goes
                s -= 2 if self.text[s - 2:s] == "\r\n" else 1
            self.edits.append((s, e, ""))

    def _delete_entry(self, k, v) -> None:
        if not self.starts_line(k):
            self._refuse(k.value, "does not start its own line")
        a, b = self.line_start(k.start_mark.index), self.after_line(self.entry_end(k, v))
        spans = self._scalar_spans(v, [(k.start_mark.index, k.end_mark.index)])
        self._delete_lines(a, b, keep=self._comment_lines(a, b, spans))

    def _remove_emptied(self, parents: list) -> None:
        """Every key of a block extraArgs goes: the mapping goes too, and any parent it leaves empty, unless a
        comment lives there (then the mapping stays, as {})."""
        _, k, v = parents[-1]
        spans = self._scalar_spans(v, [])
        a = self.line_start(k.start_mark.index)
        b = self.after_line(self.entry_end(k, v))
        top = len(parents) - 1
        if not self.starts_line(k) or self._comment_lines(a, b, spans) or self._has_comment(k.start_mark.index, spans):
            for kk, vv in v.value:
                self._delete_entry(kk, vv)
            self.edits.append((self.colon_end(k), self.colon_end(k), " {}"))
            return
        # climb while the parent holds nothing else and carries no comment of its own
        while top > 0:
            pm, pk, pv = parents[top - 1]
            if len(pv.value) != 1 or not self.starts_line(pk) or pm.flow_style:
                break
            pa, pb = self.line_start(pk.start_mark.index), self.after_line(self.entry_end(pk, pv))
            pspans = self._scalar_spans(pv, [])
            if self._comment_lines(pa, pb, pspans) or self._has_comment(pk.start_mark.index, pspans):
                break
            top -= 1
            a, b = pa, pb
        self._delete_lines(a, b)

    def _replace(self, k, v, new: Value, flow: bool) -> None:
        """Give the entry k: v the value ``new``, keeping the old value's quote style and layout."""
        if isinstance(v, yaml.MappingNode):
            raise BadInput(f"{self.source}: line {v.start_mark.line + 1}: {k.value} holds a mapping, not a flag value")
        in_flow = flow or (isinstance(v, yaml.SequenceNode) and v.flow_style and isinstance(new, list))
        style = _chosen_style(v, in_flow)
        empty = v.end_mark.index == v.start_mark.index
        if in_flow:
            item_style = next((s for s in map(lambda i: _chosen_style(i, True), v.value) if s), None) \
                if isinstance(v, yaml.SequenceNode) else style
            body = self._flow_value(new, item_style)
            if empty:
                self.edits.append((v.start_mark.index, v.start_mark.index, " " + body))
            else:
                self.edits.append((v.start_mark.index, self.stop(v), body))
            return
        if isinstance(new, str):
            if isinstance(v, yaml.SequenceNode) and not v.flow_style and v.value:  # list -> string
                a, b = self.line_start(v.start_mark.index), self.after_line(self.end(v))
                self._delete_lines(a, b, keep=self._comment_lines(a, b, self._scalar_spans(v, [])))
                self.edits.append((self.colon_end(k), self.colon_end(k), " " + _scalar(new)))
            elif empty:
                self.edits.append((v.start_mark.index, v.start_mark.index, " " + _scalar(new)))
            else:
                self.edits.append((v.start_mark.index, self.stop(v), _scalar(new, style)))
            return
        # a list, in block style
        if isinstance(v, yaml.SequenceNode) and v.value and new and all(
                isinstance(i, yaml.ScalarNode) and i.style not in ("|", ">") and self.starts_line_item(i)
                for i in v.value):
            self._edit_items(v, new)
            return
        colon = self.colon_end(k)
        if isinstance(v, yaml.SequenceNode) and v.value:  # items we cannot edit one by one: all of them anew
            a, b = self.line_start(v.start_mark.index), self.after_line(self.end(v))
            self._delete_lines(a, b, keep=self._comment_lines(a, b, self._scalar_spans(v, [])))
            at = b
        else:
            if not empty:
                self.edits.append((colon, self.stop(v), ""))
            at = self.after_line(max(colon, self.stop(v)))
        if not new:
            self.edits.append((colon, colon, " []"))
            return
        pad = " " * (k.start_mark.column + self.dash)
        self.insert_lines(at, [f"{pad}- {_scalar(x)}" for x in new])

    def starts_line_item(self, item) -> bool:
        i = item.start_mark.index
        return re.fullmatch(r"[ \t]*-[ \t]+", self.text[self.line_start(i):i]) is not None

    def _edit_items(self, seq, new: list[str]) -> None:
        """A block list's items changed one by one: unchanged items keep their lines."""
        items = seq.value
        old = [i.value if i.tag == _STR else _OTHER for i in items]
        prefix = self.text[self.line_start(items[0].start_mark.index):items[0].start_mark.index]
        style = next((s for s in map(lambda i: _chosen_style(i, False), items) if s), None)
        spans = self._scalar_spans(seq, [])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
            for n in range(paired):
                it = items[i1 + n]
                self.edits.append((it.start_mark.index, it.end_mark.index,
                                   _scalar(new[j1 + n], _chosen_style(it, False))))
            for n in range(i1 + paired, i2):
                it = items[n]
                a, b = self.line_start(it.start_mark.index), self.after_line(self.end(it))
                self._delete_lines(a, b, keep=self._comment_lines(a, b, spans))
            if j1 + paired < j2:
                after = items[i1 + paired - 1] if i1 + paired > 0 else None
                at = self.after_line(self.end(after)) if after is not None else \
                    self.line_start(items[0].start_mark.index)
                self.insert_lines(at, [prefix + _scalar(x, style) for x in new[j1 + paired:j2]])

    # -- the result ----------------------------------------------------------------------------------
    def result(self) -> str:
        # stable: insertions at one place keep the order they were made in
        edits = sorted(self.edits, key=lambda e: (e[0], e[1]))
        for (_, b1, _), (a2, _, _) in zip(edits, edits[1:]):
            if a2 < b1:
                raise BadInput(f"{self.source}: breakglass could not place its change (overlapping edits at "
                               f"line {self.text.count(chr(10), 0, a2) + 1}); edit the file by hand or use "
                               f"--write-patch")
        out = self.text
        for a, b, s in reversed(edits):
            out = out[:a] + s + out[b:]
        return out


# -- checking an edit --------------------------------------------------------------------------------

def _locate(docs: list, era: str):
    """The era's extraArgs (None when absent) and the documents without it (empty parents dropped)."""
    import copy  # noqa: PLC0415

    docs = copy.deepcopy(docs)
    for d in docs:
        if not isinstance(d, dict):
            continue
        if era == DOCUMENT and d.get("kind") == "KubeAPIServerConfig":
            return d.pop("extraArgs", None), docs
        if era == LEGACY and d.get("version") == "v1alpha1" and "kind" not in d:
            cluster = d.get("cluster")
            if not isinstance(cluster, dict):
                if cluster is None:
                    d.pop("cluster", None)
                return None, docs
            api = cluster.get("apiServer")
            args = api.pop("extraArgs", None) if isinstance(api, dict) else None
            if api in ({}, None):
                cluster.pop("apiServer", None)
            if cluster == {}:
                d.pop("cluster")
            return args, docs
    return None, docs


def _verify(old: str, new: str, era: str, values: dict, source: str) -> None:
    """The edit changed exactly these keys: the rest of every document reads as it did."""
    try:
        before_args, before_rest = _locate([d for d in yaml.load_all(old, Loader=_FAST) if d is not None], era)
        after_args, after_rest = _locate([d for d in yaml.load_all(new, Loader=_FAST) if d is not None], era)
        ok = after_rest == before_rest and \
            (after_args or {}) == apply_change(before_args if isinstance(before_args, dict) else {}, values)
    except yaml.YAMLError:
        ok = False
    if not ok:
        raise BadInput(f"{source}: breakglass could not edit extraArgs in place here (the edit would change more "
                       f"than those keys); edit the file by hand or use --write-patch")


# -- reversing an edit by its own lines --------------------------------------------------------------

def _reverse_lines(current: str, written: str, original: str) -> str | None:
    """Undo written -> original on ``current``: each changed run of lines, where its lines and the lines
    around it are still as written (a three-way merge). None when any of them moved apart or changed."""
    w, o, c = _lines(written), _lines(original), _lines(current)
    where = {}  # line of written -> the same line in current
    for block in difflib.SequenceMatcher(None, w, c, autojunk=False).get_matching_blocks():
        for n in range(block.size):
            where[block.a + n] = block.b + n
    out, at = [], 0
    for tag, w1, w2, o1, o2 in difflib.SequenceMatcher(None, w, o, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if w1 > 0 and w1 - 1 not in where:
            return None
        start = where[w1 - 1] + 1 if w1 > 0 else 0
        if w2 < len(w) and w2 not in where:
            return None
        stop = where[w2] if w2 < len(w) else len(c)
        if stop - start != w2 - w1 or any(where.get(x) != start + (x - w1) for x in range(w1, w2)):
            return None
        if start < at:
            return None
        out += c[at:start] + o[o1:o2]
        at = stop
    out += c[at:]
    return "".join(out)


# -- showing an edit -------------------------------------------------------------------------------------

_KEY = re.compile(r"""[ \t]*(?:-[ \t]+)?("[^"]*"|'[^']*'|[^\s#'"][^:#]*?)[ \t]*:(?:[ \t]|$)""")
_CONTAINERS = ("extraArgs", "apiServer", "cluster")


def _range(a: int, b: int) -> str:
    if b - a == 1:
        return str(a + 1)
    return f"{a + 1 if b > a else a},{b - a}"


def _flow_safe(value, keys) -> bool:
    if not isinstance(value, dict):
        return False
    return all(k in keys or (k in _CONTAINERS and (v in (None, {}) or _flow_safe(v, keys))) for k, v in value.items())


def _shown(lines: list[str], i: int, keys) -> str:
    line = lines[i].rstrip("\r\n")
    if _safe(lines, i, keys):
        return line
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    m = _KEY.match(line)
    if m and m.group(1) == "extraArgs":  # a flow mapping with other keys too: the admission keys only
        try:
            inner = yaml.safe_load(line.strip()).get("extraArgs")
        except (yaml.YAMLError, AttributeError):
            inner = None
        if isinstance(inner, dict):
            shown = [f"{_key(k)}: {json.dumps(v)}" for k, v in inner.items() if k in keys]
            hidden = len(inner) - len(shown)
            return f"{indent}extraArgs: {{{', '.join(shown + [f'<{hidden} other key(s) not shown>'])}}}"
    return f"{indent}<not shown: not an admission key>"


def _safe(lines: list[str], i: int, keys) -> bool:
    line = lines[i].rstrip("\r\n")
    body = line.strip()
    if not body:
        return True
    if body.startswith("#"):
        return False
    m = _KEY.match(line)
    if m:
        key = m.group(1).strip("'\"")
        if key in keys:
            return True
        if key in _CONTAINERS:
            rest = line[m.end():].split(" #", 1)[0].strip()
            if rest in ("", "{}", "null", "~"):
                return True
            try:
                return _flow_safe(yaml.safe_load(body.lstrip("- ")).get(key), keys)
            except (yaml.YAMLError, AttributeError):
                return False
        return False
    # a list item or a continuation: whose is it? the nearest line above indented less
    depth = len(line) - len(line.lstrip(" \t"))
    for j in range(i - 1, -1, -1):
        above = lines[j].rstrip("\r\n")
        if not above.strip() or above.strip().startswith("#"):
            continue
        if len(above) - len(above.lstrip(" \t")) < depth:
            m = _KEY.match(above)
            return bool(m) and m.group(1).strip("'\"") in keys and not above[m.end():].split(" #", 1)[0].strip()
    return False
