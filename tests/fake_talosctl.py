#!/usr/bin/env python3
"""A stand-in for `talosctl`: talosctl cannot be installed here (see README, Testing).

It keeps one machine config per node under $FAKE_TALOS_DIR/nodes/<node>.yaml and implements the
subset breakglass uses, with real talosctl's behaviour where it matters:
- `get machineconfig v1alpha1 -o yaml`, with `spec` as a block string (Talos 1.12+) or, when
  <node>.shape says `mapping`, as a mapping of the first document (older Talos);
- `patch machineconfig --mode M --patch P [--dry-run]`: the patching and the node's side of the apply
  are Talos' own code, not ours: build/talos-machinery/v<version>/talos-machinery (go/talos-machinery,
  built by `make go-components`) loads the patches as talosctl does (strategic merge with `$patch:
  delete`, or JSON6902, which Talos refuses on multi-document configs), applies them, and validates the
  result as a running node of that version does (<node>.platform: metal, container or cloud; metal if
  absent). The build is the node's declared Talos version (<node>.version: X.Y picks the newest build of
  that minor, X.Y.Z that exact one when built, else the nearest older build); without one, the config's
  era picks it (a KubeAPIServerConfig document: 1.14; a list value: 1.13; else 1.12). What the node
  stores is the patched bytes Talos wrote. Output as talosctl's: "patched ... at the node", the mode
  details and "Apply was skipped: no changes detected." on stderr, and a node's refusal as the gRPC
  error after the "patched" line (talosctl prints that line before it returns the apply's error);
  mode names per version;
- `containers -k` and `logs -k ID` from <node>.log;
- `ls ROOT --type f --recurse` (apid's table: NODE and the name relative to ROOT, "." for ROOT itself) and
  `read PATH` over the files under <node>.fs/, with talosd's NotFound error for a missing path;
- a node with a <node>.down file answers like an unreachable node; with <node>.fail-apply it passes the
  dry run and then fails the real patch;
- `--mode=try --timeout D` as machined does it: the patched config is active, the previous one kept in
  <node>.try.json with the deadline; any apply in another mode, a dry run included, cancels the rollback
  (CancelConfigRollbackTimeout comes first in ApplyConfiguration); a call made after the deadline finds the
  previous config back (this stand-in has no daemon whose timer fires, so the rollback is applied when it is
  next asked; a test moves the deadline to make the timer fire);
- `--talosconfig`/$TALOSCONFIG must name an existing file.
Every call is appended to $FAKE_TALOS_DIR/calls.log. Without the Talos machinery build a patch needs,
it fails with one line naming `make go-components`.
"""

import json
import os
import subprocess
import sys
import time

import yaml

DIR = os.environ.get("FAKE_TALOS_DIR", "")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg, code=1):
    print(msg, file=sys.stderr)
    sys.exit(code)


def parse_args(argv):
    opts = {"nodes": None, "talosconfig": os.environ.get("TALOSCONFIG"), "rest": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-n", "--nodes"):
            opts["nodes"] = argv[i + 1]; i += 2; continue
        if a in ("--talosconfig", "--context", "-e", "--endpoints"):
            opts[{"-e": "endpoints"}.get(a, a.lstrip("-"))] = argv[i + 1]
            i += 2
            continue
        opts["rest"].append(a)
        i += 1
    return opts


def node_path(node, ext="yaml"):
    return os.path.join(DIR, "nodes", f"{node}.{ext}")


def read(node, ext, default=None):
    try:
        with open(node_path(node, ext)) as f:
            return f.read().strip()
    except OSError:
        return default


def load_docs(node):
    with open(node_path(node)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# -- the real Talos machinery (go/talos-machinery) -------------------------------------------------

def _vt(v):
    return tuple(int(x) for x in v.split("."))


def machinery_builds():
    """The talos-machinery versions go/versions lists, oldest first."""
    if ROOT not in sys.path:  # run as a script by any python3 (the talosctl on PATH): breakglass is this checkout
        sys.path.insert(0, ROOT)
    from breakglass.sandbox import builds  # noqa: PLC0415

    out = builds.versions("talos-machinery")
    return sorted(out, key=_vt)


def era_version(docs):
    """The Talos version a config's schema era implies, when a node declares none."""
    if any(isinstance(d, dict) and d.get("kind") == "KubeAPIServerConfig" for d in docs):
        return "1.14"
    main = next((d for d in docs if isinstance(d, dict) and d.get("version") == "v1alpha1"), {})
    extra = (((main.get("cluster") or {}).get("apiServer") or {}).get("extraArgs") or {})
    if isinstance(extra, dict) and any(isinstance(v, list) for v in extra.values()):
        return "1.13"
    return "1.12"


def machinery_version(declared):
    """The build for a Talos version: X.Y.Z exactly when built, else the newest of X.Y, else the nearest older."""
    builds = machinery_builds()
    want = _vt(declared)
    if declared in builds:
        return declared
    same = [b for b in builds if _vt(b)[:2] == want[:2]]
    older = [b for b in builds if _vt(b) < want]
    return (same or older or builds)[-1]


def machinery_binary(version):
    return os.path.join(ROOT, "build", "talos-machinery", f"v{version}", "talos-machinery")


def missing_machinery(version):
    """One line for a missing build, or None."""
    path = machinery_binary(version)
    if os.access(path, os.X_OK):
        return None
    return (f"Talos machinery v{version} is not built ({os.path.relpath(path, ROOT)} is missing): "
            f"run `make go-components`")


def machinery(version, *args, stdin=None):
    """Run talos-machinery; its JSON answer (exit 0 or 1), or die loudly."""
    problem = missing_machinery(version)
    if problem:
        die(f"fake talosctl: {problem}", 3)
    p = subprocess.run([machinery_binary(version), *args], input=stdin, capture_output=True)
    if p.returncode not in (0, 1):
        die(f"fake talosctl: talos-machinery v{version} {args[0]} failed (exit {p.returncode}): "
            f"{p.stderr.decode(errors='replace').strip()}", 3)
    return json.loads(p.stdout)


def node_version(node):
    declared = read(node, "version")
    if declared:
        return declared
    try:
        return era_version(load_docs(node))
    except yaml.YAMLError:
        return "1.12"


def _unchanged(body, patched):
    """talosctl's check: equal once comments are stripped (yamlstrip re-encodes the YAML: order and values count)."""
    def strip(text):
        try:
            return json.dumps([d for d in yaml.safe_load_all(text) if d is not None], default=str)
        except yaml.YAMLError:
            return "\n".join(ln for ln in text.strip().splitlines() if not ln.lstrip().startswith("#"))
    return strip(body) == strip(patched)


def get_mc(node):
    meta = {"namespace": "config", "type": "MachineConfigs.config.talos.dev", "id": "v1alpha1", "version": 3,
            "owner": None, "phase": "running", "created": "2026-02-24T15:32:50Z", "updated": "2026-02-24T15:32:50Z"}
    if read(node, "shape") == "mapping":
        print(yaml.safe_dump({"node": node, "metadata": meta, "spec": load_docs(node)[0]}, sort_keys=False), end="")
        return
    meta["annotations"] = {"talos.dev/yaml-spec": "1"}
    with open(node_path(node)) as f:
        text = f.read()  # byte representation is preserved as submitted
    out = yaml.safe_dump({"node": node, "metadata": meta}, sort_keys=False)
    out += "spec: |\n" + "".join("    " + line + "\n" for line in text.splitlines())
    print(out, end="")


def _try_file(node):
    return node_path(node, "try.json")


def roll_back_if_due(node):
    """What Talos' rollback timer did at its deadline: the config from before the try is active again."""
    path = _try_file(node)
    if not os.path.exists(path):
        return
    with open(path) as f:
        held = json.load(f)
    if held["until"] <= time.time():
        with open(node_path(node) + ".tmp", "w") as f:
            f.write(held["previous"])
        os.replace(node_path(node) + ".tmp", node_path(node))
        os.unlink(path)


def _go_duration(text):
    import re
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        die(f'Error: invalid argument "{text}" for "--timeout" flag: time: invalid duration "{text}"')
    return sum(float(a) * units[b] for a, b in parts)


def patch(node, rest):
    mode, patches, dry, timeout = "auto", [], False, "1m0s"
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("--mode") or a == "-m":
            mode = a.split("=", 1)[1] if "=" in a else rest[i + 1]
            i += 1 if "=" in a else 2
            continue
        if a.startswith("--timeout"):
            timeout = a.split("=", 1)[1] if "=" in a else rest[i + 1]
            i += 1 if "=" in a else 2
            continue
        if a in ("-p", "--patch"):
            patches.append(rest[i + 1]); i += 2; continue
        if a == "--patch-file":
            patches.append("@" + rest[i + 1]); i += 2; continue
        if a == "--dry-run":
            dry = True
        i += 1
    talos = node_version(node)
    modes = {"auto", "no-reboot", "staged", "try"} | ({"reboot"} if _vt(talos)[:2] < (1, 14) else set())
    if mode not in modes:
        die(f'Error: invalid argument "{mode}" for "-m, --mode" flag: possible values: {", ".join(sorted(modes))}')
    if not patches:
        die("either --patch or --patch-file should be defined")
    seconds = _go_duration(timeout)
    if mode != "try" and os.path.exists(_try_file(node)):
        os.unlink(_try_file(node))  # machined: CancelConfigRollbackTimeout, before anything else
    with open(node_path(node)) as f:
        body = f.read()
    args = ["patch", "--json", "--config", "-", "--mode", read(node, "platform", "metal")]
    for p in patches:
        args += ["--patch", p]
    res = machinery(machinery_version(talos), *args, stdin=body.encode())
    if not res["ok"] and res["stage"] in ("patches", "patch"):
        die(res["error"].rstrip())  # talosctl's own side: loading the patches or applying them
    patched = res.get("config", "")
    if _unchanged(body, patched):
        die("Apply was skipped: no changes detected.", 0)  # checked after the apply call, whatever it answered
    print(f"patched MachineConfigs.config.talos.dev/v1alpha1 at the node {node}", file=sys.stderr)
    if not res["ok"]:  # the node's side: ApplyConfiguration's InvalidArgument
        die(f"rpc error: code = InvalidArgument desc = {res['error']}")
    for w in res["warnings"]:
        print(f"WARNING: {w}", file=sys.stderr)
    details = {"staged": "Staged configuration to be applied after the next reboot"}.get(
        mode, "Applied configuration without a reboot")
    if dry:
        print(f"Dry run summary:\n{details} (skipped in dry-run).", file=sys.stderr)
        return
    if read(node, "fail-apply") is not None:
        die("rpc error: code = Unavailable desc = connection closed before server preface received")
    if mode == "try":
        previous = body
        if os.path.exists(_try_file(node)):  # a try over a try: the config to go back to stays the first one
            with open(_try_file(node)) as f:
                previous = json.load(f)["previous"]
        with open(_try_file(node), "w") as f:
            json.dump({"previous": previous, "until": time.time() + seconds, "timeout": timeout}, f)
        details += f"\nThe config is applied in 'try' mode and will be automatically reverted back in {timeout}"
    with open(node_path(node) + ".tmp", "w") as f:
        f.write(patched)
    os.replace(node_path(node) + ".tmp", node_path(node))
    print(details, file=sys.stderr)


def ls(node, args):
    root = next(a for a in args if a.startswith("/"))
    base = os.path.join(DIR, "nodes", f"{node}.fs")
    full = base + root
    if not os.path.exists(full):
        die(f"error fetching logs: rpc error: code = NotFound desc = lstat {root}: no such file or directory")
    print("NODE         NAME")
    if os.path.isfile(full):
        print(f"{node}   .")
        return
    for d, _, files in sorted(os.walk(full)):
        for f in sorted(files):
            print(f"{node}   {os.path.relpath(os.path.join(d, f), full)}")


def main():
    if not DIR:
        die("fake talosctl: FAKE_TALOS_DIR is not set", 3)
    o = parse_args(sys.argv[1:])
    with open(os.path.join(DIR, "calls.log"), "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\n")
    if o["talosconfig"] and not os.path.exists(o["talosconfig"]):
        die(f"failed to open config file {o['talosconfig']!r}: no such file or directory")
    rest = o["rest"]
    node = o["nodes"]
    if not rest:
        die("Usage: talosctl [command]")
    if rest[0] == "version" and "--client" in rest:
        print("Client:\n\tTag: v1.12.0-fake")
        return
    if node is None:
        die("error: nodes are not set for the command: please use `--nodes` flag or configuration file to set the nodes to run the command against")
    if "," in node:
        die("error: this stand-in takes one node per call")
    if read(node, "down") is not None or not os.path.exists(node_path(node)):
        die(f"error getting resource: rpc error: code = Unavailable desc = connection error: desc = \"transport: "
            f"Error while dialing: dial tcp {node}:50000: connect: connection refused\"")
    roll_back_if_due(node)
    if rest[:2] in (["get", "machineconfig"], ["get", "mc"]):
        return get_mc(node)
    if rest[:2] in (["patch", "machineconfig"], ["patch", "mc"]):
        return patch(node, rest[2:])
    if rest[:2] == ["containers", "-k"]:
        print("NODE         NAMESPACE   ID                                                            IMAGE       PID    STATUS")
        print(f"{node}   k8s.io      kube-system/kube-apiserver-cp:kube-apiserver:51c3aad7a271    registry.k8s.io/kube-apiserver:v1.34.1   2572   CONTAINER_RUNNING")
        return
    if rest[0] in ("ls", "list"):
        return ls(node, rest[1:])
    if rest[0] == "read":
        path = os.path.join(DIR, "nodes", f"{node}.fs") + rest[1]
        if not os.path.isfile(path):
            die(f"error reading file: rpc error: code = NotFound desc = open {rest[1]}: no such file or directory")
        with open(path, "rb") as f:
            sys.stdout.buffer.write(f.read())
        return
    if rest[:2] == ["logs", "-k"]:
        for line in (read(node, "log", "") or "").splitlines():
            print(f"{node}: {line}")
        return
    die(f"Error: unknown command {rest[0]!r} for \"talosctl\"")


if __name__ == "__main__":
    main()
