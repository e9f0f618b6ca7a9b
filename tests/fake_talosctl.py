#!/usr/bin/env python3
"""A stand-in for `talosctl`: talosctl cannot be installed here (see README, Testing).

It keeps one machine config per node under $FAKE_TALOS_DIR/nodes/<node>.yaml and implements the
subset breakglass uses, with real talosctl's behaviour where it matters:
- `get machineconfig v1alpha1 -o yaml`, with `spec` as a block string (Talos 1.12+) or, when
  <node>.shape says `mapping`, as a mapping of the first document (older Talos);
- `patch machineconfig --mode M --patch @FILE [--dry-run]`: strategic merge (maps merged key by key,
  lists appended, `$patch: delete`), multi-document configs matched by kind/apiVersion, JSON6902
  patches rejected on multi-document configs with talosctl's message, the v1.14 conflict between
  `.cluster.apiServer` and a `KubeAPIServerConfig` document, list values refused before Talos 1.13
  (<node>.version), mode names per version;
- `containers -k` and `logs -k ID` from <node>.log;
- `ls ROOT --type f --recurse` (apid's table: NODE and the name relative to ROOT, "." for ROOT itself) and
  `read PATH` over the files under <node>.fs/, with talosd's NotFound error for a missing path;
- a node with a <node>.down file answers like an unreachable node; with <node>.fail-apply it passes the
  dry run and then fails the real patch;
- `--talosconfig`/$TALOSCONFIG must name an existing file.
Every call is appended to $FAKE_TALOS_DIR/calls.log.
"""

import copy
import json
import os
import sys

import yaml

DIR = os.environ["FAKE_TALOS_DIR"]


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


def version(node):
    return tuple(int(x) for x in (read(node, "version", "1.12")).split("."))


def load_docs(node):
    with open(node_path(node)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def merge(base, patch, replace_values=False):
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if isinstance(v, dict) and v.get("$patch") == "delete":
                out.pop(k, None)
            elif replace_values:
                out[k] = v  # meta.Args.Merge is maps.Copy: a value (string or list) replaces the old one
            elif k in out:
                out[k] = merge(out[k], v, replace_values=(k == "extraArgs"))
            else:
                out[k] = {kk: vv for kk, vv in v.items() if kk != "$patch"} if isinstance(v, dict) else v
        return out
    if isinstance(base, list) and isinstance(patch, list):
        return base + patch
    return patch


def strategic(docs, patches):
    docs = copy.deepcopy(docs)
    for p in patches:
        if "kind" in p:
            idx = next((i for i, d in enumerate(docs) if d.get("kind") == p["kind"]
                        and d.get("apiVersion") == p.get("apiVersion") and d.get("name") == p.get("name")), None)
            if p.get("$patch") == "delete":
                if idx is not None:
                    docs.pop(idx)
                continue
            if idx is None:
                docs.append({k: v for k, v in p.items()})
            else:
                docs[idx] = merge(docs[idx], p)
        else:
            idx = next(i for i, d in enumerate(docs) if d.get("version") == "v1alpha1")
            docs[idx] = merge(docs[idx], p)
    return docs


def validate(node, docs):
    main = next((d for d in docs if d.get("version") == "v1alpha1"), None)
    if main is None:
        die("error: the applied machine configuration doesn't contain v1alpha1 config, did you mean to patch the "
            "machine config instead?")
    kapi = [d for d in docs if d.get("kind") == "KubeAPIServerConfig"]
    if kapi and (main.get("cluster") or {}).get("apiServer") is not None:
        die("error applying new configuration: rpc error: code = InvalidArgument desc = configuration validation "
            "failed: 1 error occurred:\n\t* kube-apiserver config is already set in v1alpha1 config (.cluster.apiServer)")
    for where in [((main.get("cluster") or {}).get("apiServer") or {}).get("extraArgs") or {}] + \
            [d.get("extraArgs") or {} for d in kapi]:
        for k, v in where.items():
            if isinstance(v, list) and version(node) < (1, 13):
                die(f"error: failed to parse config: yaml: unmarshal errors:\n  cannot unmarshal !!seq into string "
                    f"(extraArgs.{k})")


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


def patch(node, rest):
    mode, patches, dry = "auto", [], False
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("--mode"):
            mode = a.split("=", 1)[1] if "=" in a else rest[i + 1]
            i += 1 if "=" in a else 2
            continue
        if a in ("-p", "--patch"):
            patches.append(rest[i + 1]); i += 2; continue
        if a == "--dry-run":
            dry = True
        i += 1
    modes = {"auto", "no-reboot", "staged", "try"} | ({"reboot"} if version(node) < (1, 14) else set())
    if mode not in modes:
        die(f'Error: invalid argument "{mode}" for "-m, --mode" flag: possible values: {", ".join(sorted(modes))}')
    docs = load_docs(node)
    new = docs
    for p in patches:
        text = open(p[1:]).read() if p.startswith("@") else p
        try:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as e:
            die(f"error: failed to load patch: {e}")
        if len(loaded) == 1 and isinstance(loaded[0], list):
            if len(docs) != 1:
                die("error: JSON6902 patches are not supported for multi-document machine configuration")
            die("error: JSON6902 patches are not implemented by this stand-in")
        if not all(isinstance(d, dict) for d in loaded):
            die("error: failed to load patch: not a strategic merge patch")
        new = strategic(new, loaded)
    validate(node, new)
    old_text, new_text = yaml.safe_dump_all(docs, sort_keys=False), yaml.safe_dump_all(new, sort_keys=False)
    if not dry and read(node, "fail-apply") is not None:
        die("error applying new configuration: rpc error: code = Unavailable desc = connection closed before "
            "server preface received")
    if dry:
        print("Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).")
        return
    if old_text == new_text:
        print("Apply was skipped: no changes detected.", file=sys.stderr)
        return
    with open(node_path(node) + ".tmp", "w") as f:
        f.write(new_text)
    os.replace(node_path(node) + ".tmp", node_path(node))
    print(f"patched MachineConfigs.config.talos.dev/v1alpha1 at the node {node}\n"
          f"Applied configuration without a reboot")


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
