"""Which requests got in while a webhook was failing open.

``audit`` reads kube-apiserver audit logs, which name every request; ``apiserver`` falls back to
the apiserver's own log, which names the webhook and, through slow-call traces, sometimes the
resource. Both fill the same ``model.LeakReport``.
"""

from breakglass.leaks.model import CSV_FIELDS, LeakReport, parse_time, recheck_yaml, to_csv

__all__ = ["CSV_FIELDS", "LeakReport", "parse_time", "recheck_yaml", "to_csv"]
