"""What this installation is made of: breakglass, its Python, its libraries, and the tools on PATH.

Library versions come from package metadata (nothing is imported, so ``version`` stays fast and works
when a native module cannot load); ``loads`` says whether the native ones actually import here.
Tools are asked for their client version, in parallel, each with a short timeout.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib import metadata

from breakglass import __version__

# distribution, module to try, what it gives breakglass
LIBRARIES = (
    ("typer", None, "command line"),
    ("questionary", None, "wizard prompts"),
    ("PyYAML", None, "YAML"),
    ("paramiko", "paramiko", "SSH"),
    ("cryptography", None, "SSH, the sandbox's throwaway CA"),
    ("etcd-sdk-python", "pyetcd", "etcd access"),
    ("grpcio", "grpc", "etcd access"),
    ("protobuf", None, "etcd access"),
    ("kubernetes", None, "kubeconfig access"),
    ("hyperscan", "hyperscan", "fast log search (a pure-Python search is used without it)"),
)
# tool, version command, how to read the version from its output
TOOLS = (
    ("kubectl", ["version", "--client"], r"Client Version:\s*(\S+)|GitVersion:\"(v[^\"]+)\""),
    ("talosctl", ["version", "--client"], r"Tag:\s*(\S+)|Talos\s+(v\S+)"),
    ("etcdctl", ["version"], r"etcdctl version:\s*(\S+)"),
    ("ssh", ["-V"], r"(OpenSSH_\S+)"),
)


@dataclass
class Library:
    name: str
    version: str | None  # None: not installed
    used_for: str
    loads: bool | None = None  # for native modules: does it import here (None: not checked)


@dataclass
class Tool:
    name: str
    path: str | None
    version: str | None = None


@dataclass
class About:
    breakglass: str
    python: str
    platform: str
    bundle: str | None  # the offline bundle's native target, when running from one
    libraries: list[Library] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def collect(check_imports: bool = True, timeout: float = 3.0) -> About:
    about = About(__version__, platform.python_version(), f"{sys.platform}-{platform.machine()}",
                  os.environ.get("BREAKGLASS_BUNDLE_TARGET") if os.environ.get("BREAKGLASS_BUNDLE") else None)
    for dist, module, used_for in LIBRARIES:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = None
        about.libraries.append(Library(dist, version, used_for,
                                       _loads(module) if check_imports and module and version else None))
    with ThreadPoolExecutor(len(TOOLS)) as pool:
        about.tools = list(pool.map(lambda t: _tool(*t, timeout=timeout), TOOLS))
    return about


def _loads(module: str) -> bool:
    import importlib  # noqa: PLC0415

    try:
        importlib.import_module(module)
        return True
    except Exception:  # noqa: BLE001 - any failure to import means: not usable here
        return False


def _tool(name: str, args: list[str], pattern: str, timeout: float) -> Tool:
    path = shutil.which(name)
    if not path:
        return Tool(name, None)
    try:
        p = subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return Tool(name, path, "unknown (did not answer)")
    m = re.search(pattern, p.stdout + p.stderr)
    return Tool(name, path, next((g for g in m.groups() if g), None) if m else "unknown")
