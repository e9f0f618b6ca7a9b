"""A diagnosis's webhooks placed in their configurations by what the cluster holds (``diagnose`` given access).

The log names webhooks; ``findings`` can only guess their configurations from vendor conventions. With etcd or
the API reachable, every finding's webhook is looked up in the configurations read there
(``webhooks.resolve``): a configuration the log itself named stays, a convention's guess is replaced, and the
finding records where its configuration came from (``etcd``, ``api``) and who owns it.
"""

from __future__ import annotations

from breakglass.core.errors import BreakglassError
from breakglass.diagnose import remedies
from breakglass.diagnose.model import CONVERSION, NODE_LEASE, PROVEN, REFUTED, Diagnosis
from breakglass.webhooks import model, resolve


def place(diag: Diagnosis, configs: list[model.AdmissionConfig], source: str) -> list[str]:
    """Update ``diag`` in place; return notes for what could not be placed or was ambiguous."""
    notes: list[str] = []
    for f in diag.findings:
        if not f.webhook or f.configuration_source == "log":
            continue
        kinds = [f.webhook_type] if f.webhook_type in (model.VALIDATING, model.MUTATING) else None
        found = resolve.find(configs, f.webhook, source, kinds)
        if not found:
            if f.configuration:
                notes.append(f"{f.id}: no configuration in the cluster defines webhook {f.webhook} (the "
                             f"{f.configuration_source} guess {f.configuration} is not there either)"
                             if not any(c.name == f.configuration for c in configs) else
                             f"{f.id}: webhook {f.webhook} is not in {f.configuration} as the cluster holds it")
            continue
        if len(found) > 1:
            notes.append(f"{f.id}: webhook {f.webhook} is defined in {', '.join(m.ref for m in found)}")
            continue
        m = found[0]
        f.configuration, f.configuration_source, f.webhook_type = m.configuration, source, m.kind
        if m.owner:
            f.operator_note = f"{m.owner} may recreate or overwrite it" + (
                f"; {f.operator_note}" if f.operator_note else "")
    diag.remedies = remedies.options(diag.findings)
    return notes


def _webhook(configs: list[model.AdmissionConfig], configuration: str | None, name: str, kind: str | None):
    for cfg in configs:
        if cfg.kind not in (model.VALIDATING, model.MUTATING) or (kind and cfg.kind != kind):
            continue
        if configuration and cfg.name != configuration:
            continue
        for w in cfg.webhooks:
            if w.name == name:
                return cfg, w
    return None, None


def prove(diag: Diagnosis, configs: list[model.AdmissionConfig], source: str, backend_of=None,
          namespaces: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Prove or refute each webhook finding's cycle against its configuration (``cycle``), then the verdict again.

    ``backend_of(namespace, name)`` reads a Service's endpoints (webhooks.backend.Backend), None when only a saved
    file was read: then the backend's state is what the log says. Returns notes for what could not be checked."""
    from breakglass.diagnose import cycle, findings  # noqa: PLC0415 - findings imports this module's peers

    notes: list[str] = []
    judged: list = []
    for f in diag.findings:
        if f.deadlock == CONVERSION and f.service and backend_of is not None:
            _conversion_backend(f, backend_of, notes)
            continue
        if not f.webhook or f.mode not in ("closed", "deny") or f.deadlock == CONVERSION or f.bootstrap_deadlock:
            continue  # a bootstrap deadlock is shown by the apiserver's own lines; a conversion is not admission
        cfg, w = _webhook(configs, f.configuration, f.webhook, f.webhook_type)
        if w is None:
            cfg, w = _webhook(configs, None, f.webhook, None)
        if w is None:
            notes.append(f"{f.id}: webhook {f.webhook} is not in what was read ({source}): its cycle is not checked")
            continue
        backend = None
        if backend_of is not None and w.service:
            ns, _, name = w.service.partition("/")
            try:
                backend = backend_of(ns, name)
            except BreakglassError as e:
                notes.append(f"{f.id}: the endpoints of {w.service} could not be read ({e})")
        j = cycle.judge(f, w, cfg.name, source, backend, namespaces)
        cycle.apply(f, j)
        judged.append((f, j))
    # a lost leader lease is the webhooks' doing where one of them is shown to refuse Leases
    lease_proven = any(j.proof == PROVEN and j.family == NODE_LEASE for _, j in judged)
    for f in diag.findings:
        if f.family == "leader-election-lost" and judged:
            f.proof = PROVEN if lease_proven else REFUTED
            f.prove = None
            if not lease_proven:
                f.deadlock = None
                f.cycle = f.cycle[:1] + ["checked: none of the failing webhooks blocks the writes that keep "
                                         "Leases, Nodes and leaders alive"]
    diag.verdict = findings.verdict(diag.findings, diag.notices)
    diag.remedies = remedies.options(diag.findings)
    return notes


def _conversion_backend(f, backend_of, notes: list[str]) -> None:
    """A conversion webhook's backend as the cluster holds it: down (the outage is shown) or answering again."""
    ns, _, name = f.service.partition("/")
    try:
        b = backend_of(ns, name)
    except BreakglassError as e:
        notes.append(f"{f.id}: the endpoints of {f.service} could not be read ({e})")
        return
    if b is None:
        return
    what = ", ".join(f.crds[:3]) or "the custom resources"
    f.cycle = [f"the log: the conversion webhook of {what} fails ({f.cause})", b.line()]
    if b.healthy:
        f.proof = REFUTED
        f.cycle.append("its backend answers again: conversions work once the apiserver retries")
    else:
        f.proof = PROVEN
        f.cycle.append("reads and writes of those resources in another version fail until it returns; an operator "
                       "that lists them to start cannot start")


def backend_reader(source: str, kubeconfig=None, context=None, etcd_endpoints=None, etcd_cacert=None,
                   etcd_cert=None, etcd_key=None, etcd_prefix: str = "/registry", timeout=None):
    """``backend_of(namespace, name)`` reading a Service's endpoints through the API or from etcd."""
    from breakglass.webhooks import backend  # noqa: PLC0415

    if source == "api":
        from breakglass.access import kubeapi  # noqa: PLC0415

        api = kubeapi.connect(kubeconfig, context, timeout or 10.0)
        return lambda ns, name: backend.from_api(api, ns, name)

    def from_etcd(ns: str, name: str):
        from breakglass.access.etcd import Etcd, EtcdSettings  # noqa: PLC0415

        settings = EtcdSettings.resolve(etcd_endpoints, etcd_cacert, etcd_cert, etcd_key, timeout)
        etcd = Etcd(settings, backend.etcd_prefixes(ns, etcd_prefix))
        try:
            return backend.from_etcd(etcd, ns, name, etcd_prefix)
        finally:
            etcd.close()

    return from_etcd
