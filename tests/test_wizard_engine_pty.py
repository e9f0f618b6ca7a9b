"""The wizard in a real pseudo-terminal (pexpect, read through a pyte screen at 80 columns) on the sandbox's real,
deadlocked kube-apiserver: one test per finding of issue 26, each of which the wizard before d29d49c failed.

1. a way out the access cannot use is not offered (k3s/RKE2 from a local manifest), and an empty plan is not
   called "already in place" while /readyz is 500;
2. a revert while the webhook's backend is down needs the typed word (on resume and after a change); with the
   backend up it needs none;
3. a confirmation typed into the apiserver's restart gap is retried, not the end of the wizard;
4. a way back at every step (back, a declined confirmation, ``<`` at a question, quit);
5. Ctrl-C during the /readyz wait goes on to the lasting fix and the revert question; a second one leaves;
6. the apiserver to watch is validated, its default read from the manifest's --secure-port, the local manifest
   probe labelled as such;
7. nothing printed is cut or split inside a word at 80 columns, the refusal of a typed answer included.

The sandbox's apiserver crash-loops as a deadlocked one does (it exits about every minute and its kubelet
stand-in starts it again), so the ways-out list is read from the screen (which ways are enabled) rather than
counted, and every wait is generous: the machine running these may be loaded. No assertion is on time.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

import pytest

from breakglass import sandbox
from breakglass.flows import wizard
from tests.conftest import ROOT

DOWN, ERASE = "\x1b[B", "\x15"  # arrow down, and Ctrl-U (erase what the question pre-filled)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
COLUMNS, ROWS = 80, 400  # a tall screen: nothing of a flow scrolls away before it is read
WAIT = 180  # seconds for anything the wizard does on a loaded machine (a timeout is a failure, never a pass)
KYVERNO = "kyverno-resource-validating-webhook-cfg"
INNOCENT = "breakglass-test-innocent"  # a fail-open configuration no bootstrap write meets: deleting it mends nothing
WAY_IN_LAST = "quit: leave"
WAY_OUT_LAST = "back: another way in"
CONFIRM = r"Type (\S+) to apply:"  # the typed confirmation's question
SPINNER = r"\r\x1b\[K[|/\\-] "  # a status line that replaces the last (Prompter.progress): a wait under way


class Term:
    """``breakglass wizard`` in a pty, its output fed to a pyte screen as a terminal would draw it."""

    def __init__(self, state: str, env: dict | None = None) -> None:
        import pexpect
        import pyte

        e = {**os.environ, "BREAKGLASS_STATE_DIR": state, "TERM": "xterm", "COLUMNS": str(COLUMNS),
             "LINES": str(ROWS), "KUBECONFIG": "", "TALOSCONFIG": "", "ETCDCTL_ENDPOINTS": "", "ETCDCTL_CACERT": "",
             "ETCDCTL_CERT": "", "ETCDCTL_KEY": "",
             "PROMPT_TOOLKIT_NO_CPR": "1",  # nothing here answers a cursor-position request
             **(env or {})}
        self.child = pexpect.spawn(sys.executable, ["-m", "breakglass", "wizard"], cwd=ROOT, env=e, timeout=WAIT,
                                   encoding="utf-8", dimensions=(ROWS, COLUMNS))
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.Stream(self.screen)
        self.seen = ""
        RUNNING.append(self)

    def _feed(self, chunk: str) -> None:
        self.seen += chunk
        self.stream.feed(chunk)

    def expect(self, patterns, timeout: float = WAIT) -> int:
        import pexpect

        try:
            i = self.child.expect(patterns, timeout=timeout)
        except (pexpect.TIMEOUT, pexpect.EOF) as e:
            self._feed(self.child.before if isinstance(self.child.before, str) else "")
            raise AssertionError(f"{type(e).__name__} waiting for {patterns!r}; the wizard said:\n"
                                 + self.text()[-3000:] + f"\nwhat it wrote last, as written: {self.seen[-800:]!r}") from None
        self._feed(self.child.before + (self.child.after if isinstance(self.child.after, str) else ""))
        return i

    def settle(self, seconds: float = 1.0) -> None:
        """Read what the wizard draws in the next moment (a list finishes drawing, a toolbar appears)."""
        import pexpect

        try:
            self.child.expect("(?!x)x", timeout=seconds)
        except pexpect.TIMEOUT:
            self._feed(self.child.before)

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def answer(self, text: str, erase: bool = True) -> None:
        time.sleep(0.3)  # prompt_toolkit takes keys once its prompt is up; earlier ones can be lost
        self.child.send((ERASE if erase else "") + text + "\r")

    def rows(self) -> list[str]:
        return [r.rstrip() for r in self.screen.display]

    def choices(self, question: str, last: str) -> list[tuple[str, bool]]:
        """The list under the last ``question`` on the screen: (title, enabled) in order."""
        self.expect(re.escape(last))
        self.settle(0.5)
        rows = self.rows()
        top = max(i for i, r in enumerate(rows) if question in r)
        out = []
        for r in rows[top + 1:]:
            if r.strip().startswith("(Use arrow keys)") or not r.strip():
                continue
            if r.startswith("  Description:") or not r.startswith(("   ", " » ")):
                if out:
                    break
                continue
            body = r[3:]
            out.append((body[2:], False) if body.startswith("- ") else (body, True))
            if last in r:
                break
        return out

    def choose(self, question: str, wanted: str, last: str) -> list[tuple[str, bool]]:
        """Point at the enabled choice whose title starts with ``wanted`` and take it; returns the list seen."""
        self.expect(re.escape(question))
        listed = self.choices(question, last)
        enabled = [t for t, ok in listed if ok]
        index = next((i for i, t in enumerate(enabled) if t.startswith(wanted)), None)
        assert index is not None, (wanted, listed, self.rows()[-40:])
        time.sleep(0.3)
        self.send(DOWN * index + "\r")
        return listed

    def prefilled(self, question: str) -> str:
        """What the question on the screen offers (its default, as drawn: folded over rows when long)."""
        self.expect(re.escape(question))
        self.settle()
        rows = self.rows()
        top = max(i for i, r in enumerate(rows) if question in r)
        return "".join(rows[top:top + 3]).split(question, 1)[1].strip()

    def way_in(self, wanted: str) -> None:
        self.choose("How can you reach the cluster", wanted, WAY_IN_LAST)

    def end(self) -> int:
        import pexpect

        self.child.expect(pexpect.EOF, timeout=WAIT)
        self._feed(self.child.before)
        self.child.close()
        text = self.text()
        assert "Traceback" not in text and "unexpected" not in text, text[-3000:]
        return self.child.exitstatus if self.child.exitstatus is not None else 128 + self.child.signalstatus

    def text(self) -> str:
        return ANSI.sub("", self.seen)


RUNNING: list[Term] = []


@pytest.fixture(autouse=True)
def _no_wizard_left():
    """A test that failed half-way leaves no wizard of ours running."""
    yield
    while RUNNING:
        t = RUNNING.pop()
        if t.child.isalive():
            t.child.terminate(force=True)


# -- the sandbox --------------------------------------------------------------------------------------------------

def _binary() -> str:
    built = sandbox.built_apiservers()
    if not built:
        pytest.skip("no kube-apiserver is built here (`make go-components` builds build/kube-apiserver/...)")
    return next((b for b in built if "/v1.34." in b), built[-1])  # the seed's deadlock needs 1.33+


def _short_state() -> str:
    """A short state directory: the paths echoed at 80 columns stay shorter than a line."""
    return tempfile.mkdtemp(prefix="bgw-", dir="/tmp")


@pytest.fixture(scope="module")
def deadlocked():
    """One deadlocked sandbox for the tests that change nothing it needs (the restart-gap test, which mends the
    deadlock, comes last). Its state directory holds no run: those tests start at the questions."""
    binary = _binary()  # a skip leaves no directory behind
    state = _short_state()
    d = sandbox.default_dir(state)
    sb = sandbox.up(d, apiserver=binary)
    yield state, sb
    sandbox.down(d)
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def state():
    s = _short_state()
    yield s
    sandbox.down(sandbox.default_dir(s))
    shutil.rmtree(s, ignore_errors=True)


def _etcd(sb):
    from breakglass.access.etcd import Etcd, EtcdSettings
    from breakglass.webhooks import sources

    return Etcd(EtcdSettings(endpoints=(sb.endpoint,)), tuple(sources.etcd_prefixes().values()))


def _has_kyverno(sb) -> bool:
    from breakglass.webhooks import sources

    etcd = _etcd(sb)
    try:
        return etcd.get(sources.etcd_key("validating", KYVERNO)) is not None
    finally:
        etcd.close()


def _readyz_status(sb) -> int | None:
    from breakglass.sandbox import controlplane

    return controlplane.readiness(sb.apiserver, sb.dir)["status"]


def _flagged_manifest(sb, where: str) -> str:
    """A copy of the sandbox's manifest that already disables the webhook plugins (the kubelet does not read it:
    the apiserver stays deadlocked)."""
    import yaml

    with open(sb.apiserver["manifest"], encoding="utf-8") as f:
        pod = yaml.safe_load(f)
    pod["spec"]["containers"][0]["command"].append(
        "--disable-admission-plugins=ValidatingAdmissionWebhook,MutatingAdmissionWebhook")
    path = os.path.join(where, "flagged-kube-apiserver.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(pod, f, sort_keys=False)
    return path


def _apiserver_pid(sb) -> int | None:
    from breakglass.sandbox import controlplane

    return controlplane.kubelet_state(sb.dir).get("pid")


def _accepts(url: str) -> bool:
    port = int(url.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _until(what: str, cond, seconds: float = WAIT) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"the sandbox never got there: {what}")
        time.sleep(0.3)


def _fresh_apiserver(sb) -> None:
    """Restart the sandbox's apiserver now (as its crash loop would) and wait until it serves: a deadlocked
    apiserver serves for about a minute before it exits again, time enough for a flow to reach its confirmation."""
    pid = _apiserver_pid(sb)
    if pid:
        os.kill(pid, signal.SIGKILL)  # the apiserver our sandbox started, by its pid
        _until("a new apiserver process", lambda: _apiserver_pid(sb) not in (None, pid))
    _until("the apiserver answering", lambda: _readyz_status(sb) is not None)


def _skip_logs(t: Term) -> None:
    t.expect("Logs to diagnose")
    t.answer("")


def _manifest_way_in(t: Term, manifest: str) -> None:
    t.way_in("a kubeadm manifest")
    t.expect("kube-apiserver manifest:")
    t.answer(manifest)


# -- 1. no false all-clear ------------------------------------------------------------------------------------------

def test_k3s_and_rke2_are_not_usable_from_a_manifest_and_an_empty_plan_is_not_an_all_clear(deadlocked, tmp_path):
    state, sb = deadlocked
    flagged = _flagged_manifest(sb, str(tmp_path))
    t = Term(state)
    _skip_logs(t)
    t.way_in("REHEARSAL")
    seen = t.choose("Which way out", "back", WAY_OUT_LAST)  # the rehearsal: etcd, the API, the manifest
    usable = {title.split(" ")[0].rstrip(":") for title, ok in seen if ok}
    for way in ("k3s", "rke2"):
        row = next((title for title, _ in seen if title.startswith(way + ":")), None)
        assert row is not None and (row, False) in seen and "(no ssh access given)" in row, (way, seen)
    assert {"kubeapi", "kubeadm", "etcd"} <= usable, seen
    # the local manifest, which already disables the plugins: an empty plan while /readyz is 500
    _manifest_way_in(t, flagged)
    t.expect("Apiserver to watch:")
    t.answer(sb.apiserver["url"])
    seen = t.choose("Which way out", "kubeadm", WAY_OUT_LAST)
    assert [title.split(":")[0] for title, ok in seen if ok][:1] == ["kubeadm (in a manifest on this machine)"]
    for way in ("k3s", "rke2"):
        assert any(title.startswith(way + ":") and "(no ssh access given)" in title and not ok
                   for title, ok in seen), (way, seen)
    t.expect("Nothing to change")
    assert _readyz_status(sb) != 200  # the deadlock is still there (500, or between two of its restarts)
    t.choose("Which way out", "back", WAY_OUT_LAST)  # back at the list, not ended with an all-clear
    t.way_in("quit")
    assert t.end() == 7
    assert "already in place" not in t.text()
    assert "no run of breakglass made this change" in t.text()


# -- 4. a way back at every step --------------------------------------------------------------------------------------

def test_back_decline_and_less_than_each_go_back_and_quit_changes_nothing(deadlocked):
    state, sb = deadlocked
    manifest = sb.apiserver["manifest"]
    before = hashlib.sha256(open(manifest, "rb").read()).hexdigest()
    t = Term(state)
    _skip_logs(t)
    t.way_in("a kubeadm manifest")
    t.expect("Type < at any question")
    t.expect("kube-apiserver manifest:")
    t.answer("<")  # back to the list of ways in
    t.way_in("a kubeadm manifest")
    t.expect("kube-apiserver manifest:")
    t.answer(manifest)
    t.expect("Apiserver to watch:")
    t.answer("", erase=False)  # the default: the manifest's own address
    t.choose("Which way out", "back", WAY_OUT_LAST)  # "back": the ways in again
    t.way_in("a kubeadm manifest")
    assert t.prefilled("kube-apiserver manifest:").startswith(manifest)  # what was typed is kept
    t.answer("", erase=False)
    t.expect("Apiserver to watch:")
    t.answer("", erase=False)
    t.choose("Which way out", "kubeadm", WAY_OUT_LAST)
    t.expect(CONFIRM)
    t.answer("")  # declined
    t.expect("Nothing was changed. Back to the ways out.")
    t.choose("Which way out", "back", WAY_OUT_LAST)  # the ways out again, and from there the ways in
    t.way_in("quit")
    assert t.end() == 7
    assert "nothing was changed" in t.text()
    assert hashlib.sha256(open(manifest, "rb").read()).hexdigest() == before


# -- 6. answers checked against what was read -----------------------------------------------------------------------

def test_the_apiserver_to_watch_is_validated_and_defaults_to_the_manifests_port(deadlocked):
    state, sb = deadlocked
    url = sb.apiserver["url"]
    t = Term(state)
    _skip_logs(t)
    _manifest_way_in(t, sb.apiserver["manifest"])
    assert t.prefilled("Apiserver to watch:").startswith(url), t.rows()[-6:]  # the manifest's --secure-port
    t.answer("htps//127.0.0.1:51501")
    assert t.expect(["not a URL", "Which way out"]) == 0, t.text()[-2000:]  # asked again, with the reason
    t.expect("Apiserver to watch:")
    t.answer(url)
    t.choose("Which way out", "kubeadm", WAY_OUT_LAST)
    probes = [ln.strip() for ln in t.text().splitlines() if ": reachable:" in ln or ": NOT reachable:" in ln]
    assert any(p.startswith("manifest: reachable") for p in probes), probes
    assert not any(p.startswith("ssh:") for p in probes), probes
    t.child.sendcontrol("c")
    assert t.end() == 130


# -- 7. width ------------------------------------------------------------------------------------------------------

def _vocabulary(text: str) -> set[str]:
    words = set(re.findall(r"[A-Za-z]{3,}", text))
    for mod in ("flows/wizard.py", "flows/revert_guard.py", "ways/registry.py", "cli/prompter.py"):
        with open(os.path.join(ROOT, "breakglass", mod), encoding="utf-8") as f:
            words |= set(re.findall(r"[A-Za-z]{3,}", f.read()))
    return words


def _left_whole(text: str) -> list[str]:
    """Lines the wizard prints whole on purpose (a diff, a command: splitting them changes what they say), which
    the terminal folds where it must."""
    out = []
    for ln in text.splitlines():
        ln = re.sub(r"^\[REHEARSAL\] ", "", ln)
        if len(ln) > COLUMNS and (ln.lstrip()[:1] in ("+", "-", "@", "$", "#") or "  $ " in ln):
            out.append(ln)
    return out


def _split_words(rows: list[str], text: str) -> list[tuple[str, str]]:
    words, whole = _vocabulary(text), _left_whole(text)
    out = []
    for a, b in zip(rows, rows[1:]):
        if len(a) == COLUMNS and a[-1:].isalpha() and b[:1].isalpha():
            joined = re.search(r"[A-Za-z]+$", a).group() + re.match(r"[A-Za-z]+", b).group()
            if joined in words and not any(a[-30:] + b[:30] in w for w in whole):
                out.append((a, b))
    return out


def _on_screen(rows: list[str], message: str) -> bool:
    """``message`` shown whole, folded over rows at spaces or not."""
    flat = " ".join(r.strip() for r in rows if r.strip())
    return " ".join(message.split()) in flat or message.replace(" ", "") in flat.replace(" ", "")


def test_nothing_is_cut_or_split_inside_a_word_at_80_columns(deadlocked):
    state, sb = deadlocked
    t = Term(state)
    t.expect("Logs to diagnose")
    t.answer(sb.apiserver["log"])
    t.expect("DEADLOCK")
    _manifest_way_in(t, sb.apiserver["manifest"])
    t.expect("Apiserver to watch:")
    t.answer("htps//127.0.0.1:51501")
    t.expect("not a URL")
    t.settle()
    refusal = wizard._url_problem("htps//127.0.0.1:51501")
    assert _on_screen(t.rows(), refusal), (refusal, t.rows()[-12:])  # the whole reason, where it is shown
    splits = _split_words(t.rows(), t.text())
    t.expect("Apiserver to watch:")
    t.answer("", erase=True)  # none: the wait is skipped
    t.choose("Which way out", "kubeadm", WAY_OUT_LAST)
    t.expect(CONFIRM)
    t.answer("yes")  # a wrong word: refused with how to back out
    t.expect("that is not")
    t.settle()
    word = re.search(r"Type (\S+) to apply", t.text()).group(1)
    wrong = f"that is not {word!r}; type it exactly, or Enter alone for no"
    assert _on_screen(t.rows(), wrong), (wrong, t.rows()[-12:])
    splits += _split_words(t.rows(), t.text())
    t.expect(CONFIRM)
    t.answer("")
    t.choose("Which way out", "back", WAY_OUT_LAST)
    t.way_in("quit")
    assert t.end() == 7
    splits += _split_words(t.rows(), t.text())
    assert not splits, splits


# -- 5. Ctrl-C during the wait --------------------------------------------------------------------------------------

def _seed_innocent(sb) -> None:
    from breakglass.webhooks import codec, sources

    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": INNOCENT, "uid": "3f0c2a9e-1b7d-4e5f-9a8b-7c6d5e4f3a2b",
                        "creationTimestamp": "2026-01-05T09:00:00Z"},
           "webhooks": [{"name": "innocent.example.com",
                         "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                         "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
                                    "resources": ["widgets"]}],
                         "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 5,
                         "admissionReviewVersions": ["v1"]}]}
    etcd = _etcd(sb)
    try:
        etcd.put_if_absent(sources.etcd_key("validating", INNOCENT), codec.encode_value(obj))
    finally:
        etcd.close()


def _etcd_way_in(t: Term, sb, watch: str) -> None:
    t.way_in("etcd endpoints")
    t.expect("etcd endpoints")
    t.answer(sb.endpoint)
    for question in ("etcd CA file", "etcd client cert", "etcd client key"):
        t.expect(question)
        t.answer("")
    t.expect("Apiserver to watch:")
    t.answer(watch)


def test_ctrl_c_in_the_readyz_wait_goes_on_to_the_fix_and_the_revert_question(deadlocked, state):
    _, sb = deadlocked
    _seed_innocent(sb)  # deleting it leaves the apiserver deadlocked: the wait cannot end on its own
    t = Term(state)
    _skip_logs(t)
    _etcd_way_in(t, sb, sb.apiserver["url"])
    t.choose("Which way out", "etcd", WAY_OUT_LAST)
    t.choose("Which configuration", INNOCENT, KYVERNO)
    t.expect(CONFIRM)
    t.answer(INNOCENT)
    t.expect("Waiting for /readyz after the change")
    t.expect("s left")  # the countdown: the wait is under way
    for attempt in range(3):
        t.child.sendcontrol("c")
        try:
            t.expect("Stopped waiting for /readyz", timeout=20)
            break
        except AssertionError:  # still counting down 20 s later: that ^C never arrived (a loaded CI machine)
            if attempt == 2:
                raise
    t.expect("The lasting fix")
    t.expect("Revert the temporary change now")
    t.child.sendcontrol("c")  # the second one leaves
    assert t.end() == 130
    assert "breakglass revert" in t.text()


# -- 3. a confirmation in the restart gap (last on the shared sandbox: its change mends the deadlock) -------------

def test_a_confirmation_typed_in_the_restart_gap_is_retried(deadlocked, state):
    _, sb = deadlocked
    kubelet = sb.apiserver["kubelet_pid"]
    _fresh_apiserver(sb)
    t = Term(state)
    _skip_logs(t)
    t.way_in("kubeconfig")
    t.expect("kubeconfig:")
    t.answer(sb.apiserver["kubeconfig"])
    t.choose("Which way out", "kubeapi", WAY_OUT_LAST)
    t.choose("Which configuration", KYVERNO, KYVERNO)
    t.choose("Which change", "failurePolicy Ignore", "delete the configuration")
    t.expect(CONFIRM)
    # the gap: the kubelet stand-in held, the apiserver gone (as when it exits and is not restarted yet)
    os.kill(kubelet, signal.SIGSTOP)
    try:
        pid = _apiserver_pid(sb)
        os.kill(pid, signal.SIGKILL)
        _until("the apiserver refusing connections", lambda: not _accepts(sb.apiserver["url"]))
        t.answer(KYVERNO)
        # the restart gap waited out (flows.retry), not the end of the wizard
        if t.expect([SPINNER, "The change could not be made"]) == 1:
            t.settle()
            pytest.fail("the refused write was not retried; the wizard wrote: " + repr(t.seen[-1500:]))
    finally:
        os.kill(kubelet, signal.SIGCONT)  # the kubelet starts it again
    i = t.expect(["Revert the temporary change now", "Which way out"],
                 timeout=WAIT + wizard.RETRY_SECONDS + wizard.WAIT_SECONDS)
    if i == 0:
        t.answer("n", erase=False)
        assert t.end() == 0
        assert "The change could not be made" not in t.text()
        assert "breakglass revert" in t.text()  # the run was made, and says how to undo it
    else:  # past the deadline: back at the ways out, and what was typed is still there
        t.choose("Which way out", "back", WAY_OUT_LAST)
        t.way_in("kubeconfig")
        assert t.prefilled("kubeconfig:").startswith(sb.apiserver["kubeconfig"])
        t.child.sendcontrol("c")
        assert t.end() == 130


# -- 2. the revert guard: a typed word while the backend is down ----------------------------------------------------

def test_a_revert_with_the_backend_down_needs_the_typed_word_on_resume_and_after_the_change(state):
    """With the webhook's backend down a revert needs the typed word, right after the change and on resume; with
    the backend back, none.

    Cost: `sandbox.up` boots kube-apiserver twice (first boot, the deadlocked restart), then three wizards run in a
    pty, each a new interpreter; the first deletes the key and waits for /readyz until the deadlocked apiserver
    gets past its bootstrap: the wizard asks "revert now?" only after that wait."""
    d = sandbox.default_dir(state)
    sb = sandbox.up(d, apiserver=_binary())
    # the main flow: a change, then "revert now?" yes, and Enter at the typed word
    t = Term(state)
    _skip_logs(t)
    _etcd_way_in(t, sb, sb.apiserver["url"])
    t.choose("Which way out", "etcd", WAY_OUT_LAST)
    t.choose("Which configuration", KYVERNO, KYVERNO)
    t.expect(CONFIRM)
    t.answer(KYVERNO)
    t.expect("Revert the temporary change now", timeout=wizard.WAIT_SECONDS + WAIT)
    t.answer("y", erase=False)
    t.expect("Not safe to revert yet")
    t.expect(f"Type {wizard.OVERRIDE_WORD}:")
    t.answer("")
    t.expect("When the webhook is healthy: breakglass revert")
    assert t.end() == 0
    assert "backend" in t.text() and "not ready" in t.text()
    assert not _has_kyverno(sb)  # the bypass is still in place
    # started again with the run open: the same guard
    t = Term(state)
    t.choose("What now", "revert it", "leave it")
    listed = "\n".join(t.rows()).split("reverted:", 1)[1].split("? What now", 1)[0]
    assert KYVERNO in listed, listed  # the run's steps at 80 columns, the name never cut
    t.expect("Not safe to revert yet")
    t.expect(f"Type {wizard.OVERRIDE_WORD}:")
    t.answer("")
    t.expect("The change stays")
    assert t.end() == 7  # issue 33: the re-arm declined on resume is exit 7, as the table says
    assert not _has_kyverno(sb)
    # the backend back: the revert goes ahead with no word to type
    sandbox.backend(d, True)
    t = Term(state)
    t.choose("What now", "revert it", "leave it")
    t.expect("revert of run")
    assert t.end() == 0
    assert f"Type {wizard.OVERRIDE_WORD}" not in t.text()
    assert _has_kyverno(sb)
