"""Where admission configurations are read from: YAML/JSON files, etcd, or the live API.

Files: ``kubectl get -o yaml|json`` output, ``List`` documents and multi-document streams.
etcd: exactly the keys of shared reference §4.1 (``/registry/<resource>/<name>``, no API
group in the key), ranged one resource prefix at a time, never the whole keyspace.
API: the official kubernetes client, imported only on this path.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from breakglass.core import textfile
from breakglass.core.errors import BadInput, Unreachable
from breakglass.webhooks import codec, model
from breakglass.webhooks.model import AdmissionConfig

DEFAULT_ETCD_PREFIX = "/registry"


@dataclass
class Inventory:
    configs: list[AdmissionConfig] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)  # encrypted etcd values, by key
    sources: list[str] = field(default_factory=list)
    # name -> labels of every Namespace, when read from a cluster (for namespaceSelectors); None from files
    namespaces: dict[str, dict[str, str]] | None = None
    # what was found wrong on a node rather than in a configuration (a staticManifestsDir the apiserver cannot
    # see): dicts with rule, severity, where, title, explanation; audit reports each as a finding
    problems: list[dict] = field(default_factory=list)
    version: str | None = None  # the apiserver's gitVersion (/version), when read through the API


# -- files --------------------------------------------------------------------------------------

def _yaml():
    import yaml  # noqa: PLC0415 - only the file path needs it

    return yaml


def _documents(text: str, path: str) -> list:
    yaml = _yaml()
    try:
        return [d for d in textfile.load_yaml(text, path, "a webhook file", all_documents=True) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise BadInput(f"{path}:{where}: invalid YAML: {problem}") from None


def _expand(paths: list[str]) -> list[str]:
    """Files as given; directories become their *.yaml, *.yml and *.json files (rendered manifests)."""
    out = []
    for p in paths:
        if p != "-" and os.path.isdir(p):
            found = sorted(os.path.join(r, f) for r, _, fs in os.walk(p) for f in fs
                           if f.endswith((".yaml", ".yml", ".json")))
            if not found:
                raise BadInput(f"{p}: no YAML or JSON files in this directory")
            out += found
        else:
            out.append(p)
    return out


def load_static_manifests(directory: str) -> Inventory:
    """The manifest-based webhook configurations of a kube-apiserver's staticManifestsDir (1.36+, feature gate
    ManifestBasedAdmissionControlConfig): its .yaml, .yml and .json files, as the apiserver reads them, each
    configuration marked with its file (they are changed there, on every control-plane node, not through the
    API)."""
    if not os.path.isdir(directory):
        raise BadInput(f"--static-manifests {directory}: not a directory (the apiserver's staticManifestsDir)")
    files = sorted(os.path.join(directory, n) for n in os.listdir(directory)
                   if n.endswith((".yaml", ".yml", ".json")) and os.path.isfile(os.path.join(directory, n)))
    if not files:
        raise BadInput(f"--static-manifests {directory}: no .yaml, .yml or .json file in it")
    return _static(load_files(files))


def load_files(paths: list[str]) -> Inventory:
    inv = Inventory()
    whole_dirs = any(p != "-" and os.path.isdir(p) for p in paths)
    for path in _expand(paths):
        if path == "-":
            import sys  # noqa: PLC0415

            text = textfile.decode(sys.stdin.buffer.read(), "<stdin>", "YAML or JSON")
            path = "<stdin>"
        else:
            text = textfile.read(path, "YAML or JSON")
        _load_text(inv, text, path, whole_dirs)
    return inv


def load_texts(texts: list[tuple[str, str]], static: bool = False) -> Inventory:
    """Configurations from texts already read (a node's files, named ``host:path``), each file one document set;
    ``static``: a staticManifestsDir's, each configuration marked with its file."""
    inv = Inventory()
    for where, text in texts:
        _load_text(inv, text, where, True)
    return _static(inv) if static else inv


def _static(inv: Inventory) -> Inventory:
    """Each configuration marked as a staticManifestsDir's, with the file it came from."""
    for cfg in inv.configs:
        cfg.static_manifest = cfg.source.rsplit("#", 1)[0]
    return inv


def _load_text(inv: Inventory, text: str, path: str, whole_dirs: bool) -> None:
    found = 0
    others: list[str] = []
    for i, doc in enumerate(_documents(text, path)):
        items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else [doc]
        for j, obj in enumerate(items or []):
            where = f"{path}#{i}" + (f".items[{j}]" if len(items) > 1 or doc is not obj else "")
            if not isinstance(obj, dict):
                raise BadInput(f"{where}: expected a Kubernetes object, found {type(obj).__name__}")
            if obj.get("kind") not in model.KIND_OF:
                others.append(str(obj.get("kind")))
                continue
            inv.configs.append(model.from_json(obj, where))
            found += 1
    if not found:
        what = f" (found {', '.join(sorted(set(others)))})" if others else ""
        if whole_dirs:  # a manifests directory holds everything else too
            inv.warnings.append(f"{path}: no admission configurations{what}")
            return
        raise BadInput(f"{path}: no admission configurations{what}")
    if others:
        inv.warnings.append(f"{path}: skipped {len(others)} object(s) of other kinds ({', '.join(sorted(set(others)))})")
    inv.sources.append(path)


# -- etcd ---------------------------------------------------------------------------------------

def etcd_prefixes(prefix: str = DEFAULT_ETCD_PREFIX, kinds: tuple[str, ...] | None = None) -> dict[str, bytes]:
    """kind -> key prefix, e.g. validating -> b'/registry/validatingwebhookconfigurations/'."""
    base = prefix.rstrip("/")
    if not base.startswith("/") or len(base) < 2:
        raise BadInput(f"not an etcd prefix: {prefix!r} (kube-apiserver's default is /registry)")
    kinds = kinds or tuple(model.RESOURCE_OF)
    return {k: f"{base}/{model.RESOURCE_OF[k]}/".encode() for k in kinds}


def etcd_key(kind: str, name: str, prefix: str = DEFAULT_ETCD_PREFIX) -> bytes:
    return etcd_prefixes(prefix, (kind,))[kind] + name.encode()


def load_etcd(etcd, prefix: str = DEFAULT_ETCD_PREFIX) -> Inventory:
    """Read every admission configuration from etcd (``etcd`` is an access.etcd.Etcd)."""
    inv = Inventory()
    for kind, key_prefix in etcd_prefixes(prefix).items():
        for kv in etcd.range_prefix(key_prefix):
            key = kv.key.decode("utf-8", "replace")
            try:
                dec = codec.decode_value(kv.value)
            except BadInput as e:
                inv.warnings.append(f"etcd {key}: {e}")
                continue
            if dec.obj is None:
                inv.opaque.append(f"{key} (encrypted: {dec.detail})")
                continue
            try:
                inv.configs.append(model.from_json(dec.obj, f"etcd:{key}"))
            except BadInput as e:
                inv.warnings.append(str(e))
    inv.namespaces = etcd_namespaces(etcd, prefix, inv.warnings)
    inv.sources.append("etcd " + ",".join(etcd.settings.endpoints))
    return inv


def namespaces_prefix(prefix: str = DEFAULT_ETCD_PREFIX) -> bytes:
    return f"{prefix.rstrip('/')}/namespaces/".encode()


def etcd_namespaces(etcd, prefix: str, warnings: list[str]) -> dict[str, dict[str, str]] | None:
    """Every Namespace's labels from its metadata (the codec reads any object's ObjectMeta); None when the
    caller's etcd client may not read those keys or a value cannot be read (selectors then see only the label
    Kubernetes sets)."""
    out: dict[str, dict[str, str]] = {}
    try:
        kvs = list(etcd.range_prefix(namespaces_prefix(prefix)))
    except ValueError:
        return None  # not among the prefixes this client was allowed
    for kv in kvs:
        key = kv.key.decode("utf-8", "replace")
        try:
            dec = codec.decode_value(kv.value)
        except BadInput as e:
            warnings.append(f"etcd {key}: {e}")
            return None
        if dec.obj is None:
            warnings.append(f"etcd {key}: encrypted, namespace labels not read")
            return None
        meta = dec.obj.get("metadata") or {}
        out[str(meta.get("name") or key.rpartition("/")[2])] = {str(k): str(v) for k, v in
                                                                 (meta.get("labels") or {}).items()}
    return out


# -- the live API -------------------------------------------------------------------------------

_API_PATHS = {
    model.VALIDATING: ["/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"],
    model.MUTATING: ["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"],
    model.VAP: ["/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"],
    model.VAP_BINDING: ["/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"],
    model.MAP: ["/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
                "/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicies",
                "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies"],
    model.MAP_BINDING: ["/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
                        "/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicybindings",
                        "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicybindings"],
}


def load_api(kubeconfig: str | None = None, context: str | None = None, timeout: float = 10.0) -> Inventory:
    from breakglass.access import kubeapi  # noqa: PLC0415 - pulls in the kubernetes client

    return load_api_with(kubeapi.connect(kubeconfig, context, timeout))


def load_api_with(api, kinds: tuple[str, ...] | None = None) -> Inventory:
    """Every admission configuration (of ``kinds``) through an ``access.kubeapi`` client already connected."""
    inv = Inventory()
    for kind, paths in _API_PATHS.items():
        if kinds is not None and kind not in kinds:
            continue
        for path in paths:
            status, body = api.get(path)
            if status == 404:
                continue  # this API version is not served (older cluster, feature off)
            if status != 200:
                raise Unreachable(f"apiserver {api.host}: GET {path} returned HTTP {status}: {body[:200]!r}")
            try:
                doc = json.loads(body)
            except ValueError:
                raise Unreachable(f"apiserver {api.host}: GET {path} did not return JSON") from None
            list_kind = doc.get("kind", "")
            item_kind = list_kind[:-4] if list_kind.endswith("List") else model.KIND_NAME[kind]
            for item in doc.get("items") or []:
                item.setdefault("kind", item_kind)
                item.setdefault("apiVersion", doc.get("apiVersion", ""))
                inv.configs.append(model.from_json(item, f"api:{path}/{item.get('metadata', {}).get('name')}"))
            break
    if kinds is None:
        inv.namespaces = api_namespaces(api, inv.warnings)
        inv.version = server_version(api)
    inv.sources.append(f"apiserver {api.host}")
    return inv


def server_version(api) -> str | None:
    """The apiserver's gitVersion from /version, or None where it does not say."""
    status, body = api.get("/version")
    if status != 200:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return str(doc.get("gitVersion")) if isinstance(doc, dict) and doc.get("gitVersion") else None


def api_namespaces(api, warnings: list[str]) -> dict[str, dict[str, str]] | None:
    """Every Namespace's labels through the API; None (with a warning) when they cannot be listed."""
    status, body = api.get("/api/v1/namespaces")
    if status != 200:
        warnings.append(f"apiserver {api.host}: GET /api/v1/namespaces returned HTTP {status}: namespaceSelectors "
                        f"are read against the label Kubernetes sets (kubernetes.io/metadata.name) only")
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    out = {}
    for item in doc.get("items") or []:
        meta = item.get("metadata") or {} if isinstance(item, dict) else {}
        if isinstance(meta, dict) and meta.get("name"):
            labels = meta.get("labels") or {}
            out[str(meta["name"])] = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
    return out


# -- choosing a source --------------------------------------------------------------------------

@dataclass
class SourceSpec:
    """Where to read configurations from, as the user said it (CLI flags, wizard answers)."""

    files: list[str] = field(default_factory=list)
    source: str = "auto"  # auto | file | api | etcd
    kubeconfig: str | None = None
    context: str | None = None
    etcd_endpoints: str | None = None
    etcd_cacert: str | None = None
    etcd_cert: str | None = None
    etcd_key: str | None = None
    etcd_prefix: str = DEFAULT_ETCD_PREFIX
    timeout: float | None = None

    def resolved(self) -> str:
        if self.source != "auto":
            return self.source
        if self.files:
            return "file"
        if self.etcd_endpoints:
            return "etcd"
        return "api"


def load(spec: SourceSpec) -> Inventory:
    kind = spec.resolved()
    if kind == "file":
        if not spec.files:
            raise BadInput("--source file needs at least one --file")
        return load_files(spec.files)
    if spec.files:
        raise BadInput(f"--file cannot be combined with --source {kind}")
    if kind == "etcd":
        from breakglass.access.etcd import Etcd, EtcdSettings  # noqa: PLC0415

        settings = EtcdSettings.resolve(spec.etcd_endpoints, spec.etcd_cacert, spec.etcd_cert, spec.etcd_key,
                                        spec.timeout)
        etcd = Etcd(settings, tuple(etcd_prefixes(spec.etcd_prefix).values()) + (namespaces_prefix(spec.etcd_prefix),))
        try:
            return load_etcd(etcd, spec.etcd_prefix)
        finally:
            etcd.close()
    if kind == "api":
        return load_api(spec.kubeconfig, spec.context, spec.timeout or 10.0)
    raise BadInput(f"unknown source {kind!r} (use file, api or etcd)")
