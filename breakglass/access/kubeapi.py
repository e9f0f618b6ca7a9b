"""Access to a serving apiserver through kubeconfig, with the official kubernetes client.

Imported only on the kubeconfig path: the client takes about a second to import and
nothing else needs it. Honours ``--kubeconfig``, ``KUBECONFIG`` (colon-separated lists
too), ``--context``, exec credential plugins and OIDC as the client supports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakglass.errors import BadInput, Unreachable


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
        headers = {"Accept": "application/json"}
        c = self.client
        if hasattr(c, "param_serialize"):  # clients generated since v32
            method, url, hdrs, _, _ = c.param_serialize("GET", path, header_params=headers,
                                                        auth_settings=["BearerToken"])
            resp = c.call_api(method, url, header_params=hdrs, _request_timeout=self.timeout)
            resp.read()
            return resp.status, resp.data
        resp = c.call_api(path, "GET", header_params=headers, auth_settings=["BearerToken"],
                          _preload_content=False, _request_timeout=self.timeout, _return_http_data_only=True)
        return resp.status, resp.data


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
        raise BadInput(f"kubeconfig: {str(e).splitlines()[0]}") from None
    except OSError as e:
        raise BadInput(f"kubeconfig {kubeconfig or '(default)'}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - exec plugins and broken YAML raise many types
        raise BadInput(f"kubeconfig: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    cfg.retries = 0
    return Api(client.ApiClient(cfg), cfg.host, timeout)
