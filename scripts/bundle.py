"""Build dist/breakglass.pyz: one file that runs with the system python3 (3.10+) on Linux x86_64 and aarch64,
offline, with no pip. Also dist/kubectl-breakglass.tar.gz and dist/breakglass.krew.yaml for krew.

    python scripts/bundle.py [--python 3.10,3.11,3.12,3.13,3.14] [--machine x86_64,aarch64] [--out dist/breakglass.pyz]

For each target (CPython minor version x machine) pip resolves breakglass's own wheel against PyPI with
that target's platform tags (manylinux glibc 2.17-2.28) and downloads binary wheels only. Each wheel is
stored once in the zip, uncompressed (wheels already are), with bundle.json naming the wheels of each
target; scripts/bundle_main.py becomes __main__.py and picks and unpacks them at run time. Entries are
written in a fixed order with fixed times, so the same wheels give the same bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
MACHINES = ("x86_64", "aarch64")
GLIBC = range(17, 29)  # manylinux_2_17 (CentOS 7 era) to manylinux_2_28 (RHEL 8, Debian 10, Ubuntu 20.04)
# Left out: the pure-Python search gives the same answers (hyperscan is 2.5 MiB per target, a quarter of the file).
EXCLUDE = {"hyperscan"}
# Their compiled parts are optional speedups, and each also ships a pure wheel: one file instead of ten.
PREFER_PURE = {"aiohttp", "multidict", "yarl", "frozenlist", "propcache", "charset_normalizer"}
EPOCH = (1980, 1, 1, 0, 0, 0)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def own_wheel(work: str) -> str:
    out = os.path.join(work, "self")
    shutil.rmtree(out, ignore_errors=True)
    # pure: the newline counter's C extension would tie the wheel to this Python and machine
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "-w", out, ROOT], check=True, env={**os.environ, "BREAKGLASS_PURE": "1"})
    (name,) = os.listdir(out)
    return os.path.join(out, name)


def download(target: str, wheel: str, work: str) -> list[str]:
    """The wheels ``target`` needs, downloaded into work/<target>/ (pip's cache keeps repeats offline)."""
    py, machine = target.split("-")
    ver = f"{py[2]}.{py[3:]}"
    dest = os.path.join(work, target)
    stale = os.path.join(dest, os.path.basename(wheel))
    if os.path.exists(stale):  # pip keeps a file it already has: breakglass's own wheel must be today's
        os.unlink(stale)
    platforms = [f"manylinux_2_{g}_{machine}" for g in GLIBC] + [f"manylinux2014_{machine}"]
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:",
           "--python-version", ver, "--implementation", "cp", "--abi", py, "--abi", "abi3", "--abi", "none",
           "-d", dest, wheel]
    for p in platforms:
        cmd += ["--platform", p]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"bundle: pip could not resolve {target}:\n{p.stderr[-2000:]}")
    # The directory may hold wheels of earlier runs too: keep what this resolution chose.
    chosen = []
    for line in p.stdout.splitlines():
        for marker in ("Saved ", "File was already downloaded "):
            if marker in line:
                chosen.append(os.path.join(dest, os.path.basename(line.split(marker, 1)[1].strip())))
    if not chosen:
        raise SystemExit(f"bundle: pip chose no wheels for {target}:\n{p.stdout[-2000:]}")
    return sorted(set(chosen))


def _dist(path: str) -> tuple[str, str]:
    name, version = os.path.basename(path).split("-")[:2]
    return name.lower().replace("-", "_"), version


def slim(per_target: dict[str, list[str]], work: str, exclude: set[str]) -> dict[str, list[str]]:
    """Fewer bytes for the same code: drop ``exclude``, take PREFER_PURE's pure wheels, and one abi3 wheel per
    machine (the one with the oldest CPython tag serves every newer Python)."""
    pure_dir = os.path.join(work, "pure")
    pure: dict[tuple[str, str], str] = {}
    abi3: dict[tuple[str, str, str], str] = {}
    for target, paths in per_target.items():
        machine = target.split("-")[1]
        for p in paths:
            dist, version = _dist(p)
            if "-abi3-" in p:
                key = (dist, version, machine)
                tag = int(os.path.basename(p).split("-")[2][3:] or 0)  # cp39 -> 9
                if key not in abi3 or tag < int(os.path.basename(abi3[key]).split("-")[2][3:] or 0):
                    abi3[key] = p
            if dist in PREFER_PURE and (dist, version) not in pure:
                pure[(dist, version)] = _pure_wheel(dist, version, target, pure_dir)
    out = {}
    for target, paths in per_target.items():
        machine = target.split("-")[1]
        keep = []
        for p in paths:
            dist, version = _dist(p)
            if dist in exclude:
                continue
            if "-abi3-" in p:
                p = abi3[(dist, version, machine)]
            keep.append(pure.get((dist, version)) or p)
        out[target] = sorted(set(keep))
    return out


def _pure_wheel(dist: str, version: str, target: str, dest: str) -> str:
    os.makedirs(dest, exist_ok=True)
    for n in os.listdir(dest):
        if _dist(n) == (dist, version) and n.endswith("-none-any.whl"):
            return os.path.join(dest, n)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--only-binary=:all:", "--platform", "any", "--implementation", "py", "--abi", "none",
                    "--python-version", f"3.{target.split('-')[0][3:]}", "-d", dest, f"{dist}=={version}"], check=True)
    return _pure_wheel(dist, version, target, dest)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_bundle(out: str, per_target: dict[str, list[str]]) -> dict:
    files: dict[str, str] = {}  # wheel name -> path (each stored once)
    for paths in per_target.values():
        for p in paths:
            files.setdefault(os.path.basename(p), p)
    main = open(os.path.join(ROOT, "scripts", "bundle_main.py"), "rb").read()
    ident = hashlib.sha256(main + b"".join(f"{n}:{sha256(p)}".encode() for n, p in sorted(files.items())))
    manifest = {"id": ident.hexdigest()[:16],
                "targets": {t: sorted(os.path.basename(p) for p in ps) for t, ps in sorted(per_target.items())}}
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(tmp, "a") as z:
        def put(name: str, data: bytes, compress: int) -> None:
            info = zipfile.ZipInfo(name, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = compress
            z.writestr(info, data)

        put("__main__.py", main, zipfile.ZIP_DEFLATED)
        put("bundle.json", json.dumps(manifest, indent=1, sort_keys=True).encode(), zipfile.ZIP_DEFLATED)
        for name in sorted(files):
            put(f"wheels/{name}", open(files[name], "rb").read(), zipfile.ZIP_STORED)
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return manifest


def write_krew(pyz: str, version: str, release_url: str) -> tuple[str, str]:
    """kubectl-breakglass.tar.gz (the bundle under the name kubectl runs) and the krew manifest for it."""
    dist = os.path.dirname(pyz)
    tgz = os.path.join(dist, "kubectl-breakglass.tar.gz")
    data = open(pyz, "rb").read()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, body, mode in (("kubectl-breakglass", data, 0o755),
                                 ("README.md", open(os.path.join(ROOT, "README.md"), "rb").read(), 0o644)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(body), mode, 0
            tar.addfile(info, io.BytesIO(body))
    raw = buf.getvalue()
    # gzip writes the time into its header; zero it so the same bundle gives the same archive
    raw = raw[:4] + b"\x00\x00\x00\x00" + raw[8:]
    with open(tgz, "wb") as f:
        f.write(raw)
    tag = f"v{version}"
    uri = release_url.replace("{{ .TagName }}", tag)
    template = open(os.path.join(ROOT, ".krew.yaml"), encoding="utf-8").read()
    rendered = template.replace(
        '{{ addURIAndSha "' + release_url + '" .TagName }}', f"uri: {uri}\n    sha256: {sha256(tgz)}")
    rendered = rendered.replace("{{ .TagName }}", tag)
    manifest = os.path.join(dist, "breakglass.krew.yaml")
    with open(manifest, "w", encoding="utf-8") as f:
        f.write(rendered)
    return tgz, manifest


RELEASE_URL = "https://github.com/breakglass-sh/breakglass/releases/download/{{ .TagName }}/kubectl-breakglass.tar.gz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=",".join(PYTHONS), help="CPython versions to carry native code for")
    ap.add_argument("--machine", default=",".join(MACHINES), help="machines to carry native code for")
    ap.add_argument("--out", default=os.path.join(ROOT, "dist", "breakglass.pyz"))
    ap.add_argument("--work", default=os.path.join(ROOT, "dist", ".wheels"), help="where downloaded wheels stay")
    ap.add_argument("--exclude", default=",".join(sorted(EXCLUDE)),
                    help="distributions to leave out (the tests leave out grpcio to check the degraded bundle)")
    ap.add_argument("--jobs", type=int, default=3)
    args = ap.parse_args()
    targets = [f"cp{v.replace('.', '')}-{m}" for v in args.python.split(",") for m in args.machine.split(",")]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    with _holding(args.work):
        return _build(args, targets)


@contextlib.contextmanager
def _holding(work: str):
    """One build at a time per work directory: its own wheel and each target's downloads are rewritten in place,
    so two builds side by side (two `make bundle`, parallel test workers) would take each other's files."""
    import fcntl  # noqa: PLC0415 - Linux and macOS, where the bundle is built

    with open(os.path.join(work, ".lock"), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"bundle: another build is using {work}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _build(args, targets: list[str]) -> int:
    wheel = own_wheel(args.work)
    log(f"bundle: resolving {len(targets)} targets: {', '.join(targets)}")
    with ThreadPoolExecutor(args.jobs) as pool:
        per_target = dict(zip(targets, pool.map(lambda t: download(t, wheel, args.work), targets)))
    per_target = slim(per_target, args.work, {d.strip().lower().replace("-", "_") for d in args.exclude.split(",") if d})
    manifest = write_bundle(args.out, per_target)
    version = os.path.basename(wheel).split("-")[1]
    tgz, krew = write_krew(args.out, version, RELEASE_URL)
    size = os.path.getsize(args.out)
    unique = len({w for ws in manifest["targets"].values() for w in ws})
    log(f"bundle: {args.out}: {size / (1 << 20):.1f} MiB, {unique} wheels for {len(targets)} targets, "
        f"id {manifest['id']}")
    log(f"bundle: {tgz} and {krew} (kubectl krew install --manifest={krew} --archive={tgz})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
