"""A control-plane node's manifest-based webhooks (1.36+), read over SSH from what its kube-apiserver obeys: the
kubeadm static-pod manifest's command line, the admission configuration it names, the staticManifestsDir that
names, and the files in it (breakglass.webhooks.static_manifests reads them; this module fetches them)."""

from __future__ import annotations

import shlex

from breakglass.core.errors import BadInput
from breakglass.access.ssh import quoted_path
from breakglass.webhooks import sources, static_manifests
from breakglass.ways import kubeadm_flags, nodefile

KUBEADM_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"


def read(node, manifest: str = KUBEADM_MANIFEST) -> sources.Inventory:
    """The manifest-based configurations of ``node``'s apiserver (none when it names no staticManifestsDir, said
    as a warning), each marked with its ``host:path``."""
    text = kubeadm_flags.read_remote(node, manifest).decode("utf-8", "replace")
    args = kubeadm_flags.apiserver_args(text, f"{node.host}:{manifest}")
    dirs = static_manifests.manifest_dirs(args, lambda path: nodefile.read_remote(node, path))
    if not dirs:
        inv = sources.Inventory()
        inv.warnings.append(f"{node.host}: kube-apiserver names no staticManifestsDir (no "
                            f"--{static_manifests.CONFIG_FLAG}, or no WebhookAdmission.staticManifestsDir in it)")
        return inv
    texts = []
    for d in dirs:
        r = node.run(f"ls -1A -- {quoted_path(d, 'staticManifestsDir')}")
        if r.rc != 0:
            raise BadInput(f"{node.host}:{d}: {r.err.decode('utf-8', 'replace').strip()[:200] or 'cannot list it'}")
        names = static_manifests.manifest_files(r.out.decode("utf-8", "replace").splitlines())
        for name in names:
            path = f"{d.rstrip('/')}/{name}"
            texts.append((f"{node.host}:{path}", nodefile.read_remote(node, path).decode("utf-8", "replace")))
    inv = sources.load_texts(texts, static=True)
    if not texts:
        inv.warnings.append(f"{node.host}: {', '.join(map(shlex.quote, dirs))}: no .yaml, .yml or .json file")
    return inv
