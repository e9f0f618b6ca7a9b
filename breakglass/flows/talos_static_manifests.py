"""A Talos control-plane node's manifest-based webhooks (1.36+), read through talosctl from what its kube-apiserver
obeys: the machine config's admission plugins (`cluster.apiServer.admissionControl`, or Talos 1.14+'s
KubeAdmissionControlConfig documents), which Talos writes into the apiserver's AdmissionConfiguration; each webhook
plugin's `staticManifestsDir`, a path inside the apiserver's container, found on the host through the mounts
(`extraVolumes`: hostPath -> mountPath; 1.14's fixed ones); and the files in it (`talosctl ls`, `talosctl read`).
breakglass.webhooks.static_manifests reads the configuration; this module fetches it."""

from __future__ import annotations

import posixpath

from breakglass.core import textfile
from breakglass.core.errors import BadInput
from breakglass.webhooks import sources, static_manifests

APISERVER_KIND = "KubeAPIServerConfig"  # Talos 1.14+: the apiserver's own document
ADMISSION_KIND = "KubeAdmissionControlConfig"  # Talos 1.14+: one document per admission plugin (name, configuration)
# Talos 1.14's KubeAPIServerConfig takes no extraVolumes: the apiserver's container mounts only the host's CA roots
# (config/types/k8s/apiserver.go, ExtraVolumes)
FIXED_VOLUMES_1_14 = [{"hostPath": "/etc/ssl/certs", "mountPath": "/etc/ssl/certs"}]


def apiserver_sections(docs: list) -> list[tuple[list, list]]:
    """(admission plugins, volumes) of each apiserver section of a machine config: v1alpha1's `cluster.apiServer`
    (admissionControl, extraVolumes), and the 1.14+ documents (KubeAdmissionControlConfig each a plugin, the
    fixed volumes of KubeAPIServerConfig)."""
    out = []
    plugins_1_14 = []
    for d in docs:
        if not isinstance(d, dict):
            continue
        if d.get("kind") == ADMISSION_KIND:
            plugins_1_14.append({"name": d.get("name"), "configuration": d.get("configuration")})
        api = (d.get("cluster") or {}).get("apiServer") if isinstance(d.get("cluster"), dict) else None
        if isinstance(api, dict):
            out.append((api.get("admissionControl") or [], api.get("extraVolumes") or []))
    if plugins_1_14:
        out.append((plugins_1_14, FIXED_VOLUMES_1_14))
    return out


def host_path(container_dir: str, volumes: list) -> str | None:
    """Where ``container_dir`` of the apiserver's container is on the host, by the section's extraVolumes; None
    when no volume mounts it (then the apiserver cannot read it either)."""
    best = None
    for v in volumes or []:
        if not isinstance(v, dict) or not isinstance(v.get("mountPath"), str) or not isinstance(v.get("hostPath"), str):
            continue
        mount = v["mountPath"].rstrip("/") or "/"
        if container_dir == mount or container_dir.startswith(mount.rstrip("/") + "/"):
            if best is None or len(mount) > len(best[0]):
                best = (mount, v["hostPath"].rstrip("/") or "/")
    if best is None:
        return None
    rest = container_dir[len(best[0]):].lstrip("/")
    return posixpath.join(best[1], rest) if rest else best[1]


def read(talos, node: str) -> sources.Inventory:
    """The manifest-based configurations of ``node``'s apiserver, each marked ``node:hostpath`` (none when its
    machine config names no staticManifestsDir, said as a warning)."""
    import yaml  # noqa: PLC0415

    text = talos.machine_config(node)
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise BadInput(f"{node}: its machine config is not YAML ({str(e).splitlines()[0]})") from None
    inv = sources.Inventory()
    texts, found = [], []
    for plugins, volumes in apiserver_sections(docs):
        dirs = static_manifests.plugin_dirs({"plugins": plugins}, f"{node}:machine config", _no_files(node))
        for d in dirs:
            host = host_path(d, volumes)
            if host is None:
                inv.problems.append({
                    "rule": "static-dir-unmounted", "severity": "critical", "where": f"{node}: machine config",
                    "title": f"staticManifestsDir {d} is on no mount of the apiserver's container",
                    "explanation": f"{node}'s admissionControl names staticManifestsDir {d}, but no extraVolumes "
                                   f"entry mounts a host directory there (Talos 1.14's KubeAPIServerConfig mounts "
                                   f"only the CA roots): kube-apiserver refuses to start with a staticManifestsDir "
                                   f"it cannot read (k8s.io/apiserver, ValidateStaticManifestsDir), so this config "
                                   f"keeps the control plane down. Mount the directory with "
                                   f"cluster.apiServer.extraVolumes, or remove staticManifestsDir."})
                continue
            found.append(host)
            paths = [p for p in talos.files(node, host) if posixpath.dirname(p) == host.rstrip("/")]
            for name in static_manifests.manifest_files([posixpath.basename(p) for p in paths]):
                path = posixpath.join(host, name)
                data = talos.run(node, ["read", path]).encode("utf-8")
                texts.append((f"{node}:{path}", textfile.decode(data, f"{node}:{path}", "YAML")))
    if not found and not inv.problems:
        inv.warnings.append(f"{node}: its machine config names no staticManifestsDir (no webhook plugin with "
                            f"one in admissionControl)")
    loaded = sources.load_texts(texts, static=True)
    loaded.warnings = inv.warnings + loaded.warnings
    loaded.problems = inv.problems
    if found and not texts:
        loaded.warnings.append(f"{node}: {', '.join(found)}: no .yaml, .yml or .json file")
    return loaded


def _no_files(node: str):
    def read(path: str) -> bytes:  # Talos takes each plugin's configuration inline: a `path:` is not Talos'
        raise BadInput(f"{node}: admissionControl names a file ({path}); Talos takes the configuration inline")
    return read
