"""Appending JSON lines safely: the bench history and a soak's window log share the one writer."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from ddtree_tui.atomicio import resolve_trusted

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]


def append_line(obj: Mapping[str, object], path: Path | str) -> Path:
    """One JSON object as one line: one write() on a file opened O_APPEND, under an advisory lock, then
    fsync, so two writers never interleave and a crash leaves at most a torn last line (readers skip it)."""
    return append_bytes((json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode(), path)


def append_bytes(data: bytes, path: Path | str) -> Path:
    """`append_line` of a line already serialized (ending with a newline), as one write."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    p = Path(resolve_trusted(path))  # a symlink another user planted is refused (UntrustedLinkError)
    nofollow = 0 if p.is_symlink() else getattr(os, "O_NOFOLLOW", 0)  # a /proc/self/fd link stays one
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | nofollow, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        # a torn last line from a crash would glue onto ours: start on a fresh line
        size = os.fstat(fd).st_size
        if size:
            with open(p, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fsync(fd)  # /dev/null or a FIFO: nothing to sync (fsync would fail with EINVAL)
    finally:
        os.close(fd)
    return p
