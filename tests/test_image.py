"""The guard's image (deploy/Dockerfile), built for real and run as the chart's pod runs it.

scripts/image.sh builds it with buildah (no Docker engine runs on these machines) on Python base images made from
Debian's own packages (no container registry is reachable here); podman runs it with the chart's pod settings: its
rendered arguments, read-only root, an emptyDir-like /tmp, every capability dropped, no privilege escalation, the
ServiceAccount token and CA mounted where the kubelet mounts them, KUBERNETES_SERVICE_HOST/PORT set. Against the
real kube-apiserver, what the container serves is what `breakglass audit` on the host finds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest

from breakglass.sandbox import free_port
from tests.conftest import ROOT
from tests.real_apiserver_session import real_apiserver  # noqa: F401
from tests.test_chart import _container_args, _docs, _render, chart_rbac  # noqa: F401
from tests.test_exporter import _audit_json, _get, _samples, _until, risky_cluster  # noqa: F401

STORE = os.path.join(ROOT, "build", "image-store")  # buildah's and podman's images for the tests (vfs), git-ignored
POD_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the kubelet mounts the token


def _version() -> str:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        return re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)


def _need(condition: bool, why: str) -> None:
    """Skip with the reason on a developer's machine; under CI, which installs these (make system-deps), fail."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(why + ": CI must build and run the image")
    pytest.skip(why)


def _store() -> list[str]:
    return ["--root", os.path.join(STORE, "root"), "--runroot", os.path.join(STORE, "run"), "--storage-driver", "vfs"]


def _podman(*args: str, ok: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    p = subprocess.run(["podman", *_store(), "--cgroup-manager=cgroupfs", *args], capture_output=True, text=True,
                       timeout=timeout)
    if ok:
        assert p.returncode == 0, f"podman {args}: {p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def image() -> str:
    """The guard's image, built by scripts/image.sh (buildah, bases from Debian's packages) into the test store.

    Cost: a whole build each run: the two Debian base file systems (build/image-base/, about 700 MB of tar) are
    imported into the vfs store again, buildah builds both stages with no layer cache (pip fetching and building
    the wheels, the line counter compiled), vfs copying each layer whole. The image of this checkout is tested."""
    _need(os.geteuid() == 0, "building the image's Debian bases needs root (debootstrap)")
    for tool in ("buildah", "podman", "runc", "debootstrap"):
        _need(shutil.which(tool) is not None, f"{tool} is not installed (make system-deps)")
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "image.sh"), "--builder", "buildah", "--debian-base"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800,
                       env={**os.environ, "BREAKGLASS_IMAGE_STORE": STORE})
    assert p.returncode == 0, p.stderr[-3000:]
    # each build leaves the last one's images untagged, whole copies under vfs: the test store keeps only these
    _podman("image", "prune", "--force")
    return "localhost/" + p.stdout.strip().splitlines()[-1]


def _pod_args(image: str, account_dir: str | None, env: dict) -> list[str]:
    """`podman run` with the chart's container securityContext and volumes. The machine's own limits: runc (crun
    refuses these hybrid cgroups), cgroupfs (no systemd), nofile and nproc limits set low (podman's defaults,
    and even this machine's own hard nproc limit, are refused here: "error setting rlimit type 6"), and the
    host's network, where the real apiserver listens on loopback."""
    args = ["run", "--rm", "--runtime", "runc", "--network", "host", "--ulimit", "nofile=1024:1024",
            "--ulimit", "nproc=1024:1024",
            "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--user", "65532:65532"]
    if account_dir is not None:
        args += ["-v", f"{account_dir}:{POD_ACCOUNT_DIR}:ro"]
    for k, v in env.items():
        if k.startswith("KUBERNETES_"):
            args += ["-e", f"{k}={v}"]
    return [*args, image]


def _readable_account(src: str, dst) -> str:
    """The kubelet's projected volume is world-readable (0644 files); the test's copy is root's 0700 temp dir,
    which user 65532 in the container could not open."""
    os.makedirs(dst)
    for name in ("token", "ca.crt"):
        shutil.copy(os.path.join(src, name), os.path.join(dst, name))
        os.chmod(os.path.join(dst, name), 0o644)
    os.chmod(dst, 0o755)
    return str(dst)


def test_the_image_is_this_package_and_runs_as_the_chart_expects(image):
    """The image's metadata is the chart's (user, entrypoint, port, tag = appVersion), it runs this version, and the
    compiled line counter is in while no compiler is.

    Cost: two `podman run`s on the vfs storage driver, each copying the image's root file system whole before the
    process starts (about 25 s each here); the image itself is the fixture's (built once per module)."""
    config = json.loads(_podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["breakglass"]
    assert config["Cmd"] == ["exporter", "--listen=0.0.0.0:9847"]
    assert "9847/tcp" in config["ExposedPorts"]

    version = _version()
    assert image.endswith(f"/breakglass:{version}")
    p = _podman(*_pod_args(image, None, {}), "--version")
    assert p.stdout.strip() == f"breakglass {version}"
    chart = _docs(open(os.path.join(ROOT, "deploy", "helm", "breakglass", "Chart.yaml"), encoding="utf-8").read())[0]
    values = _docs(open(os.path.join(ROOT, "deploy", "helm", "breakglass", "values.yaml"), encoding="utf-8").read())[0]
    assert chart["appVersion"] == values["image"]["tag"] == version  # the chart pulls the image this builds

    # the compiled line counter is in (built in the wheel stage), the compiler is not (the runtime has none)
    probe = "import breakglass.logs._newlines, shutil, os; print(shutil.which('gcc'), shutil.which('cc'), os.getuid())"
    p = _podman(*_pod_args(image, None, {})[:-1], "--entrypoint", "python", image, "-c", probe)
    assert p.stdout.split() == ["None", "None", "65532"]


def test_the_images_audit_reads_the_api_as_a_pod_and_says_so_without_a_token(image, chart_rbac, risky_cluster,
                                                                           tmp_path):
    """`exporter --once` in the container, with nothing but what a pod has: the token at the kubelet's path.
    Without the token mounted: one line and exit 5, nothing printed as metrics.

    Cost: two `podman run`s of the image on the vfs storage driver (each container's root file system a whole copy
    of the image's) and a `breakglass audit` on the host for the expected answer: the real image, run with what a
    pod has, is what this proves."""
    _, admin_kubeconfig = risky_cluster
    expected = _audit_json(admin_kubeconfig)
    _, _, env, mount = chart_rbac
    account = _readable_account(mount, tmp_path / "account")

    p = _podman(*_pod_args(image, account, env), "exporter", "--once", "-o", "json", ok=False)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"] == expected["result"]

    p = _podman(*_pod_args(image, None, env), "exporter", "--once", ok=False)
    assert p.returncode == 5, p.stdout + p.stderr
    assert p.stdout == ""
    assert "in-cluster config" in p.stderr and "Traceback" not in p.stderr


def test_the_charts_deployment_runs_the_image_and_serves_the_audit(image, chart_rbac, risky_cluster, tmp_path):
    """The Deployment's rendered arguments as the container's command, as the chart's ServiceAccount: /healthz
    answers (the probes) and /metrics and /findings carry the host's audit."""
    _, admin_kubeconfig = risky_cluster
    expected = _audit_json(admin_kubeconfig)
    _, _, env, mount = chart_rbac
    account = _readable_account(mount, tmp_path / "account")
    port = free_port()
    args = _container_args(_docs(_render(f"port={port}", "interval=5", "findings.enabled=true").stdout), "Deployment")
    name = f"breakglass-test-{uuid.uuid4().hex[:8]}"
    run = _pod_args(image, account, env)
    _podman(*run[:1], "--detach", "--name", name, *run[1:], *args)
    try:
        url = f"http://127.0.0.1:{port}"

        def healthy():
            state = _podman("inspect", "--format", "{{.State.Status}}", name, ok=False).stdout.strip()
            return state not in ("running", "created", "configured") or _get(url + "/healthz")[0] == 200

        _until("the container's /healthz", healthy, seconds=180)
        logs = _podman("logs", name, ok=False)
        assert _get(url + "/healthz")[0] == 200, logs.stdout + logs.stderr
        s = _samples(_get(url + "/metrics")[1])
        assert s["breakglass_audit_errors_total"] == [({}, 0.0)], logs.stderr
        assert sorted((m["configuration"], m["webhook"], m["rule"]) for m, _ in s["breakglass_webhook_risk"]) == \
            sorted({(f["configuration"], f["webhook"] or "", f["rule"]) for f in expected["result"]["findings"]})
        assert json.loads(_get(url + "/findings")[1])["result"] == expected["result"]
    finally:
        _podman("rm", "--force", "--time", "5", name, ok=False)
