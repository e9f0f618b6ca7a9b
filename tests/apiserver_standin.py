"""Stand-ins for kube-apiserver, which cannot run here (see README, Testing).

`serve`: a minimal read path (GET of lists, bearer-token auth, 404 for unserved versions).
`StandinApiserver`: the REST subset the kubeapi remedy uses, over real TLS with bearer-token and
client-certificate auth, storing objects in the real etcd fixture with kube-apiserver's keys and
encoding, so the API and etcd paths act on one storage."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serve(lists: dict[str, dict], token: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.headers.get("Authorization") != f"Bearer {token}":
                return self._send(401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401})
            path = self.path.split("?")[0]
            if path in lists:
                return self._send(200, lists[path])
            if path.startswith("/apis/admissionregistration.k8s.io/v1/"):
                kind = path.rsplit("/", 1)[-1]
                return self._send(200, {"kind": "List", "apiVersion": "admissionregistration.k8s.io/v1", "items": [],
                                        "metadata": {"resource": kind}})
            return self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})

        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


@contextlib.contextmanager
def serve_readyz(codes: list[int], failing_hook: str):
    """/readyz?verbose answering the given statuses in turn (then 200), with kube-apiserver's check
    lines: a 500 names `failing_hook` as failed, as an apiserver stuck on a post-start hook does."""
    answers = iter(codes)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            code = next(answers, 200)
            body = (f"[+]ping ok\n[-]poststarthook/{failing_hook} failed: reason withheld\nreadyz check failed\n"
                    if code == 500 else "[+]ping ok\nreadyz check passed\n").encode()
            self.send_response(code)
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


# -- a stand-in with real TLS, real auth checks, and the real etcd as its storage ----------------------



def _pointer(path: str) -> list:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")] if path else []


class PatchError(Exception):
    pass


def json_patch(doc, ops):
    """RFC 6902 add/remove/replace/test, enough for what kubectl and breakglass send."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1] if parts else None
        kind = op["op"]
        try:
            if kind == "test":
                cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if cur != op.get("value"):
                    raise PatchError(f"testing value {op['path']} failed")
            elif kind == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if last == "-" else int(last), op["value"])
                else:
                    parent[last] = op["value"]
            elif kind == "replace":
                if isinstance(parent, list):
                    parent[int(last)] = op["value"]
                else:
                    if last not in parent:
                        raise PatchError(f"replace operation does not apply: doc is missing path: {op['path']}")
                    parent[last] = op["value"]
            elif kind == "remove":
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    del parent[last]
            else:
                raise PatchError(f"unsupported op {kind}")
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise PatchError(f"{kind} {op['path']}: {e}") from None
    return doc


def merge_patch(doc, patch):
    if not isinstance(patch, dict):
        return patch
    out = dict(doc) if isinstance(doc, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class StandinApiserver:
    """kube-apiserver's REST subset breakglass uses, over HTTPS, storing objects in etcd exactly as
    kube-apiserver does (protobuf, /registry/<resource>/<name>, resourceVersion = mod_revision)."""

    GROUP = "/apis/admissionregistration.k8s.io/v1/"

    def __init__(self, etcd_srv, pki: dict, token: str) -> None:
        from tests import etcd_server as es
        self.etcd = es.raw_client(etcd_srv)
        self.token = token
        self.endpoints: dict[str, dict] = {}  # "ns/name" -> Endpoints object
        self.failing: list[str] = []  # readyz checks to report failing
        self.requests: list[tuple[str, str]] = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki["server_cert"], pki["server_key"])
        ctx.load_verify_locations(pki["ca"])
        ctx.verify_mode = ssl.CERT_OPTIONAL
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _auth(self) -> bool:
                if self.connection.getpeercert():
                    return True
                return self.headers.get("Authorization") == f"Bearer {outer.token}"

            def _do(self, method):
                outer.requests.append((method, self.path))
                if not self._auth():
                    return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                if self.headers.get("Authorization") == "Bearer forbidden":
                    return self._send(403, _status(403, "Forbidden", "forbidden: User cannot do this"))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                code, obj = outer.handle(method, self.path, body, self.headers.get("Content-Type", ""))
                self._send(code, obj)

            def do_GET(self):
                self._do("GET")

            def do_POST(self):
                self._do("POST")

            def do_PUT(self):
                self._do("PUT")

            def do_PATCH(self):
                self._do("PATCH")

            def do_DELETE(self):
                self._do("DELETE")

            def _send(self, code, obj):
                data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if not isinstance(obj, str) else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.etcd.close()

    # -- storage -----------------------------------------------------------------------------------
    def _key(self, res, name):
        return f"/registry/{res}/{name}".encode()

    def _read(self, res, name):
        from breakglass.webhooks import codec
        value, meta = self.etcd.get(self._key(res, name))
        if value is None:
            return None, 0
        obj = codec.decode_value(value).obj
        obj.setdefault("metadata", {})["resourceVersion"] = str(meta.mod_revision)
        return obj, meta.mod_revision

    def _write(self, res, obj, expect_mod):
        """CAS put; expect_mod 0 means create. Returns the stored object or None if the CAS lost."""
        from breakglass.webhooks import codec
        stored = copy.deepcopy(obj)
        stored["metadata"].pop("resourceVersion", None)
        key = self._key(res, obj["metadata"]["name"])
        t = self.etcd.transactions
        cmp = [t.create(key) == 0] if expect_mod == 0 else [t.mod(key) == expect_mod]
        ok, _ = self.etcd.transaction(compare=cmp, success=[t.put(key, codec.encode_value(stored))], failure=[])
        return self._read(res, obj["metadata"]["name"])[0] if ok else None

    # -- REST ----------------------------------------------------------------------------------------
    def handle(self, method, path, body, ctype):
        url, _, query = path.partition("?")
        dry = "dryRun=All" in query
        if url in ("/readyz", "/livez", "/healthz"):
            lines = [f"[-]{c} failed: reason withheld" if c in self.failing else f"[+]{c} ok"
                     for c in ["ping", "etcd"] + self.failing]
            ok = not self.failing
            return (200 if ok else 500), "\n".join(lines) + f"\n{url[1:]} check {'passed' if ok else 'failed'}\n"
        m = re.match(r"^/api/v1/namespaces/([^/]+)/endpoints/([^/]+)$", url)
        if m:
            ep = self.endpoints.get(f"{m[1]}/{m[2]}")
            return (200, ep) if ep else (404, _status(404, "NotFound", f'endpoints "{m[2]}" not found'))
        if not url.startswith(self.GROUP):
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        parts = url[len(self.GROUP):].split("/")
        res = parts[0]
        kind = {"validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
                "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
                "validatingadmissionpolicies": "ValidatingAdmissionPolicy",
                "validatingadmissionpolicybindings": "ValidatingAdmissionPolicyBinding"}.get(res)
        if kind is None:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        name = parts[1] if len(parts) > 1 else None
        if method == "GET" and name is None:
            items = []
            for value, meta in self.etcd.get_prefix(f"/registry/{res}/".encode()):
                from breakglass.webhooks import codec
                o = codec.decode_value(value).obj
                o["metadata"]["resourceVersion"] = str(meta.mod_revision)
                items.append(o)
            return 200, {"kind": kind + "List", "apiVersion": "admissionregistration.k8s.io/v1", "items": items,
                         "metadata": {"resourceVersion": "0"}}
        if method == "POST" and name is None:
            name = body["metadata"]["name"]
            if self._read(res, name)[0] is not None:
                return 409, _status(409, "AlreadyExists", f'{res}.admissionregistration.k8s.io "{name}" already exists')
            if body["metadata"].get("resourceVersion"):
                return 400, _status(400, "BadRequest", "resourceVersion should not be set on objects to be created")
            obj = copy.deepcopy(body)
            obj["metadata"].setdefault("uid", str(uuid.uuid4()))
            obj["metadata"].setdefault("creationTimestamp", "2026-02-24T15:32:50Z")
            obj["metadata"]["generation"] = 1
            if dry:
                return 201, obj
            return 201, self._write(res, obj, 0)
        cur, mod = self._read(res, name)
        if cur is None:
            return 404, _status(404, "NotFound", f'{res}.admissionregistration.k8s.io "{name}" not found')
        if method == "GET":
            return 200, cur
        if method == "DELETE":
            pre = ((body or {}).get("preconditions") or {})
            if pre.get("resourceVersion") and pre["resourceVersion"] != str(mod):
                return 409, _status(409, "Conflict", "Operation cannot be fulfilled: the ResourceVersion in the "
                                                     "precondition does not match")
            if dry:
                return 200, cur
            t = self.etcd.transactions
            ok, _ = self.etcd.transaction(compare=[t.mod(self._key(res, name)) == mod],
                                          success=[t.delete(self._key(res, name))], failure=[])
            return (200, cur) if ok else (409, _status(409, "Conflict", "the object has been modified"))
        if method in ("PATCH", "PUT"):
            try:
                if method == "PUT":
                    new = body
                elif "json-patch" in ctype:
                    new = json_patch(cur, body)
                else:
                    new = merge_patch(cur, body)
            except PatchError as e:
                return 422, _status(422, "Invalid", str(e))
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != str(mod):
                return 409, _status(409, "Conflict", "Operation cannot be fulfilled: the object has been modified; "
                                                     "please apply your changes to the latest version and try again")
            new["metadata"]["generation"] = int(cur["metadata"].get("generation", 1)) + 1
            if dry:
                return 200, new
            stored = self._write(res, new, mod)
            return (200, stored) if stored else (409, _status(409, "Conflict", "the object has been modified"))
        return 405, _status(405, "MethodNotAllowed", method)


def _status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
