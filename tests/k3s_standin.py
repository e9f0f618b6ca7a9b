"""A `systemctl` stand-in for a k3s or RKE2 server node, put first on PATH for the test SSH server's sessions.

It stands in for systemd starting `k3s` / `rke2-server`, which cannot run here. On `systemctl restart k3s`
(or `rke2-server`) it reads the node's config files as k3s does (config.yaml, then config.yaml.d/*.yaml in
name order), computes kube-apiserver's flags with breakglass' own merge model (breakglass.k3s.config: `+`
appends, a plain key replaces, GetArgs' defaults and ordering) on top of the sandbox's loopback flags (which
stand for the ones k3s computes from its data directory), and writes them into the static-pod manifest that the
sandbox's kubelet stand-in runs: the real kube-apiserver (build/kube-apiserver/v1.34.4) restarts with them, and
refuses to start when a plugin is both enabled and disabled, as on a real node. That is what RKE2 does on
`rke2-server` start (it writes kube-apiserver's static pod from the same config); k3s runs the apiserver in its
own process instead. It logs k3s' own `Running kube-apiserver ...` line to a journal file, and `journalctl -u`
of this stand-in prints it.

`systemctl cat k3s` prints the unit file named by the optional `unit` setting (after systemd's `# PATH` line),
and `restart` appends that unit's own `--kube-apiserver-arg` values after the config files', as k3s does with its
command line (read with breakglass.k3s.unit).

`k3s kubectl ...` and `kubectl ...` (the node's k3s binary, RKE2's bundled kubectl) run the real `kubectl` with the
sandbox's admin kubeconfig (the `kubeconfig` setting) in place of the node's own, which does not exist here.

Its settings are in standin.json beside the `systemctl` script: distro, config, manifest, base flags, journal,
and optionally unit and kubeconfig.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from breakglass.k3s import config as k3s  # noqa: E402
from breakglass.k3s import unit as k3s_unit  # noqa: E402
from breakglass.core.textfile import write_atomic  # noqa: E402


def install(bindir: str, settings: dict) -> None:
    """Write the `systemctl` and `journalctl` scripts and their settings into ``bindir``."""
    os.makedirs(bindir, exist_ok=True)
    with open(os.path.join(bindir, "standin.json"), "w") as f:
        json.dump(settings, f)
    for tool in ("systemctl", "journalctl", "k3s", "kubectl"):
        path = os.path.join(bindir, tool)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} {tool} \"$@\"\n")
        os.chmod(path, 0o755)


def _settings() -> dict:
    with open(os.path.join(_bindir(), "standin.json")) as f:
        return json.load(f)


def _bindir() -> str:
    for d in os.environ.get("PATH", "").split(":"):
        if os.path.exists(os.path.join(d, "standin.json")):
            return d
    raise SystemExit("stand-in: no standin.json on PATH")


def read_files(config: str) -> list[k3s.ConfigFile]:
    files = []
    if os.path.exists(config):
        files.append(k3s.ConfigFile(config, open(config, encoding="utf-8").read()))
    d = k3s.dropin_dir(config)
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if k3s.is_dropin(name) and not os.path.isdir(p):
                files.append(k3s.ConfigFile(p, open(p, encoding="utf-8").read()))
    return files


def restart(s: dict) -> int:
    import yaml

    d = k3s.distro(s["distro"])
    base = dict(a[2:].split("=", 1) for a in s["base"])
    d = dataclasses.replace(d, defaults=tuple({**base, **dict(d.defaults)}.items()))
    start = k3s_unit.exec_start(_unit_text(s)) if s.get("unit") else None
    try:
        argv = k3s.apiserver_argv(d, read_files(s["config"]), k3s_unit.apiserver_args(start.argv) if start else [])
    except Exception as e:  # noqa: BLE001 - k3s exits on a config it cannot read
        print(f"Job for {s['service']}.service failed: {e}", file=sys.stderr)
        return 1
    with open(s["manifest"], encoding="utf-8") as f:
        pod = yaml.safe_load(f)
    pod["spec"]["containers"][0]["command"] = ["kube-apiserver", *argv]
    write_atomic(s["manifest"], yaml.safe_dump(pod, sort_keys=False).encode())
    with open(s["journal"], "a", encoding="utf-8") as f:
        f.write("Running kube-apiserver " + " ".join(argv) + "\n")
    return 0


def _unit_text(s: dict) -> str:
    return f"# {s['unit']}\n" + open(s["unit"], encoding="utf-8").read()


def _kubectl(s: dict, args: list[str]) -> int:
    """The real kubectl (the first on PATH after this stand-in's directory), with the sandbox's kubeconfig."""
    import shutil

    here = _bindir()
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d != here)
    real = shutil.which("kubectl", path=path)
    if not real or not s.get("kubeconfig"):
        print("stand-in kubectl: no real kubectl or no kubeconfig setting", file=sys.stderr)
        return 1
    out, i = [], 0
    while i < len(args):  # the node's own --kubeconfig becomes the sandbox's
        if args[i] == "--kubeconfig" and i + 1 < len(args):
            i += 2
            continue
        if args[i].startswith("--kubeconfig="):
            i += 1
            continue
        out.append(args[i])
        i += 1
    os.execv(real, [real, "--kubeconfig", s["kubeconfig"], *out])
    return 1


def main(argv: list[str]) -> int:
    tool, args = argv[0], [a for a in argv[1:] if a != "--"]
    s = _settings()
    if tool == "kubectl":
        return _kubectl(s, argv[1:])
    if tool == "k3s":
        if argv[1:2] != ["kubectl"]:
            print("stand-in k3s: only `k3s kubectl` is supported", file=sys.stderr)
            return 1
        return _kubectl(s, argv[2:])
    if tool == "journalctl":
        if os.path.exists(s["journal"]):
            sys.stdout.write(open(s["journal"], encoding="utf-8").read())
        return 0
    if len(args) == 2 and args[0] == "cat":
        if args[1].removesuffix(".service") != s["service"] or not s.get("unit"):
            print(f"No files found for {args[1]}.", file=sys.stderr)
            return 1
        sys.stdout.write(_unit_text(s))
        return 0
    if len(args) == 2 and args[0] == "restart":
        if args[1].removesuffix(".service") != s["service"]:
            print(f"Failed to restart {args[1]}.service: Unit {args[1]}.service not found.", file=sys.stderr)
            return 5
        return restart(s)
    print(f"stand-in systemctl: only `restart {s['service']}` is supported", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
