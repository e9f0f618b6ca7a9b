"""Files on a node (over SSH, or this machine through access.local): read, compare-and-write atomically,
compare-and-remove, and the node's own backup copy. Shared by the remedies that edit a node's files (the
kubeadm manifest, k3s and RKE2 config files).

Every write is one script run on the node: it compares the current file's sha256 with the one that was read
(or that there is no file, for a new one), writes a dot-prefixed temp file in the same directory (kubelet and
k3s skip dot files that do not end in .yaml), checks its length and sha256, keeps the replaced file's mode and
owner (a new file stays 0600), fsyncs, renames, and fsyncs the directory. A connection that drops midway
leaves the old file and at most that temp file, never a partial one; the next script that reads, writes or
removes the file (a revert too, even one that finds nothing to write) removes that temp file first. Paths are
absolute and passed after ``--`` (access.ssh.quoted_path), so none can become an option.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import posixpath
import time

from breakglass.access.ssh import quoted_path
from breakglass.core.errors import BadInput, DiskFull, PreconditionFailed, Unreachable
from breakglass.ways.base import RESTORED, RevertOutcome, Unverified

ABSENT = ""  # the expected sha256 of a file that must not exist yet


class Nodes:
    """Mixin for a remedy that acts on nodes by host name (``self.nodes``: host -> connection)."""

    nodes: dict
    local: bool  # this machine (no node copy of a backup)
    backup_dir: str  # on the node
    missing = "no such file"  # what a step's file missing on the node means

    def _node(self, host: str):
        node = self.nodes.get(host)
        if node is None:
            raise BadInput(f"no connection to {host} (pass it with --ssh)")
        return node

    # The one-file-per-step remedies (a step's data: host, path, before_sha, after, after_sha) share these.
    def backup_file(self, step, run, name: str, keys: tuple[str, str], loaded_by: str) -> dict:
        """Keep the step's file, still as plan read it, in the run directory as ``name`` (``keys``: the journal's
        fields for its name and sha256) and, over SSH, a copy on the node in ``self.backup_dir``: never in the
        file's own directory, whose every file ``loaded_by`` loads (a backup there would be loaded too)."""
        node, path = self._node(step.data["host"]), step.data["path"]
        raw = read_remote(node, path, self.missing)
        if sha(raw) != step.data["before_sha"]:
            raise PreconditionFailed(f"{step.target} changed since it was read; nothing was written")
        info = {keys[0]: name, keys[1]: run.write_backup(name, raw)}
        remote = f"{self.backup_dir}/{run.id}-{step.id}-{posixpath.basename(path)}"
        if posixpath.dirname(posixpath.normpath(remote)) == posixpath.dirname(posixpath.normpath(path)):
            raise BadInput(f"the node backup directory must not be {posixpath.dirname(path)} ({loaded_by} every "
                           f"file there)")
        if not self.local:
            copy_to_node(node, self.backup_dir, posixpath.basename(remote), raw)
            info["node_copy"] = remote
        return info

    def write_planned(self, step) -> None:
        """Write the step's new file, only over the bytes plan read."""
        write_remote(self._node(step.data["host"]), step.data["path"], step.data["before_sha"],
                     step.data["after"].encode(), pause_for_tests())

    def read_back(self, step):
        """The step's node, once its file reads back as written."""
        node = self._node(step.data["host"])
        if sha(read_remote(node, step.data["path"], self.missing)) != step.data["after_sha"]:
            raise PreconditionFailed(f"{step.target} does not read back as written")
        return node


    @staticmethod
    def restore_bytes(step, node, path: str, current: bytes, original: bytes, dry_run: bool):
        """Put the backed-up bytes back over the file breakglass wrote (``current``, checked by the caller)."""
        if dry_run:
            return RevertOutcome(step.id, RESTORED, f"would restore {step.target} byte for byte ({len(original)} bytes)")
        write_remote(node, path, sha(current), original)
        return RevertOutcome(step.id, RESTORED, f"{step.target} restored byte for byte as it was before the run")


def text_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), before_name, after_name))


def pause_for_tests() -> float:
    """$BREAKGLASS_TEST_PAUSE (tests only): how long a write sleeps between its checks and its rename."""
    return float(os.environ.get("BREAKGLASS_TEST_PAUSE", "0") or 0)


def wait_until(node, script: str, timeout: float, on_wait, waiting: str, unverified: str, done: str):
    """Run ``script`` on the node every 2 s until it prints something (``done``), or until ``timeout``: then
    "applied, not verified" with ``unverified`` (what to check). ``on_wait`` hears how long is left."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            if node.run(script).out.strip():
                return done
            if time.monotonic() >= deadline:
                return Unverified(f"applied, not verified: {unverified}")
            if on_wait:
                on_wait(f"{int(deadline - time.monotonic())}s left: {waiting}")
            time.sleep(2)
    except KeyboardInterrupt as e:
        if e.args:  # SIGTERM or SIGHUP, raised as an interrupt (cli._signals_as_interrupts): the run ends
            raise
        # Ctrl-C stops the wait, not the run: the file is written and journaled, the run goes on to its /readyz
        # wait and its result, as the /readyz spinner's Ctrl-C does (issue 37 §5)
        return Unverified(f"applied, not verified: the wait was stopped (Ctrl-C); {unverified}")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# One writer at a time per directory (flock on the directory itself, where the node has flock: util-linux and
# busybox do), so the compare-and-swap (the sha256 read, then the rename) cannot interleave with another
# breakglass writing the same file: the second one finds the file changed and says so. Under that lock any temp
# file of ours for this target is stale (its writer was killed or lost its connection: it may hold a config's
# token), so it is removed. The temp file itself is made by mktemp (O_EXCL, 0600, a fresh name): two writers never
# share one, and a planted file or link at a predictable name is never written through.
_WRITE = r"""set -u
f={path}; d=$(dirname -- "$f"); b=$(basename -- "$f")
{links}{mkdir}if command -v flock >/dev/null 2>&1; then exec 9<"$d" && flock -x 9 || exit 5; fi
cur=$(sha256sum -- "$f" 2>/dev/null | cut -d' ' -f1)
{exists}[ "$cur" = "{expected}" ] || {{ echo "changed:$cur" >&2; exit 3; }}
for s in "$d/.$b.breakglass.tmp" "$d/.$b".breakglass.??????; do
  if [ -f "$s" ] && [ ! -L "$s" ]; then rm -f -- "$s"; fi
done
umask 077
t=$(mktemp -- "$d/.$b.breakglass.XXXXXX") || exit 5
cat >> "$t" || {{ rm -f -- "$t"; exit 5; }}
if [ "$(wc -c < "$t")" -ne {length} ] || [ "$(sha256sum -- "$t" | cut -d' ' -f1)" != "{new}" ]; then
  rm -f -- "$t"; echo "incomplete" >&2; exit 4
fi
if [ -e "$f" ]; then chmod --reference="$f" -- "$t" && chown --reference="$f" -- "$t" || {{ rm -f -- "$t"; exit 5; }}; fi
sync -- "$t" 2>/dev/null || sync
{pause}mv -f -- "$t" "$f" || exit 5
sync -- "$d" 2>/dev/null || sync
echo written
"""

# What a writer killed midway (kill -9, a dropped SSH session) left beside a file: its temp file, a copy of the new
# content with the config's tokens. Every script that touches the file (reads included, so a revert that finds the
# file already as it was, and writes nothing, still tidies) removes those first, under the directory's lock. It
# waits up to 30 s for a writer at work to finish first: a dropped SSH session does not stop the node's shell,
# which may still rename its temp file over the file, so a read before that would be stale, and a revert could call
# "already as it was" a file about to change. (busybox's flock has no -w: there it takes the lock only if free.)
# Nothing it says reaches the output.
_TIDY = r"""( f={path}; d=$(dirname -- "$f"); b=$(basename -- "$f")
  [ -d "$d" ] && [ ! -L "$d" ] || exit 0
  if command -v flock >/dev/null 2>&1; then
    exec 9<"$d" || exit 0; {{ flock -w 30 -x 9 2>/dev/null || flock -n -x 9; }} || exit 0
  fi
  for s in "$d/.$b.breakglass.tmp" "$d/.$b".breakglass.??????; do
    if [ -f "$s" ] && [ ! -L "$s" ]; then rm -f -- "$s"; fi
  done ) >/dev/null 2>&1
"""


def tidy_script(path: str) -> str:
    """The node-side lines that remove stale temp files of ``path`` (see _TIDY), to go before a command."""
    return _TIDY.format(path=quoted_path(path, "file path"))


# Refuse a link at the file or its directory: breakglass never writes through one (checked on the node, at
# the moment of writing).
_NO_LINKS = '[ -L "$f" ] || [ -L "$d" ] && { echo "link" >&2; exit 6; }\n'
_MKDIR = '[ -d "$d" ] || mkdir -p -- "$d" || exit 5\n'
_MUST_BE_NEW = '[ -e "$f" ] || [ -L "$f" ] && cur=exists\n'


# What the node's own tools say when its disk cannot take the write (ENOSPC, EDQUOT, EROFS, EIO): the node's disk
# is full, not the node unreachable.
_DISK_WORDS = ("No space left on device", "Disk quota exceeded", "Read-only file system", "Input/output error")


def _check_disk(node, path: str, r, what: str) -> None:
    said = r.err.decode("utf-8", "replace") if r.rc else ""
    word = next((w for w in _DISK_WORDS if w in said), None)
    if word:
        err = DiskFull(f"{node.host}:{path}: not {what}: {word.lower()} on the node (the file is as it was)")
        err.reason, err.where = word.lower(), f"{node.host}:{path}"  # type: ignore[attr-defined]
        raise err


def _check_rc(node, path: str, r, what: str) -> None:
    _check_disk(node, path, r, what)
    if r.rc == 3:
        raise PreconditionFailed(f"{node.host}:{path} changed since it was read; not {what}")
    if r.rc == 6:
        raise BadInput(f"{node.host}:{path} (or its directory) is a symbolic link; breakglass never writes through "
                       f"one: name the real file")


def write_remote(node, path: str, expected_sha: str, data: bytes, pause: float = 0.0,
                 refuse_links: bool = False) -> None:
    """Replace ``path`` with ``data`` if its sha256 is still ``expected_sha`` (ABSENT: create it, refusing an
    existing file)."""
    script = _WRITE.format(path=quoted_path(path, "file path"), expected=expected_sha, length=len(data),
                           new=sha(data), pause=f"sleep {pause}; " if pause else "",
                           links=_NO_LINKS if refuse_links else "",
                           mkdir=_MKDIR if expected_sha == ABSENT else "",
                           exists=_MUST_BE_NEW if expected_sha == ABSENT else "")
    r = node.run(script, stdin=data)
    _check_rc(node, path, r, "written")
    if r.rc != 0 or b"written" not in r.out:
        raise Unreachable(f"{node.host}:{path}: write failed ({r.err.decode('utf-8', 'replace').strip()[:200] or r.rc})")


_REMOVE = r"""set -u
f={path}; d=$(dirname -- "$f")
[ -L "$f" ] && {{ echo "link" >&2; exit 6; }}
cur=$(sha256sum -- "$f" 2>/dev/null | cut -d' ' -f1)
[ "$cur" = "{expected}" ] || {{ echo "changed:$cur" >&2; exit 3; }}
rm -f -- "$f" || exit 5
sync -- "$d" 2>/dev/null || sync
echo removed
"""


def remove_remote(node, path: str, expected_sha: str) -> None:
    """Remove ``path`` only if it still holds exactly the bytes with ``expected_sha``."""
    r = node.run(tidy_script(path) + _REMOVE.format(path=quoted_path(path, "file path"), expected=expected_sha))
    _check_rc(node, path, r, "removed")
    if r.rc != 0 or b"removed" not in r.out:
        raise Unreachable(f"{node.host}:{path}: remove failed ({r.err.decode('utf-8', 'replace').strip()[:200] or r.rc})")


def read_remote(node, path: str, missing: str = "no such file") -> bytes:
    r = node.run(tidy_script(path) + f"cat -- {quoted_path(path, 'file path')}")
    if r.rc != 0:
        err = r.err.decode("utf-8", "replace").strip()
        if "No such file" in err:
            raise BadInput(f"{node.host}:{path}: {missing}")
        raise Unreachable(f"{node.host}:{path}: {err[:200] or 'cannot read'}")
    return r.out


def read_optional(node, path: str) -> bytes | None:
    """The file's bytes, or None when there is no file."""
    q = quoted_path(path, "file path")
    r = node.run(tidy_script(path) + f"if [ -e {q} ] || [ -L {q} ]; then cat -- {q}; else echo absent >&2; exit 3; fi")
    if r.rc == 3 and r.err.strip() == b"absent":
        return None
    if r.rc != 0:
        raise Unreachable(f"{node.host}:{path}: {r.err.decode('utf-8', 'replace').strip()[:200] or 'cannot read'}")
    return r.out


def copy_to_node(node, directory: str, name: str, data: bytes) -> str:
    """Keep a copy of ``data`` on the node, in ``directory`` (made 0700; the copy 0600); returns its path."""
    if "/" in name or name.startswith("."):
        raise ValueError(name)
    remote = f"{directory.rstrip('/')}/{name}"
    bdir, q = quoted_path(directory, "node backup directory"), quoted_path(remote, "node backup")
    script = (f"umask 077; mkdir -p -- {bdir} && chmod 700 -- {bdir} && "
              f"cat > {q} && sync -- {q} 2>/dev/null; sha256sum -- {q}")
    r = node.run(script, stdin=data)
    _check_disk(node, remote, r, "written")
    if r.rc != 0 or sha(data) not in r.out.decode("utf-8", "replace"):
        raise Unreachable(f"{node.host}: backup to {remote} failed ({r.err.decode('utf-8', 'replace').strip()[:200]})")
    return remote
