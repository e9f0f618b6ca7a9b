"""`breakglass sandbox up|down|status`: the local rehearsal environment."""

import enum
import os
import sys
from typing import Optional

import typer
from typing_extensions import Annotated

from breakglass.cli._base import (
    app,
    Output,
    OutputOpt,
    _run,
    _show,
    StateDirOpt,
    VerboseOpt,
)
from breakglass.core.errors import BadInput


sandbox_app = typer.Typer(name="sandbox", help="A local rehearsal environment: a real etcd, and with --apiserver "
                                                "a real kube-apiserver in the outage's state.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(sandbox_app, name="sandbox")
SandboxDirOpt = Annotated[Optional[str], typer.Option(
    "--dir", help="Sandbox directory (default: the state directory's sandbox/).", show_default=False)]


class Scenario(str, enum.Enum):
    deadlock = "deadlock"
    fail_open = "fail-open"
    policy_deadlock = "policy-deadlock"
    mutating_policy_deadlock = "mutating-policy-deadlock"
    healthy = "healthy"


class NodeKind(str, enum.Enum):
    kubeadm = "kubeadm"
    talos = "talos"


class EngineName(str, enum.Enum):
    kyverno = "kyverno"
    gatekeeper = "gatekeeper"


@sandbox_app.command("up")
def sandbox_up(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
               apiserver: Annotated[Optional[str], typer.Option(
                   "--apiserver", help="A kube-apiserver binary (a release tarball's, one extracted from the image, "
                                       "or `make kube-apiserver`'s): run it for real in the scenario's state.",
                   show_default=False)] = None,
               scenario: Annotated[Scenario, typer.Option(
                   help="With --apiserver: deadlock (the Talos/Kyverno upgrade outage; 1.33+ never becomes ready), "
                        "fail-open (Gatekeeper-shaped, requests leak), policy-deadlock (the same upgrade locked "
                        "by a fail-closed ValidatingAdmissionPolicy, no webhook in it), mutating-policy-deadlock "
                        "(the same with a MutatingAdmissionPolicy; 1.36+), or healthy.")] = Scenario.deadlock,
               node: Annotated[NodeKind, typer.Option(
                   help="With --apiserver: what the node's apiserver obeys: kubeadm (a static-pod manifest) or talos "
                        "(a machine config made by Talos' own generator; needs `make go-components`).")
               ] = NodeKind.kubeadm,
               engine: Annotated[Optional[EngineName], typer.Option(
                   "--engine", help="With --apiserver: the scenario's webhooks are this real engine's own (built by "
                                    "`make go-components`): kyverno for deadlock or healthy, gatekeeper for "
                                    "fail-open, policy-deadlock (it generates the policy) or healthy. Its backend "
                                    "is then the engine itself.",
                   show_default=False)] = None,
               tunnel: Annotated[Optional[bool], typer.Option(
                   "--tunnel/--no-tunnel", help="With --apiserver: the webhook calls go through a real konnectivity "
                                                "server and agent (`sandbox tunnel restart` breaks them). Default: "
                                                "on for fail-open where konnectivity is built.",
                   show_default=False)] = None,
               output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Start the sandbox (idempotent) and print how to point breakglass at it.

    Without --apiserver: a real etcd holding the outage's webhook configurations, an example apiserver log,
    a Talos machine config and a kubeadm manifest. With --apiserver: also that kube-apiserver, for real, on
    loopback with its own throwaway CA, a kubeconfig, audit logging, and the node configuration a stand-in for
    kubelet (or Talos) obeys: a kubeadm static-pod manifest, or a Talos machine config, brought into the scenario's state the way a real cluster gets there.

    Examples:

      breakglass sandbox up

      breakglass sandbox up --apiserver build/kube-apiserver/v1.34.4/kube-apiserver

      breakglass sandbox up --apiserver ./kube-apiserver --scenario fail-open -o json

      breakglass sandbox up --apiserver ./kube-apiserver --node talos

      breakglass sandbox up --apiserver ./kube-apiserver --engine kyverno

      breakglass sandbox up --apiserver ./kube-apiserver --engine gatekeeper --scenario fail-open

      breakglass sandbox up --apiserver ./kube-apiserver --engine gatekeeper --scenario policy-deadlock

      breakglass webhooks $(breakglass sandbox up -o json | jq -r .result.flags)
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        say = (lambda m: print(f"sandbox: {m}", file=sys.stderr, flush=True)) if sys.stderr.isatty() or \
            output is Output.text else (lambda _m: None)
        if not sandbox_dir:
            # the state directory is refused as `recover` refuses it: another user's, a link, a file
            from breakglass.core.journal import _mkdir_private, state_dir as resolve  # noqa: PLC0415

            _mkdir_private(resolve(state_dir))
        sb = sandbox.up(sandbox_dir or sandbox.default_dir(state_dir), apiserver=apiserver,
                        scenario=scenario.value, say=say, node=node.value,
                        engine=engine.value if engine else None, tunnel=tunnel)
        st = {**sandbox.status(sb.dir), "reused": sb.reused}
        _show(output, "Sandbox", st, lambda: _render_sandbox(st))
        return 0

    _run(output, verbose, body)


@sandbox_app.command("down")
def sandbox_down(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                 output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Stop the sandbox and remove its directory.

    Examples:

      breakglass sandbox down
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        d = sandbox_dir or sandbox.default_dir(state_dir)
        existed = os.path.isdir(d)  # never "removed" for a directory that was not there
        was = sandbox.down(d)
        _show(output, "Sandbox", {"running": False, "dir": d, "stopped": was, "removed": existed},
              lambda: f"sandbox {'stopped and ' if was else ''}removed ({d})" if existed
              else f"no sandbox in {d}; nothing removed")
        return 0

    _run(output, verbose, body)


@sandbox_app.command("status")
def sandbox_status(sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                   output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Show whether the sandbox runs, and how to point breakglass at it.

    Examples:

      breakglass sandbox status -o json
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415

        st = sandbox.status(_existing_dir_or_none(sandbox_dir or sandbox.default_dir(state_dir)))
        _show(output, "Sandbox", st, lambda: _render_sandbox(st))
        return 0

    _run(output, verbose, body)


class BackendAction(str, enum.Enum):
    start = "start"
    stop = "stop"


@sandbox_app.command("backend")
def sandbox_backend(action: Annotated[BackendAction, typer.Argument(help="start or stop", show_default=False)],
                    sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                    output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Start or stop the webhook's backend: "the policy engine is back" (or down again). In a sandbox made with
    --engine the backend is that engine; otherwise an admit-everything stand-in.

    Examples:

      breakglass sandbox backend start

      breakglass sandbox backend stop
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415
        d = sandbox_dir or sandbox.default_dir(state_dir)
        st = sandbox.backend(d, action is BackendAction.start)
        off = st.get("running") and st.get("engine") and st.get("enforcing") is None
        _show(output, "Sandbox", st, lambda: f"webhook backend {'running' if st['running'] else 'stopped'} "
                                             f"({st['url']})" + (
            ("\nits generated admission policies are the apiserver's to enforce: `breakglass audit` shows them"
             if st.get("scenario") == "policy-deadlock" else
             "\nnot seen enforcing: the apiserver's webhook admission plugins are off (revert turns them on)")
            if off else ""))
        return 0

    _run(output, verbose, body)


@sandbox_app.command("engine")
def sandbox_engine(action: Annotated[BackendAction, typer.Argument(help="start or stop", show_default=False)],
                   engine: Annotated[EngineName, typer.Option("--engine", help="Which policy engine.")]
                   = EngineName.kyverno,
                   sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                   output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Start or stop a real policy engine on the sandbox's apiserver (Kyverno or Gatekeeper, built by `make
    go-components`), in place of the admit-everything backend: the first start installs it from its own manifests
    and a policy; Kyverno then registers (and keeps re-creating) its own webhook configurations. Needs a ready
    apiserver: in the deadlock, start it after the recovery, as the engine coming back.

    Examples:

      breakglass sandbox engine start --engine kyverno

      breakglass sandbox engine stop --engine kyverno

      breakglass sandbox engine start --engine gatekeeper
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415
        d = sandbox_dir or sandbox.default_dir(state_dir)
        st = sandbox.engine(d, engine.value, action is BackendAction.start)
        _show(output, "Sandbox", st, lambda: f"{engine.value} {'running' if st['running'] else 'stopped'}"
                                             + (f" (log: {st['log']})" if st.get("log") else ""))
        return 0

    _run(output, verbose, body)


tunnel_app = typer.Typer(name="tunnel", help="The sandbox's konnectivity tunnel (fail-open scenario): the path "
                                              "the apiserver's webhook calls take.", no_args_is_help=True,
                         rich_markup_mode=None)
sandbox_app.add_typer(tunnel_app, name="tunnel")


@tunnel_app.command("restart")
def tunnel_restart(down_for: Annotated[str, typer.Option(
                       "--down-for", help="How long no agent runs, as Go writes durations (a pod's restart).")]
                   = "3s",
                   sandbox_dir: SandboxDirOpt = None, state_dir: StateDirOpt = None,
                   output: OutputOpt = Output.text, verbose: VerboseOpt = False) -> None:
    """Restart the konnectivity agent as its pod restarts: SIGKILL (no drain), --down-for without an agent, a new
    one connected. Calls through it break meanwhile: a fail-open webhook admits what it should have judged (find
    them with `breakglass leaks`), a fail-closed one refuses.

    Examples:

      breakglass sandbox tunnel restart

      breakglass sandbox tunnel restart --down-for 10s -o json
    """

    def body() -> int:
        from breakglass import sandbox  # noqa: PLC0415
        from breakglass.text.durations import seconds  # noqa: PLC0415

        wait = seconds(down_for)
        if wait is None or wait > 600:
            raise BadInput(f"--down-for {down_for!r}: not a duration up to 10m (3s, 500ms, 1m)")
        d = sandbox_dir or sandbox.default_dir(state_dir)
        st = sandbox.tunnel_restart(d, wait)
        _show(output, "Sandbox", st, lambda: f"konnectivity agent {'killed and ' if st['killed'] else ''}started "
                                             f"again after {down_for}: connected (log: {st['log']})")
        return 0

    _run(output, verbose, body)


def _existing_dir_or_none(d: str) -> str:
    """--dir naming a file is bad input, not "sandbox not running"."""
    if os.path.exists(d) and not os.path.isdir(d):
        raise BadInput(f"{d} is a file, not a sandbox directory", hint="breakglass sandbox status --help")
    return d


def _render_sandbox(st: dict) -> str:
    """One fact a line, labels first, so an 80-column terminal wraps only long paths."""
    if st.get("untrusted"):
        return f"sandbox not trusted, so not looked at: {st['untrusted']}"
    if not st.get("running"):
        left = st.get("processes") or []
        if not left:
            return f"sandbox not running ({st['dir']})"
        return "\n".join([f"sandbox not running ({st['dir']}), but processes it started still run:",
                          *(f"  {p['what']} (pid {p['pid']})" for p in left),
                          f"  `breakglass sandbox down --dir {st['dir']}` stops them"])
    # `up` over a running sandbox has said on stderr that it reuses it, and how to get a fresh one
    out = [f"sandbox running in {st['dir']}{' (it was already: reused as it is)' if st.get('reused') else ''}"]
    api = st.get("apiserver")
    if api:
        out += [f"REHEARSAL: kube-apiserver {api['version']}, scenario {api['scenario']}, {api['node']} node",
                f"  apiserver: {api['url']} {'READY' if api['ready'] else 'NOT READY'}"]
        out += [f"    failing: {c}" for c in api["failing"]]
        policy_only = api["scenario"] in ("policy-deadlock", "mutating-policy-deadlock")
        backend = (f"{api['engine']} (the real engine)" if api.get("engine") else
                   f"stand-in, {api['webhook_url']}")
        if policy_only:  # the lock is an admission policy inside the apiserver: no backend of its own
            kind = "Mutating" if api["scenario"].startswith("mutating") else "Validating"
            out.append(f"  the lock: a fail-closed {kind}AdmissionPolicy in the apiserver (no backend to wait for)"
                       + (f"; {api['engine']}, which generated it: "
                          f"{'up' if api['backend_running'] else 'down'}" if api.get("engine") else ""))
        else:
            out.append(f"  webhook backend: {'up' if api['backend_running'] else 'down'} ({backend})")
        t = api.get("tunnel")
        if t:
            out.append(f"  tunnel: konnectivity server {'up' if t['server_running'] else 'DOWN'}, agent "
                       f"{'connected' if t['connected'] else 'up, not connected' if t['agent_running'] else 'DOWN'}")
    out.append(f"  etcd (pid {st['pid']}): {st['flags']}")
    out += [f"  {k}: {v}" for k, v in st["files"].items()]
    out.append("next:")
    out.append("  breakglass wizard                  (all of it, step by step; way in: sandbox)")
    logs = [st["files"].get("apiserver_log", "")]
    if api and api["scenario"].endswith("policy-deadlock"):  # a policy's refusal is only in the audit log
        logs.append(st["files"].get("audit_log", ""))
    out.append(f"  breakglass diagnose {' '.join(x for x in logs if x)}")
    out.append(f"  breakglass audit {st['flags']}")
    if api and (not api["scenario"].endswith("policy-deadlock") or api.get("engine")):
        out.append("  breakglass sandbox backend start   (the policy engine is back"
                   + (f": {api['engine']} itself)" if api.get("engine") else ")"))
        if api.get("tunnel"):
            out.append("  breakglass sandbox tunnel restart  (the konnectivity agent's pod restarts)")
    return "\n".join(out)
