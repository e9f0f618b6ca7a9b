"""Text files the engineer hands us (plans, manifests, machine configs): read them or say in one
line why not, so a wrong path or a binary file is bad input, never a traceback. And the one way
breakglass writes a private file of its own."""

from __future__ import annotations

import os
import re
import stat

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
    """The one way breakglass writes a file. A temp file named for ``path`` (``.NAME.breakglass-<random>.tmp``) is
    created beside it with O_EXCL|O_NOFOLLOW and mode 0600 (a link or file planted there makes this fail, it is
    never followed or reused) and locked (flock) for as long as the write lasts, written, fsynced, given
    ``like``'s mode and owner (the file it replaces) or ``mode``, renamed over ``path`` (which replaces a link
    there rather than writing through it), and the directory is fsynced. On any failure the temp file is
    removed, so no copy of a secret is left behind; one a killed process left (SIGKILL, power loss) is removed by
    the next write to the same ``path`` (remove_stale_temps: its lock is free)."""
    import fcntl  # noqa: PLC0415

    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(path)
    tmp, fd = _locked_temp(directory, os.path.basename(path), fcntl)
    try:
        write_all(fd, data)
        os.fsync(fd)
        if like is not None:
            if os.geteuid() == 0:
                os.fchown(fd, like.st_uid, like.st_gid)
            os.fchmod(fd, like.st_mode & 0o7777)
        elif mode != 0o600:
            os.fchmod(fd, mode)
        # renamed while still locked: a cleaner never takes a temp file that is about to become the file
        os.replace(tmp, path)
        tmp = None
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        raise
    finally:
        os.close(fd)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


_TEMP_MARK = ".breakglass-"


def _temp_name(name: str) -> str:
    return f".{name}{_TEMP_MARK}{os.urandom(6).hex()}.tmp"


def _is_temp_of(entry: str, name: str | None) -> bool:
    """Whether ``entry`` is the temp file of an atomic write to ``name`` (None: to any file)."""
    stem = re.escape(f".{name}{_TEMP_MARK}") if name is not None else r"\..+" + re.escape(_TEMP_MARK)
    return re.fullmatch(stem + r"[0-9a-f]{12}\.tmp", entry, re.DOTALL) is not None


def create_new(path: str, flags: int = os.O_WRONLY) -> int:
    """``os.open(path, O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600)``: a new file of ours, never one planted there,
    never through a link. Ctrl-C and SIGTERM's handler (which raises KeyboardInterrupt) run as a system call
    returns, so an interrupt can land once the file exists but before its descriptor reaches the caller's ``try``:
    the file is removed then, so an interrupted write never leaves an empty or partial file behind (CI caught a
    snapshot's PATH.part left so). An OSError means the create itself failed: nothing of ours to remove."""
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        raise
    except BaseException:
        remove_quietly(path)
        raise


def write_new(path: str, data: bytes) -> None:
    """A new file at ``path`` the engineer asked for (a patch to hand to talosctl): mode 0600, fsynced, never over
    an existing file or through a link, and removed again if the write fails or is interrupted midway, so a
    half-written patch never sits there looking whole. BadInput when it cannot be made."""
    try:
        fd = create_new(path)
    except FileExistsError:
        raise BadInput(f"{path} exists; choose a new file") from None
    except OSError as e:
        raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}") from None
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as e:
        remove_quietly(path)
        if isinstance(e, OSError):
            raise BadInput(f"{path}: {(e.strerror or str(e)).lower()}; nothing was left there") from None
        raise


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def remove_quietly(path: str) -> None:
    """Remove a file of ours that must not stay (a partial write); one already gone is fine."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _locked_temp(directory: str, name: str, fcntl) -> tuple[str, int]:
    """A new temp file for ``name``, created and locked. A cleaner may take the lock in the instant between the
    create and our flock, and remove the file as stale: then it is no longer ours, and another name is tried."""
    for _ in range(8):
        tmp = os.path.join(directory, _temp_name(name))
        fd = create_new(tmp)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(tmp, fd):
                return tmp, fd
        except BaseException:
            try:
                if _same_file(tmp, fd):
                    remove_quietly(tmp)  # interrupted before it held anything: not left for the next write
            finally:
                os.close(fd)
            raise
        os.close(fd)
    raise OSError(f"{directory}: could not keep a temp file for {name} (removed each time as it was made)")


def _same_file(path: str, fd: int) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def remove_stale_temps(path: str, any_file: bool = False) -> list[str]:
    """Remove the temp files of atomic writes to ``path`` (``any_file``: to any file in the directory ``path``)
    that no live process owns (a process killed mid-write leaves one: a copy of the file's new content, secrets
    and all, beside it). A writer holds an flock on its temp file until the rename, so a temp file whose lock can
    be taken is stale. Only regular files of ours named as our temps are touched (never a link, never another
    user's file). Returns the names removed."""
    import fcntl  # noqa: PLC0415

    directory, name = (os.path.abspath(path), None) if any_file else os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for entry in sorted(entries):
        if not _is_temp_of(entry, name):
            continue
        tmp = os.path.join(directory, entry)
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # a link planted under our name, or gone already: not ours to remove
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live write
            if _same_file(tmp, fd):
                os.unlink(tmp)
                removed.append(entry)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


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


# Nodes YAML aliases may stand for in one file, counted as the loader expands them. k3s configs use an anchor or
# two; a file whose aliases stand for more nodes than this is the billion-laughs shape (nine aliases of nine
# aliases ...: 9^8 nodes from 80 lines), refused before anything walks or compares the expansion.
YAML_ALIAS_BUDGET = 10_000


class AliasBudget:
    """Mixin for a PyYAML loader (before the loader class in the bases): counts the nodes each alias stands for
    while composing, and raises BadInput (one line) once the file's aliases stand for more than
    YAML_ALIAS_BUDGET nodes, or for an alias inside the node it names (an endless expansion). Set ``bg_source``
    and ``bg_what`` on the instance for the message."""

    bg_source = "the file"
    bg_what = "a YAML file"

    def compose_node(self, parent, index):
        import yaml  # noqa: PLC0415

        if not hasattr(self, "bg_frames"):
            self.bg_frames, self.bg_sizes, self.bg_expanded = [0], {}, 0
        if parent is None:  # a document's root: its anchors are its own (an alias never names another's)
            self.bg_sizes = {}
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            size = self.bg_sizes.get(event.anchor)
            if size is None and event.anchor in getattr(self, "anchors", {}):
                raise BadInput(f"{self.bg_source}: line {event.start_mark.line + 1}: the YAML alias *{event.anchor} "
                               f"is inside the node it names (it never ends); not accepted in {self.bg_what}")
            node = super().compose_node(parent, index)
            self.bg_expanded += size or 0
            self.bg_frames[-1] += size or 0
            if self.bg_expanded > YAML_ALIAS_BUDGET:
                raise BadInput(f"{self.bg_source}: line {event.start_mark.line + 1}: YAML aliases stand for more "
                               f"than {YAML_ALIAS_BUDGET} nodes; not accepted in {self.bg_what} (write the values "
                               f"out, or use fewer aliases)")
            return node
        anchor = getattr(event, "anchor", None)
        self.bg_frames.append(1)
        try:
            node = super().compose_node(parent, index)
        finally:
            size = self.bg_frames.pop()
        self.bg_frames[-1] += size
        if anchor is not None:
            self.bg_sizes[anchor] = size
        return node


def budgeted_loader(text: str, source: str, what: str, base=None):
    """A PyYAML SafeLoader (or ``base``, an AliasBudget subclass) for ``text`` that refuses alias expansion beyond
    YAML_ALIAS_BUDGET; the caller disposes of it."""
    import yaml  # noqa: PLC0415

    global _BUDGETED  # noqa: PLW0603 - one class, built on first use (yaml is imported lazily)
    if base is None:
        if _BUDGETED is None:
            _BUDGETED = type("BudgetedSafeLoader", (AliasBudget, yaml.SafeLoader), {})
        base = _BUDGETED
    loader = base(text)
    loader.bg_source, loader.bg_what = source, what
    return loader


_BUDGETED = None
