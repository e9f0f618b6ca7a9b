"""The offline bundle (scripts/bundle.py): built for real from PyPI wheels, then run by a fresh virtual
environment's python with nothing installed and, where the kernel allows, no network at all."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.conftest import ROOT
from tests.test_etcd_remedy import _seed, _snapshot

WORK = os.path.join(ROOT, "dist", ".wheels")  # downloaded wheels stay between runs, as with `make bundle`
HOST = f"cp{sys.version_info.major}{sys.version_info.minor}-{os.uname().machine}"
TALOS_LOG = os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")


def _build(out, *extra):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bundle.py"), "--out", str(out),
                        "--work", WORK, *extra], capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The offline bundle, breakglass.pyz, built for real by scripts/bundle.py in the module's temporary directory.

    Cost: bundle.py builds the package's wheel and resolves ten targets (CPython 3.10 to 3.14, x86_64 and aarch64)
    with `pip download` against PyPI, three at a time; the wheels stay in dist/.wheels, so a warm run only
    resolves. The file under test is this checkout's, built as `make bundle` builds it."""
    return _build(tmp_path_factory.mktemp("dist") / "breakglass.pyz")


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory):
    """A fresh virtual environment with nothing installed, not even pip."""
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    py = d / "bin" / "python"
    listed = subprocess.run([str(py), "-c", "import sys; print([p for p in sys.path if 'site-packages' in p])"],
                            capture_output=True, text=True, check=True).stdout
    site = eval(listed)[0]  # noqa: S307 - our own child's repr of a list of paths
    assert os.listdir(site) == [] or set(os.listdir(site)) <= {"_distutils_hack", "distutils-precedence.pth"}
    return py


def _run(py, pyz, *args, home, offline=False, env=None, target=None, py_args=()):
    e = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
         "BREAKGLASS_BUNDLE_CACHE": str(home / "cache"), "BREAKGLASS_STATE_DIR": str(home / "state"), **(env or {})}
    if target:
        e["BREAKGLASS_BUNDLE_FORCE_TARGET"] = target
    cmd = [str(py), *py_args, str(pyz), *args]
    if offline and _can_unshare():
        cmd = ["unshare", "--net", *cmd]  # a network namespace with no interfaces up: nothing to reach
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300, cwd=str(home))


def _can_unshare():
    return shutil.which("unshare") and subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


def test_bundle_carries_native_code_for_every_target(bundle):
    with zipfile.ZipFile(bundle) as z:
        manifest = json.loads(z.read("bundle.json"))
        stored = {n[len("wheels/"):] for n in z.namelist() if n.startswith("wheels/")}
        assert z.read("__main__.py") == open(os.path.join(ROOT, "scripts", "bundle_main.py"), "rb").read()
    assert open(bundle, "rb").read(2) == b"#!" and os.access(bundle, os.X_OK)
    targets = manifest["targets"]
    assert set(targets) == {f"cp3{v}-{m}" for v in range(10, 15) for m in ("x86_64", "aarch64")}
    for target, wheels in targets.items():
        py, machine = target.split("-")
        assert set(wheels) <= stored
        grpc = [w for w in wheels if w.startswith("grpcio-")]
        core = [w for w in wheels if w.startswith("pydantic_core-")]
        assert len(grpc) == 1 and f"-{py}-{py}-" in grpc[0] and machine in grpc[0], (target, grpc)
        assert len(core) == 1 and machine in core[0], (target, core)
        assert any(w.startswith("cryptography-") and "abi3" in w and machine in w for w in wheels)
        assert any(w.startswith("breakglass-") for w in wheels)
        assert not any(w.startswith("hyperscan-") for w in wheels)  # left out on purpose (README)


def test_runs_offline_from_a_clean_venv(bundle, clean_python, tmp_path):
    p = _run(clean_python, bundle, "--help", home=tmp_path, offline=True)
    assert p.returncode == 0 and "Usage: breakglass" in p.stdout, p.stderr[-2000:]
    p = _run(clean_python, bundle, "diagnose", TALOS_LOG, "--year", "2026", home=tmp_path, offline=True)
    assert p.returncode == 3, p.stderr[-2000:]
    assert "BOOTSTRAP DEADLOCK" in p.stdout and "validate.kyverno.svc-fail" in p.stdout
    p = _run(clean_python, bundle, "version", "-o", "json", home=tmp_path, offline=True)
    about = json.loads(p.stdout)["result"]
    assert about["bundle"] == HOST
    libs = {x["name"]: x for x in about["libraries"]}
    assert libs["grpcio"]["loads"] and libs["paramiko"]["loads"] and libs["hyperscan"]["version"] is None
    # the second run uses the unpacked cache: one directory per target, complete
    (cache,) = (tmp_path / "cache").iterdir()
    assert sorted(x.name for x in cache.iterdir()) == [HOST] and (cache / HOST / ".complete").exists()


def test_recover_etcd_dry_run_against_real_etcd(bundle, clean_python, tmp_path, etcd_clean):
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    p = _run(clean_python, bundle, "recover", "--method", "etcd", "-w",
             "validating/kyverno-resource-validating-webhook-cfg", "--etcd-endpoints", etcd_clean.endpoint,
             "--dry-run", home=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "/registry/validatingwebhookconfigurations/kyverno-resource-validating-webhook-cfg" in p.stdout
    assert _snapshot(etcd_clean) == before  # a dry run


def test_without_grpc_the_etcd_paths_say_so_and_the_rest_works(tmp_path, clean_python, etcd_clean):
    slim = _build(tmp_path / "slim.pyz", "--python", f"{sys.version_info.major}.{sys.version_info.minor}",
                  "--machine", os.uname().machine, "--exclude", "hyperscan,grpcio")
    p = _run(clean_python, slim, "diagnose", TALOS_LOG, "--year", "2026", home=tmp_path, offline=True)
    assert p.returncode == 3, p.stderr[-2000:]
    p = _run(clean_python, slim, "recover", "--method", "etcd", "-w", "validating/x", "--etcd-endpoints",
             etcd_clean.endpoint, "--dry-run", home=tmp_path)
    assert p.returncode == 6, p.stderr[-2000:]
    first = p.stderr.strip().splitlines()[0]
    assert first.startswith("breakglass: error: etcd access needs grpcio, which cannot be loaded here")
    assert "Traceback" not in p.stderr
    p = _run(clean_python, slim, "etcd", "list", "--etcd-endpoints", etcd_clean.endpoint, home=tmp_path)
    assert p.returncode == 6 and "grpcio" in p.stderr


def test_a_python_without_native_code_gets_one_line(bundle, clean_python, tmp_path):
    other = next(f"cp3{v}-{os.uname().machine}" for v in (10, 12) if f"cp3{v}" != HOST.split("-")[0])
    p = _run(clean_python, bundle, "diagnose", TALOS_LOG, home=tmp_path, target=other)
    assert p.returncode == 6 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.startswith("breakglass: error: the command line needs pydantic_core")
    assert "CPython 3.10, 3.11, 3.12, 3.13, 3.14 on aarch64 and x86_64" in p.stderr


def test_kubectl_plugin_and_krew_manifest(bundle, clean_python, tmp_path):
    import yaml
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(clean_python)  # the bundle's shebang finds this python3 first
    (bin_dir / "kubectl-breakglass").symlink_to(bundle)
    kubectl = shutil.which("kubectl")
    assert kubectl, "make test installs kubectl (Debian kubernetes-client) for this test"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "BREAKGLASS_BUNDLE_CACHE": str(tmp_path / "c")}
    p = subprocess.run([kubectl, "breakglass", "version", "--short"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.startswith("breakglass "), p.stderr[-2000:]
    p = subprocess.run([kubectl, "breakglass", "recover", "--no-such-flag"], env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "`kubectl breakglass recover --help`" in p.stderr  # usage errors: one line, a hint
    (bin_dir / "kubectl_complete-breakglass").symlink_to(bundle)  # the same file answers kubectl's TAB
    p = subprocess.run([str(bin_dir / "kubectl_complete-breakglass"), "recover", "--method", ""], env=env,
                       capture_output=True, text=True, timeout=300)
    # the registry's rank order
    assert p.stdout.splitlines() == ["kubeapi", "static-manifests", "talos", "kubeadm", "k3s", "rke2", "etcd", ":4"], p.stderr[-2000:]

    dist = bundle.parent
    tgz = dist / "kubectl-breakglass.tar.gz"
    doc = yaml.safe_load((dist / "breakglass.krew.yaml").read_text())
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2" and doc["kind"] == "Plugin"
    assert doc["metadata"]["name"] == "breakglass" and doc["spec"]["version"].startswith("v")
    archs = {p["selector"]["matchLabels"]["arch"] for p in doc["spec"]["platforms"]}
    assert archs == {"amd64", "arm64"}
    for plat in doc["spec"]["platforms"]:
        assert plat["sha256"] == hashlib.sha256(tgz.read_bytes()).hexdigest()
        assert plat["uri"].endswith(f"/{doc['spec']['version']}/kubectl-breakglass.tar.gz")
        assert plat["bin"] == "kubectl-breakglass"
    with tarfile.open(tgz) as t:
        member = t.getmember("kubectl-breakglass")
        assert member.mode & 0o111 and t.extractfile(member).read() == bundle.read_bytes()


def _other_pythons():
    """Other CPython interpreters on this machine (pyenv's, Debian's), one per minor version."""
    import glob
    found = {}
    for exe in sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3") + glob.glob("/usr/bin/python3.[0-9]*")):
        if exe.endswith("-config"):
            continue
        p = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                           text=True)
        if p.returncode == 0:
            found.setdefault(p.stdout.strip(), exe)
    found.pop(f"{sys.version_info.major}.{sys.version_info.minor}", None)
    return sorted(found.items())


OTHER_PYTHONS = _other_pythons()


@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other CPython on this machine (pyenv's are used where present)")
@pytest.mark.parametrize("version,exe", OTHER_PYTHONS, ids=[v for v, _ in OTHER_PYTHONS])
def test_every_python_on_this_machine_runs_it(bundle, version, exe, tmp_path, etcd_clean):
    minor = int(version.split(".")[1])
    p = _run(exe, bundle, "diagnose", TALOS_LOG, "--year", "2026", home=tmp_path, offline=True)
    if minor < 10:
        assert p.returncode == 2 and p.stderr == f"breakglass: error: needs Python 3.10 or newer, this is " \
            f"{subprocess.run([exe, '-c', 'import platform; print(platform.python_version())'], capture_output=True, text=True).stdout.strip()}\n"
        return
    assert p.returncode == 3, p.stderr[-2000:]
    about = json.loads(_run(exe, bundle, "version", "-o", "json", home=tmp_path).stdout)["result"]
    assert about["bundle"] == f"cp3{minor}-{os.uname().machine}" and about["python"].startswith(version)
    assert {x["name"]: x["loads"] for x in about["libraries"]}["grpcio"] is True
    _seed(etcd_clean)
    p = _run(exe, bundle, "recover", "--method", "etcd", "-w", "validating/policy-a", "--etcd-endpoints",
             etcd_clean.endpoint, "--dry-run", home=tmp_path)
    assert p.returncode == 0 and "/registry/validatingwebhookconfigurations/policy-a" in p.stdout, p.stderr[-2000:]


# The other machine's wheels, run for real: Debian's Python for that architecture (its packages unpacked by
# debootstrap and dpkg-deb into a sysroot, cached in dist/) under qemu's user-mode emulator.
OTHER = {"x86_64": ("aarch64", "arm64"), "aarch64": ("x86_64", "amd64")}[os.uname().machine]
SYSROOT = os.path.join(ROOT, "dist", f".sysroot-{OTHER[1]}")


@pytest.fixture(scope="module")
def foreign_python():
    qemu = shutil.which(f"qemu-{OTHER[0]}-static")
    assert qemu and shutil.which("debootstrap"), "make test installs qemu-user-static and debootstrap"
    done = os.path.join(SYSROOT, ".complete")
    if not os.path.exists(done):
        shutil.rmtree(SYSROOT, ignore_errors=True)
        subprocess.run(["debootstrap", f"--arch={OTHER[1]}", "--foreign", "--variant=minbase", "--include=python3",
                        "bookworm", SYSROOT, "http://deb.debian.org/debian"], check=True, capture_output=True,
                       timeout=1200)
        archives = os.path.join(SYSROOT, "var", "cache", "apt", "archives")
        for deb in sorted(os.listdir(archives)):
            if deb.endswith(".deb"):
                subprocess.run(["dpkg-deb", "-x", os.path.join(archives, deb), SYSROOT], check=True)
        open(done, "w").close()
    return [qemu, os.path.join(SYSROOT, "usr", "bin", "python3")]


def test_the_other_machine_runs_its_own_wheels(bundle, foreign_python, tmp_path, etcd_clean):
    env = {"QEMU_LD_PREFIX": SYSROOT}
    p = _run(foreign_python[0], bundle, "version", "-o", "json", home=tmp_path, env=env, py_args=foreign_python[1:])
    assert p.returncode == 0, p.stderr[-2000:]
    about = json.loads(p.stdout)["result"]
    assert about["platform"] == f"linux-{OTHER[0]}" and about["bundle"].endswith(f"-{OTHER[0]}")
    assert {x["name"]: x["loads"] for x in about["libraries"]}["grpcio"] is True  # the other machine's gRPC
    p = _run(foreign_python[0], bundle, "diagnose", TALOS_LOG, "--year", "2026", home=tmp_path, env=env,
             py_args=foreign_python[1:])
    assert p.returncode == 3 and "validate.kyverno.svc-fail" in p.stdout, p.stderr[-2000:]
    _seed(etcd_clean)
    before = _snapshot(etcd_clean)
    args = ["-w", "validating/kyverno-resource-validating-webhook-cfg", "--etcd-endpoints", etcd_clean.endpoint]
    p = _run(foreign_python[0], bundle, "recover", "--method", "etcd", *args, "--yes", home=tmp_path, env=env,
             py_args=foreign_python[1:])
    # issue 33: etcd alone, no apiserver to ask /readyz or send a canary through: applied and reverted, not verified
    assert p.returncode == 8 and _snapshot(etcd_clean) != before, p.stderr[-2000:]
    p = _run(foreign_python[0], bundle, "revert", "--yes", "--etcd-endpoints", etcd_clean.endpoint, home=tmp_path,
             env=env, py_args=foreign_python[1:])
    assert p.returncode in (0, 8) and _snapshot(etcd_clean) == before, p.stderr[-2000:]
