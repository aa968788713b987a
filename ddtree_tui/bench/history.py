"""The benchmark history: one JSON line per run (the `--json` schema), appended atomically.

An append is one write() of a whole line on a file opened O_APPEND, under an advisory lock, then fsync, so
two runs finishing together never interleave and a crash leaves at most a torn last line, which `load`
skips.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import deque
from pathlib import Path

from pydantic import ValidationError

from ddtree_tui.bench.models import BenchRun, dump

DEFAULT_HISTORY = Path(".ddtree") / "bench-history.jsonl"
RECENT_RUNS = 20  # what a live view keeps: the TUI's bench pane shows the last 20 runs
_TAILS_KEPT = 8  # history files followed at once by load_tail (one per fleet in practice)

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]


def append(run: BenchRun | Path | str, path: Path | str | BenchRun = DEFAULT_HISTORY) -> Path:
    """Append one run as one line; `append(run, path)` (also accepts `append(path, run)`)."""
    if isinstance(path, BenchRun):
        run, path = path, run
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
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fsync(fd)  # /dev/null or a FIFO: nothing to sync (fsync would fail with EINVAL)
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


def _parse(line: bytes) -> BenchRun | None:
    if not line.strip():
        return None
    try:
        return BenchRun.model_validate_json(line)
    except (ValidationError, ValueError):
        return None


class HistoryTail:
    """The last `keep` runs of a history file, reading only the bytes appended since the previous call.

    A live view re-reads the history after every run; `load` would parse the whole, ever-growing file each
    time (I/O and memory growing with uptime). This follows the file by offset instead: complete lines
    only (a line being appended is read next time), from scratch when the file was replaced or truncated.
    """

    def __init__(self, path: Path | str, keep: int = RECENT_RUNS) -> None:
        self.path = Path(path)
        self.keep = max(1, int(keep))
        self._runs: deque[BenchRun] = deque(maxlen=self.keep)
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._lock = threading.Lock()

    @property
    def offset(self) -> int:
        """Bytes of the file consumed so far (complete lines)."""
        return self._offset

    def runs(self) -> list[BenchRun]:
        """The last `keep` readable runs, oldest first; a missing file is an empty history."""
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                self._runs.clear()
                self._ident, self._offset = None, 0
                return []
            ident = (st.st_dev, st.st_ino)
            if ident != self._ident or st.st_size < self._offset:
                self._runs.clear()
                self._ident, self._offset = ident, 0
            if st.st_size > self._offset:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read(st.st_size - self._offset)
                end = data.rfind(b"\n")
                if end >= 0:
                    # newest first, and no further than `keep` readable runs: a first look at a long history
                    # parses only what is kept
                    fresh: list[BenchRun] = []
                    for line in reversed(data[: end + 1].splitlines()):
                        if len(fresh) >= self.keep:
                            break
                        run = _parse(line)
                        if run is not None:
                            fresh.append(run)
                    self._runs.extend(reversed(fresh))
                    self._offset += end + 1
            return list(self._runs)


_TAILS: dict[tuple[str, int], HistoryTail] = {}
_TAILS_LOCK = threading.Lock()


def load_tail(path: Path | str = DEFAULT_HISTORY, keep: int = RECENT_RUNS) -> list[BenchRun]:
    """The last `keep` runs, oldest first, read incrementally across calls (see HistoryTail)."""
    key = (os.path.abspath(path), int(keep))
    with _TAILS_LOCK:
        tail = _TAILS.pop(key, None) or HistoryTail(key[0], keep)
        _TAILS[key] = tail  # most recently used last
        while len(_TAILS) > _TAILS_KEPT:
            _TAILS.pop(next(iter(_TAILS)))
    return tail.runs()
