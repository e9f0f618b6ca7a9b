"""Import the libraries with native code only where they are needed, and say plainly when one cannot load.

The offline bundle (``make bundle``) carries compiled code for CPython 3.10-3.14 on Linux x86_64 and
aarch64. Elsewhere it still runs everything written in Python, and a path that needs gRPC (etcd) or
the cryptography stack (SSH) stops with one line and exit 6 instead of a traceback.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from types import ModuleType

from breakglass.core.errors import Unsupported


def load(module: str, capability: str, package: str) -> ModuleType:
    """``import module`` for ``capability`` (e.g. "etcd access"), which the ``package`` distribution provides."""
    try:
        return importlib.import_module(module)
    except (ImportError, OSError) as e:  # OSError: a shared library present but not loadable (wrong libc)
        raise unsupported(capability, package, e) from None


def unsupported(capability: str, package: str, err: Exception) -> Unsupported:
    return Unsupported(f"{capability} needs {package}, which cannot be loaded here: {err}", hint=_hint())


def _hint() -> str:
    where = f"CPython {sys.version_info.major}.{sys.version_info.minor} on {platform.machine()}"
    if os.environ.get("BREAKGLASS_BUNDLE"):
        carried = os.environ.get("BREAKGLASS_BUNDLE_TARGETS", "")
        return (f"this bundle carries native code for {carried or 'other platforms'}, not {where}; "
                "run it with one of those Pythons, or install breakglass with pip")
    return f"install breakglass with pip for {where} (pip install breakglass) to get it"
