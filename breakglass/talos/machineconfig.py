"""Where a Talos machine config keeps kube-apiserver's extraArgs, and the patches that change them.

Three schema eras (shared reference §1): up to Talos 1.12 ``cluster.apiServer.extraArgs`` is a
map of strings; 1.13 allows a string or a list per key; from 1.14 a separate
``KubeAPIServerConfig`` document holds ``extraArgs``, and setting ``.cluster.apiServer`` as well is
a validation error. The era is read from the config itself, never assumed. Changes are
strategic-merge patches (JSON patches fail on multi-document configs, which 1.12+ generates),
and a key is removed with ``$patch: delete``.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakglass.core import textfile
from breakglass.core.errors import BadInput
from breakglass.text.admission_flags import Value

from breakglass.text.textedit import DOCUMENT, LEGACY  # noqa: F401  (the two eras, named where the text is edited)


@dataclass
class ApiServerArgs:
    era: str  # LEGACY or DOCUMENT
    args: dict[str, Value]


def parse(text: str, source: str) -> list[dict]:
    import yaml  # noqa: PLC0415

    try:
        docs = [d for d in textfile.load_yaml(text, source, "a machine config", all_documents=True)
                if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise BadInput(f"{source}:{where}: invalid YAML in the machine config: "
                       f"{getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    if not all(isinstance(d, dict) for d in docs):
        raise BadInput(f"{source}: a machine config document is not a mapping")
    return docs


def _v1alpha1(docs: list[dict], source: str) -> dict:
    for d in docs:
        if d.get("version") == "v1alpha1" and "kind" not in d:
            return d
    kinds = ", ".join(str(d.get("kind") or d.get("version") or "?") for d in docs) or "nothing"
    raise BadInput(f"{source}: not a Talos machine config of a known era (no v1alpha1 document; found {kinds})")


def _args(value, where: str, source: str) -> dict[str, Value]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput(f"{source}: {where} is not a mapping")
    for k, v in value.items():
        ok = isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
        if not isinstance(k, str) or not ok:
            raise BadInput(f"{source}: {where}.{k}: a value must be a string or a list of strings")
    return dict(value)


def locate(docs: list[dict], source: str) -> ApiServerArgs:
    main = _v1alpha1(docs, source)
    mtype = (main.get("machine") or {}).get("type")
    if mtype not in ("controlplane", "init"):
        raise BadInput(f"{source}: not a control-plane node (machine.type is {mtype!r}); kube-apiserver runs on "
                       f"control-plane nodes only")
    cluster = main.get("cluster") or {}
    if not isinstance(cluster, dict):
        raise BadInput(f"{source}: cluster is not a mapping")
    docs_kapi = [d for d in docs if d.get("kind") == "KubeAPIServerConfig"]
    if len(docs_kapi) > 1:
        raise BadInput(f"{source}: more than one KubeAPIServerConfig document")
    if docs_kapi:
        if cluster.get("apiServer") is not None:
            raise BadInput(f"{source}: kube-apiserver config is already set in v1alpha1 config (.cluster.apiServer) "
                           f"and in a KubeAPIServerConfig document; Talos rejects this config")
        return ApiServerArgs(DOCUMENT, _args(docs_kapi[0].get("extraArgs"), "KubeAPIServerConfig.extraArgs", source))
    api = cluster.get("apiServer") or {}
    if not isinstance(api, dict):
        raise BadInput(f"{source}: cluster.apiServer is not a mapping")
    return ApiServerArgs(LEGACY, _args(api.get("extraArgs"), LEGACY, source))


def patch(era: str, values: dict[str, Value | None]) -> dict:
    """The strategic-merge patch that sets (or, for None, deletes) these extraArgs keys."""
    extra = {k: ({"$patch": "delete"} if v is None else v) for k, v in values.items()}
    if era == DOCUMENT:
        return {"apiVersion": "v1alpha1", "kind": "KubeAPIServerConfig", "extraArgs": extra}
    return {"cluster": {"apiServer": {"extraArgs": extra}}}


def dump(obj) -> str:
    import yaml  # noqa: PLC0415

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def args_text(args: dict[str, Value]) -> str:
    """extraArgs alone, for diffs: the rest of a machine config holds secrets and is never shown."""
    return dump(args) if args else "{}\n"
