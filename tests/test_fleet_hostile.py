"""The fleet audit (`breakglass audit --all-contexts`) with hostile or large kubeconfigs (issue 34 §4): a context
name XML cannot hold, 2,000 contexts, an exec credential plugin that hangs, a token meant for an https server
pointed at a plain http:// one. The clusters are loopback servers answering with a real kube-apiserver's
recorded answers (tests/recorded_apiserver.py) or closed ports (connection refused at once)."""

from __future__ import annotations

import json
import os
import stat
import time
import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.conftest import run_cli
from tests.recorded_apiserver import Recorded, answers, configurations
from tests.webhook_backends import closed_port

EXEC_API = "client.authentication.k8s.io/v1"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    from breakglass.sandbox import pki

    return pki.make(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def https(keys):
    """One HTTPS 'apiserver' holding one recorded risky configuration."""
    srv = Recorded(answers(configurations(1)), keys)
    yield srv
    srv.close()


def _write(path, clusters: list[dict], users: list[dict], contexts: list[tuple[str, str, str]]) -> str:
    """contexts: (name, cluster, user)."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": contexts[0][0], "clusters": clusters,
           "users": users, "contexts": [{"name": n, "context": {"cluster": c, "user": u}} for n, c, u in contexts]}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f)
    os.chmod(path, 0o600)
    return str(path)


def _audit(kubeconfig: str, *args: str, env: dict | None = None):
    return run_cli("audit", "--kubeconfig", kubeconfig, *args, env={"KUBECONFIG": "", **(env or {})}, timeout=300)


# -- names XML cannot hold ----------------------------------------------------------------------------------

HOSTILE = ["escape\x1b[31mred", "nul\x00byte", "bell\x07and\x0bvt", "rlo\u202egpj.exe"]


def test_a_context_name_with_esc_or_nul_leaves_the_junit_report_well_formed(tmp_path):
    """One name with ESC or NUL made the whole fleet's JUnit report ill-formed (ET.parse: not well-formed). They
    are written visibly (\\u001b, \\u0000) in JUnit; JSON and SARIF carry them escaped, as the exact strings."""
    dead = closed_port()
    kc = _write(tmp_path / "hostile.yaml", [{"name": "dead", "cluster": {"server": f"https://127.0.0.1:{dead}"}}],
                [{"name": "u", "user": {"token": "t"}}], [(n, "dead", "u") for n in ["plain", *HOSTILE]])
    p = _audit(kc, "--all-contexts", "-o", "junit")
    assert p.returncode == 5, p.stderr
    (tmp_path / "audit.xml").write_bytes(p.stdout)
    root = ET.parse(tmp_path / "audit.xml").getroot()  # what a CI job does with it
    names = [s.get("name") for s in root.findall("testsuite")]
    assert names == ["plain", "escape\\u001b[31mred", "nul\\u0000byte", "bell\\u0007and\\u000bvt",
                     "rlo\\u202egpj.exe"]
    for suite in root.findall("testsuite"):
        context = {p.get("name"): p.get("value") for p in suite.iter("property")}["context"]
        assert context == suite.get("name")
        assert suite.find("testcase").get("classname") == suite.get("name")
    raw = p.stdout.decode("utf-8")
    assert not any(c in raw for c in "\x1b\x00\x07\x0b\u202e")

    for fmt in ("json", "sarif"):
        p = _audit(kc, "--all-contexts", "-o", fmt)
        assert p.returncode == 5, p.stderr
        assert not any(c in p.stdout.decode("utf-8") for c in "\x1b\x00\x07\u202e"), fmt
        doc = json.loads(p.stdout)
        got = ([c["context"] for c in doc["result"]["clusters"]] if fmt == "json" else
               [n["properties"]["context"] for n in doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]])
        assert got == ["plain", *HOSTILE], fmt


# -- 2,000 contexts, one parse ------------------------------------------------------------------------------

def test_two_thousand_contexts_parse_the_kubeconfig_once(tmp_path, keys, https, monkeypatch):
    """Each context re-parsed the whole kubeconfig (the client's load_kube_config): quadratic, 1.5 s per context
    at 2,000. Now the file is read once for all of them. 1,990 contexts point at a closed port, 10 at the
    recorded apiserver: every one gets its own verdict."""
    from kubernetes.config import kube_config

    from breakglass.flows import fleet

    dead = closed_port()
    kc = _write(tmp_path / "big.yaml",
                [{"name": "dead", "cluster": {"server": f"https://127.0.0.1:{dead}"}},
                 {"name": "live", "cluster": {"server": https.url, "certificate-authority": keys.ca}}],
                [{"name": "u", "user": {"token": "t"}}],
                [(f"ctx-{i:04d}", "live" if i % 200 == 0 else "dead", "u") for i in range(2000)])
    parses = []
    real_load = kube_config.KubeConfigMerger.load_config
    monkeypatch.setattr(kube_config.KubeConfigMerger, "load_config",
                        lambda self, path: (parses.append(path), real_load(self, path))[1])
    code, document = fleet.command([kc], None, True, None, 30.0, 16, "high", "json")
    doc = json.loads(document)
    assert parses == [kc]
    clusters = doc["result"]["clusters"]
    assert len(clusters) == 2000 and code == 3
    live = [c for c in clusters if c["server"] == https.url]
    assert [c["context"] for c in live] == [f"ctx-{i:04d}" for i in range(0, 2000, 200)]
    assert {c["status"] for c in live} == {"audited"}
    assert all(any(f["severity"] == "critical" for f in c["report"]["findings"]) for c in live)
    assert {c["status"] for c in clusters if c not in live} == {"unreachable"}


# -- exec credential plugins --------------------------------------------------------------------------------

def _alive(pid: int) -> bool:
    """A process that still runs (a zombie waiting for a reaper counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _script(path, text: str) -> str:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(stat.S_IRWXU)
    return str(path)


def _exec_user(command: str) -> dict:
    return {"exec": {"apiVersion": EXEC_API, "command": command, "interactiveMode": "Never"}}


def _pids(pidfile) -> list[int]:
    """The plugin's pids as it wrote them (itself, then its child), waited for since the plugin may still start."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if pidfile.exists():
            pids = [int(x) for x in pidfile.read_text().split()]
            if len(pids) == 2:
                return pids
        time.sleep(0.1)
    pytest.fail("the plugin never wrote its pids")


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_a_hanging_exec_plugin_is_killed_with_its_children_at_the_clusters_deadline(tmp_path, keys, https):
    """A plugin that never answers (and started a child that sleeps 1000 s) outlived the audit, re-parented to
    PID 1, one per such context per run. Now it runs in its own process group, killed at the cluster's
    deadline: the cluster is a timeout, the other cluster is audited, and neither process is left."""
    pidfile = tmp_path / "pids"
    hang = _script(tmp_path / "hang.sh", f"echo $$ > {pidfile}\nsleep 1000 &\necho $! >> {pidfile}\nwait\n")
    kc = _write(tmp_path / "exec.yaml",
                [{"name": "live", "cluster": {"server": https.url, "certificate-authority": keys.ca}}],
                [{"name": "hangs", "user": _exec_user(hang)}, {"name": "token", "user": {"token": "t"}}],
                [("hanging", "live", "hangs"), ("fine", "live", "token")])
    pids = []
    try:
        p = _audit(kc, "--all-contexts", "--timeout", "3", "-o", "json")
        pids = _pids(pidfile)
        assert p.returncode == 3, p.stderr
        c = {x["name"]: x for x in json.loads(p.stdout)["result"]["clusters"]}
        assert c["fine"]["status"] == "audited"
        assert c["hanging"]["status"] == "timeout"
        assert [pid for pid in pids if _alive(pid)] == []
        # one cluster, not the fleet path: the plugin is killed at --timeout too, and the audit says so
        pidfile.unlink()
        p = _audit(kc, "--context", "hanging", "--timeout", "2")
        pids = _pids(pidfile)
        assert p.returncode == 5, p.stderr
        assert "timed out" in p.stderr.decode() and "Traceback" not in p.stderr.decode()
        assert [pid for pid in pids if _alive(pid)] == []
    finally:
        _kill(pids)


def test_an_exec_plugins_token_is_sent_and_its_failure_is_one_line(tmp_path, keys):
    """The plugin's run is ours now; its ExecCredential is still the client's protocol: the token it answers is
    the bearer token sent (and KUBERNETES_EXEC_INFO names the API version). A plugin that fails is an error line
    naming it (the client logged it and went on without credentials)."""
    srv = Recorded(answers(configurations(1)), keys)
    try:
        info = tmp_path / "exec-info.json"
        ok = _script(tmp_path / "ok.sh", f"printf '%s' \"$KUBERNETES_EXEC_INFO\" > {info}\n"
                                         f"echo '{{\"apiVersion\": \"{EXEC_API}\", \"kind\": \"ExecCredential\", "
                                         f"\"status\": {{\"token\": \"from-the-plugin\"}}}}'\n")
        bad = _script(tmp_path / "bad.sh", "echo 'no credentials here: run login first' >&2\nexit 3\n")
        kc = _write(tmp_path / "exec.yaml",
                    [{"name": "live", "cluster": {"server": srv.url, "certificate-authority": keys.ca}}],
                    [{"name": "ok", "user": _exec_user(ok)}, {"name": "bad", "user": _exec_user(bad)}],
                    [("ok", "live", "ok"), ("bad", "live", "bad")])
        p = _audit(kc, "--all-contexts", "-o", "json")
        c = {x["name"]: x for x in json.loads(p.stdout)["result"]["clusters"]}
        assert c["ok"]["status"] == "audited", c["ok"]
        assert {h.get("authorization") for _, h in srv.requests} == {"Bearer from-the-plugin"}
        assert json.loads(info.read_text())["apiVersion"] == EXEC_API
        assert c["bad"]["status"] == "unreachable"
        assert "exec plugin" in c["bad"]["error"] and "exited 3: no credentials here" in c["bad"]["error"]
    finally:
        srv.close()


# -- a token over plain HTTP ---------------------------------------------------------------------------------

def test_a_token_is_never_sent_over_plain_http_unless_asked(tmp_path, keys, https):
    """A tokenFile was sent as a bearer token to a plain http:// server. Now a context whose user has a
    credential and whose server is http:// is refused in one line naming it, before anything is sent; one with
    no credentials (kubectl proxy's) is still read, and the same token still goes to an https:// server.
    BREAKGLASS_ALLOW_HTTP_CREDENTIALS=1 is the user asking: then it is sent."""
    plain = Recorded(answers(configurations(1)))  # no TLS
    try:
        token = tmp_path / "token"
        token.write_text("secret-token-value")
        kc = _write(tmp_path / "http.yaml",
                    [{"name": "plain", "cluster": {"server": plain.url}},
                     {"name": "tls", "cluster": {"server": https.url, "certificate-authority": keys.ca}}],
                    [{"name": "file", "user": {"tokenFile": str(token)}}, {"name": "anonymous", "user": {}}],
                    [("plain-token", "plain", "file"), ("plain-anonymous", "plain", "anonymous"),
                     ("tls-token", "tls", "file")])
        p = _audit(kc, "--all-contexts", "-o", "json")
        c = {x["name"]: x for x in json.loads(p.stdout)["result"]["clusters"]}
        assert c["plain-token"]["status"] == "invalid"
        assert c["plain-token"]["error"] == (
            f"kubeconfig context plain-token: server {plain.url} is plain HTTP and its user has a credential "
            f"(tokenFile): breakglass sends none over plain HTTP (use https://, or set "
            f"BREAKGLASS_ALLOW_HTTP_CREDENTIALS=1 to send it anyway)")
        assert c["plain-anonymous"]["status"] == "audited" and c["tls-token"]["status"] == "audited"
        assert plain.requests and all("authorization" not in h for _, h in plain.requests)
        assert "secret-token-value" not in p.stdout.decode() + p.stderr.decode()
        tls_auth = {h.get("authorization") for path, h in https.requests}
        assert "Bearer secret-token-value" in tls_auth

        # the table gives the context its one row, the refusal in it; -v gives the whole line, once
        text = _audit(kc, "--all-contexts", env={"COLUMNS": "500"}).stdout.decode()
        row = [ln for ln in text.splitlines() if ln.startswith("plain-token ")]
        assert len(row) == 1 and "invalid: kubeconfig context plain-token: server" in row[0], text
        text = _audit(kc, "--all-contexts", "-v", env={"COLUMNS": "500"}).stdout.decode()
        said = [ln for ln in text.splitlines() if "plain HTTP" in ln and ln.startswith("breakglass: error:")]
        assert len(said) == 1 and said[0].startswith("breakglass: error: plain-token: invalid: kubeconfig context")

        p = _audit(kc, "--context", "plain-token", "-o", "json", env={"BREAKGLASS_ALLOW_HTTP_CREDENTIALS": "1"})
        assert p.returncode == 3, p.stderr
        assert "Bearer secret-token-value" in {h.get("authorization") for _, h in plain.requests}
    finally:
        plain.close()
