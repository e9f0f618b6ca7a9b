"""The fail-open seed with the seed's own software (issue 35 §2): Gatekeeper's webhooks reached through a real
konnectivity tunnel (apiserver-network-proxy 0.36.0's server and agent; the apiserver's egress selection sends
url: webhooks through `controlplane`), rejected requests sent continuously while the agent is SIGKILLed and
restarted. What got in through validation.gatekeeper.sh failing open is what `breakglass leaks` reports, from the
real audit log (exactly the requests that got a 201) and from the apiserver's own log (one failing-open call each).
Real kube-apiserver 1.34.4, etcd, Gatekeeper 3.23.1, konnectivity; nothing timed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile


from breakglass.sandbox import engines
from tests.real_apiserver_session import RealApiserver
from tests.real_control_plane import binary_for, require
from tests.real_engines import Gatekeeper, Traffic, denying, kill, wait_for
from tests.webhook_backends import Ca

FAIL_OPEN = "validation.gatekeeper.sh"


class Tunnelled(RealApiserver):
    """The test apiserver with --egress-selector-config-file: its webhook calls go through konnectivity."""

    def __init__(self, directory: str, binary: str, egress: str) -> None:
        super().__init__(directory, binary)
        self.egress = egress

    def _spawn(self, argv, log):
        if argv and argv[0] == self.binary:
            argv = [*argv, f"--egress-selector-config-file={self.egress}"]
        return super()._spawn(argv, log)


def test_leaks_through_a_restarting_konnectivity_agent_are_reported_exactly(tmp_path):
    _, apiserver_bin = binary_for("1.34")
    version = engines.versions("gatekeeper")[-1]
    for component, name in (("gatekeeper", "gatekeeper"), ("konnectivity", "konnectivity-server")):
        require(engines.binary(component, name) or os.path.join(engines.ROOT, "build", component, "missing", name))
    d = str(tmp_path)
    sock_dir = tempfile.mkdtemp(prefix="kn", dir="/tmp")  # a unix socket path must stay under 108 bytes
    uds = os.path.join(sock_dir, "konnectivity.sock")
    ca = Ca("konnectivity-test-ca")
    cert, key = ca.issue(d, "konnectivity-server", dns=("localhost",), ips=("127.0.0.1",))
    ca_path = os.path.join(d, "konnectivity-ca.crt")
    with open(ca_path, "wb") as f:
        f.write(ca.pem)
    agent_port = engines.low_port()
    server = engines.konnectivity_server(d, uds, cert, key, agent_port).start()
    agent_engine = engines.konnectivity_agent(d, ca_path, agent_port)
    agent = agent_engine.start()
    logs = f"(logs in {d})"
    api = gk = None
    traffic = None
    try:
        wait_for("the konnectivity server's socket", lambda: os.path.exists(uds), proc=server, logs=logs)
        api = Tunnelled(d, apiserver_bin, engines.egress_config(os.path.join(d, "egress.yaml"), uds)).start()
        gk = Gatekeeper(d, api)
        gk.install_and_start(version)
        denying(gk)  # denied through the tunnel: the set-up works
        with open(api.layout.log, "rb") as f:
            log_start = len(f.read())
        traffic = Traffic(api.client)
        traffic.start()
        wait_for("denials through the tunnel", lambda: traffic.count(403) >= 5, logs=logs)
        kill(agent)  # the agent's pod restarts (SIGKILL: no drain)
        wait_for("requests failing open", lambda: traffic.count(201) >= 3, logs=logs)
        agent = agent_engine.start()
        denied = traffic.count(403)
        wait_for("denials again after the agent's return", lambda: traffic.count(403) >= denied + 5, logs=logs)
        got_in = traffic.finish()
        assert got_in and all(s in (201, 403) for s in traffic.answers.values()), traffic.answers
        # from the audit log: exactly the requests that got in (and nothing of the denied ones)
        p = gk.cli("leaks", "--audit-log", api.layout.audit_log, "--webhook", FAIL_OPEN, "-o", "json")
        assert p.returncode == 3, p.stderr.decode()
        rep = json.loads(p.stdout)["result"]
        leaked = {x["name"] for x in rep["leaks"] if x["resource"] == "configmaps" and x["name"].startswith("traffic-")}
        assert leaked == got_in, (sorted(leaked ^ got_in), logs)
        # from the apiserver's own log: one failing-open call for each request that got in
        tail = os.path.join(d, "apiserver-during-traffic.log")
        with open(api.layout.log, "rb") as f, open(tail, "wb") as out:
            f.seek(log_start)
            out.write(f.read())
        p = gk.cli("leaks", "--apiserver-log", tail, "--webhook", FAIL_OPEN, "-o", "json")
        assert p.returncode == 3, p.stderr.decode()
        calls = json.loads(p.stdout)["result"]
        # the apiserver's log counts calls, not requests (it cannot say which request a call was, and Gatekeeper's
        # own status writes fail open too): at least one failing-open call for each request that got in, every one
        # of them the tunnel's failure
        assert len(calls["leaks"]) >= len(got_in), (len(calls["leaks"]), len(got_in), calls["by_cause"])
        # (a call in flight through the agent when it died is a dropped connection: the seed's own failure)
        assert "egress proxy (konnectivity) failed" in calls["by_cause"], calls["by_cause"]
        assert set(calls["by_cause"]) <= {"egress proxy (konnectivity) failed", "connection dropped"}, calls["by_cause"]
    finally:
        if traffic is not None:
            traffic.stop.set()
        if gk is not None:
            gk.kill()
        if api is not None:
            api.stop()
        kill(agent)
        kill(server)
        shutil.rmtree(sock_dir, ignore_errors=True)
