"""Benchmark the offline bundle next to the installed package: size, first run (unpacking), warm start-up,
and a diagnose of an example log, each against the installed `breakglass` and `kubectl version --client`.

Uses dist/breakglass.pyz (`make bundle` builds it). The issue sets no goal; the README records the numbers.
Usage: python bench/bundle.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import ROOT, report, run  # noqa: E402


def _installed_size() -> int:
    """Bytes of the installed package and everything it imports from site-packages."""
    import site  # noqa: PLC0415

    total = 0
    for sp in site.getsitepackages():
        for d, _, files in os.walk(sp):
            total += sum(os.path.getsize(os.path.join(d, f)) for f in files if not os.path.islink(os.path.join(d, f)))
    return total


def main() -> int:
    pyz = os.path.join(ROOT, "dist", "breakglass.pyz")
    if not os.path.exists(pyz):
        raise SystemExit("dist/breakglass.pyz is missing: run `make bundle` first")
    # /usr/bin/python3, not a pyenv shim (a shell script that would add its own start-up to every run)
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    installed = [os.path.join(os.path.dirname(sys.executable), "breakglass")]
    kubectl = shutil.which("kubectl")
    log = os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")
    cache = tempfile.mkdtemp(prefix="breakglass-bench-")
    os.environ["BREAKGLASS_BUNDLE_CACHE"] = cache
    try:
        cold, _, code = run([python, pyz, "--help"], repeat=1)  # unpacks this Python's target
        assert code == 0, f"bundle exited {code}"
        unpacked = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs)
        bundle_t, bundle_rss, _ = run([python, pyz, "--help"], repeat=21)
        inst_t, inst_rss, _ = run([*installed, "--help"], repeat=21)
        print(f"size: bundle {os.path.getsize(pyz) / (1 << 20):.1f} MiB (unpacked for this Python: "
              f"{unpacked / (1 << 20):.0f} MiB); installed venv site-packages {_installed_size() / (1 << 20):.0f} MiB")
        print(f"first run of the bundle (unpacks): {cold:.2f}s")
        report("bundle --help vs installed", bundle_t, inst_t, "installed --help", "no goal set")
        if kubectl:
            k_t, _, _ = run([kubectl, "version", "--client"], repeat=21)
            report("bundle --help vs kubectl", bundle_t, k_t, "kubectl version --client", "no goal set")
        d_b, _, code = run([python, pyz, "diagnose", log, "--year", "2026"], repeat=11)
        assert code == 3, f"bundle diagnose exited {code}"
        d_i, _, _ = run([*installed, "diagnose", log, "--year", "2026"], repeat=11)
        report("bundle diagnose (example log) vs installed", d_b, d_i, "installed diagnose", "no goal set")
        print(f"peak RSS --help: bundle {bundle_rss / 1024:.0f} MB, installed {inst_rss / 1024:.0f} MB")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
