"""The benchmark history: one JSON line per run (the `--json` schema), appended atomically.

An append is one write() of a whole line on a file opened O_APPEND, under an advisory lock, then fsync, so
two runs finishing together never interleave and a crash leaves at most a torn last line, which `load`
skips.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from ddtree_tui.bench.models import BenchRun, dump

DEFAULT_HISTORY = Path(".ddtree") / "bench-history.jsonl"

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]


def append(run: BenchRun | Path | str, path: Path | str | BenchRun = DEFAULT_HISTORY) -> Path:
    """Append one run as one line; `append(run, path)` (also accepts `append(path, run)`)."""
    if isinstance(path, BenchRun):
        run, path = path, run  # type: ignore[assignment]
    if not isinstance(run, BenchRun) or isinstance(path, BenchRun):
        raise TypeError("append(run: BenchRun, path)")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(dump(run), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
        os.fsync(fd)
    finally:
        os.close(fd)
    return p


def load(path: Path | str = DEFAULT_HISTORY) -> list[BenchRun]:
    """Every readable run, oldest first; unreadable lines are skipped, a missing file is an empty history."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out: list[BenchRun] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append(BenchRun.model_validate_json(line))
        except (ValidationError, ValueError):
            continue
    return out
