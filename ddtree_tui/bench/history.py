"""The benchmark history: one JSON line per run (the `--json` schema), appended atomically.

Plain runs (schema 1) and load / soak / agentic runs (schema 2, told apart by `kind`) share the file. A soak
also appends its start line and each window as it goes (`kind` soak_started / soak_window), then its whole
run: a soak that never finished (a crash) is rebuilt from what it appended, status "interrupted", so at most
the window in progress is lost. Readers of plain runs skip every schema 2 line.

An append is one write() of a whole line on a file opened O_APPEND, under an advisory lock, then fsync, so
two runs finishing together never interleave and a crash leaves at most a torn last line, which `load`
skips.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from pydantic import ValidationError

from ddtree_tui.bench.drift import detect_drift
from ddtree_tui.bench.jsonl import append_bytes, append_line
from ddtree_tui.bench.models import BenchRun, TargetInfo
from ddtree_tui.bench.report import iter_json
from ddtree_tui.bench.results import AgenticRun, AnyRun, LoadRun, ShapeRun, SoakRun, SoakWindow
from ddtree_tui.lib import paths
from ddtree_tui.model.identity import TargetIdentity

DEFAULT_HISTORY = paths.BENCH_HISTORY
RECENT_RUNS = 20  # what a live view keeps: the TUI's bench pane shows the last 20 runs
_TAILS_KEPT = 8  # history files followed at once by load_tail (one per fleet in practice)


BLOCK = 64 * 1024  # what lines_backward reads at a time


def lines_backward(path: Path | str, block: int | None = None) -> Generator[bytes, None, None]:
    """The file's lines, newest first, read a block at a time from its end (without their line breaks; the
    first one is what follows the last line break: empty, or a line being appended). A reader of the last
    few runs reads only their bytes, however long the history has grown: every run appends a line, and a
    poisson run's is ~125 KB, so reading the whole file each time made a run's start, and the fleet's
    todo check after it, cost more with every run (issue 26). Opening raises what open() raises; close the
    iterator (contextlib.closing) when it is left before its end."""
    return _backward(open(path, "rb"), block or BLOCK)  # closed by the generator


def _backward(f: BinaryIO, block: int, end: int | None = None) -> Generator[bytes, None, None]:
    """lines_backward of an open file (closed when done), from byte `end` (default: its end now)."""
    with f:
        pos = f.seek(0, os.SEEK_END) if end is None else end
        tail: list[bytes] = []  # pieces of the line being assembled, newest piece first
        while pos > 0:
            n = min(block, pos)
            pos -= n
            f.seek(pos)
            buf = f.read(n)
            cut = buf.rfind(b"\n")
            if cut < 0:  # the whole block is inside one line
                tail.append(buf)
                continue
            tail.append(buf[cut + 1 :])
            yield b"".join(reversed(tail))
            parts = buf[:cut].split(b"\n")
            yield from reversed(parts[1:])
            tail = [parts[0]]
        yield b"".join(reversed(tail))


def append(run: BenchRun | Path | str, path: Path | str | BenchRun = DEFAULT_HISTORY) -> Path:
    """Append one run as one line; `append(run, path)` (also accepts `append(path, run)`)."""
    if isinstance(path, BenchRun):
        run, path = path, run
    if not isinstance(run, BenchRun) or isinstance(path, BenchRun):
        raise TypeError("append(run: BenchRun, path)")
    # serialized a list item at a time: a big run's line is built without its whole dump in memory
    return append_bytes(b"".join((*iter_json(run, indent=None), b"\n")), path)


_SHAPES: dict[str, type[LoadRun] | type[SoakRun] | type[AgenticRun]] = {
    "load": LoadRun,
    "soak": SoakRun,
    "agentic": AgenticRun,
}


def append_shape(run: ShapeRun, path: Path | str = DEFAULT_HISTORY) -> Path:
    """Append a finished load, soak or agentic run (its --json object) as one line."""
    return append_line(run.model_dump(mode="json", by_alias=True), path)


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


def load_shapes(path: Path | str = DEFAULT_HISTORY, keep: int = RECENT_RUNS) -> list[ShapeRun]:
    """The last `keep` load, soak and agentic runs, oldest first, with every soak that began but never
    appended its run rebuilt from its start line and windows (status "interrupted"). Read from the end
    (lines_backward) until `keep` of them are in: an unfinished soak's windows follow its start line, so
    they are read before it; a finished soak's run line carries its windows."""
    keep = max(1, keep)
    try:
        lines = lines_backward(path)
    except FileNotFoundError:
        return []
    objs: list[object] = []  # newest first
    ids: set[str] = set()  # the runs those lines are, or begin: soak_started, or a whole run
    want = keep
    runs: list[ShapeRun] = []
    with contextlib.closing(lines):
        for line in lines:
            if b'"kind"' not in line:
                continue  # a plain run (or a torn line)
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            objs.append(obj)
            if isinstance(obj, dict) and (obj.get("kind") == "soak_started" or obj.get("kind") in _SHAPES):
                ids.add(str(obj.get("run_id") if obj.get("kind") == "soak_started" else obj.get("id")))
                if len(ids) >= want:
                    runs = load_shapes_from(objs[::-1], keep)
                    if len(runs) >= keep:
                        return runs
                    want += keep  # some were unreadable: further back
    return load_shapes_from(objs[::-1], keep)


def load_shapes_from(objs: Sequence[object], keep: int = RECENT_RUNS) -> list[ShapeRun]:
    """`load_shapes` on parsed lines (any JSON value): unreadable ones, and lines that are no object, are
    skipped."""
    runs: list[tuple[int, ShapeRun]] = []
    started: dict[str, tuple[int, dict[str, Any]]] = {}
    windows: dict[str, list[SoakWindow]] = {}
    for i, obj in enumerate(objs):
        if not isinstance(obj, dict):
            continue
        try:
            kind = obj.get("kind")
            if kind == "soak_started":
                started[str(obj.get("run_id"))] = (i, obj)
            elif kind == "soak_window":
                w = SoakWindow.model_validate(obj)
                windows.setdefault(w.run_id, []).append(w)
            elif kind in _SHAPES and "schema" in obj:
                runs.append((i, _SHAPES[kind].model_validate(obj)))
        except (ValidationError, ValueError):
            continue
    done = {r.id for _, r in runs}
    for rid, (i, head) in started.items():
        if rid in done:
            continue
        with_ws = windows.get(rid, [])
        try:
            runs.append(
                (
                    i,
                    SoakRun(
                        id=rid,
                        status="interrupted",
                        started_at=head["started_at"],
                        load_text=head.get("load_text", "sync"),
                        concurrency=head.get("concurrency", 1),
                        duration_s=head.get("duration_s", 0.0),
                        window_s=head.get("window_s", 10.0),
                        prompt_set=head.get("prompt_set", "seed3"),
                        targets=[TargetInfo.model_validate(t) for t in head.get("targets", [])],
                        windows=with_ws,
                        drift=detect_drift(with_ws),
                        failed=sum(w.metrics.failed for w in with_ws),
                    ),
                )
            )
        except (ValidationError, KeyError, TypeError):
            continue
    runs.sort(key=lambda x: x[0])
    return [r for _, r in runs[-max(1, keep) :]]


def recent_identities(path: Path | str = DEFAULT_HISTORY, keep: int = RECENT_RUNS) -> list[TargetIdentity]:
    """The target identities the last `keep` runs recorded (plain, load, soak and agentic, and a soak that
    never finished: its start line), oldest first: what a run compares its targets with before it sends
    anything (fleet/benching.py, the latest of each target). Reads only those fields of each line (orjson, then the
    identities validated one by one), so a long history of big runs costs a run's start almost nothing;
    unreadable lines and identities are skipped, a missing file has none."""
    try:
        lines = lines_backward(path)
    except FileNotFoundError:
        return []
    runs: list[list[TargetIdentity]] = []
    with contextlib.closing(lines):
        _identities_of(lines, runs, max(1, keep))
    return [i for run in reversed(runs) for i in run]


def _identities_of(lines: Iterator[bytes], runs: list[list[TargetIdentity]], keep: int) -> None:
    """recent_identities' reading: the identities of each run line, newest first, until `keep` runs."""
    for line in lines:
        if len(runs) >= keep:
            break
        if b'"identit' not in line:  # no identity recorded (an older run, a soak window): not a run to count
            if line.strip() and b'"soak_window"' not in line:
                runs.append([])
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or obj.get("kind") == "soak_window":
            continue
        found: list[object] = [t.get("identity") for t in obj.get("targets") or [] if isinstance(t, dict)]
        found += obj.get("identities") or []
        idents: list[TargetIdentity] = []
        for raw in found:
            if raw is None:
                continue
            try:
                idents.append(TargetIdentity.model_validate(raw))
            except ValidationError:
                continue
        runs.append(idents)


def parse_plain(line: bytes) -> BenchRun | None:
    """One history line as a plain run; None for anything else (a load, soak or agentic line, a torn one)."""
    return _parse(line)


def _parse(line: bytes) -> BenchRun | None:
    if not line.strip():
        return None
    try:
        return BenchRun.model_validate_json(line)
    except (ValidationError, ValueError):
        return None


def _last_runs(lines: Iterable[bytes], keep: int) -> list[BenchRun]:
    """The first `keep` readable plain runs of `lines` (newest first, as read from the end)."""
    out: list[BenchRun] = []
    for line in lines:
        if len(out) >= keep:
            break
        run = _parse(line)
        if run is not None:
            out.append(run)
    return out


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
            if self._offset == 0 and st.st_size > BLOCK:
                self._first_look()
            elif st.st_size > self._offset:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read(st.st_size - self._offset)
                end = data.rfind(b"\n")
                if end >= 0:
                    # newest first, and no further than `keep` readable runs: a long append parses only
                    # what is kept
                    fresh = _last_runs(reversed(data[: end + 1].splitlines()), self.keep)
                    self._runs.extend(reversed(fresh))
                    self._offset += end + 1
            return list(self._runs)

    def _first_look(self) -> None:
        """The first read of a long file: its last `keep` readable runs, read from the end (lines_backward),
        and the offset set past its last complete line; from then on only appended bytes are read."""
        try:
            f = open(self.path, "rb")  # closed by _backward
        except FileNotFoundError:
            return
        end = os.fstat(f.fileno()).st_size
        lines = _backward(f, BLOCK, end)
        with contextlib.closing(lines):
            torn = next(lines)  # what follows the last line break: read next time, once it is whole
            fresh = _last_runs(lines, self.keep)
        self._runs.extend(reversed(fresh))
        self._offset = max(0, end - len(torn))


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


def recent_runs(path: Path | str = DEFAULT_HISTORY) -> list[AnyRun]:
    """What a live view shows: the last plain runs (read incrementally) and load / soak / agentic runs, oldest
    first (the fleet's bench desk, and fleet/starting.py before the core is built). Raises what reading raises."""
    runs: list[AnyRun] = [*load_tail(path), *load_shapes(path)]
    return sorted(runs, key=lambda r: r.started_at)[-RECENT_RUNS:]
