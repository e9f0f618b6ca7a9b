# The first code to run in dist/breakglass.pyz (copied into the zip as __main__.py). Standard library only.
#
# The zip holds wheels, each stored once, and bundle.json, which names the wheels each target
# (CPython minor version x machine) needs. On first run the target's wheels are unpacked into
# ~/.cache/breakglass/bundle-<id>/<target>/ (built beside it, renamed into place, so a crash or a
# second process never sees half of it); later runs only check that directory and put it first on
# sys.path. Native modules cannot be imported from inside a zip, which is why this unpacks at all.
#
# On a Python or machine the bundle has no wheels for, it unpacks the nearest target instead:
# everything written in Python works, modules with optional speedups fall back to pure Python,
# and the paths that need a missing native module (gRPC for etcd, cryptography for SSH) stop
# with one line and exit 6 (breakglass/core/capability.py says which).
import json
import os
import platform
import sys
import zipfile

if sys.version_info < (3, 10):
    sys.stderr.write("breakglass: error: needs Python 3.10 or newer, this is %s\n" % platform.python_version())
    sys.exit(2)

_MACHINES = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}


def _target(targets):
    machine = _MACHINES.get(platform.machine().lower(), platform.machine().lower())
    want = "cp%d%d-%s" % (sys.version_info[0], sys.version_info[1], machine)
    forced = os.environ.get("BREAKGLASS_BUNDLE_FORCE_TARGET")  # for tests of the fallback
    if forced:
        return forced, forced == want
    if want in targets:
        return want, True

    def minor(t):  # cp312-x86_64 -> 12
        return int(t.split("-")[0][3:])

    # nearest: same machine, the newest Python not newer than this one; else any
    same = sorted((t for t in targets if t.endswith("-" + machine)), key=minor)
    older = [t for t in same if minor(t) <= sys.version_info[1]]
    return (older or same or sorted(targets, key=minor))[-1], False


def _unpack(bundle, names, dest):
    import shutil
    import tempfile

    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".unpack-", dir=parent)
    try:
        for name in names:
            with bundle.open("wheels/" + name) as raw, zipfile.ZipFile(raw) as wheel:
                for info in wheel.infolist():
                    path = info.filename
                    head, _, rest = path.partition("/")
                    if head.endswith(".data"):  # wheel spec: purelib/platlib go to site-packages
                        kind, _, rest = rest.partition("/")
                        if kind not in ("purelib", "platlib") or not rest:
                            continue
                        path = rest
                    out = os.path.join(tmp, path)
                    if info.is_dir() or not os.path.realpath(out).startswith(os.path.realpath(tmp) + os.sep):
                        continue
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    with wheel.open(info) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst)
        open(os.path.join(tmp, ".complete"), "w").close()
        try:
            os.rename(tmp, dest)
        except OSError:  # another process finished first: use theirs
            if not os.path.exists(os.path.join(dest, ".complete")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _site():
    here = os.path.dirname(os.path.abspath(__file__))  # the .pyz itself
    with zipfile.ZipFile(here) as bundle:
        manifest = json.loads(bundle.read("bundle.json"))
        target, exact = _target(manifest["targets"])
        base = os.environ.get("BREAKGLASS_BUNDLE_CACHE") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "breakglass")
        dest = os.path.join(base, "bundle-" + manifest["id"], target)
        if not os.path.exists(os.path.join(dest, ".complete")):
            if sys.stderr.isatty():  # a pause of a second or two, once: say why
                sys.stderr.write("breakglass: first run of this bundle: unpacking %s into %s\n" % (target, base))
            try:
                _unpack(bundle, manifest["targets"][target], dest)
            except OSError:  # no writable cache (read-only home): unpack for this run only
                import tempfile

                dest = os.path.join(tempfile.mkdtemp(prefix="breakglass-"), target)
                _unpack(bundle, manifest["targets"][target], dest)
    os.environ["BREAKGLASS_BUNDLE"] = here
    os.environ["BREAKGLASS_BUNDLE_TARGET"] = target if exact else target + " (nearest; no exact match here)"
    pythons = sorted({int(t.split("-")[0][3:]) for t in manifest["targets"]})
    machines = sorted({t.split("-")[1] for t in manifest["targets"]})
    os.environ["BREAKGLASS_BUNDLE_TARGETS"] = "CPython %s on %s" % (
        ", ".join("3.%d" % v for v in pythons), " and ".join(machines))
    return dest


sys.path.insert(0, _site())
sys.path[:] = [p for p in sys.path if not p.endswith(".pyz")]  # nothing is imported from the zip itself

from breakglass.cli import bundle_main  # noqa: E402

bundle_main()
