"""The sandbox as root next to another local user, and under signals: nothing another user can write is run,
and nothing the sandbox starts outlives it unnoticed (issue 27 §1, §8).

The other user is uid 65534 (nobody): files are given to it with os.chown, and what it does (swap the sandbox
directory, plant a program) runs as it, through subprocess's user=. The sandbox runs as root, as the tests do.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from breakglass.sandbox import procs
from tests.conftest import ROOT, run_cli

OTHER = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


def _mentioning(path: str) -> list[tuple[int, bytes]]:
    """Live processes (zombies have no command line) whose command line names a path under ``path``."""
    key = (os.path.abspath(path).rstrip("/") + "/").encode()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if key in cmd:
                out.append((int(entry), cmd))
    return out


def _kill_all(path: str) -> None:
    for pid, _ in _mentioning(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_for(what: str, cond, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.1)


@pytest.fixture
def shared(tmp_path_factory):
    """A directory the other user can reach (pytest's own are root's, 0700), root's and 0755 like /home."""
    import tempfile

    d = tempfile.mkdtemp(prefix="bg-sandbox-safety-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    _kill_all(d)
    shutil.rmtree(d, ignore_errors=True)


def _as_other(script: str) -> None:
    """Run ``script`` (Python) as the other user, as that user would."""
    python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"  # ours is under /root
    subprocess.run([python, "-I", "-c", textwrap.dedent(script)], user=OTHER, group=OTHER, extra_groups=[],
                   check=True, cwd="/", timeout=60)


def _theirs(path, mode: int = 0o755) -> str:
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)
    os.chown(path, OTHER, OTHER)
    return str(path)


def _apiserver() -> str:
    from tests.real_control_plane import binary_for

    return binary_for("1.32")[1]


def _plant(parent: str, marker: str) -> None:
    """What the other user does: move root's sandbox aside and put their own in its place, with an images.json
    mapping a tag to their program and a manifest using that tag (the attack of issue 27 §1)."""
    _as_other(f"""
        import json, os
        parent, marker = {parent!r}, {marker!r}
        sb = os.path.join(parent, "sandbox")
        if os.path.lexists(sb):
            os.rename(sb, os.path.join(parent, "sandbox.roots"))
        os.makedirs(os.path.join(sb, "manifests"))
        open(os.path.join(sb, ".breakglass-sandbox"), "w").close()
        evil = os.path.join(parent, "evil.sh")
        with open(evil, "w") as f:
            f.write("#!/bin/sh\\nid -u > " + marker + "\\nexec sleep 300 " + evil + "\\n")
        os.chmod(evil, 0o755)
        with open(os.path.join(sb, "images.json"), "w") as f:
            json.dump({{"evil": evil}}, f)
        pod = {{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "kube-apiserver"}},
               "spec": {{"containers": [{{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:evil",
                                         "command": ["kube-apiserver", "--owned"]}}]}}}}
        with open(os.path.join(sb, "manifests", "kube-apiserver.yaml"), "w") as f:
            json.dump(pod, f)
        os.chmod(sb, 0o777)
    """)


# -- 27 §1: another user's directory, or a file it can write, is never trusted -----------------------------

@needs_root
def test_up_refuses_a_state_directory_another_user_owns_and_starts_nothing(tmp_path):
    state = _theirs(tmp_path / "theirs")
    p = run_cli("sandbox", "up", env={"BREAKGLASS_STATE_DIR": state})
    try:
        assert p.returncode == 2 and b"belongs to uid 65534" in p.stderr, p.stderr
        assert len(p.stderr.decode().splitlines()) <= 2  # the one line, and at most a hint
        assert _mentioning(state) == [] and os.listdir(state) == []
    finally:
        _kill_all(state)


@needs_root
@pytest.mark.parametrize("case", ["parent-theirs", "dir-world-writable", "parent-group-writable", "link-on-path"])
def test_up_refuses_a_sandbox_directory_another_user_could_change(tmp_path, case):
    base = tmp_path / "base"
    base.mkdir(mode=0o755)
    if case == "parent-theirs":
        d = os.path.join(_theirs(base / "p"), "sandbox")
    elif case == "dir-world-writable":
        d = str(base / "sandbox")
        os.mkdir(d)
        os.chmod(d, 0o777)  # empty: the sandbox would once have taken it over
    elif case == "parent-group-writable":
        (base / "p").mkdir()
        os.chmod(base / "p", 0o775)
        d = str(base / "p" / "sandbox")
    else:
        (base / "real").mkdir()
        os.symlink(base / "real", base / "link")
        d = str(base / "link" / "sandbox")
    p = run_cli("sandbox", "up", "--dir", d)
    try:
        assert p.returncode == 2 and b"another user could replace what the sandbox runs" in p.stderr, p.stderr
        assert _mentioning(str(base)) == []
        assert not os.path.exists(os.path.join(d, "sandbox.json"))
    finally:
        _kill_all(str(base))


@needs_root
def test_the_attack_on_a_state_directory_another_user_owns_never_runs_their_program(shared):
    binary = _apiserver()
    parent = _theirs(os.path.join(shared, "theirs"))
    marker = os.path.join(shared, "ran-as")
    d = os.path.join(parent, "sandbox")
    try:
        p = run_cli("sandbox", "up", "--dir", d, "--apiserver", binary, timeout=300)
        assert p.returncode == 2 and b"belongs to uid 65534" in p.stderr, p.stderr
        _plant(parent, marker)
        # what root runs next in that directory believes none of it
        st = run_cli("sandbox", "status", "--dir", d, "-o", "json")
        assert json.loads(st.stdout)["result"]["running"] is False and "untrusted" in st.stdout.decode()
        assert run_cli("sandbox", "down", "--dir", d).returncode == 2
        assert run_cli("sandbox", "up", "--dir", d, "--apiserver", binary).returncode == 2
        assert not os.path.exists(marker) and _mentioning(parent) == []
    finally:
        _kill_all(parent)


@needs_root
def test_the_kubelet_stand_in_stops_when_its_directory_passes_to_another_user_and_runs_nothing_of_theirs(shared):
    from pathlib import Path

    binary = _apiserver()
    parent = Path(shared) / "state"
    parent.mkdir(mode=0o755)
    d = str(parent / "sandbox")
    marker = os.path.join(shared, "ran-as")
    try:
        p = run_cli("sandbox", "up", "--dir", d, "--apiserver", binary, "-o", "json", timeout=300)
        assert p.returncode == 0, p.stderr
        kubelet = [pid for pid, cmd in _mentioning(d) if b"breakglass.sandbox.kubelet" in cmd]
        assert len(kubelet) == 1
        os.chown(parent, OTHER, OTHER)  # the state directory is now another user's: they can swap the sandbox
        _plant(str(parent), marker)
        _wait_for("the kubelet stand-in stops", lambda: not os.path.exists(f"/proc/{kubelet[0]}/cmdline") or
                  not open(f"/proc/{kubelet[0]}/cmdline", "rb").read())
        assert not os.path.exists(marker), f"their program ran as uid {open(marker).read().strip()}"
        assert [c for _, c in _mentioning(d) if c.startswith(binary.encode())] == []  # its apiserver stopped too
        log = open(os.path.join(parent, "sandbox.roots", "kubelet.log"), "rb").read()
        assert b"nothing more is started" in log and b"belongs to uid 65534" in log
    finally:
        os.chown(parent, 0, 0)
        _kill_all(str(parent))


# -- 27 §8: signals, concurrent ups, leftovers ------------------------------------------------------------

def _up_in_background(d: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "breakglass", "sandbox", "up", "--dir", d, *extra, "-o", "json"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _kubelet_started(d: str):
    """The stand-in once it runs: not while procs' gate (``/bin/sh -c 'read ...'``, whose command line names it
    too) still waits for ``up`` to record it. An ``up`` killed in that window leaves a gate that reads end-of-file
    and exits by design, so a test that kills ``up`` must wait for the stand-in itself."""
    return [pid for pid, cmd in _mentioning(d)
            if b"breakglass.sandbox.kubelet" in cmd and cmd.split(b"\0")[0] != procs._GATE[0].encode()]


def test_sigterm_during_up_with_an_apiserver_stops_everything_it_started(tmp_path):
    binary = _apiserver()
    d = str(tmp_path / "sb")
    up = _up_in_background(d, "--apiserver", binary)
    try:
        _wait_for("the kubelet stand-in starts", lambda: _kubelet_started(d) or up.poll() is not None, 300)
        assert up.poll() is None, up.communicate()
        up.send_signal(signal.SIGTERM)
        _, err = up.communicate(timeout=120)
        assert up.returncode == 130, err
        assert _mentioning(d) == []  # no etcd, no stand-in, no apiserver
        st = json.loads(run_cli("sandbox", "status", "--dir", d, "-o", "json").stdout)["result"]
        assert st["running"] is False and st["processes"] == []
    finally:
        up.kill()
        up.wait()
        _kill_all(d)
        run_cli("sandbox", "down", "--dir", d)


def test_what_a_killed_up_left_is_named_by_status_stopped_by_the_next_up_and_by_down(tmp_path):
    binary = _apiserver()
    d = str(tmp_path / "sb")
    up = _up_in_background(d, "--apiserver", binary)
    try:
        _wait_for("the kubelet stand-in starts", lambda: _kubelet_started(d) or up.poll() is not None, 300)
        assert up.poll() is None, up.stderr.read().decode()[-2000:]  # up failed before starting the stand-in
        up.kill()  # no chance to clean up
        up.wait()
        try:
            left = _wait_for("the stand-in starts its apiserver",
                             lambda: [c for _, c in _mentioning(d) if c.startswith(binary.encode())])
        except AssertionError as e:  # say what the stand-in said (CI saw this once, on a loaded machine)
            said = [open(os.path.join(d, f), errors="replace").read()[-1500:] for f in ("kubelet.log", "kubelet.json")
                    if os.path.exists(os.path.join(d, f))]
            raise AssertionError(f"{e}; stand-in alive: {bool(_kubelet_started(d))}; {said}") from None
        assert left
        st = json.loads(run_cli("sandbox", "status", "--dir", d, "-o", "json").stdout)["result"]
        assert {"kubelet", "apiserver"} <= {p["name"] for p in st["processes"]}, st
        text = run_cli("sandbox", "status", "--dir", d).stdout.decode()
        assert "processes it started still run" in text and "sandbox down" in text
        again = run_cli("sandbox", "up", "--dir", d, "--apiserver", binary, "-o", "json", timeout=300)
        assert again.returncode == 0, again.stderr
        assert len(_kubelet_started(d)) == 1  # one stand-in, not two fighting over the port
        assert run_cli("sandbox", "down", "--dir", d).returncode == 0
        assert _mentioning(d) == []
    finally:
        _kill_all(d)
        run_cli("sandbox", "down", "--dir", d)


def test_two_concurrent_ups_on_one_directory_start_one_etcd_and_down_leaves_none(tmp_path):
    d = str(tmp_path / "sb")
    ups = [_up_in_background(d) for _ in range(2)]
    try:
        results = []
        for up in ups:
            out, err = up.communicate(timeout=120)
            assert up.returncode == 0, err
            results.append(json.loads(out)["result"])
        etcds = [pid for pid, cmd in _mentioning(d) if b"etcd" in cmd.split(b"\0")[0]]
        assert len(etcds) == 1, etcds
        assert {r["pid"] for r in results} == set(etcds)
        assert sorted(r["reused"] for r in results) == [False, True]
        assert run_cli("sandbox", "down", "--dir", d).returncode == 0
        assert _mentioning(d) == []
    finally:
        for up in ups:
            up.kill()
            up.wait()
        _kill_all(d)
        shutil.rmtree(d, ignore_errors=True)


def test_up_over_a_running_sandbox_says_it_reuses_it_and_how_to_get_a_fresh_one(tmp_path):
    d = str(tmp_path / "sb")
    assert run_cli("sandbox", "up", "--dir", d).returncode == 0
    try:
        p = run_cli("sandbox", "up", "--dir", d)
        assert p.returncode == 0
        assert b"reusing the sandbox already running" in p.stderr and b"breakglass sandbox down" in p.stderr
        assert "reused" in p.stdout.decode()
    finally:
        run_cli("sandbox", "down", "--dir", d)


def test_the_kubelet_stand_in_applies_no_manifest_others_can_write_and_starts_no_changed_binary(tmp_path):
    import yaml

    src = _apiserver()
    ver = os.path.basename(os.path.dirname(src))
    binary = tmp_path / "bin" / ver / "kube-apiserver"  # a copy of our own, so it can be changed here
    binary.parent.mkdir(parents=True)
    shutil.copy2(src, binary)
    d = str(tmp_path / "sb")
    state = os.path.join(d, "kubelet.json")

    def kubelet() -> dict:
        try:
            with open(state, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def running_with(flag: str) -> list:
        return [pid for pid, cmd in _mentioning(d) if cmd.startswith(str(binary).encode()) and flag.encode() in cmd]

    try:
        p = run_cli("sandbox", "up", "--dir", d, "--apiserver", str(binary), "-o", "json", timeout=300)
        assert p.returncode == 0, p.stderr
        manifest = json.loads(p.stdout)["result"]["apiserver"]["manifest"]
        pod = yaml.safe_load(open(manifest))
        pod["spec"]["containers"][0]["command"].append("--profiling=false")
        os.chmod(manifest, 0o664)  # as an editor under umask 002 leaves it: the group could have written it
        with open(manifest, "w") as f:
            yaml.safe_dump(pod, f)
        _wait_for("the stand-in refuses the manifest", lambda: "writable by its group" in (kubelet().get("error") or ""))
        assert running_with("--profiling=false") == []
        os.chmod(manifest, 0o600)  # only ours again: applied
        _wait_for("the stand-in applies it", lambda: running_with("--profiling=false") and kubelet().get("pid"))

        changed = binary.with_name("changed")
        shutil.copy2(src, changed)
        with open(changed, "ab") as f:
            f.write(b"\0")
        os.replace(changed, binary)  # another build put in its place: not the bytes pinned at `up`
        os.kill(kubelet()["pid"], signal.SIGKILL)  # the stand-in restarts what exits, from its pinned binary
        _wait_for("the stand-in refuses the changed binary",
                  lambda: "changed since the sandbox started" in (kubelet().get("error") or ""))
        assert [pid for pid, cmd in _mentioning(d) if cmd.startswith(str(binary).encode())] == []
        assert kubelet().get("pid") is None
    finally:
        run_cli("sandbox", "down", "--dir", d)
        _kill_all(d)


def test_down_gives_a_draining_process_the_second_sigterm_not_the_whole_grace_period(tmp_path):
    """konnectivity's agent takes a first SIGTERM as the start of a drain that waits for its server, which `down`
    stops at the same moment: the whole 30 s grace period went by before SIGKILL (every fail-open sandbox's
    `down`). The Go convention is that a second SIGTERM means now: stop sends one, and the process exits on it,
    neither waiting out the grace period nor being killed."""
    from breakglass.sandbox import procs

    d = str(tmp_path / "sb")
    os.makedirs(d, mode=0o700)
    said = tmp_path / "said"
    script = textwrap.dedent(f"""
        import signal, sys, time
        seen = []
        def on_term(*_):
            seen.append(1)
            open({str(said)!r}, "w").write(str(len(seen)))
            if len(seen) == 2:
                sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        open({str(said)!r}, "w").write("0")
        while True:
            time.sleep(0.05)
        # {d}/
    """)
    proc = procs.spawn(d, "drainer", [sys.executable, "-c", script], str(tmp_path / "drainer.log"))
    deadline = time.monotonic() + 60
    while not said.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs.stop(d, ("drainer",), seconds=300)
    assert proc.wait(10) == 0  # its own exit on the second signal, not SIGKILL (-9)
    assert said.read_text() == "2"


@pytest.mark.parametrize("said", [b"", b"go\n"])
def test_the_spawn_gate_runs_its_program_only_once_up_has_recorded_it(tmp_path, said):
    """``procs.spawn`` starts each program behind a gate and says "go" only after the record is written. An ``up``
    SIGKILLed in between closes the pipe unwritten: the gate must read end-of-file and exit without running the
    program, so no process runs that nobody recorded (and a killed up's test must not mistake the gate for it)."""
    mark = tmp_path / "ran"
    r, w = os.pipe()
    gate = subprocess.Popen([*procs._GATE, "/bin/sh", "-c", f"echo yes > {mark}"], stdin=r)
    os.close(r)
    os.write(w, said)
    os.close(w)  # what the kernel does for an up that was killed
    assert gate.wait(timeout=30) == (0 if said else 1)
    assert mark.exists() == bool(said)
