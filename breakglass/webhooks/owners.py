"""Who acts on a webhook configuration after breakglass has, and what each will do.

A deleted or patched configuration does not stay that way when something owns it, and what owns it decides which
way out holds and where a lasting fix must go (issue 35, from the owners' own sources):

- **Kyverno** (label ``webhook.kyverno.io/managed-by: kyverno``, set by its webhook controller): re-creates a deleted
  configuration and rewrites a patched one wholesale within a second while it is healthy (its watchdog re-queues
  every 10 s, gated on its ``kyverno-health`` lease); it sets an ownerReference by uid to its ``…:webhook``
  ClusterRole and re-reads the caBundle from its CA Secret. Its webhooks' matchConditions come from its ConfigMap
  (key ``matchConditions``, a JSON list; Helm value ``config.matchConditions``).
- **Gatekeeper** (label ``gatekeeper.sh/system: "yes"``, its configuration names): does not re-create its
  configuration (Helm or GitOps does), but its cert rotator injects the current CA into it whenever the manager
  runs. Its lasting conditions are the Helm value ``validatingWebhookMatchConditions`` (``validation.gatekeeper.sh``).
- **Helm** (``meta.helm.sh/release-name`` annotations): puts back the chart's object at the next upgrade.
- **Argo CD** (``argocd.argoproj.io/instance`` label, ``argocd.argoproj.io/tracking-id`` annotation) and **Flux**
  (``kustomize.toolkit.fluxcd.io/name`` or ``helm.toolkit.fluxcd.io/name`` labels): re-apply from Git, at once
  with self-heal or at the next sync.
- **cert-manager's cainjector** (``cert-manager.io/inject-ca-from`` annotation): rewrites caBundle.
- Any other ``ownerReferences``: the owner's controller, and the garbage collector deletes the object when the
  owner (by uid) is gone.

Only the object is read; nothing here talks to a cluster.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from breakglass.webhooks import model

KYVERNO_LABEL = "webhook.kyverno.io/managed-by"
GATEKEEPER_LABEL = "gatekeeper.sh/system"
_GATEKEEPER_CONFIGS = ("gatekeeper-validating-webhook-configuration", "gatekeeper-mutating-webhook-configuration")
KYVERNO_CONFIGMAP = ("kyverno", "kyverno")  # namespace, name: upstream's defaults (KYVERNO_NAMESPACE, INIT_CONFIG)


@dataclass(frozen=True)
class Owner:
    """One party that acts on a configuration."""

    kind: str  # kyverno | gatekeeper | helm | argocd | flux | cert-manager | controller
    name: str  # how it is named to the engineer
    evidence: str  # the label, annotation or reference that says so
    recreates: bool = False  # puts a deleted configuration back
    reverts_patches: bool = False  # undoes a patch of the configuration
    injects_ca: bool = False  # rewrites caBundle
    when: str = ""  # when it acts

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "evidence": self.evidence, "recreates": self.recreates,
                "revertsPatches": self.reverts_patches, "injectsCA": self.injects_ca, "when": self.when}


@dataclass
class Owners:
    """Everyone that acts on one configuration, strongest first."""

    of: str  # Kind/name
    owners: list[Owner] = field(default_factory=list)
    owner_refs: list[dict] = field(default_factory=list)  # the raw ownerReferences (apiVersion, kind, name, uid)

    def __bool__(self) -> bool:
        return bool(self.owners)

    def first(self, kind: str) -> Owner | None:
        return next((o for o in self.owners if o.kind == kind), None)

    @property
    def recreates(self) -> list[Owner]:
        return [o for o in self.owners if o.recreates]

    @property
    def reverts_patches(self) -> list[Owner]:
        return [o for o in self.owners if o.reverts_patches]

    def names(self) -> str:
        return ", ".join(o.name for o in self.owners)

    def warning(self, action: str) -> str | None:
        """What the owners will do to ``action`` (delete | patch | restore), in one sentence; None when nothing
        acts on it."""
        if not self.owners:
            return None
        kyverno = self.first("kyverno")
        if action == "delete":
            if kyverno:
                return ("Kyverno re-creates this configuration within a second while it is healthy: stop its "
                        "admission controller first (kubectl -n kyverno scale deploy kyverno-admission-controller "
                        "--replicas=0), or use the plugin flag, which nothing in the cluster can undo")
            back = self.recreates
            if back:
                return f"{back[0].name} puts a deleted configuration back {back[0].when}: the delete lasts until then"
            return None
        if action == "patch":
            if kyverno:
                return ("Kyverno rewrites this configuration wholesale on every reconcile (within a second): a patch "
                        "is undone at once; the change belongs in Kyverno's ConfigMap or Helm values")
            undo = self.reverts_patches
            if undo:
                return f"{undo[0].name} undoes a patch {undo[0].when}: change it where {undo[0].name} keeps it"
            return None
        if action == "restore":
            ca = [o for o in self.owners if o.injects_ca]
            refs = "; its ownerReferences name " + ", ".join(f"{r.get('kind')}/{r.get('name')}"
                                                              for r in self.owner_refs) + \
                   " by uid: restored after the owner was re-created, the garbage collector deletes it" \
                if self.owner_refs else ""
            if ca:
                return f"{ca[0].name} rewrites its caBundle {ca[0].when}{refs}"
            return (refs[2:] if refs else None)
        return None

    def to_json(self) -> dict:
        return {"configuration": self.of, "owners": [o.to_json() for o in self.owners]}


def _refs(cfg: model.AdmissionConfig) -> list[dict]:
    refs = (cfg.raw.get("metadata") or {}).get("ownerReferences") if isinstance(cfg.raw, dict) else None
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def gatekeeper_template(cfg: model.AdmissionConfig) -> str | None:
    """The ConstraintTemplate a Gatekeeper-generated ValidatingAdmissionPolicy names as its controller (Gatekeeper
    sets it: pkg/controller/constrainttemplate), else None."""
    for r in _refs(cfg):
        if r.get("kind") == "ConstraintTemplate" and str(r.get("apiVersion", "")).startswith("templates.gatekeeper.sh/"):
            return str(r.get("name") or "") or None
    return None


def of(cfg: model.AdmissionConfig) -> Owners:
    """Every owner the object names, strongest first (the engine that reconciles it, then whoever re-applies it)."""
    labels, ann = cfg.labels, cfg.annotations
    out = Owners(of=f"{cfg.kind_name}/{cfg.name}", owner_refs=_refs(cfg))
    add = out.owners.append
    if labels.get(KYVERNO_LABEL) == "kyverno":
        add(Owner("kyverno", "Kyverno", f"label {KYVERNO_LABEL}=kyverno", recreates=True, reverts_patches=True,
                  injects_ca=True, when="within a second while it is healthy (its webhook controller)"))
    if labels.get(GATEKEEPER_LABEL) == "yes" or cfg.name in _GATEKEEPER_CONFIGS:
        evidence = f"label {GATEKEEPER_LABEL}=yes" if labels.get(GATEKEEPER_LABEL) == "yes" else "its name"
        add(Owner("gatekeeper", "Gatekeeper", evidence, injects_ca=True,
                  when="whenever its manager runs (its cert rotator)"))
    template = gatekeeper_template(cfg)
    constraint = next((r for r in _refs(cfg) if str(r.get("apiVersion", "")).startswith("constraints.gatekeeper.sh/")),
                      None)  # a generated binding's controller is its constraint
    if (template or constraint) and not out.first("gatekeeper"):
        made_by = (f"ConstraintTemplate {template}" if template else
                   f"constraint {constraint.get('kind')}/{constraint.get('name')}")
        add(Owner("gatekeeper", "Gatekeeper", f"ownerReferences: {made_by}", recreates=True, reverts_patches=True,
                  when="whenever its manager reconciles the template or constraint (while it runs)"))
    release = ann.get("meta.helm.sh/release-name")
    if release:
        ns = ann.get("meta.helm.sh/release-namespace")
        add(Owner("helm", f"Helm release {ns + '/' if ns else ''}{release}", "annotation meta.helm.sh/release-name",
                  recreates=True, reverts_patches=True, when="at the next helm upgrade"))
    argo = labels.get("argocd.argoproj.io/instance") or ann.get("argocd.argoproj.io/tracking-id")
    if argo:
        app = argo.split(":", 1)[0]
        evidence = ("label argocd.argoproj.io/instance" if labels.get("argocd.argoproj.io/instance")
                    else "annotation argocd.argoproj.io/tracking-id")
        add(Owner("argocd", f"Argo CD application {app}", evidence, recreates=True, reverts_patches=True,
                  when="at the next sync (at once with self-heal)"))
    for key, what in (("kustomize.toolkit.fluxcd.io", "Kustomization"), ("helm.toolkit.fluxcd.io", "HelmRelease")):
        name = labels.get(f"{key}/name")
        if name:
            ns = labels.get(f"{key}/namespace")
            add(Owner("flux", f"Flux {what} {ns + '/' if ns else ''}{name}", f"label {key}/name", recreates=True,
                      reverts_patches=True, when="at its next reconcile (its interval)"))
    if ann.get("cert-manager.io/inject-ca-from") or ann.get("cert-manager.io/inject-ca-from-secret"):
        add(Owner("cert-manager", "cert-manager's cainjector", "annotation cert-manager.io/inject-ca-from",
                  injects_ca=True, when="within seconds while it runs"))
    if not out.owners and out.owner_refs:
        r = out.owner_refs[0]
        add(Owner("controller", f"the controller of {r.get('kind')}/{r.get('name')}", "ownerReferences",
                  recreates=True, reverts_patches=True, when="while it runs"))
    managed = labels.get("app.kubernetes.io/managed-by")
    if not out.owners and managed and managed.lower() != "helm":
        add(Owner("controller", managed, "label app.kubernetes.io/managed-by", reverts_patches=True,
                  when="while it runs"))
    return out


# -- the lasting fix where the owner keeps it ------------------------------------------------------------------

@dataclass
class Placement:
    """Where a matchConditions fix must go so that its owner keeps it."""

    form: str  # kyverno-config | gatekeeper-values | helm-values | gitops | static-manifest | patch
    owner: str | None  # who would undo a direct patch
    command: str  # the one command that makes the change (kubectl or helm)
    snippet: str  # YAML: the values or the object change to keep (in Git for GitOps)
    note: str  # why here, and what to watch for
    # the body of a `kubectl patch -p` command as YAML, for a file when the one line is too long to read (text
    # output gives `--patch-file`); the same change, its JSON values spaced so that they fold at a terminal's width
    patch_file: str = ""
    # another whole command in the owner's surface, with what it trades (Gatekeeper: keep the generated policy)
    alternative: str = ""
    alternative_why: str = ""

    def to_json(self) -> dict:
        out = {"form": self.form, "owner": self.owner, "command": self.command, "snippet": self.snippet,
               "note": self.note}
        if self.alternative:
            out.update(alternative=self.alternative, alternative_why=self.alternative_why)
        return out


def _yaml(doc) -> str:
    import yaml  # noqa: PLC0415

    return yaml.safe_dump(doc, sort_keys=False, width=100)


def _gatekeeper_template(template: str, conds: list[dict], gitops) -> Placement:
    """A ValidatingAdmissionPolicy Gatekeeper generates from a ConstraintTemplate's CEL source is rewritten from that
    source on every reconcile, so its fix goes into the template. Its paramKind is the constraint's own CRD, which a
    starting apiserver may not resolve for tens of seconds; until it does, the policy fails closed with `failed to
    configure policy` before any matchCondition is evaluated (k8s.io/apiserver policy/validating dispatcher). So
    the lasting form takes bootstrap writes out of the policy's reach altogether: ``generateVAP: false`` in the
    source (Gatekeeper deletes the policy and its bindings; its webhook, failing open by default, keeps
    enforcing the template). The source's ``matchCondition`` list is offered as the form that keeps the policy."""
    ops = [{"op": "add", "path": "/spec/targets/0/code/0/source/generateVAP", "value": False}]
    command = f"kubectl patch constrainttemplate {shlex.quote(template)} --type=json -p " \
              f"{shlex.quote(json.dumps(ops, separators=(',', ':')))}"
    keep = [{"op": "add", "path": "/spec/targets/0/code/0/source/matchCondition", "value": conds}]
    note = ("Gatekeeper generates this policy from ConstraintTemplate " + template + "'s K8sNativeValidation source "
            "and rewrites it on every reconcile, so a patch of the policy is undone. Its paramKind is the constraint's "
            "CRD, which a starting apiserver resolves only after a while (48 s in the sandbox); until then the policy "
            "refuses with `failed to configure policy` before any matchCondition is looked at, so matchConditions "
            "alone do not keep a restart safe. generateVAP: false makes Gatekeeper delete the policy and its bindings; "
            "its webhook keeps enforcing the template. Run it while the binding is gone (the way out): the policy "
            "refuses changes to cluster-scoped objects, the template included. The path assumes the "
            "K8sNativeValidation entry is the first of spec.targets[0].code (as in the Gatekeeper library). For every "
            "template at once: --default-create-vap-for-templates=false (Helm: defaultCreateVAPForTemplates=false)"
            + (f"; {gitops.name} re-applies the template: commit the change there" if gitops else ""))
    snippet = _yaml({"spec": {"targets": [{"target": "admission.k8s.gatekeeper.sh", "code": [
        {"engine": "K8sNativeValidation", "source": {"generateVAP": False}}]}]}})
    alternative = (f"kubectl patch constrainttemplate {shlex.quote(template)} --type=json -p "
                   + shlex.quote(json.dumps(keep, separators=(',', ':'))))
    why = ("keeps the generated policy: its source's matchCondition list is copied into it on every reconcile, "
           "and the apiserver's own writes are skipped once the paramKind resolves; until then a starting "
           "apiserver is still refused")
    return Placement("gatekeeper-template", "Gatekeeper", command, snippet, note, alternative=alternative,
                     alternative_why=why)


def place(cfg: model.AdmissionConfig, webhook: str | None, conds: list[dict], patch_command: str,
          patch_yaml: str) -> Placement:
    """The lasting form of adding ``conds`` to ``webhook`` of ``cfg``: in the owner's own configuration where an
    owner reconciles it; the direct patch only where nothing owns the object."""
    if cfg.manifest_based:
        where = cfg.static_manifest or f"the file of {cfg.name} in kube-apiserver's staticManifestsDir"
        return Placement(
            "static-manifest", None,
            f"# on every control-plane node: add these matchConditions to {where} (kube-apiserver reloads the directory)",
            patch_yaml,
            "a manifest-based configuration (1.36+): kube-apiserver loads it from a file on each control-plane node; "
            "it is not in etcd and the API does not serve it, so `kubectl patch` cannot reach it. Edit the file on "
            "every node (the apiserver watches the directory and reloads it), and in whatever writes those files "
            "(the node's configuration management)")
    who = of(cfg)
    gitops = who.first("argocd") or who.first("flux")
    if who.first("kyverno"):
        ns, name = KYVERNO_CONFIGMAP
        value = json.dumps(conds, separators=(",", ":"))
        body = json.dumps({"data": {"matchConditions": value}}, separators=(",", ":"))
        command = f"kubectl -n {ns} patch configmap {name} --type=merge -p {shlex.quote(body)}"
        note = ("Kyverno rewrites its webhooks from its ConfigMap on every reconcile, so a patch of the "
                "configuration is undone within a second; its ConfigMap's matchConditions (a JSON list, applied to "
                "every resource webhook it registers) is kept. Merge with any conditions already there; with Helm "
                "set config.matchConditions (below) so an upgrade keeps it"
                + (f"; {gitops.name} re-applies the chart: commit the values there" if gitops else ""))
        return Placement("kyverno-config", "Kyverno", command, _yaml({"config": {"matchConditions": conds}}), note,
                         _yaml({"data": {"matchConditions": json.dumps(conds)}}))  # Kyverno json.Unmarshals it
    gk = who.first("gatekeeper")
    template = gatekeeper_template(cfg)
    if gk and template and webhook is None:
        return _gatekeeper_template(template, conds, gitops)
    if gk and webhook in (None, "validation.gatekeeper.sh"):
        release = cfg.annotations.get("meta.helm.sh/release-name") or "gatekeeper"
        ns = cfg.annotations.get("meta.helm.sh/release-namespace") or "gatekeeper-system"
        command = (f"helm upgrade {shlex.quote(release)} gatekeeper/gatekeeper -n {shlex.quote(ns)} --reuse-values "
                   f"--set-json {shlex.quote('validatingWebhookMatchConditions=' + json.dumps(conds, separators=(',', ':')))}")
        note = ("Gatekeeper's chart renders validation.gatekeeper.sh from validatingWebhookMatchConditions; a direct "
                "patch lasts until the next helm upgrade" + (f" or {gitops.name}'s next sync" if gitops else ""))
        return Placement("gatekeeper-values", gk.name, command,
                         _yaml({"validatingWebhookMatchConditions": conds}), note)
    if gitops:
        return Placement("gitops", gitops.name, patch_command, patch_yaml,
                         f"{gitops.name} re-applies this configuration from Git {gitops.when}: commit the change "
                         f"below to the manifest it syncs; the command is only good until then")
    helm = who.first("helm")
    if helm:
        return Placement("helm-values", helm.name, patch_command, patch_yaml,
                         f"{helm.name} puts its own object back at the next upgrade: set these matchConditions in "
                         "the chart's values (its key for this webhook) and upgrade; the command is only good until "
                         "then")
    undo = who.reverts_patches
    if undo:
        return Placement("patch", undo[0].name, patch_command, patch_yaml,
                         f"{undo[0].name} may undo a patch {undo[0].when}: make the change where it keeps it")
    return Placement("patch", None, patch_command, patch_yaml, "nothing owns this configuration: the patch lasts")


# -- a revert among owners --------------------------------------------------------------------------------------

# where each engine keeps the CA it injects (namespace, Secret, key): re-read on each of its reconciles
CA_SECRETS = {"kyverno": ("kyverno", "kyverno-svc.kyverno.svc.kyverno-tls-ca", "tls.crt"),
              "gatekeeper": ("gatekeeper-system", "gatekeeper-webhook-server-cert", "ca.crt")}


def restored_by(original: dict, cur: dict) -> Owner | None:
    """The owner that put a deleted configuration back: ``cur`` is another object (a new uid) than the one
    backed up, and names an owner that re-creates it. None when an operator (or nothing known) made it."""
    if (cur.get("metadata") or {}).get("uid") == (original.get("metadata") or {}).get("uid"):
        return None
    try:
        who = of(model.from_json(cur, "api"))
    except Exception:  # noqa: BLE001 - an object the model refuses names no owner
        return None
    back = who.recreates
    return back[0] if back else None


def undone_by(cur: dict) -> Owner | None:
    """The owner that rewrites this configuration (so a patch it no longer holds was undone by it)."""
    try:
        who = of(model.from_json(cur, "api"))
    except Exception:  # noqa: BLE001
        return None
    undo = who.reverts_patches
    return undo[0] if undo else None


def _owner_path(ref: dict) -> str | None:
    """The API path of a cluster-scoped owner (a cluster-scoped object can only be owned by one)."""
    api_version, kind, name = ref.get("apiVersion"), ref.get("kind"), ref.get("name")
    if not (isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str) and name):
        return None
    base = "/api/v1" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/{kind.lower()}s/{name}"


def fit_for_restore(obj: dict, get) -> list[str]:
    """Make a backed-up configuration safe to re-create today, in place, and say what changed:

    - an ownerReference whose owner is gone, or is another object now (its uid differs), is dropped: the garbage
      collector would delete the restored copy at once;
    - a caBundle older than the owning engine's current CA is replaced by that CA: the engine re-reads it on each
      reconcile, and with autoUpdateWebhooks=false (Kyverno) never fixes a stale one.

    ``get(path)`` returns the object at an API path, or None (absent, or not readable)."""
    import base64  # noqa: PLC0415

    said = []
    meta = obj.setdefault("metadata", {})
    refs = meta.get("ownerReferences")
    if isinstance(refs, list) and refs:
        keep = []
        for r in refs:
            path = _owner_path(r) if isinstance(r, dict) else None
            now = get(path) if path else None
            if now is not None and (now.get("metadata") or {}).get("uid") == r.get("uid"):
                keep.append(r)
            else:
                said.append(f"dropped the ownerReference to {r.get('kind')}/{r.get('name')} (uid {r.get('uid')}): "
                            f"{'gone' if now is None else 'another object now'}, so the garbage collector would "
                            f"delete the restored copy")
        if keep:
            meta["ownerReferences"] = keep
        else:
            meta.pop("ownerReferences", None)
    try:
        who = of(model.from_json(obj, "api"))
    except Exception:  # noqa: BLE001
        return said
    for o in who.owners:
        if o.kind not in CA_SECRETS:
            continue
        ns, name, key = CA_SECRETS[o.kind]
        secret = get(f"/api/v1/namespaces/{ns}/secrets/{name}")
        current = ((secret or {}).get("data") or {}).get(key)
        if not current:
            continue
        try:
            base64.b64decode(current, validate=True)
        except ValueError:
            continue
        stale = 0
        for w in obj.get("webhooks") or []:
            cc = w.get("clientConfig") if isinstance(w, dict) else None
            if isinstance(cc, dict) and cc.get("caBundle") and cc.get("caBundle") != current:
                cc["caBundle"] = current
                stale += 1
        if stale:
            said.append(f"caBundle of {stale} webhook(s) set to {o.name}'s current CA (Secret {ns}/{name}): the "
                        f"backed-up one is older")
        break
    return said
