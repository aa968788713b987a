"""Soak (`--soak --duration 30m --window 10s`): one load level held for a long time, measured in windows,
each window joined with the service's GPUs and state, and drift flagged with the window where it began.

One load level (the first of --load, concurrency 1 by default) is held for the whole duration. Services are
compared interleaved, like every level of a load run: inside each window they take turns, one at a time, the
order rotating window by window (A B, then B A, ...), so drift on one host or the hour of the day cannot bias
the comparison; a service's window is measured over its own turn. Drift is detected per service.

Each window, per service: the level metrics of levels.py (throughput, TTFT/TPOT/ITL/e2e percentiles, error
rate, accept length, goodput) plus a probe at the window's end: /health (status and latency), whether the
server restarted (its /server_info's start stamp or pid changed, or /health failed then recovered), and its
GPUs (`gpu_probe`: the host's telemetry snapshot for the service's GPUs; for the simulator its modelled GPU,
GET /sim/gpu, labelled "sim").

A window ends once the requests in flight at its edge have finished and its probe has answered, so it runs
past its nominal length by about one request and one probe (0.82 s past a 1 s window was seen on a starved
machine; a real 10 s+ window barely notices). Its figures are over the time its requests really ran (its
turn, in-flight requests included), never the nominal length; the next window still ends on the nominal grid,
so an overrun shortens that one rather than shifting every later window.

Windows are appended to `log_path` as JSON lines while the run goes (one line a window, flushed and fsynced,
O_APPEND): a crash or Ctrl-C loses at most the window in progress.

Drift (drift.py `detect_drift`), against the baseline = the median of windows 1 and 2 (window 0 is the warm-up):
- tok/s decay: output throughput below (1 − DECAY) × baseline in two windows running;
- TTFT growth: TTFT p50 above (1 + GROWTH) × baseline and at least GROWTH_MIN_MS more, two windows running;
- GPU memory creep: memory used rising window over window for CREEP_WINDOWS windows running, by CREEP_MIB in
  all; began = the first window of that rise;
- error onset: the first window with a failure after error-free baseline windows;
- restart / unhealthy: the first window whose probe saw /health fail or the server restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from pydantic import BaseModel, ConfigDict

from ddtree_tui.bench.drift import detect_drift
from ddtree_tui.bench.jsonl import append_line
from ddtree_tui.bench.levels import level_service
from ddtree_tui.bench.load import LoadSpec, Slo
from ddtree_tui.bench.models import BenchRequest, BenchTarget, RequestResult, TargetInfo
from ddtree_tui.bench.results import (
    GpuWindow,
    ServiceProbe,
    SoakRun,
    SoakWindow,
)
from ddtree_tui.bench.runner import RunHooks, until_stopped
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.config import HostProfile
from ddtree_tui.model.snapshot import GpuSample

if TYPE_CHECKING:
    from ddtree_tui.transport.base import Transport

DEFAULT_WINDOW_S = 10.0

GpuProbe = Callable[[BenchTarget], Awaitable[tuple[list[GpuWindow], str | None]]]


class SoakSettings(BaseModel):
    """How a soak runs: how long, in windows of how long, the SLO of its goodput, where its windows are
    appended as they come (the window log and the bench history), and how a window probes a service's GPUs."""

    model_config = ConfigDict(frozen=True)

    duration_s: float
    window_s: float = DEFAULT_WINDOW_S
    slo: Slo | None = None
    log_path: Path | None = None
    history_path: Path | None = None  # the bench history: start line and windows as they come
    gpu_probe: GpuProbe | None = None


async def get_json(client: StreamClient, url: str, timeout: float) -> tuple[int, object]:
    """(status, parsed JSON body or None); raises on a connection failure or the timeout."""
    async with asyncio.timeout(timeout):
        async with await client.get(url) as r:
            raw = await r.read()
            status = r.status
    try:
        return status, orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return status, None


async def sim_gpu_probe(t: BenchTarget) -> tuple[list[GpuWindow], str | None]:
    """The simulator's modelled GPU (GET /sim/gpu): for simulated services only."""
    async with StreamClient(connect_timeout=2.0) as client:
        with contextlib.suppress(Exception):
            status, body = await get_json(client, t.base_url + "/sim/gpu", 3.0)
            if status == 200 and isinstance(body, dict):
                return [GpuWindow(**g) for g in body.get("gpus", [])], "sim"
    return [], None


def host_gpu_probe(transport: Transport, profile: HostProfile, gpus: Sequence[int] | None) -> GpuProbe:
    """A probe from the host's telemetry snapshot (nvml, nvidia-smi, replay, prometheus: the profile's
    source), keeping the service's GPUs (its CUDA_VISIBLE_DEVICES; all of them when it names none)."""
    from ddtree_tui.telemetry.sampler import snapshot_once

    async def probe(t: BenchTarget) -> tuple[list[GpuWindow], str | None]:
        _, samples, _status = await snapshot_once(transport, profile, timeout=5.0)
        return gpu_windows(samples, gpus), profile.telemetry.source

    return probe


def gpu_windows(samples: Sequence[GpuSample], gpus: Sequence[int] | None) -> list[GpuWindow]:
    """The telemetry samples of a service's GPUs (all of them when it names none), as a window's probe."""
    keep = set(gpus or [])
    return [
        GpuWindow(
            index=g.index,
            memory_used_mib=g.mem_used_mb,
            utilization_pct=g.util_gpu,
            power_w=g.power_w,
            temperature_c=g.temp_c,
        )
        for g in samples
        if not keep or g.index in keep
    ]


class SoakRunner:
    def __init__(
        self,
        req: BenchRequest,
        targets: Sequence[BenchTarget],
        load: LoadSpec,
        settings: SoakSettings,
        hooks: RunHooks | None = None,
    ) -> None:
        if settings.window_s <= 0 or settings.duration_s <= 0:
            raise ValueError("--duration and --window must be above zero")
        self.runner = (hooks or RunHooks()).runner(req.model_copy(update={"warmup": 0}), targets)
        self._on_measure_start = (hooks or RunHooks()).on_measure_start
        self.req = req
        self.load = load
        self.concurrency = max(1, int(load.levels[0])) if load.closed_loop else 1
        self.settings = settings
        self.windows: list[SoakWindow] = []
        self.started_at = datetime.now(UTC)
        self.id = self.runner.run_id
        self._t0 = time.monotonic()
        self._ident: dict[str, tuple[object, object]] = {}  # (pid, start stamp) of /server_info
        self._was_down: dict[str, bool] = {}

    def _emit(self, ev: SoakWindow) -> None:
        self.runner._emit(ev)  # type: ignore[arg-type]  # the runner's listener takes the soak's events too

    async def _lanes(self, client: StreamClient, t: BenchTarget, end: float) -> None:
        r = self.runner
        n = [0]

        async def lane(k: int) -> None:
            while time.monotonic() < end:
                p = r.prompts[n[0] % len(r.prompts)]
                n[0] += 1
                seq = len(r.order)
                r.order.append(f"{t.ref} {p.id}")
                await r._one(client, t, p, 0, seq, False)

        await asyncio.gather(*(lane(k) for k in range(self.concurrency)))

    async def _probe(self, client: StreamClient, t: BenchTarget) -> ServiceProbe:
        pr = ServiceProbe()
        t0 = time.monotonic()
        try:
            status, _ = await get_json(client, t.base_url + "/health", min(10.0, self.settings.window_s))
            pr.health_status = status
            pr.healthy = status == 200
        except Exception as e:
            pr.healthy = False
            pr.note = f"/health: {e}"
        pr.health_ms = (time.monotonic() - t0) * 1000.0
        with contextlib.suppress(Exception):
            status, info = await get_json(client, t.base_url + "/server_info", 5.0)
            if status == 200 and isinstance(info, dict):
                ident = (info.get("pid"), info.get("start_time") or info.get("started_at"))
                old = self._ident.get(t.ref)
                if old is not None and any(ident) and ident != old:
                    pr.restarted = True
                    pr.note = f"server identity changed {old} -> {ident}"
                self._ident[t.ref] = ident
        if pr.healthy and self._was_down.get(t.ref):
            pr.restarted = True
            pr.note = pr.note or "/health failed, then answered again"
        self._was_down[t.ref] = pr.healthy is False
        if self.settings.gpu_probe is not None:
            with contextlib.suppress(Exception):
                pr.gpus, pr.gpu_source = await self.settings.gpu_probe(t)
        return pr

    async def _slot(
        self, client: StreamClient, t: BenchTarget, until: float
    ) -> tuple[list[RequestResult], float]:
        """One service alone on the servers until `until` (in-flight requests finish): its results and the
        seconds it ran. Only one service runs at a time, so every result appended meanwhile is its own."""
        r = self.runner
        first, s0 = len(r.results), time.monotonic()
        await self._lanes(client, t, until)
        return [x for x in r.results[first:] if not x.warmup], time.monotonic() - s0

    async def _windows(self, client: StreamClient, end: float) -> None:
        """Window after window until `end`; inside each, the services take turns (the order rotating window by
        window), each getting an equal share of what is left of the window, so drift on one host or a
        slow start cannot bias the comparison; each service's window is measured over its own turn."""
        r = self.runner
        t0 = self._t0_measure
        n = len(r.targets)
        idx = 0
        while True:
            w_lo = time.monotonic()
            w_hi = min(t0 + (idx + 1) * self.settings.window_s, end)
            k = idx % n
            order = list(r.targets[k:]) + list(r.targets[:k])
            for j, t in enumerate(order):
                now = time.monotonic()
                # what is left of the window, shared by the services still to run; never a turn of nothing
                until = max(now + (w_hi - now) / (n - j), now + 0.25 * self.settings.window_s / n)
                rs, ran_s = await self._slot(client, t, until)
                m = level_service(t, rs, max(ran_s, 1e-9), self.settings.slo, None)
                probe = await self._probe(client, t)
                w = SoakWindow(
                    run_id=self.id,
                    index=idx,
                    start_s=w_lo - t0,
                    end_s=time.monotonic() - t0,
                    service=t.ref,
                    metrics=m,
                    probe=probe,
                )
                self.windows.append(w)
                self._log(w.model_dump(mode="json"))
                self._emit(w)
            idx += 1
            if time.monotonic() >= end - 1e-6:
                return

    def _log(self, obj: dict[str, object]) -> None:
        """A line to the window log and the history, each appended at once (a crash loses no line)."""
        for path in (self.settings.log_path, self.settings.history_path):
            if path is not None:
                append_line(obj, path)

    async def run(self) -> SoakRun:
        r = self.runner
        async with StreamClient() as client:
            await r.prepare(client)
            if self.settings.log_path is not None:
                self.settings.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log(
                {
                    "kind": "soak_started",
                    "run_id": self.id,
                    "started_at": self.started_at.isoformat(),
                    "window_s": self.settings.window_s,
                    "duration_s": self.settings.duration_s,
                    "concurrency": self.concurrency,
                    "load_text": self.load.text,
                    "prompt_set": r.prompt_set,
                    "targets": [i.model_dump(mode="json") for i in r.infos.values()],
                }
            )
            self._t0_measure = time.monotonic()
            if self._on_measure_start is not None:
                self._on_measure_start(time.time())
            await r._monitor_start()  # the client's CPU and loop lag over the measured windows
            await self._windows(client, self._t0_measure + self.settings.duration_s)
            await r._monitor_stop()
        return self.build("complete")

    def build(self, status: str) -> SoakRun:
        r = self.runner
        return SoakRun(
            id=self.id,
            status=status,  # type: ignore[arg-type]
            started_at=self.started_at,
            wall_s=time.monotonic() - self._t0,
            load_text=self.load.text,
            concurrency=self.concurrency,
            duration_s=self.settings.duration_s,
            window_s=self.settings.window_s,
            slo=self.settings.slo,
            prompt_set=r.prompt_set,
            targets=[
                r.infos.get(t.ref)
                or TargetInfo(ref=t.ref, base_url=t.base_url, algorithm=t.algorithm, mode=t.mode)
                for t in r.targets
            ],
            windows=list(self.windows),
            drift=detect_drift(self.windows),
            failed=sum(1 for x in r.results if not x.ok),
            log_path=str(self.settings.log_path) if self.settings.log_path else None,
            # interrupted: what the runner's loop saw so far (as a plain run's build does)
            client=r.client_stats or (r._verdict([r.monitor.sample()]) if r.monitor.running else None),
        )


async def run_soak(
    req: BenchRequest,
    targets: Sequence[BenchTarget],
    load: LoadSpec,
    settings: SoakSettings,
    hooks: RunHooks | None = None,
) -> SoakRun:
    """Run the soak; `hooks.stop` ends it with status "interrupted", keeping every finished window."""
    sr = SoakRunner(req, targets, load, settings, hooks)
    return await until_stopped(sr.run(), (hooks or RunHooks()).stop, lambda: sr.build("interrupted"))
