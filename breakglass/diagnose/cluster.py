"""A diagnosis's webhooks placed in their configurations by what the cluster holds (``diagnose`` given access).

The log names webhooks; ``findings`` can only guess their configurations from vendor conventions. With etcd or
the API reachable, every finding's webhook is looked up in the configurations read there
(``webhooks.resolve``): a configuration the log itself named stays, a convention's guess is replaced, and the
finding records where its configuration came from (``etcd``, ``api``) and who owns it.
"""

from __future__ import annotations

from breakglass.diagnose import remedies
from breakglass.diagnose.model import Diagnosis
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
