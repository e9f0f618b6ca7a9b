"""Access to a serving apiserver through kubeconfig, with the official kubernetes client.

Imported only on the kubeconfig path: the client takes about a second to import and
nothing else needs it. Honours ``--kubeconfig``, ``KUBECONFIG`` (colon-separated lists
too), ``--context``, exec credential plugins and OIDC as the client supports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakglass.core.errors import BadInput, Unreachable


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

    def _raw(self, method: str, path: str, body=None, content_type: str = "application/json") -> tuple[int, bytes]:
        """``body`` is a JSON-able object (the client serialises it; a JSON patch must be a list)."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        headers = {"Accept": "application/json"}
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
                query: str = "", forbidden_returns: bool = False) -> tuple[int, dict]:
        """A JSON request; 401/403 and transport failures raise Unreachable, other statuses are returned.
        ``forbidden_returns``: a 403 is returned too, for a write whose refusal may come from admission (a
        webhook's denial carries the code the webhook chose, 403 for controller-runtime's) rather than RBAC."""
        import json  # noqa: PLC0415

        import urllib3  # noqa: PLC0415

        try:
            status, data = self._raw(method, path + (f"?{query}" if query else ""), obj, content_type)
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


def connect(kubeconfig: str | None, context: str | None, timeout: float = 10.0) -> Api:
    try:
        from kubernetes import client, config  # noqa: PLC0415
        from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
    except ImportError:
        raise Unreachable("the kubernetes Python client is not installed here") from None
    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
                                persist_config=False)
    except ConfigException as e:
        # a context or cluster that is not in the kubeconfig: the target cannot be reached as asked
        raise Unreachable(f"kubeconfig: {str(e).splitlines()[0]}") from None
    except OSError as e:
        raise BadInput(f"kubeconfig {kubeconfig or '(default)'}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - exec plugins and broken YAML raise many types
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
