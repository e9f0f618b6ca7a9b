"""The fail-open seed's tunnel in a sandbox: the apiserver's webhook calls through a real konnectivity server and
agent (apiserver-network-proxy, built by `make go-components`), as on GKE, where the leak came from.

The apiserver gets ``--egress-selector-config-file`` naming the server's socket for both ``controlplane`` (what a
``url:`` webhook is dialled through) and ``cluster`` (a ``service:`` one); the server takes agents on a loopback
port over TLS with the sandbox's webhook certificate (its SAN is 127.0.0.1), and the agent, trusting the
sandbox's CA, dials whatever the server asks of it, here the engine on loopback. ``restart_agent`` is the
konnectivity-agent pod restarting: SIGKILL (no drain; a drained agent still breaks the connections open through
it), a pause, a new agent. Calls in flight break and new ones find no agent: a fail-open webhook then admits
what it should have judged, which `breakglass leaks` must find.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request

from breakglass.core.errors import BadInput, Unreachable
from breakglass.sandbox import engines, procs

SERVER, AGENT = "tunnel-server", "tunnel-agent"
NAMES = {SERVER: "konnectivity-server", AGENT: "konnectivity-agent"}
_SOCKET = "konnectivity.sock"
_UNIX_PATH_MAX = 107  # sun_path is 108 bytes with its NUL
_PREFIX, _ELSEWHERE = "bg-tunnel-", "socket-dir"


def available() -> bool:
    """Both konnectivity binaries are built here."""
    return all(engines.binary("konnectivity", n) for n in NAMES.values())


def start(directory: str, info: dict, keys) -> list[str]:
    """Start the server and an agent for the sandbox in ``directory`` and wait until the agent is connected;
    ``info`` records where (sandbox.json's apiserver part). Returns the apiserver's extra flag."""
    if not available():
        raise BadInput("konnectivity is not built here: `make go-components` builds it from its Go module (needs Go)")
    tdir = os.path.join(directory, "tunnel")
    os.makedirs(tdir, mode=0o700, exist_ok=True)
    sock = _socket_path(tdir)[0]
    t = {"socket": sock, "dir": tdir, "ca": keys.ca, "agent_port": engines.low_port(),
         "health_port": engines.low_port(), "egress": engines.egress_config(os.path.join(tdir, "egress.yaml"), sock)}
    info["tunnel"] = t
    server = engines.konnectivity_server(tdir, sock, keys.webhook_cert, keys.webhook_key, t["agent_port"],
                                         t["health_port"])
    proc = procs.spawn(directory, SERVER, server.argv, server.log, detached=True)
    engines.until("the konnectivity server's socket", lambda: os.path.exists(sock), proc, server.log, 60,
                  "konnectivity-server", 0.1)
    _start_agent(directory, t)
    return [f"--egress-selector-config-file={t['egress']}"]


def restart_agent(directory: str, info: dict, down_for: float = 3.0) -> dict:
    """The agent's pod restarts: SIGKILL, ``down_for`` seconds without an agent, a new one connected."""
    t = info.get("tunnel")
    if not t:
        raise BadInput("this sandbox has no konnectivity tunnel",
                       hint="breakglass sandbox up --apiserver ... --scenario fail-open (with konnectivity built)")
    if procs.find(directory, SERVER) is None:
        raise Unreachable("the sandbox's konnectivity server is not running; `breakglass sandbox down` and up again")
    killed = procs.stop(directory, (AGENT,), hard=True)
    time.sleep(max(0.0, down_for))
    _start_agent(directory, t)
    return {"killed": killed, "down_for": down_for, "connected": True,
            "log": os.path.join(t["dir"], "konnectivity-agent.log")}


def status(directory: str, info: dict) -> dict | None:
    t = info.get("tunnel")
    if not t:
        return None
    return {"server_running": procs.find(directory, SERVER) is not None,
            "agent_running": procs.find(directory, AGENT) is not None, "connected": _connected(t),
            "socket": t["socket"]}


def cleanup(directory: str) -> None:
    """Remove the short socket directory made outside the sandbox, if one was (the sandbox's own removal takes
    the rest); its name is read from the sandbox, so `down` and a failed `up` find it without sandbox.json."""
    try:
        with open(os.path.join(directory, "tunnel", _ELSEWHERE), encoding="utf-8") as f:
            d = f.read().strip()
    except OSError:
        return
    tmp = os.path.realpath(tempfile.gettempdir())
    # only a directory this module made: directly in the temporary directory, with its prefix (no `..`, no link)
    if (os.path.dirname(d) != tmp or not os.path.basename(d).startswith(_PREFIX) or os.path.islink(d)
            or not os.path.isdir(d)):
        return
    if os.lstat(d).st_uid == os.getuid() and set(os.listdir(d)) <= {_SOCKET}:
        shutil.rmtree(d, ignore_errors=True)


def _start_agent(directory: str, t: dict) -> None:
    agent = engines.konnectivity_agent(t["dir"], t["ca"], t["agent_port"])
    proc = procs.spawn(directory, AGENT, agent.argv, agent.log, detached=True)
    engines.until("the konnectivity agent connected", lambda: _connected(t), proc, agent.log, 60,
                  "konnectivity-agent", 0.1)


def _connected(t: dict) -> bool:
    """The server's own readiness: 200 once an agent is connected ("no connection to any proxy agent" before)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{t['health_port']}/readyz", timeout=2) as r:  # noqa: S310
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _socket_path(tdir: str) -> tuple[str, str | None]:
    """The server's socket in the sandbox, or, where that path is too long for a unix socket, in a private
    directory of its own under the temporary directory (removed by ``cleanup``)."""
    from breakglass.core.textfile import write_private  # noqa: PLC0415

    path = os.path.join(tdir, _SOCKET)
    if len(path.encode()) <= _UNIX_PATH_MAX:
        return path, None
    d = tempfile.mkdtemp(prefix=_PREFIX, dir=os.path.realpath(tempfile.gettempdir()))  # 0700, a new name
    write_private(os.path.join(tdir, _ELSEWHERE), d.encode())
    return os.path.join(d, _SOCKET), d
