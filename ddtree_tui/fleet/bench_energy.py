"""A benchmark's GPU samples, taken from the fleet's own telemetry while the run goes (issue 26), and the
run's energy made from them (bench/energy.py does the arithmetic).

Never a second sampler: the recorder listens to the fleet's GpuSampleEvents (what the TUI's GPU pane shows)
for the hosts the targets run on, keeps the samples of the targets' GPUs, and after the run waits (bounded)
for one sample past its end so the integration covers it. A GPU belongs to a target by the fleet's join: its
processes' pids are the service's (GpuSample.service), else the service's profile `gpus`, else (a profile
that names none) every GPU of its host. `--url` targets have no host: the run says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ddtree_tui.bench.energy import (
    URL_NOTE,
    GpuTrack,
    LevelEnergy,
    Point,
    RunEnergy,
    Span,
    point_of,
    run_energy,
)
from ddtree_tui.bench.models import BenchRun, BenchTarget, RequestResult
from ddtree_tui.bench.results import LoadRun
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.model.events import FleetEvent, GpuSampleEvent
from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample

MAX_POINTS = 100_000  # samples kept per GPU (a day at 1 Hz): a bound, whatever the run's length
TAIL_WAIT_INTERVALS = 2.5
STALE_INTERVALS = 3.0  # the fleet's last sample is used as the one before the run when at most this old
NO_PIDS = frozenset(
    {"replay", "prometheus"}
)  # telemetry sources whose processes are not ours  # after the run: wait up to this many sample intervals for one past its end


@runtime_checkable
class EnergyFleet(Protocol):
    """What the recorder needs of the fleet."""

    def spec_of(self, ref: str) -> tuple[HostProfile, ServiceSpec]: ...
    def snapshot(self) -> FleetSnapshot: ...
    def subscribe(self) -> asyncio.Queue[FleetEvent]: ...
    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None: ...


class GpuRecorder:
    """Samples of the targets' GPUs from the fleet's events, from `start()` to `finish()`."""

    def __init__(self, fleet: EnergyFleet, targets: Sequence[BenchTarget]) -> None:
        self.fleet = fleet
        self.where: dict[str, tuple[str, str, list[int]]] = {}  # ref -> (host, service name, profile gpus)
        self.interval: dict[str, float] = {}  # host -> telemetry interval, seconds
        for t in targets:
            host, spec = fleet.spec_of(t.ref)
            self.where[t.ref] = (host.name, spec.name, list(spec.gpus))
            self.interval[host.name] = host.telemetry.interval_ms / 1000.0
        self.samples: dict[tuple[str, int], dict[float, GpuSample]] = {}
        self.sources: dict[str, str | None] = {}
        self._q: asyncio.Queue[FleetEvent] | None = None
        self._task: asyncio.Task[None] | None = None

    def _add(self, host: str, gpus: Sequence[GpuSample], source: str | None) -> None:
        if host not in self.interval:
            return
        self.sources[host] = source
        for g in gpus:
            if g.health != "ok" or not g.ts:
                continue
            kept = self.samples.setdefault((host, g.index), {})
            if len(kept) < MAX_POINTS:
                kept[g.ts] = g

    def start(self) -> None:
        """Listen from now on, and keep what the fleet last saw (the sample just before the run)."""
        snap = self.fleet.snapshot()
        now = time.time()
        for name, interval in self.interval.items():
            view = snap.host(name)
            if view is not None:  # a stale sample would stretch one trapezoid over the gap: left out
                fresh = [g for g in view.gpus if now - g.ts <= STALE_INTERVALS * interval]
                self._add(name, fresh, view.telemetry.source)
        self._q = self.fleet.subscribe()
        self._task = asyncio.create_task(self._pump(self._q))

    async def _pump(self, q: asyncio.Queue[FleetEvent]) -> None:
        while True:
            ev = await q.get()
            if isinstance(ev, GpuSampleEvent):
                self._add(ev.host, ev.gpus, ev.telemetry.source)

    def _latest(self) -> float:
        """The oldest of each recorded GPU's newest sample time (0: none yet)."""
        newest = [max(v) for v in self.samples.values() if v]
        return min(newest) if newest else 0.0

    async def stop(self, until: float) -> None:
        """Wait (bounded) until every GPU has a sample at or past `until`, then stop listening."""
        wait = TAIL_WAIT_INTERVALS * max(self.interval.values(), default=1.0)
        deadline = time.monotonic() + wait
        while self._latest() < until and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._q is not None:
            self.fleet.unsubscribe(self._q)
            self._q = None

    def _by_pid(self, host: str, kept: dict[float, GpuSample]) -> set[str]:
        """Our services' names the fleet saw on a GPU by their processes' pids (a replay or Prometheus has no
        pids of ours: the snapshot labels their GPUs from the profile, so nothing here)."""
        if self.sources.get(host) in NO_PIDS:
            return set()
        return {n.strip() for g in kept.values() for n in (g.service or "").split(",") if n.strip()}

    def tracks(self) -> list[GpuTrack]:
        """Each recorded GPU with the targets it belongs to and how that was decided: a service's GPUs are
        those its pids were seen on; none seen (pids hidden, a replay): its profile's `gpus`; none named:
        every GPU of its host."""
        pids = {key: self._by_pid(key[0], kept) for key, kept in self.samples.items()}
        owners: dict[tuple[str, int], list[tuple[str, str]]] = {}
        for ref, (host, name, gpus) in self.where.items():
            seen = [k for k in self.samples if k[0] == host and name in pids[k]]
            if seen:
                keys, join = seen, "pid"
            elif gpus:
                keys, join = [k for k in self.samples if k[0] == host and k[1] in gpus], "profile"
            else:
                keys, join = [k for k in self.samples if k[0] == host], "host"
            for k in keys:
                owners.setdefault(k, []).append((ref, join))
        out: list[GpuTrack] = []
        for (host, index), kept in sorted(self.samples.items()):
            mine = owners.get((host, index))
            if not mine:
                continue
            last = kept[max(kept)]
            pts: list[Point] = [point_of(g) for _, g in sorted(kept.items())]
            joins = sorted({j for _, j in mine})
            out.append(
                GpuTrack(host, index, last.name, last.uuid, [r for r, _ in mine], "+".join(joins),
                         self.sources.get(host), pts)
            )  # fmt: skip
        return out


def spans(results: Sequence[RequestResult], keep: Sequence[int] | None = None) -> dict[str, list[Span]]:
    """The counted successful requests of each service (of `keep`, their indexes, when given) as time spans
    with their output tokens."""
    out: dict[str, list[Span]] = {}
    for i in range(len(results)) if keep is None else keep:
        r = results[i]
        if r.warmup or not r.ok or r.e2e_s is None or not r.output_tokens:
            continue
        out.setdefault(r.service, []).append(Span(i, r.started_at, r.started_at + r.e2e_s, r.output_tokens))
    return out


def bounds(results: Sequence[RequestResult]) -> tuple[float, float] | None:
    """(first send, last byte) of the counted requests, unix seconds; None when none finished."""
    ends = [(r.started_at, r.started_at + r.e2e_s) for r in results if not r.warmup and r.e2e_s is not None]
    if not ends:
        return None
    return min(a for a, _ in ends), max(b for _, b in ends)


def apply(run: BenchRun, energy: RunEnergy, per: dict[int, float]) -> None:
    """The run carries its energy: the RunEnergy, each request's joules, each prompt row's J/token."""
    run.energy = energy
    for i, j in per.items():
        run.results[i].energy_j = j
    for row in run.rows:
        mine = [
            (r.energy_j, r.output_tokens or 0)
            for r in run.results
            if r.service == row.service and r.prompt_id == row.prompt_id and r.energy_j is not None
        ]
        tokens = sum(n for _, n in mine)
        row.j_per_token = sum(j for j, _ in mine) / tokens if mine and tokens else None


def url_energy(urls: bool) -> RunEnergy:
    """What a run asked for energy says when nothing could be recorded: URL targets, or no telemetry."""
    return RunEnergy(note=URL_NOTE if urls else "this fleet has no GPU telemetry to record from")


NOTHING = "no counted request finished: nothing to attribute"


async def finish(rec: GpuRecorder, run: BenchRun) -> None:
    """Stop recording once the run's last request is covered, and put the energy on the run."""
    span = bounds(run.results)
    await rec.stop(span[1] if span else time.time())
    if span is None:
        run.energy = RunEnergy(note=NOTHING)
        return
    energy, per = run_energy(rec.tracks(), spans(run.results), span[0], span[1], [t.ref for t in run.targets])
    apply(run, energy, per)


async def finish_load(rec: GpuRecorder, run: LoadRun) -> None:
    """A load ladder's energy: over the whole run (each request's joules), and per level over the level's
    own requests and time span (J/token against the load)."""
    span = bounds(run.results)
    await rec.stop(span[1] if span else time.time())
    if span is None:
        run.energy = RunEnergy(note=NOTHING)
        return
    refs = [t.ref for t in run.targets]
    tracks = rec.tracks()
    run.energy, per = run_energy(tracks, spans(run.results), span[0], span[1], refs)
    for i, j in per.items():
        run.results[i].energy_j = j
    for lv in run.levels:
        idx = [i for i, r in enumerate(run.results) if r.level == lv.level]
        lspan = bounds([run.results[i] for i in idx])
        if lspan is None:
            continue
        en, _ = run_energy(tracks, spans(run.results, idx), lspan[0], lspan[1], refs)
        run.level_energy.append(LevelEnergy(level=lv.level, label=lv.label, energy=en))
