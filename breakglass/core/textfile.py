"""Text files the engineer hands us (plans, manifests, machine configs): read them or say in one
line why not, so a wrong path or a binary file is bad input, never a traceback. And the one way
breakglass writes a private file of its own."""

from __future__ import annotations

import os

from breakglass.core.errors import BadInput


def decode(data: bytes, path: str, what: str) -> str:
    if b"\x00" in data[:8192]:
        raise BadInput(f"{path}: binary data, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start}), not {what}") from None


# Plans, manifests and machine configs are kilobytes; this only stops a wrong path (a disk image,
# /dev/zero) from being read into memory whole.
LIMIT = 64 << 20


def read(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(LIMIT + 1)
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    if len(data) > LIMIT:
        raise BadInput(f"{path}: larger than {LIMIT >> 20} MiB, not {what}")
    return decode(data, path, what)


def write_atomic(path: str, data: bytes, like: os.stat_result | None = None, mode: int = 0o600) -> None:
    """The one way breakglass writes a file. A temp file with a random name is created beside ``path`` with
    O_EXCL|O_NOFOLLOW and mode 0600 (a link or file planted there makes this fail, it is never followed or
    reused), written, fsynced, given ``like``'s mode and owner (the file it replaces) or ``mode``, renamed over
    ``path`` (which replaces a link there rather than writing through it), and the directory is fsynced. On any
    failure the temp file is removed, so no copy of a secret is left behind."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        if like is not None:
            if os.geteuid() == 0:
                os.fchown(fd, like.st_uid, like.st_gid)
            os.fchmod(fd, like.st_mode & 0o7777)
        elif mode != 0o600:
            os.fchmod(fd, mode)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_private(path: str, data: bytes) -> None:
    """A file of breakglass' own (state, keys, reports): mode 0600, atomically, never through a link."""
    write_atomic(path, data)


# -- YAML the engineer hands us ------------------------------------------------------------------------------

YAML_MAX_DEPTH = 100  # Kubernetes objects, plans and machine configs nest a dozen or two levels


def load_yaml(text: str, source: str, what: str, all_documents: bool = False):
    """``yaml.safe_load`` (or ``safe_load_all``, as a list) for files the engineer hands us: plans, manifests,
    machine configs, webhook objects. None of them needs an anchor or an alias, so any is refused where the
    composer meets it, before anything is expanded (a billion-laughs file is one line, not gigabytes), and so is
    nesting deeper than YAML_MAX_DEPTH (never a RecursionError). Invalid YAML still raises yaml.YAMLError, for
    the caller's own message."""
    import yaml  # noqa: PLC0415

    loader = _guarded_loader(yaml)(text)
    loader.bg_source, loader.bg_what = source, what
    try:
        if all_documents:
            docs = []
            while loader.check_data():
                docs.append(loader.get_data())
            return docs
        return loader.get_single_data()
    finally:
        loader.dispose()


_GUARDED = None


def _guarded_loader(yaml):
    global _GUARDED  # noqa: PLW0603 - one class, built on first use (yaml is imported lazily)
    if _GUARDED is None:
        class Guarded(yaml.SafeLoader):
            bg_depth = 0
            bg_source = bg_what = ""

            def compose_node(self, parent, index):
                event = self.peek_event()
                if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                    raise BadInput(f"{self.bg_source}: line {event.start_mark.line + 1}: YAML anchors and aliases "
                                   f"(&name, *name) are not accepted in {self.bg_what}")
                if self.bg_depth >= YAML_MAX_DEPTH:
                    raise BadInput(f"{self.bg_source}: line {event.start_mark.line + 1}: {self.bg_what} nested "
                                   f"deeper than {YAML_MAX_DEPTH} levels")
                self.bg_depth += 1
                try:
                    return super().compose_node(parent, index)
                finally:
                    self.bg_depth -= 1

        _GUARDED = Guarded
    return _GUARDED
