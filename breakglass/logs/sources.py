"""Where log bytes come from: files, gzip files, directories such as a copy of
/var/log/pods/kube-system_kube-apiserver-*, and standard input.

Each source is read as a stream of chunks, so memory does not grow with the log.
Errors a user can cause (missing file, truncated gzip, binary data) are ``BadInput``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterator

from breakglass.core.errors import BadInput

CHUNK = 4 << 20  # measured: 4 MiB reads are fastest here and keep peak RSS near 35 MB
_GZIP_MAGIC = b"\x1f\x8b"
_TEXT_CONTROL = set(range(0, 32)) - {9, 10, 12, 13, 27}
# kubelet rotates N.log to N.log.<YYYYmmdd-HHMMSS> and later gzips it.
_POD_LOG = re.compile(r"^(\d+)\.log(?:\.(\d{8}-\d{6}(?:\.\d+)?))?(?:\.gz)?$")


@dataclass
class LogSource:
    name: str
    opener: Callable[[], BinaryIO] = field(repr=False)
    lenient: bool = False  # found by walking a directory: a broken file is a warning, not an error
    path: str | None = None  # a local regular file, which may be read in parts (``logs.split``)


def _looks_binary(head: bytes) -> bool:
    sample = head[:8192]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    bad = sum(1 for b in sample if b in _TEXT_CONTROL)
    return bad > len(sample) // 10


def is_gzip(head: bytes) -> bool:
    return head.startswith(_GZIP_MAGIC)


_PEM = re.compile(rb"-----BEGIN [A-Z0-9 ]*(?:PRIVATE KEY|CERTIFICATE|PUBLIC KEY|CERTIFICATE REQUEST)-----")


def check_text(head: bytes, name: str) -> None:
    """The first bytes of a plain (not gzip) source must be text, and not a key or certificate (whose bytes must
    not be read as evidence)."""
    if _looks_binary(head):
        raise BadInput(f"{name}: binary data, not a text log")
    if _PEM.search(head[:8192]):
        raise BadInput(f"{name}: a key or certificate (PEM), not a log")


# What a directory walk leaves out by its name, with the reason said (a copy of a node's /etc/kubernetes or of a
# sandbox holds keys, certificates, manifests, kubeconfigs and etcd's data beside the logs)
_NOT_LOGS = (
    (re.compile(r"\.(?:key|crt|pem|csr|pub|der|p12|pfx|jks)$|^id_(?:rsa|ecdsa|ed25519|dsa)"), "a key or certificate"),
    (re.compile(r"\.(?:ya?ml|kubeconfig|conf|toml|ini)$|^kubeconfig$"), "configuration"),
    (re.compile(r"\.(?:db|wal|snap|sqlite|sqlite3|bolt|tmp|lock|pid|sock)$|^db$"), "data, not text"),
    (re.compile(r"\.(?:md|rst|html?|py|go|sh|c|h|mod|sum)$"), "documentation or code"),
    (re.compile(r"\.(?:tar|tgz|zip|xz|bz2|zst|png|jpe?g|pyz|so|bin)$"), "an archive or binary"),
)


def not_a_log(path: str) -> str | None:
    """Why a file found in a directory is not read as a log (None: read it). etcd's data directory goes whole."""
    name = os.path.basename(path)
    if "/member/wal/" in path or "/member/snap/" in path:
        return "etcd data"
    for pattern, why in _NOT_LOGS:
        if pattern.search(name):
            return why
    return None


def os_error(name: str, err: OSError) -> BadInput:
    if err.errno == errno.ENOENT:
        return BadInput(f"{name}: no such file or directory")
    if err.errno == errno.EACCES:
        return BadInput(f"{name}: permission denied")
    if err.errno == errno.EISDIR:
        return BadInput(f"{name}: is a directory")
    return BadInput(f"{name}: {err.strerror or err}")


def _pod_log_key(path: str) -> tuple:
    name = os.path.basename(path)
    m = _POD_LOG.match(name)
    if m:
        # restart count, then rotated files (oldest first) before the live one
        return (os.path.dirname(path), 0, int(m[1]), 0 if m[2] else 1, m[2] or "")
    return (os.path.dirname(path), 1, 0, 0, name)


def _file_source(path: str, lenient: bool = False) -> LogSource:
    return LogSource(name=path, opener=lambda: open(path, "rb"), lenient=lenient, path=path)


def expand(paths: list[str], stdin: BinaryIO | None = None, skipped: list | None = None) -> list[LogSource]:
    """Resolve command-line arguments to sources. A directory's files that are not logs (``not_a_log``) are left
    out, each added to ``skipped`` as (path, why) when it is given; a file named on the command line is read."""
    sources: list[LogSource] = []
    for p in paths:
        if p == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            sources.append(LogSource(name="<stdin>", opener=lambda s=stream: s))
            continue
        try:
            st = os.stat(p)
        except OSError as e:
            raise os_error(p, e) from None
        if stat.S_ISDIR(st.st_mode):
            found = []
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for f in files:
                    if f.startswith("."):
                        continue
                    full = os.path.join(root, f)
                    if not os.path.isfile(full):
                        continue
                    why = not_a_log(full)
                    if why is None:
                        found.append(full)
                    elif skipped is not None:
                        skipped.append((full, why))
            if not found:
                raise BadInput(f"{p}: directory holds no log files")
            for full in sorted(found, key=_pod_log_key):
                sources.append(_file_source(full, lenient=True))
        else:
            sources.append(_file_source(p))
    return sources


def read_chunks(src: LogSource, chunk: int | None = None) -> Iterator[bytes]:
    """Yield the decompressed bytes of one source in chunks of about ``chunk`` bytes."""
    chunk = chunk or CHUNK
    try:
        raw = src.opener()
    except OSError as e:
        raise os_error(src.name, e) from None
    try:
        first = raw.read(chunk)
        if first.startswith(_GZIP_MAGIC):
            yield from _gunzip_checked(raw, first, src.name)
            return
        check_text(first, src.name)
        while first:
            yield first
            first = raw.read(chunk)
    except OSError as e:
        raise os_error(src.name, e) from None
    finally:
        if raw is not sys.stdin.buffer and src.name != "<stdin>":
            raw.close()


def _gunzip_checked(raw: BinaryIO, first: bytes, name: str) -> Iterator[bytes]:
    """Stream-decompress gzip (several members allowed), failing clearly on truncation."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    started = False
    data = first
    checked_head = False
    while True:
        while data:
            started = True
            try:
                out = d.decompress(data, CHUNK)
            except zlib.error as e:
                raise BadInput(f"{name}: corrupt gzip data ({e})") from None
            if out:
                if not checked_head:
                    checked_head = True
                    if _looks_binary(out):
                        raise BadInput(f"{name}: binary data inside gzip, not a text log")
                yield out
            data = d.unconsumed_tail
            if d.eof:
                rest = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                started = False
                if rest.startswith(_GZIP_MAGIC):
                    data = rest
                elif rest.strip(b"\x00"):
                    raise BadInput(f"{name}: trailing garbage after gzip data")
                else:
                    data = b""
        data = raw.read(CHUNK)
        if not data:
            break
    if started and not d.eof:
        raise BadInput(f"{name}: truncated gzip file (ended before the end-of-stream marker)")
