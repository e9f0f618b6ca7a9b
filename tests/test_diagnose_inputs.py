"""diagnose reads logs, not whatever lies in a directory: keys, certificates, manifests, kubeconfigs, etcd's data
and documentation found beside the logs are skipped with one notice; a file that holds no line of any Kubernetes
component is said to be that (exit 2), never "nothing found"."""

from __future__ import annotations

import json
import os
import shutil

from tests.conftest import ROOT, run_cli

REAL = os.path.join(ROOT, "tests", "fixtures", "real", "v1.34.4", "connection-refused.log")


def _node_copy(tmp_path):
    """What a copy of a control-plane node's directories holds beside the apiserver's log."""
    d = tmp_path / "node"
    (d / "pki").mkdir(parents=True)
    (d / "etcd" / "member" / "snap").mkdir(parents=True)
    (d / "etcd" / "member" / "wal").mkdir(parents=True)
    shutil.copy(REAL, d / "kube-apiserver.log")
    (d / "pki" / "apiserver.key").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n-----END RSA PRIVATE KEY-----\n")
    (d / "pki" / "front-proxy").write_text("-----BEGIN PRIVATE KEY-----\nMIIEsecret\n-----END PRIVATE KEY-----\n")
    (d / "kube-apiserver.yaml").write_text("apiVersion: v1\nkind: Pod\n")
    (d / "admin.conf").write_text("apiVersion: v1\nkind: Config\n")
    (d / "etcd" / "member" / "snap" / "db").write_bytes(os.urandom(4096))
    (d / "etcd" / "member" / "wal" / "0000000000000000-0000000000000000.wal").write_bytes(os.urandom(4096))
    (d / "README.md").write_text("I0501 10:00:00.000000       1 x.go:1] failed calling webhook \"a.b.c\": x\n")
    return d


def test_a_directory_s_keys_manifests_etcd_data_and_docs_are_skipped_with_one_notice(tmp_path):
    d = _node_copy(tmp_path)
    p = run_cli("diagnose", str(d), "-o", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 3, p.stderr.decode()
    assert out["result"]["stats"]["sources"] == [str(d / "kube-apiserver.log")], out["result"]["stats"]
    [skipped, pem] = out["warnings"]
    assert skipped.startswith("skipped 6 file(s) that are not logs: ") and "README.md (documentation or code)" in skipped
    assert "front-proxy: a key or certificate (PEM), not a log" in pem  # found by its content, not its name
    assert b"secret" not in p.stdout and b"a.b.c" not in p.stdout  # neither the key nor the README was read
    text = run_cli("diagnose", str(d))
    said = (text.stdout + text.stderr).decode()
    assert said.count("warning: skipped") == 2, said  # one line each


def test_a_log_with_no_word_of_kubernetes_is_said_so_exit_2(tmp_path):
    """issue 45 §1: exit 2 only for text with no word of the Kubernetes world at all (dpkg's log, which names the
    kubelet package, a service's plain log); it says how much was read and why nothing matched."""
    dpkg = tmp_path / "dpkg.log"
    dpkg.write_text("2024-05-01 10:00:00 startup archives unpack\n2024-05-01 10:00:02 status installed kubelet 1.30\n")
    nginx = tmp_path / "access.log"
    nginx.write_text('10.0.0.1 - - [01/May/2024:10:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.0"\n')
    for path in (dpkg, nginx):
        p = run_cli("diagnose", str(path))
        err = p.stderr.decode()
        assert p.returncode == 2 and "line(s) read, not one word of Kubernetes in them" in err, err
        assert len(err.splitlines()) == 2 and "Traceback" not in err  # the line, and the hint
    # beside a real log, such a file is a warning and the real log is diagnosed
    p = run_cli("diagnose", str(dpkg), REAL, "-o", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 3 and out["warnings"] == [
        f"{dpkg}: not one word of Kubernetes in it (not read as a log)"], out["warnings"]


def test_every_paste_with_kubernetes_words_is_read_not_refused(tmp_path):
    """issue 45 §1: a person's paste is read whatever its shape: etcd's own JSON log, an operator's JSON line, prose
    quoting the API, a one-line controller error, an event row alone, a journal line of RKE2, a kernel's OOM line
    naming kube-apiserver. Nothing found in them is exit 0 and says what was read (never exit 2, "not a log")."""
    pastes = {
        "etcd.log": '{"level":"warn","ts":"2024-05-01T10:00:01.000Z","caller":"etcdserver/util.go:170",'
                    '"msg":"apply request took too long","took":"1.2s"}\n',
        "operator.json": '{"level":"info","time":"2024-05-01T10:00:01Z","scope":"validation","msg":"config is '
                         'invalid: spec.servers must not be empty"}\n',
        "notes.md": "# Postmortem\n\nThe admission webhooks were failing closed on every node; we ran kubectl\n"
                    "by hand and saw failures everywhere.\n",
        "one.txt": "Error creating: Timeout: request did not complete within allowed duration\n",
        "row.txt": "  Warning  BackOff  3m (x20 over 9m)  kubelet  Back-off restarting failed container\n",
        "rke2.txt": 'Mar 02 10:00:00 cp-1 rke2[1234]: time="2024-03-02T10:00:00Z" level=info msg="Waiting for API '
                    'server to become available"\n',
        "oom.txt": "[  +0.000112] Out of memory: Kill process 20877 (kube-apiserver) score 1068 or sacrifice child\n",
    }
    for name, text in pastes.items():
        path = tmp_path / name
        path.write_text(text)
        p = run_cli("diagnose", str(path), "-o", "json")
        assert p.returncode == 0, (name, p.stderr)
        out = json.loads(p.stdout)
        assert out["result"]["verdict"]["state"] == "clear" and out["result"]["stats"]["lines"] >= 1, name
    # our own README is documentation about webhooks: read, and whatever it shows, never refused as "not a log"
    p = run_cli("diagnose", os.path.join(ROOT, "README.md"))
    assert p.returncode in (0, 3) and "Traceback" not in p.stderr.decode(), p.stderr
    denied = ('Error from server: admission webhook "validate.kyverno.svc-fail" denied the request: '
              "policy require-labels failed\n")
    for quote in ('"', '\\"', '\\\\\\"', "\u201c"):  # as typed, escaped once (JSON), twice (a ticket), curly
        paste = tmp_path / "paste.txt"
        line = "$ kubectl apply -f pod.yaml\n" if quote == '"' else ""
        paste.write_text(line + denied.replace('"validate.kyverno.svc-fail"',
                                               f"{quote}validate.kyverno.svc-fail{quote.replace(chr(0x201c), chr(0x201d))}"))
        p = run_cli("diagnose", str(paste), "-o", "json")
        assert p.returncode == 0, (quote, p.stderr)
        assert "validate.kyverno.svc-fail" in json.dumps(json.loads(p.stdout)["result"]["notices"]), quote


def test_a_named_key_file_is_refused_and_never_echoed(tmp_path):
    key = tmp_path / "apiserver.key"
    key.write_text("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIsecret\n-----END EC PRIVATE KEY-----\n")
    p = run_cli("diagnose", str(key))
    assert p.returncode == 2 and b"a key or certificate (PEM), not a log" in p.stderr
    assert b"secret" not in p.stdout + p.stderr


TALOS_EXAMPLE = os.path.join(ROOT, "examples", "logs", "talos-servicecidr-kyverno.log")


def _by_source(out):
    return {tuple(f["sources"]): f for f in out["result"]["findings"] if f["webhook"] == "validate.kyverno.svc-fail"}


def test_another_cluster_s_log_in_the_same_input_is_kept_apart(tmp_path):
    """The same webhook name served by another backend in another file (the sandbox's copied example log beside
    the real one) is a finding of its own: neither's Service, count or blocked writes are the other's."""
    p = run_cli("diagnose", REAL, TALOS_EXAMPLE, "-o", "json")
    out = json.loads(p.stdout)
    found = _by_source(out)
    assert set(found) == {(REAL,), (TALOS_EXAMPLE,)}, found.keys()
    real, example = found[(REAL,)], found[(TALOS_EXAMPLE,)]
    assert real["service"] is None and real["url"].startswith("https://127.0.0.1:49991/")
    assert real["count"] == 1 and real["hooks"] == []
    assert example["service"] == "kyverno/kyverno-svc" and example["count"] == 40
    # the example's stuck hooks are still tied to its own webhook, as when it is read alone
    assert example["hooks"] == ["start-kubernetes-service-cidr-controller", "start-service-ip-repair-controllers"]
    assert f"same name in {TALOS_EXAMPLE} are kept apart" in real["explanation"]
    assert out["warnings"] == [f"webhook 'validate.kyverno.svc-fail' is served by another backend in {TALOS_EXAMPLE} "
                               f"than in the sources before: another cluster's or apiserver's log? Its lines there "
                               f"are a finding of their own"], out["warnings"]
    # the text names both, each with its own source
    text = run_cli("diagnose", REAL, TALOS_EXAMPLE).stdout.decode()
    assert "kept apart" in text


def test_two_apiservers_of_one_cluster_are_one_finding(tmp_path):
    """Logs of the same cluster's apiservers (the same backend) are one finding, their counts added."""
    other = tmp_path / "cp2-kube-apiserver.log"
    shutil.copy(REAL, other)
    out = json.loads(run_cli("diagnose", REAL, str(other), "-o", "json").stdout)
    [(sources, f)] = _by_source(out).items()
    assert sorted(sources) == sorted([REAL, str(other)]) and f["count"] == 2 and "kept apart" not in f["explanation"]
    assert out["warnings"] == []
