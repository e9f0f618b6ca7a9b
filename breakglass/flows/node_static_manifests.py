"""A control-plane node's manifest-based webhooks (1.36+), read over SSH from what its kube-apiserver obeys: the
kubeadm static-pod manifest's command line, the admission configuration it names, the staticManifestsDir that
names, and the files in it (breakglass.webhooks.static_manifests reads them; this module fetches them)."""

from __future__ import annotations

import shlex

from breakglass.webhooks import sources
from breakglass.ways import nodefile, static_webhooks
from breakglass.ways.static_webhooks import KUBEADM_MANIFEST


def read(node, manifest: str = KUBEADM_MANIFEST) -> sources.Inventory:
    """The manifest-based configurations of ``node``'s apiserver (none when it names no staticManifestsDir, said
    as a warning), each marked with its ``host:path``."""
    dirs = static_webhooks.apiserver_dirs(node, manifest)
    if not dirs:
        inv = sources.Inventory()
        inv.warnings.append(f"{node.host}: {static_webhooks.NO_DIR}")
        return inv
    texts = [(f"{node.host}:{path}", nodefile.read_remote(node, path).decode("utf-8", "replace"))
             for d in dirs for path in static_webhooks.manifest_paths(node, d)]
    inv = sources.load_texts(texts, static=True)
    if not texts:
        inv.warnings.append(f"{node.host}: {', '.join(map(shlex.quote, dirs))}: no .yaml, .yml or .json file")
    return inv
