"""Record a whole session (snapshots and events) to a compressed, bounded file, and play it back.

The file is gzip'd JSON lines:
  {"type": "header", "version": 1, "started": T, "max_bytes": N}
  {"type": "snapshot", "t": T, "snap": <the status --json document>}    at the start and every `snapshot_every` s
  {"type": "event", "t": T, "ev": <a fleet event, its `kind` says which>}
  {"type": "end", "t": T, "reason": "stopped" | "size limit reached"}
Writing stops (with an `end` line) when the compressed file reaches `max_bytes`; a file cut short by a crash
plays up to its last whole line. Reading is bounded: a line longer than MAX_LINE_BYTES, a file that expands
past MAX_RECORDING_BYTES (a gzip bomb: 6 MB that unpack to 6 GiB) or holds more than MAX_RECORDS lines is
refused with a RecordingError that says so, before it is held in memory.

RecordingFleet wraps any fleet (the collector's, the TUI's) and records what it publishes; ReplayFleet is a
FollowerFleet that plays a file back at `speed` times real time, labelled REPLAY everywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict

from ddtree_tui.collector.attach import FollowerFleet, decode_event
from ddtree_tui.model.events import FleetEvent, Notice
from ddtree_tui.model.snapshot import FleetSnapshot

log = logging.getLogger(__name__)

VERSION = 1
DEFAULT_MAX_BYTES = 200 * 1024 * 1024
DEFAULT_SNAPSHOT_EVERY = 30.0
MAX_LINE_BYTES = 16 * 1024 * 1024  # one snapshot of a large fleet is well under a megabyte
MAX_RECORDING_BYTES = 1024 * 1024 * 1024  # unpacked; a replay holds every record in memory
MAX_RECORDS = 2_000_000  # and so: a bomb of tiny lines ("{}" is 3 bytes, its dict 64) is bounded too


class RecordingError(Exception):
    """A recording that cannot be read (missing, not a recording, wrong version)."""


class Recorder:
    """Appends snapshots and events to a gzip'd JSONL file, bounded in (compressed) size."""

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        snapshot_every: float = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.snapshot_every = snapshot_every
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._raw = open(self.path, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)
        self.full = False
        self.closed = False
        self.records = 0
        self._last_snap = 0.0
        self._last_flush = time.monotonic()
        self._write({"type": "header", "version": VERSION, "started": time.time(), "max_bytes": max_bytes})

    def _write(self, rec: dict[str, Any]) -> None:
        if self.full or self.closed:
            return
        self._gz.write((json.dumps(rec, separators=(",", ":")) + "\n").encode())
        self.records += 1
        if time.monotonic() - self._last_flush > 2.0:
            self._gz.flush(zlib.Z_SYNC_FLUSH)  # a crash loses at most the last seconds
            self._last_flush = time.monotonic()
        if self._raw.tell() >= self.max_bytes:
            self._gz.write(
                (
                    json.dumps({"type": "end", "t": time.time(), "reason": "size limit reached"}) + "\n"
                ).encode()
            )
            self.full = True
            log.warning(
                "recording %s reached its size limit (%d bytes); no longer recording",
                self.path,
                self.max_bytes,
            )

    def snapshot(self, snap: FleetSnapshot) -> None:
        self._last_snap = time.monotonic()
        self._write({"type": "snapshot", "t": snap.ts, "snap": snap.to_json_dict()})

    def snapshot_due(self) -> bool:
        return time.monotonic() - self._last_snap >= self.snapshot_every

    def event(self, ev: FleetEvent) -> None:
        try:
            d = ev.model_dump(mode="json") if isinstance(ev, BaseModel) else dict(ev)
        except Exception:
            return
        self._write({"type": "event", "t": float(d.get("ts") or time.time()), "ev": d})

    def close(self, reason: str = "stopped") -> None:
        if self.closed:
            return
        if not self.full:
            self._write({"type": "end", "t": time.time(), "reason": reason})
        self.closed = True
        with contextlib.suppress(Exception):
            self._gz.close()
        self._raw.close()


class Recordable(Protocol):
    """What RecordingFleet uses of the fleet it wraps (Fleet, a follower, the TUI's fleets all have it)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def snapshot(self) -> FleetSnapshot: ...
    def subscribe(self) -> asyncio.Queue[FleetEvent]: ...
    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None: ...


F = TypeVar("F", bound=Recordable)


class RecordingFleet(Generic[F]):
    """Any fleet, recorded: everything it publishes (and a snapshot now and then) goes to a Recorder.
    Every other attribute is the wrapped fleet's."""

    def __init__(self, inner: F, recorder: Recorder) -> None:
        self._inner = inner
        self.recorder = recorder
        self._task: asyncio.Task[None] | None = None
        self._q: asyncio.Queue[FleetEvent] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def start(self) -> None:
        self._q = self._inner.subscribe()
        await self._inner.start()
        self.recorder.snapshot(self._inner.snapshot())
        self._task = asyncio.create_task(self._pump(), name="recorder")

    async def _pump(self) -> None:
        assert self._q is not None
        while True:
            try:
                async with asyncio.timeout(1.0):
                    ev = await self._q.get()
            except TimeoutError:
                ev = None
            if ev is not None:
                self.recorder.event(ev)
            if self.recorder.snapshot_due():
                self.recorder.snapshot(self._inner.snapshot())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._q is not None:
            while not self._q.empty():  # what was published before the stop is kept
                self.recorder.event(self._q.get_nowait())
            self._inner.unsubscribe(self._q)
        with contextlib.suppress(Exception):
            self.recorder.snapshot(self._inner.snapshot())
        self.recorder.close()
        await self._inner.stop()


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


class Record(TypedDict, total=False):
    """One line of a recording, as the module docstring lists them (`type` says which keys it has). Read
    back as JSON: the header is checked here, a snapshot and an event by their models when played."""

    type: Literal["header", "snapshot", "event", "end"]
    version: int
    started: float
    max_bytes: int
    t: float
    snap: dict[str, object]
    ev: dict[str, object]
    reason: str


def read_records(
    path: Path,
    *,
    max_line: int = MAX_LINE_BYTES,
    max_total: int = MAX_RECORDING_BYTES,
    max_records: int = MAX_RECORDS,
) -> Iterator[Record]:
    """The records of a recording, up to its last whole line (a file cut short by a crash still plays).
    A line over `max_line` bytes, more than `max_total` unpacked bytes or `max_records` lines is a
    RecordingError."""
    p = Path(path)
    if not p.is_file():
        raise RecordingError(f"no recording at {p}")
    try:
        with gzip.open(p, "rb") as f:
            first = True
            total = lines = 0
            try:
                while line := f.readline(max_line + 1):
                    total += len(line)
                    lines += 1
                    if len(line) > max_line:
                        raise RecordingError(
                            f"{p}: a line longer than {_mib(max_line)} (not a recording this tool wrote)"
                        )
                    if total > max_total:
                        raise RecordingError(
                            f"{p} unpacks to more than {_mib(max_total)}; refused (a damaged file or a gzip bomb)"
                        )
                    if lines > max_records:
                        raise RecordingError(f"{p} holds more than {max_records} records; refused")
                    try:
                        rec = json.loads(line)
                    except (ValueError, RecursionError):
                        break  # a torn last line
                    if first:
                        if not isinstance(rec, dict) or rec.get("type") != "header":
                            raise RecordingError(f"{p} is not a ddtree-tui recording (no header line)")
                        if rec.get("version") != VERSION:
                            raise RecordingError(
                                f"{p}: recording version {rec.get('version')}, expected {VERSION}"
                            )
                        first = False
                    yield rec
            except EOFError:
                return  # cut short: play what is there
            if first:
                raise RecordingError(f"{p} is empty")
    except (OSError, gzip.BadGzipFile, zlib.error) as e:
        if isinstance(e, gzip.BadGzipFile) or "Not a gzipped file" in str(e):
            raise RecordingError(f"{p} is not a ddtree-tui recording (not gzip)") from None
        raise RecordingError(f"{p}: {e}") from None


class ReplayFleet(FollowerFleet):
    """Plays a recording at `speed` times real time; the snapshot, the banner and every host say REPLAY."""

    def __init__(self, path: Path, *, speed: float = 1.0) -> None:
        super().__init__()
        if speed <= 0:
            raise ValueError("--speed must be positive")
        self.path = Path(path)
        self.speed = speed
        self.records = list(read_records(self.path))
        self.t0 = next((float(r["t"]) for r in self.records if r.get("type") in ("snapshot", "event")), 0.0)
        self.t_end = max(
            (float(r.get("t", 0.0)) for r in self.records if r.get("type") != "header"), default=0.0
        )
        self.source_label = f"REPLAY of {self.path.name}"
        self.position = self.t0  # the recorded time shown now
        self.finished = False
        self._i = 0
        self.advance_to(self.t0)

    def clock(self) -> float:
        """The recorded time now on screen (the UI shows ages and uptimes against it)."""
        return self.position

    def banner(self) -> str:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.position))
        state = "finished" if self.finished else f"×{self.speed:g}"
        return f"REPLAY of {self.path.name} · {at} · {state}"

    def advance_to(self, t: float) -> int:
        """Apply every record up to recorded time `t`; returns how many were applied."""
        n = 0
        while self._i < len(self.records):
            rec = self.records[self._i]
            rt = float(rec.get("t", self.t0))
            if rec.get("type") not in ("header",) and rt > t:
                break
            self._i += 1
            n += 1
            kind = rec.get("type")
            if kind == "snapshot":
                self._snap = FleetSnapshot.model_validate(rec["snap"])
                self._floor = self._snap.ts  # events queued before it and written after are already in it
                for h in self._snap.hosts:
                    for g in h.gpus:
                        if g.util_gpu is not None and not self._history.get((h.name, g.index)):
                            self._hist(h.name, g.index).append(float(g.util_gpu))
            elif kind == "event":
                ev = decode_event(json.dumps(rec["ev"]))
                if ev is not None:
                    self._apply(ev)
                    self._publish(ev)
            elif kind == "end" and rec.get("reason") != "stopped":
                self._publish(Notice(severity="warning", text=f"recording ends: {rec.get('reason')}"))
        self.position = max(self.position, min(t, self.t_end))
        if self._i >= len(self.records):
            self.finished = True
        return n

    def seek_end(self) -> None:
        self.advance_to(float("inf"))

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._play(), name=f"replay {self.path.name}")

    async def _play(self) -> None:
        wall0, rec0 = time.monotonic(), self.position
        while not self.finished:
            await asyncio.sleep(0.1)
            self.advance_to(rec0 + (time.monotonic() - wall0) * self.speed)
        self._publish(Notice(severity="information", text=f"replay of {self.path.name} finished"))


class SessionOptions(BaseModel):
    """The recording options of a mode's command line; a mode without some of them leaves them None."""

    model_config = ConfigDict(extra="ignore")

    replay: str | None = None
    record: str | None = None
    speed: float | None = None
    record_max_mb: float | None = None

    @classmethod
    def of(cls, ns: argparse.Namespace) -> SessionOptions:
        return cls.model_validate(vars(ns))


def session_fleet(
    ns: SessionOptions | argparse.Namespace, live: Callable[[], F]
) -> F | ReplayFleet | RecordingFleet[F]:
    """The fleet a mode runs on, from `--replay FILE [--speed X]` and `--record FILE [--record-max-mb N]`:
    a ReplayFleet, or `live()`; recorded when asked. Raises RecordingError / ValueError for bad input."""
    opts = ns if isinstance(ns, SessionOptions) else SessionOptions.of(ns)
    if opts.replay:
        return replay_fleet(opts)
    fleet = live()
    if opts.record:
        mb = opts.record_max_mb or 200.0
        if mb <= 0:
            raise ValueError("--record-max-mb must be positive")
        return RecordingFleet(fleet, Recorder(Path(opts.record), max_bytes=int(mb * 1024 * 1024)))
    return fleet


def replay_fleet(opts: SessionOptions) -> ReplayFleet:
    """The ReplayFleet of `--replay FILE [--speed X]` (a mode with no live fleet). Raises RecordingError /
    ValueError for bad input."""
    if opts.replay and opts.record:
        raise ValueError("--record and --replay do not go together")
    if not opts.replay:
        raise ValueError("--replay FILE: no file given")
    return ReplayFleet(Path(opts.replay), speed=opts.speed or 1.0)
