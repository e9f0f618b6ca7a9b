"""Access to a serving apiserver through kubeconfig, with the official kubernetes client.

Imported only on the kubeconfig path: the client takes about a second to import and
nothing else needs it. Honours ``--kubeconfig``, ``KUBECONFIG`` (colon-separated lists
too), ``--context``, exec credential plugins and OIDC as the client supports them.

A kubeconfig is trusted as kubectl trusts it, with three limits (README, Security): it is parsed once
however many of its contexts are connected (``Kubeconfig``); the programs it names (exec plugins, an
auth-provider's cmd-path) run in their own process group and are killed at the connection's deadline
(``Plugins``); and no bearer token or password goes to a plain http:// server unless the user asks
(``BREAKGLASS_ALLOW_HTTP_CREDENTIALS=1``).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass

from breakglass.core.errors import BadInput, BreakglassError, Unreachable


@dataclass
class Api:
    client: object
    host: str
    timeout: float

    def get(self, path: str) -> tuple[int, bytes]:
        """(HTTP status, body) of a GET; 404 is returned, other failures raise."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415
        import urllib3  # noqa: PLC0415

        try:
            status, data = self._raw_get(path)
            if status in (401, 403):
                raise ApiException(status=status, reason="Unauthorized" if status == 401 else "Forbidden")
            return status, data
        except ApiException as e:
            if e.status == 404:
                return 404, b""
            if e.status in (401, 403):
                raise Unreachable(f"apiserver {self.host}: {e.status} {e.reason} for GET {path}",
                                  hint="check the credentials of this kubeconfig context") from None
            return int(e.status or 0), (e.body or b"") if isinstance(e.body, bytes) else str(e.body or "").encode()
        except urllib3.exceptions.MaxRetryError as e:
            raise Unreachable(f"apiserver {self.host}: {_reason(e.reason)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unreachable(f"apiserver {self.host}: {_reason(e)}") from None


    def _raw_get(self, path: str) -> tuple[int, bytes]:
        return self._raw("GET", path)

    def _raw(self, method: str, path: str, body=None, content_type: str = "application/json",
             extra: dict | None = None) -> tuple[int, bytes]:
        """``body`` is a JSON-able object (the client serialises it; a JSON patch must be a list). ``extra``:
        more request headers (Impersonate-User)."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        headers = {"Accept": "application/json", **(extra or {})}
        if body is not None:
            headers["Content-Type"] = content_type
        c = self.client
        try:
            if hasattr(c, "param_serialize"):  # clients generated since v32
                m, url, hdrs, _, _ = c.param_serialize(method, path, header_params=headers,
                                                       auth_settings=["BearerToken"])
                resp = c.call_api(m, url, header_params=hdrs, body=body, _request_timeout=self.timeout)
                resp.read()
                return resp.status, resp.data
            resp = c.call_api(path, method, header_params=headers, body=body, auth_settings=["BearerToken"],
                              _preload_content=False, _request_timeout=self.timeout, _return_http_data_only=True)
            return resp.status, resp.data
        except ApiException as e:
            data = e.body if isinstance(e.body, bytes) else str(e.body or "").encode()
            return int(e.status or 0), data

    def request(self, method: str, path: str, obj=None, content_type: str = "application/json",
                query: str = "", forbidden_returns: bool = False, headers: dict | None = None) -> tuple[int, dict]:
        """A JSON request; 401/403 and transport failures raise Unreachable, other statuses are returned.
        ``forbidden_returns``: a 403 is returned too, for a write whose refusal may come from admission (a
        webhook's denial carries the code the webhook chose, 403 for controller-runtime's) rather than RBAC."""
        import json  # noqa: PLC0415

        import urllib3  # noqa: PLC0415

        try:
            status, data = self._raw(method, path + (f"?{query}" if query else ""), obj, content_type, headers)
        except urllib3.exceptions.MaxRetryError as e:
            raise Unreachable(f"apiserver {self.host}: {_reason(e.reason)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unreachable(f"apiserver {self.host}: {_reason(e)}") from None
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            doc = {"message": data[:200].decode("utf-8", "replace")}
        if status == 401 or (status == 403 and not forbidden_returns):
            msg = doc.get("message") if isinstance(doc, dict) else ""
            raise Unreachable(f"apiserver {self.host}: {status} {'Unauthorized' if status == 401 else 'Forbidden'} "
                              f"for {method} {path}" + (f": {msg}" if msg else ""),
                              hint="check the kubeconfig context's credentials and RBAC")
        return status, doc if isinstance(doc, dict) else {}

    def readyz(self):
        """/readyz?verbose through the kubeconfig's credentials, parsed like every other readiness probe."""
        from breakglass.access import readyz  # noqa: PLC0415

        import urllib3  # noqa: PLC0415

        url = self.host + "/readyz?verbose"
        try:
            status, data = self._raw("GET", "/readyz?verbose")
        except (urllib3.exceptions.HTTPError, OSError) as e:
            return readyz.Readiness(url, False, False, None, [], f"not answering ({_reason(e)})")
        failing = readyz.parse(data.decode("utf-8", "replace"))[1]
        if status == 200:
            return readyz.Readiness(url, True, True, status, failing, "ready")
        if status in (401, 403):
            return readyz.Readiness(url, True, None, status, [], "serving; readiness not visible to these credentials")
        return readyz.Readiness(url, True, False, status, failing, "not ready: " + (", ".join(failing) or str(status)))


def _reason(e: object) -> str:
    text = str(e)
    for marker in ("CERTIFICATE_VERIFY_FAILED", "Connection refused", "timed out", "Name or service not known"):
        if marker in text:
            return {"CERTIFICATE_VERIFY_FAILED": "TLS certificate not trusted (check the kubeconfig's CA)",
                    "Connection refused": "connection refused", "timed out": "timed out",
                    "Name or service not known": "host name not found"}[marker]
    return text.splitlines()[0][:200]


# -- a kubeconfig, read once --------------------------------------------------------------------------

PLAIN_HTTP_CREDENTIALS_ENV = "BREAKGLASS_ALLOW_HTTP_CREDENTIALS"


class Kubeconfig:
    """A kubeconfig parsed once: a file, or KUBECONFIG's ':'-separated list merged as kubectl merges it (the first
    file naming a context, cluster or user wins; relative paths stay relative to the file that named them).

    Each context's client settings are built from this one parse (``connect(..., loaded=self)``): the client's own
    ``load_kube_config`` parses the whole file on every call, which made a fleet audit of N contexts parse it N
    times (quadratic: 1.5 s per context at 2,000). Raises what the client raises (``ConfigException``, ``OSError``,
    a YAML error); ``connect`` and the fleet say it in one line each."""

    def __init__(self, source: str | None) -> None:
        from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
        from kubernetes.config.kube_config import KubeConfigMerger  # noqa: PLC0415

        # read at call time, not at the client's import (its KUBE_CONFIG_DEFAULT_LOCATION)
        self.source = source or os.environ.get("KUBECONFIG") or "~/.kube/config"
        merged = KubeConfigMerger(self.source).config
        if merged is None:
            raise ConfigException("Invalid kube-config file. No configuration found.")
        value = merged.value if hasattr(merged, "value") else merged
        if not isinstance(value, dict):
            raise ConfigException("Invalid kube-config file. Expected a mapping at the top")
        self.current: str | None = value.get("current-context") or None
        self._entries: dict[str, dict[str, object]] = {}
        for section in ("contexts", "clusters", "users"):
            by_name: dict[str, object] = {}
            for item in value.get(section) or []:
                entry = item.value if hasattr(item, "value") else item
                if isinstance(entry, dict) and "name" in entry:
                    by_name.setdefault(entry["name"], item)  # the merger already kept the first of each name
            self._entries[section] = by_name

    @property
    def contexts(self) -> list[str]:
        return [str(n) for n in self._entries["contexts"]]

    def loader(self, context: str | None, plugins: "Plugins", deadline: float, interactive: bool):
        """The client's loader for one context, over a document holding only that context, its cluster and its
        user (each still knowing the file it came from): what is missing fails as the client says it."""
        name = context if context is not None else self.current
        doc: dict[str, object] = {"contexts": [], "clusters": [], "users": []}
        if name is not None:
            doc["current-context"] = name
        ctx = self._entries["contexts"].get(name)
        if ctx is not None:
            doc["contexts"].append(ctx)
            inner = _value(ctx).get("context")
            inner = _value(inner) if inner is not None else {}
            if isinstance(inner, dict):
                for section, key in (("clusters", "cluster"), ("users", "user")):
                    entry = self._entries[section].get(inner.get(key))
                    if entry is not None:
                        doc[section].append(entry)
        return _loader_class()(doc, name, plugins, deadline, interactive)


def _value(node):
    return node.value if hasattr(node, "value") else node


_LOADER = None


def _loader_class():
    """The client's KubeConfigLoader with its two ways of running a program (an exec credential plugin; an
    auth-provider's cmd-path) through ``Plugins.run``: own process group, killed at the deadline. The client runs
    them with a bare ``communicate()``: a hanging plugin held its thread forever and, the thread abandoned at
    the cluster's deadline, outlived the audit re-parented to PID 1. The rest is the client's own code path."""
    global _LOADER  # noqa: PLW0603 - one subclass, made once the client is imported
    if _LOADER is not None:
        return _LOADER
    from kubernetes.config import kube_config  # noqa: PLC0415
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415

    class Loader(kube_config.KubeConfigLoader):
        def __init__(self, doc, context, plugins, deadline, interactive):
            super().__init__(config_dict=doc, active_context=context, config_base_path=None)
            self._plugins, self._deadline, self._interactive = plugins, deadline, interactive
            default_refresh = self._get_google_credentials

            def refresh():
                provider = self._user.safe_get("auth-provider") if self._user else None
                cfg = provider.safe_get("config") if provider is not None else None
                if cfg is not None and "cmd-path" in cfg:
                    return self._cmd_path_token(cfg)
                return default_refresh()

            self._get_google_credentials = refresh

        def _load_from_exec_plugin(self):
            """The client's own handling of the plugin's answer, around our run of it. A plugin that fails or
            times out is an error here, where the client logged it and went on without credentials."""
            if "exec" not in self._user:
                return None
            exec_config = self._user["exec"]
            base_path = self._get_base_path(self._cluster.path)
            provider = kube_config.ExecProvider(exec_config, base_path, self._cluster)
            status = self._plugins.exec_credential(provider, self._deadline, self._interactive)
            if "token" in status:
                self.token = "Bearer %s" % status["token"]
            elif "clientCertificateData" in status and "clientKeyData" in status:
                for attr, key in (("cert_file", "clientCertificateData"), ("key_file", "clientKeyData")):
                    setattr(self, attr, kube_config.FileOrData(
                        status, None, data_key_name=key, file_base_path=base_path, base64_file_content=False,
                        temp_file_path=self._temp_file_path).as_file())
            else:
                raise ConfigException(f"exec plugin {provider.args[0]}: its answer has neither a token nor a "
                                      f"client certificate and key")
            if "expirationTimestamp" in status:
                self.expiry = kube_config.parse_rfc3339(status["expirationTimestamp"])
            return True

        def _cmd_path_token(self, cfg):
            import collections  # noqa: PLC0415

            cmd = cfg["cmd-path"]
            args = cfg["cmd-args"].split() if "cmd-args" in cfg else cmd.split()[1:]
            cmd = cmd if "cmd-args" in cfg else cmd.split()[0]
            out = self._plugins.run([cmd, *args], None, None, self._deadline, False, "auth-provider cmd-path")
            try:
                data = json.loads(out)
                token = collections.namedtuple("Token", "token expiry")
                return token(data["credential"]["access_token"],
                             kube_config.parse_rfc3339(data["credential"]["token_expiry"]))
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigException(f"auth-provider cmd-path {cmd}: unreadable answer ({e})") from None

    _LOADER = Loader
    return Loader


# -- credential plugins ------------------------------------------------------------------------------

class Plugins:
    """The credential programs one caller's connections start (an exec plugin, an auth-provider's cmd-path).

    Each runs in its own process group (a new session) and is killed with its whole group at the connection's
    deadline, so a plugin that hangs (or the children it starts) never outlives it. ``close`` kills every one
    still running and refuses new ones: the fleet audit calls it once every cluster is reported, for the
    clusters whose thread it abandoned at their deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set = set()
        self._closed = False

    def exec_credential(self, provider, deadline: float, interactive: bool) -> dict:
        """The client's ExecProvider.run (the same ExecCredential request and checks of the answer), its process
        run by ``run``."""
        info = {"apiVersion": provider.api_version, "kind": "ExecCredential", "spec": {"interactive": interactive}}
        if provider.cluster:
            info["spec"]["cluster"] = provider.cluster.value
            for ext in provider.cluster.value.get("extensions") or []:
                if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
                    info["spec"]["cluster"]["config"] = ext.get("extension")
                    break
        env = {**provider.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        out = self.run(provider.args, env, provider.cwd, deadline, interactive, "exec plugin")
        from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415

        try:
            data = json.loads(out)
        except ValueError as e:
            raise ConfigException(f"exec plugin {provider.args[0]}: its answer is not JSON ({e})") from None
        if not isinstance(data, dict) or not all(k in data for k in ("apiVersion", "kind", "status")):
            raise ConfigException(f"exec plugin {provider.args[0]}: its answer is no ExecCredential "
                                  f"(apiVersion, kind and status)")
        if data["apiVersion"] != provider.api_version:
            raise ConfigException(f"exec plugin {provider.args[0]}: answered apiVersion {data['apiVersion']}, "
                                  f"not {provider.api_version}")
        if not isinstance(data["status"], dict):
            raise ConfigException(f"exec plugin {provider.args[0]}: its status is not an object")
        return data["status"]

    def run(self, argv: list[str], env: dict | None, cwd: str | None, deadline: float, interactive: bool,
            what: str) -> str:
        """The program's stdout; it is killed, with its process group, at ``deadline`` (time.monotonic). An
        interactive run (a person at the terminal, who may have to log in) is waited for until it ends or Ctrl-C,
        which kills it the same way."""
        import signal  # noqa: PLC0415
        import subprocess  # noqa: PLC0415
        import sys  # noqa: PLC0415
        import time  # noqa: PLC0415

        budget = deadline - time.monotonic()
        with self._lock:
            if self._closed:
                raise Unreachable(f"{what} {argv[0]}: not started, the audit has ended")
        if budget <= 0:
            raise Unreachable(f"{what} {argv[0]}: timed out before it could start")
        try:
            proc = subprocess.Popen(argv, stdin=sys.stdin if interactive else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=None if interactive else subprocess.PIPE,
                                    cwd=cwd, env=env, text=True, start_new_session=True)
        except OSError as e:
            raise BadInput(f"{what} {argv[0]}: {e.strerror or e}") from None
        with self._lock:
            if self._closed:  # close() ran while it started
                self._kill(proc)
                raise Unreachable(f"{what} {argv[0]}: stopped, the audit has ended")
            self._running.add(proc)
        try:
            out, err = proc.communicate(timeout=None if interactive else budget)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            raise Unreachable(f"{what} {argv[0]}: timed out after {budget:.3g} s (killed with its process group)",
                              hint="check the plugin by hand, e.g. with kubectl") from None
        except BaseException:  # an interrupt: nothing of ours may stay behind
            self._kill(proc)
            raise
        finally:
            with self._lock:
                self._running.discard(proc)
        if proc.returncode == -signal.SIGKILL and self._closed:
            raise Unreachable(f"{what} {argv[0]}: stopped, the audit has ended")
        if proc.returncode != 0:
            why = (err or "").strip().splitlines()
            raise Unreachable(f"{what} {argv[0]}: exited {proc.returncode}" + (f": {why[-1][:200]}" if why else ""),
                              hint="check the plugin by hand, e.g. with kubectl")
        return out

    @staticmethod
    def _kill(proc) -> None:
        """SIGKILL to the plugin's whole process group, then reap it (no zombie left either). Its pipes are
        closed, not drained: a child that left the group could hold them open for ever."""
        import signal  # noqa: PLC0415

        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running, self._running = list(self._running), set()
        for proc in running:
            self._kill(proc)


_PLUGINS = Plugins()  # a single command's: each connection waits for its plugin, killed at its own deadline


def _credentials(user) -> list[str]:
    """What of a kubeconfig user would go to the server as a credential, in the client's words."""
    if user is None:
        return []
    user = _value(user)
    if not isinstance(user, dict):
        return []
    found = [k for k in ("token", "tokenFile", "exec", "auth-provider") if user.get(k)]
    if user.get("username") and user.get("password"):
        found.append("username/password")
    return found


def _refuse_plain_http(loader, context: str | None) -> None:
    """A bearer token or a password is never sent over plain HTTP unless the user asks (the environment variable
    ``BREAKGLASS_ALLOW_HTTP_CREDENTIALS=1``): anyone on the path would read it. An http:// server with no
    credentials (kubectl proxy's) is still read."""
    server = str(_value(loader._cluster).get("server") or "")
    scheme = server.split("://", 1)[0].lower() if "://" in server else "http"
    if scheme == "https" or os.environ.get(PLAIN_HTTP_CREDENTIALS_ENV) == "1":
        return
    sent = _credentials(loader._user)
    if sent:
        raise BadInput(f"kubeconfig context {context or loader.current_context.get('name')}: server {server} is plain "
                       f"HTTP and its user has a credential ({', '.join(sent)}): breakglass sends none over plain "
                       f"HTTP (use https://, or set {PLAIN_HTTP_CREDENTIALS_ENV}=1 to send it anyway)")


def connect(kubeconfig: str | None, context: str | None, timeout: float = 10.0, *, loaded: Kubeconfig | None = None,
            plugins: Plugins | None = None, deadline: float | None = None, interactive: bool | None = None) -> Api:
    """``loaded``: the kubeconfig already read (a fleet reads each file once). ``deadline`` (time.monotonic): when a
    credential plugin is killed (default: ``timeout`` from now). ``interactive``: whether a plugin gets the
    terminal, as kubectl gives it (default: stdout is a terminal, the client's own rule)."""
    import sys  # noqa: PLC0415
    import time  # noqa: PLC0415

    try:
        from kubernetes import client  # noqa: PLC0415
        from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
    except ImportError:
        raise Unreachable("the kubernetes Python client is not installed here") from None
    if interactive is None:
        interactive = bool(getattr(sys.stdout, "isatty", None) and sys.stdout.isatty())
    cfg = client.Configuration()
    try:
        doc = loaded if loaded is not None else Kubeconfig(kubeconfig)
        loader = doc.loader(context, plugins or _PLUGINS, deadline or time.monotonic() + timeout, interactive)
        _refuse_plain_http(loader, context)
        loader.load_and_set(cfg)
    except ConfigException as e:
        # a context or cluster that is not in the kubeconfig: the target cannot be reached as asked
        raise Unreachable(f"kubeconfig: {str(e).splitlines()[0]}") from None
    except BreakglassError:
        raise
    except OSError as e:
        raise BadInput(f"kubeconfig {kubeconfig or '(default)'}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - broken YAML and odd shapes raise many types
        raise BadInput(f"kubeconfig: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    cfg.retries = 0
    return Api(client.ApiClient(cfg), cfg.host, timeout)


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def connect_in_cluster(timeout: float = 10.0, account_dir: str = SERVICE_ACCOUNT_DIR) -> Api:
    """The pod's own identity: its mounted ServiceAccount token and CA, and KUBERNETES_SERVICE_HOST/PORT (what the
    in-cluster guard runs as). The client re-reads the token file as the kubelet rotates it (bound tokens expire)."""
    import os  # noqa: PLC0415

    try:
        from kubernetes import client  # noqa: PLC0415
        from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
        from kubernetes.config.incluster_config import InClusterConfigLoader  # noqa: PLC0415
    except ImportError:
        raise Unreachable("the kubernetes Python client is not installed here") from None
    cfg = client.Configuration()
    try:
        InClusterConfigLoader(os.path.join(account_dir, "token"), os.path.join(account_dir, "ca.crt"),
                              try_refresh_token=True).load_and_set(cfg)
    except ConfigException as e:
        raise Unreachable(f"in-cluster config: {str(e).splitlines()[0]}",
                          hint="run inside a pod with a ServiceAccount token mounted, or pass --kubeconfig") from None
    cfg.retries = 0
    return Api(client.ApiClient(cfg), cfg.host, timeout)
