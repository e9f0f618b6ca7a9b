"""kube-apiserver arguments given on the k3s / RKE2 command line in the systemd unit, not in a config file.

k3s' install script writes every argument it was given into the unit (``INSTALL_K3S_EXEC="server
--kube-apiserver-arg=..."``): ``ExecStart=/usr/local/bin/k3s \\`` then one single-quoted argument per line, each
ending in `` \\`` (install.sh's quote_indent). k3s appends those command-line values after the config files'
(pkg/configfilearg: "the non-config file flags will override, or if a slice append to, the config file values"),
so an ``enable-admission-plugins`` given there is in kube-apiserver's flags whatever the config files say, and
disabling the same plugin in a drop-in would stop kube-apiserver from starting ("plugins overlapped").

This module reads ``systemctl cat UNIT`` (the unit file and its drop-ins, each after a ``# /path`` line) the way
systemd does for ``ExecStart``: ``[Service]`` only, comment lines, lines continued with a backslash, an empty
``ExecStart=`` dropping the ones before, the ``-@:+!`` prefixes, and shell-like quoting. Then, as systemd.service(5)
"Command lines" says, the unit's environment (``Environment=``, then the ``EnvironmentFile=`` files, which
override it, later ones winning) is put in: a word that is ``$NAME`` becomes the value split at whitespace
(quotes respected, then removed: zero or more arguments), ``${NAME}`` anywhere in a word is the value as it is,
``$$`` is ``$``, and ``$NAME`` inside a longer word stays as written. A variable the unit does not set expands to
nothing, and is named in ``ExecStart.undefined`` (systemd's own manager environment may set it).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from breakglass.k3s.config import KEY


@dataclass
class ExecStart:
    path: str  # the unit file (or drop-in) the command line is in
    argv: list[str]
    unparsed: str | None = None  # why the command line could not be split, when it could not
    undefined: list[str] = field(default_factory=list)  # variables it uses that the unit does not set
    variables: list[str] = field(default_factory=list)  # every variable it uses


def _service_settings(text: str):
    """(path, key, value) of each setting in the [Service] sections, in order."""
    path, section = "", ""
    for line in _logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("# /"):
            path = stripped[2:]
            continue
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        key, eq, value = stripped.partition("=")
        if section == "Service" and eq:
            yield path, key.strip(), value.strip()


def environment_files(text: str, unit: str) -> list[tuple[str, bool]]:
    """The ``EnvironmentFile=`` files in effect, in order: (path, whether it may be missing: a ``-`` prefix), the
    specifiers %n %N %p %i %% put in for ``unit`` (``k3s.service``)."""
    out: list[tuple[str, bool]] = []
    for _, key, value in _service_settings(text):
        if key != "EnvironmentFile":
            continue
        if not value:
            out = []  # an empty assignment resets the list
            continue
        optional = value.startswith("-")
        out.append((_specifiers(value.removeprefix("-").strip(), unit), optional))
    return out


def _specifiers(value: str, unit: str) -> str:
    name = unit.rsplit(".", 1)[0]
    prefix, _, instance = name.partition("@")
    table = {"n": unit, "N": name, "p": prefix, "i": instance, "%": "%"}
    return re.sub(r"%(.)", lambda m: table.get(m.group(1), m.group(0)), value)


def environment(text: str, unit: str, files: dict[str, str | None] | None = None) -> dict[str, str]:
    """The unit's environment: ``Environment=`` assignments in order, then the files (``files``: path -> text,
    None for a missing one), which override them."""
    env: dict[str, str] = {}
    for _, key, value in _service_settings(text):
        if key != "Environment":
            continue
        if not value:
            env = {}  # an empty assignment resets the list
            continue
        try:
            words = shlex.split(value, posix=True)
        except ValueError:
            continue  # systemd ignores an assignment it cannot parse
        for w in words:
            name, eq, v = w.partition("=")
            if eq and name:
                env[name] = v
    for path, _ in environment_files(text, unit):
        env.update(parse_environment_file((files or {}).get(path) or ""))
    return env


def parse_environment_file(text: str) -> dict[str, str]:
    """``NAME=VALUE`` lines as systemd reads an EnvironmentFile: blank lines and ``#``/``;`` comments skipped, a
    backslash at the end of a line going on in the next, a value in single or double quotes unquoted, an
    unquoted value with its surrounding whitespace removed."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        name, eq, value = stripped.partition("=")
        name = name.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            inner = value[1:-1]
            value = re.sub(r'\\(["\\`$])', r"\1", inner) if value[0] == '"' else inner
        out[name] = value
    return out


def exec_start(text: str, files: dict[str, str | None] | None = None, unit: str = "") -> ExecStart | None:
    """The ``ExecStart`` in effect in ``systemctl cat`` output, its variables expanded from the unit's
    environment (``files``: the EnvironmentFile texts, path -> text or None), or None when there is none."""
    found = None
    for path, key, value in _service_settings(text):
        if key != "ExecStart":
            continue
        if not value:
            found = None  # `ExecStart=` in a drop-in drops the unit's own
            continue
        found = _command(path, value)
    if found is None or found.unparsed:
        return found
    env = environment(text, unit, files)
    found.argv = _expand(found.argv, env, found.undefined, found.variables)
    return found


def _expand(argv: list[str], env: dict[str, str], undefined: list[str], used: list[str]) -> list[str]:
    out: list[str] = []
    for word in argv:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            used.append(m.group(1))
            if m.group(1) not in env:
                undefined.append(m.group(1))
                continue
            try:
                out += shlex.split(env[m.group(1)], posix=True)
            except ValueError:
                out += env[m.group(1)].split()
            continue
        out.append(_braced(word, env, undefined, used))
    return out


def _braced(word: str, env: dict[str, str], undefined: list[str], used: list[str]) -> str:
    def put(m) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        used.append(name)
        if name not in env:
            undefined.append(name)
        return env.get(name, "")

    return re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}", put, word)


def _logical_lines(text: str):
    """Lines with systemd's continuations joined: a line ending in a backslash goes on in the next one (comment
    lines in between are skipped)."""
    pending = None
    for raw in text.splitlines():
        if pending is not None and raw.lstrip()[:1] in ("#", ";"):
            continue
        if raw.rstrip().endswith("\\"):
            pending = (pending or "") + raw.rstrip()[:-1] + " "
            continue
        yield (pending or "") + raw
        pending = None
    if pending is not None:
        yield pending


def _command(path: str, value: str) -> ExecStart:
    value = value.lstrip("-@:+!")
    try:
        return ExecStart(path, shlex.split(value, comments=False, posix=True))
    except ValueError as e:  # an unbalanced quote: systemd would refuse the unit too
        return ExecStart(path, [], unparsed=str(e))


def apiserver_args(argv: list[str]) -> list[str]:
    """The values of every ``--kube-apiserver-arg`` on the command line, in order (``--name=value``, ``--name
    value``, and urfave/cli's single dash)."""
    out: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        name, eq, value = a.lstrip("-").partition("=")
        if a.startswith("-") and name == KEY:
            if eq:
                out.append(value)
            elif i + 1 < len(argv):
                out.append(argv[i + 1])
                i += 1
        elif a == "--":
            break
        i += 1
    return out
