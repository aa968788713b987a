"""One way to write a file that never destroys what the path names: every writer of this project uses it.

`write_file(path, data)`:
- a regular file, or a path that does not exist yet: temp file in the same directory, fsync, os.replace, fsync
  of the directory (readers see the old or the new file, never half of one); a symlink to a regular file
  is followed and its target replaced, the link kept;
- a symlink (anywhere in the path) is followed only when we own it, or root does (/dev/stdout, /proc/self):
  one planted by another user (a link by `nobody` in a sticky world-writable /tmp pointing at our file) is
  refused with `UntrustedLinkError`, nothing written. We resolve links ourselves (to replace a link's
  target), so the kernel's fs.protected_symlinks never gets to judge them: this is that rule, stricter
  (any directory, not only sticky ones), and the final open of a device or FIFO uses O_NOFOLLOW;
- a special file (character or block device such as /dev/null, a FIFO, /dev/fd/N of a pipe): written
  directly, never replaced — an atomic rename over /dev/null would turn the device into a regular file;
- a directory (or anything we cannot write): OSError with the reason, nothing changed.

Stdlib only and self-contained, because host programs embed this module's source (hostscripts) and run it
with the host's Python.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable


class NotAFileError(IsADirectoryError):
    """The path is a directory (or a socket): there is nothing a file write can sensibly do."""


class UntrustedLinkError(PermissionError):
    """A symlink on the way to the file belongs to another user: not followed, nothing written."""


_MAX_LINKS = 40  # like the kernel's ELOOP limit


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def resolve_trusted(path: str | os.PathLike[str]) -> str:
    """`path` with every symlink resolved, following only links we (or root) own; UntrustedLinkError naming
    the link and its owner otherwise. A link whose target is not a path (/proc/self/fd/N of a pipe:
    `pipe:[123]`) ends the walk: the path so far, with the rest, is returned for the kernel to open."""
    p = os.fspath(path)
    cur = "/" if p.startswith("/") else os.getcwd()
    parts = [x for x in p.split("/") if x]
    hops = 0
    while parts:
        name = parts.pop(0)
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur) or "/"
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except OSError:  # missing (or not a directory): nothing further to follow
            return os.path.join(nxt, *parts) if parts else nxt
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        if not _trusted(st.st_uid):
            raise UntrustedLinkError(
                1,
                "is a symbolic link owned by uid %d, not by you: not followed (a link another user can "
                "plant); write to the real file's path" % st.st_uid,
                nxt,
            )
        hops += 1
        if hops > _MAX_LINKS:
            raise OSError(40, "too many levels of symbolic links", p)
        target = os.readlink(nxt)
        if nxt.startswith("/proc/") and ":" in target and not target.startswith("/"):
            # a /proc magic link (pipe:[N], socket:[N]): the kernel opens it; nothing more to check
            return os.path.join(nxt, *parts) if parts else nxt
        if target.startswith("/"):
            cur = "/"
        parts = [x for x in target.split("/") if x] + parts
    return cur


def _kind(path: str) -> str:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "missing"
    except NotADirectoryError:
        return "missing"
    if stat.S_ISREG(st.st_mode):
        return "regular"
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISSOCK(st.st_mode):
        return "socket"
    return "special"


def _umask() -> int:
    """The process umask, read without changing it (os.umask would, for every thread, for a moment)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_file(
    path: str | os.PathLike[str],
    data: bytes | str | Iterable[bytes],
    *,
    mode: int | None = None,
    before_replace: object = None,
    tmp_suffix: str = ".tmp",
) -> bool:
    """Write `data` to `path` without ever replacing a special file; see the module docstring.

    `data` may be an iterable of byte chunks: they are written as they come, so a large file is never
    whole in memory (and an exception from it leaves the old file untouched).

    `mode`: permissions of a new file (an existing regular file keeps its own). `before_replace`: a
    callable run just before the rename; when it returns False nothing is replaced and write_file returns
    False (the caller merges and tries again). Returns True when written.
    """
    p = resolve_trusted(path)  # refuses a link another user owns, before anything is looked at
    chunks: Iterable[bytes]
    if isinstance(data, str):
        chunks = (data.encode("utf-8"),)
    elif isinstance(data, bytes):
        chunks = (data,)
    else:
        chunks = data
    kind = _kind(p)
    if kind == "directory":
        raise NotAFileError(21, "is a directory, not a file", p)
    if kind == "socket":
        raise NotAFileError(6, "is a socket, not a file", p)
    if kind == "special":
        # a device or a FIFO: write into it like a shell redirection would; never rename over it
        # resolved above, so the last component is no link, unless a /proc magic link (pipe:[N]) we own
        nofollow = 0 if os.path.islink(p) else getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(p, os.O_WRONLY | nofollow)
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
        finally:
            os.close(fd)
        return True
    target = p  # already resolved: a rename over it can only replace the file itself
    d = os.path.dirname(target) or "."
    existing_mode: int | None = None
    if kind == "regular":
        try:
            existing_mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            existing_mode = None
    # imported here: the host programs that only read (listener, watch, read_log) start without tempfile and
    # what it imports (shutil, random: issue 24, a few ms of every such program's start)
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=tmp_suffix, dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        want = existing_mode if existing_mode is not None else mode
        if want is not None:
            os.chmod(tmp, want)
        elif existing_mode is None:
            # mkstemp makes 0600; a new file gets the usual umask-derived mode
            os.chmod(tmp, 0o666 & ~_umask())
        if callable(before_replace) and not before_replace():
            os.unlink(tmp)
            return False
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return True


def is_special(path: str | os.PathLike[str]) -> bool:
    """True for a device, FIFO or socket (something write_file writes directly, or refuses)."""
    return _kind(os.fspath(path)) in ("special", "socket")
