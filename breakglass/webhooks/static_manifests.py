"""Where a kube-apiserver keeps its manifest-based webhooks (1.36+, KEP-5793), read from its own flags.

`--admission-control-config-file` names an AdmissionConfiguration (apiserver.config.k8s.io); its
ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins carry their WebhookAdmission either inline
(`configuration:`) or in a file (`path:`, relative to the AdmissionConfiguration's own directory), and that
configuration's `staticManifestsDir` is the directory the apiserver loads (k8s.io/apiserver v0.36,
pkg/admission/plugin/webhook/config). Only the reading is here: how the files are fetched (a node over SSH) is the
caller's.
"""

from __future__ import annotations

import posixpath
from typing import Callable

from breakglass.core.errors import BadInput
from breakglass.core import textfile
from breakglass.text import admission_flags as flags

CONFIG_FLAG = "admission-control-config-file"
WEBHOOK_PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
EXTENSIONS = (".yaml", ".yml", ".json")


def config_file(args: list[str]) -> str | None:
    """The value of --admission-control-config-file on a kube-apiserver command line (either spelling)."""
    for i, arg in enumerate(args):
        if flags.flag_name(arg) != CONFIG_FLAG:
            continue
        name, eq, value = arg[2:].partition("=")
        if eq:
            return value
        if i + 1 < len(args):
            return args[i + 1]
    return None


def manifest_dirs(args: list[str], read: Callable[[str], bytes]) -> list[str]:
    """The staticManifestsDir of each webhook plugin the apiserver's admission configuration names, in order;
    ``read(path)`` returns a file's bytes on the node."""
    path = config_file(args)
    if not path:
        return []
    return plugin_dirs(_yaml(read(path), path), path, read)


def plugin_dirs(doc, path: str, read: Callable[[str], bytes]) -> list[str]:
    """The staticManifestsDir of each webhook plugin of an AdmissionConfiguration ``doc`` (read from ``path``; a
    plugin's ``path:`` is relative to it), in order. Talos' ``cluster.apiServer.admissionControl`` is the same
    list of plugins, which Talos writes into the AdmissionConfiguration it gives the apiserver."""
    dirs: list[str] = []
    for plugin in (doc.get("plugins") if isinstance(doc, dict) else None) or []:
        if not isinstance(plugin, dict) or plugin.get("name") not in WEBHOOK_PLUGINS:
            continue
        conf = plugin.get("configuration")
        if conf is None and isinstance(plugin.get("path"), str) and plugin["path"]:
            sub = plugin["path"] if posixpath.isabs(plugin["path"]) else posixpath.join(posixpath.dirname(path),
                                                                                      plugin["path"])
            conf = _yaml(read(sub), sub)
        d = conf.get("staticManifestsDir") if isinstance(conf, dict) else None
        if isinstance(d, str) and d and d not in dirs:
            dirs.append(d)
    return dirs


def manifest_files(names: list[str]) -> list[str]:
    """The names in a staticManifestsDir the apiserver reads, sorted as it reads them."""
    return sorted(n for n in names if n.endswith(EXTENSIONS) and "/" not in n)


def _yaml(data: bytes, where: str):
    import yaml  # noqa: PLC0415

    try:
        return textfile.load_yaml(textfile.decode(data, where, "YAML"), where, "an admission configuration")
    except yaml.YAMLError as e:
        raise BadInput(f"{where}: invalid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
