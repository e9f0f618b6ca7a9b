"""kube-apiserver arguments given on the k3s / RKE2 command line in the systemd unit, not in a config file.

k3s' install script writes every argument it was given into the unit (``INSTALL_K3S_EXEC="server
--kube-apiserver-arg=..."``): ``ExecStart=/usr/local/bin/k3s \\`` then one single-quoted argument per line, each
ending in `` \\`` (install.sh's quote_indent). k3s appends those command-line values after the config files'
(pkg/configfilearg: "the non-config file flags will override, or if a slice append to, the config file values"),
so an ``enable-admission-plugins`` given there is in kube-apiserver's flags whatever the config files say, and
disabling the same plugin in a drop-in would stop kube-apiserver from starting ("plugins overlapped").

This module reads ``systemctl cat UNIT`` (the unit file and its drop-ins, each after a ``# /path`` line) the way
systemd does for ``ExecStart``: ``[Service]`` only, comment lines, lines continued with a backslash, an empty
``ExecStart=`` dropping the ones before, the ``-@:+!`` prefixes, and shell-like quoting.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from breakglass.k3s.config import KEY


@dataclass
class ExecStart:
    path: str  # the unit file (or drop-in) the command line is in
    argv: list[str]
    unparsed: str | None = None  # why the command line could not be split, when it could not


def exec_start(text: str) -> ExecStart | None:
    """The ``ExecStart`` in effect in ``systemctl cat`` output, or None when there is none."""
    path, section, found = "", "", None
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
        if section != "Service" or not eq or key.strip() != "ExecStart":
            continue
        value = value.strip()
        if not value:
            found = None  # `ExecStart=` in a drop-in drops the unit's own
            continue
        found = _command(path, value)
    return found


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
