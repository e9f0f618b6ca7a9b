"""Would an admission policy that a revert puts back refuse the cluster's way back? The apiserver is asked.

An admission policy runs inside the apiserver: there is no backend to call, and its CEL is the apiserver's to
evaluate (breakglass does not re-implement CEL). So before a revert restores a ValidatingAdmissionPolicy or a
MutatingAdmissionPolicy, or its binding, a copy of
the pair is written under names of its own, with one more matchCondition that matches only this trial's requests
(an annotation carrying a random token): no other request meets the copy, so nothing in the cluster is refused
meanwhile. Then, as kube-apiserver itself (``Impersonate-User: system:apiserver``: its loopback writes are made as
that user, and a fix that exempts it must be seen doing so), server-side dry runs of writes it makes at start (a
ServiceCIDR, a ClusterRole, a Namespace, a PriorityClass) carry the token. Refused by the copy: the revert would
put back what refuses them. Admitted, or refused by anything else: the policy lets them through.

When is the copy in effect? The apiserver loads policies and bindings from two watches, each in the order they
were written, and compiles them as one set. A marker pair written after the copy refuses every request that
carries its own token; once the marker refuses, the copy written before it is loaded too. All four objects are
deleted after, whatever happened.
"""

from __future__ import annotations

import copy
import re
import secrets
import time
from dataclasses import asdict, dataclass, field

from breakglass.core.errors import BreakglassError
from breakglass.webhooks import model

GROUP = "/apis/admissionregistration.k8s.io/v1"
# each kind of policy: the API paths of its policies and of its bindings
PATHS = {model.KIND_NAME[policy]: (f"{GROUP}/{model.RESOURCE_OF[policy]}", f"{GROUP}/{model.RESOURCE_OF[binding]}")
         for policy, binding in ((model.VAP, model.VAP_BINDING), (model.MAP, model.MAP_BINDING))}
POLICIES, BINDINGS = PATHS["ValidatingAdmissionPolicy"]
ANNOTATION = "breakglass.io/trial"
APISERVER = {"Impersonate-User": "system:apiserver", "Impersonate-Group": "system:masters"}
MARKER_MESSAGE = "breakglass trial marker"
# writes kube-apiserver makes at start (heal.bootstrap), as the smallest valid objects; path, body
_WRITES = (
    ("/apis/networking.k8s.io/v1/servicecidrs", "ServiceCIDR", {"spec": {"cidrs": ["10.96.0.0/12"]}}),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole", {"rules": []}),
    ("/api/v1/namespaces", "Namespace", {}),
    ("/apis/scheduling.k8s.io/v1/priorityclasses", "PriorityClass", {"value": 1000}),
)


@dataclass
class Trial:
    policy: str
    binding: str
    refuses: bool | None  # None: could not tell
    detail: str
    writes: list = field(default_factory=list)  # what was tried: "ServiceCIDR: refused: …" / "ClusterRole: admitted"

    def to_json(self) -> dict:
        return asdict(self)


def _token_condition(token: str) -> dict:
    return {"name": "breakglass-trial-only",
            "expression": f'object != null && has(object.metadata.annotations) && "{ANNOTATION}" in '
                          f'object.metadata.annotations && object.metadata.annotations["{ANNOTATION}"] == "{token}"'}


def _copies(policy: dict, binding: dict, token: str) -> tuple[dict, dict]:
    name = f"breakglass-trial-{token}"
    kind = policy.get("kind", "ValidatingAdmissionPolicy")
    spec = copy.deepcopy(policy.get("spec") or {})
    spec["matchConditions"] = [_token_condition(token), *(spec.get("matchConditions") or [])]
    bspec = copy.deepcopy(binding.get("spec") or {})
    bspec["policyName"] = name
    return ({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind + "Binding", "metadata": {"name": name},
             "spec": bspec})


def _marker(token: str, kind: str) -> tuple[dict, dict]:
    """A policy of the same kind (same watch) that refuses every request carrying ``token``: a validation that is
    false, or a mutation whose expression fails (a key the probe does not have) under failurePolicy Fail."""
    name = f"breakglass-trial-{token}"
    spec = {"failurePolicy": "Fail", "matchConditions": [_token_condition(token)],
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "resources": ["configmaps"], "operations": ["CREATE"]}]}}
    bspec = {"policyName": name}
    if kind == "MutatingAdmissionPolicy":
        spec.update(reinvocationPolicy="Never", mutations=[{"patchType": "ApplyConfiguration", "applyConfiguration": {
            "expression": 'Object{metadata: Object.metadata{labels: {"x": object.metadata.annotations['
                          '"breakglass.io/no-such-key"]}}}'}}])
    else:
        spec["validations"] = [{"expression": "false", "message": MARKER_MESSAGE}]
        bspec["validationActions"] = ["Deny"]
    return ({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind + "Binding", "metadata": {"name": name},
             "spec": bspec})


def _probe(path: str, kind: str, body: dict, token: str) -> dict:
    """The smallest valid object of a write, carrying ``token``; its apiVersion is the one its path names."""
    version = path.split("/apis/", 1)[1].rsplit("/", 1)[0] if "/apis/" in path else "v1"
    return {"apiVersion": version, "kind": kind,
            "metadata": {"name": f"breakglass-trial-{token}", "annotations": {ANNOTATION: token}}, **body}


def _refused_by(doc: dict, status: int, name: str) -> str | None:
    """The copy's own message when ``name`` refused the request, else None."""
    msg = str(doc.get("message", ""))
    if status in (400, 403, 422) and f"'{name}'" in msg:
        return msg.split("denied request:", 1)[-1].strip() if "denied request:" in msg else msg
    return None


def run(api, policy: dict, binding: dict, seconds: float = 20.0) -> Trial:
    """The trial of one policy and binding (objects as the API serves them), through ``api`` (access.kubeapi.Api)."""
    pname = str((policy.get("metadata") or {}).get("name", "?"))
    bname = str((binding.get("metadata") or {}).get("name", "?"))
    kind = policy.get("kind") if policy.get("kind") in PATHS else "ValidatingAdmissionPolicy"
    policies, bindings = PATHS[kind]
    token, mark = secrets.token_hex(4), secrets.token_hex(4)
    cp, cb = _copies(policy, binding, token)
    mp, mb = _marker(mark, kind)
    made: list[str] = []
    try:
        for path, obj in ((policies, cp), (bindings, cb), (policies, mp), (bindings, mb)):
            status, doc = api.request("POST", path, obj, forbidden_returns=True)
            if status not in (200, 201):
                return Trial(pname, bname, None, f"could not write the trial's copy ({status}: "
                                                 f"{str(doc.get('message', ''))[:200]})")
            made.append(f"{path}/{obj['metadata']['name']}")
        if not _marker_in_effect(api, mark, mp["metadata"]["name"], seconds):
            return Trial(pname, bname, None, f"the apiserver did not load the trial's policies within {seconds:.0f} s")
        return _try_writes(api, pname, bname, token, cp["metadata"]["name"], seconds, kind)
    except BreakglassError as e:
        return Trial(pname, bname, None, f"the trial could not be made: {e}")
    finally:
        for path in reversed(made):
            try:
                api.request("DELETE", path, forbidden_returns=True)
            except BreakglassError:
                pass  # a copy left behind matches only its own token: it refuses nothing else


def _marker_in_effect(api, token: str, name: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    probe = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"breakglass-trial-{token}", "annotations": {ANNOTATION: token}}}
    while True:
        status, doc = api.request("POST", "/api/v1/namespaces/default/configmaps", probe, query="dryRun=All",
                                  forbidden_returns=True)
        if _refused_by(doc, status, name) is not None:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def _try_writes(api, pname: str, bname: str, token: str, copy_name: str, seconds: float,
                kind: str = "ValidatingAdmissionPolicy") -> Trial:
    tried, refused = [], []
    for path, write, body in _WRITES:
        deadline = time.monotonic() + min(seconds, 10.0)
        while True:
            status, doc = api.request("POST", path, _probe(path, write, body, token), query="dryRun=All",
                                      forbidden_returns=True, headers=APISERVER)
            # the live policy refusing already (through another of its bindings) blocks the way back all the same
            why = _refused_by(doc, status, copy_name) or _refused_by(doc, status, pname)
            # a paramKind the apiserver is still starting an informer for: the policy it copies has it synced
            if why and "not yet synced" in why and time.monotonic() < deadline:
                time.sleep(0.3)
                continue
            break
        if status == 404:
            tried.append(f"{write}: not served here")
        elif status == 403 and "impersonate" in str(doc.get("message", "")):
            return Trial(pname, bname, None, "these credentials cannot act as system:apiserver (impersonate), "
                                             "as the trial must to see what the apiserver's own writes meet")
        elif why is not None:
            refused.append(write)
            tried.append(f"{write}: refused: {why.replace(copy_name, pname)}")
        else:
            tried.append(f"{write}: admitted" if status in (200, 201) else
                         f"{write}: not refused by the policy ({status}: {str(doc.get('message', ''))[:120]})")
    who = f"{kind} '{pname}' (binding '{bname}')"
    if refused:
        first = next(t for t in tried if t.startswith(refused[0] + ":"))
        return Trial(pname, bname, True, f"{who} refuses the apiserver's own {', '.join(refused)} writes, as the "
                                         f"apiserver said in a dry run: {first.split(': refused: ', 1)[1]}", tried)
    return Trial(pname, bname, False, f"{who} lets the apiserver's own writes through (dry runs of "
                                      f"{', '.join(k for _, k, _ in _WRITES)} as system:apiserver)", tried)


# the apiserver's words for an admission policy's refusal (k8s.io/apiserver policy dispatchers), and for admission
# whose informers have not synced yet (a moment after a start)
_POLICY_REFUSAL = re.compile(r"(?:Validating|Mutating)AdmissionPolicy '[^']+'|(?<![\w-])policy '[^']+' with binding")
_NOT_READY = "not yet ready to handle request"


def live(api, seconds: float = 30.0) -> tuple[bool | None, list[str]]:
    """The writes kube-apiserver makes at start, as server-side dry runs through ``api`` as system:apiserver, met by
    the policies live now (after a revert turned their plugin back on): (refused by a policy?, one line per write).
    None: could not tell (the apiserver did not answer, or these credentials cannot act as system:apiserver)."""
    token = secrets.token_hex(4)
    lines, refused = [], False
    try:
        for path, write, body in _WRITES:
            deadline = time.monotonic() + seconds
            while True:
                obj = _probe(path, write, body, token)
                status, doc = api.request("POST", path, obj, query="dryRun=All", forbidden_returns=True,
                                          headers=APISERVER)
                msg = str(doc.get("message", ""))
                if _NOT_READY in msg and time.monotonic() < deadline:
                    time.sleep(0.5)  # a start's admission informers, syncing: asked again
                    continue
                break
            if status == 403 and "impersonate" in msg:
                return None, ["these credentials cannot act as system:apiserver (impersonate)"]
            m = _POLICY_REFUSAL.search(msg)
            if m and status in (400, 403, 422):
                refused = True
                lines.append(f"{write}: refused by {m.group(0).replace(' with binding', '')}: "
                             f"{msg.split('denied request:', 1)[-1].strip()[:200]}")
            elif status == 404:
                lines.append(f"{write}: not served here")
            else:
                lines.append(f"{write}: no admission policy refused it")
    except BreakglassError as e:
        return None, [f"the apiserver's own writes could not be tried: {e}"]
    return refused, lines
