"""breakglass: bring a control plane back when admission webhooks have locked it up.

The package is a library first: every command is a thin layer over functions in
these modules that return result objects. Only ``breakglass.cli`` knows about
typer; nothing here imports it.
"""

__version__ = "0.1.0"


def version_line() -> str:
    """What `breakglass --version` prints, from the fast path and the full command line alike."""
    return f"breakglass {__version__}"
