"""Is the benchmark client itself the bottleneck? CPU time and event-loop lag of one client process.

A client that cannot keep up reads chunks late: it then reports a slower server and a longer TTFT than the
truth. Two signs, measured while the counted requests run:
- CPU: the process's CPU time / wall time; near 1.0 the loop has no idle time left (a core).
- loop lag: a task asks to wake every 25 ms and records how late it woke; a busy or starved loop (own work,
  or other processes taking the cores) wakes late, and reads sockets as late.

`verdict()` turns the busiest process's numbers into "client-bound" with the reason. Where Linux has it,
the machine's CPU pressure (/proc/pressure/cpu, "some avg10": the share of time runnable tasks waited for
a core) tells a client starved by other processes from one busy with its own work.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ddtree_tui.bench.stream import read_mode
from ddtree_tui.bench.timeline import percentile

if TYPE_CHECKING:  # a worker process runs LoopMonitor and never imports the result models (bench/timeline.py)
    from ddtree_tui.bench.models import ClientStats

TICK = 0.025
CPU_BOUND = 0.85  # of a core
LAG_BOUND_MS = 10.0  # p99 of the tick's lateness: a read that late skews a 1 s stream by 1 %


def cpu_pressure(path: Path = Path("/proc/pressure/cpu")) -> float | None:
    """The machine's CPU pressure, % of the last 10 s that some runnable task waited; None where unknown."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                for f in line.split()[1:]:
                    k, _, v = f.partition("=")
                    if k == "avg10":
                        return float(v)
    except (OSError, ValueError):
        return None
    return None


class LoopMonitor:
    """Samples this process's loop lag and CPU between `start()` and `stop()`."""

    def __init__(self) -> None:
        self.lags: list[float] = []  # ms
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = 0.0
        self._t0 = 0.0
        self.cpu_s = 0.0
        self.wall_s = 0.0

    def start(self) -> None:
        self.lags = []
        self._cpu0 = time.process_time()
        self._t0 = time.monotonic()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(TICK)
            self.lags.append(max(0.0, (time.monotonic() - t - TICK) * 1000.0))

    async def stop(self) -> None:
        self.cpu_s = time.process_time() - self._cpu0
        self.wall_s = time.monotonic() - self._t0
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def sample(self) -> dict[str, float | None]:
        """This process's numbers (so far, while running), as a worker sends them to the runner."""
        if self.running:
            self.cpu_s = time.process_time() - self._cpu0
            self.wall_s = time.monotonic() - self._t0
        return {
            "cpu_s": self.cpu_s,
            "wall_s": self.wall_s,
            "lag_p50": percentile(self.lags, 50),
            "lag_p99": percentile(self.lags, 99),
            "lag_max": max(self.lags) if self.lags else None,
        }


def verdict(
    samples: list[dict[str, float | None]], tokens: int, wall_s: float, workers: int = 1
) -> ClientStats:
    """One ClientStats from each process's sample (the runner's and its workers'): the busiest process
    decides whether the run is client-bound."""
    cpu = sum(s.get("cpu_s") or 0.0 for s in samples)
    cores = [(s.get("cpu_s") or 0.0) / (s.get("wall_s") or 1.0) for s in samples if s.get("wall_s")]
    p50s = [s["lag_p50"] for s in samples if s.get("lag_p50") is not None]
    p99s = [s["lag_p99"] for s in samples if s.get("lag_p99") is not None]
    maxs = [s["lag_max"] for s in samples if s.get("lag_max") is not None]
    core = max(cores) if cores else 0.0
    p99 = max(p99s) if p99s else None  # type: ignore[type-var]
    reasons = []
    if core >= CPU_BOUND:
        reasons.append(f"client CPU at {core * 100:.0f} % of a core")
    pressure = cpu_pressure()
    if p99 is not None and p99 >= LAG_BOUND_MS:
        why = f"event-loop lag p99 {p99:.1f} ms"
        if core < CPU_BOUND and pressure is not None and pressure >= 20:
            why += f" (the machine's CPU is contended: tasks waited {pressure:.0f} % of the last 10 s)"
        reasons.append(why)
    from ddtree_tui.bench.models import ClientStats

    return ClientStats(
        workers=workers,
        wall_s=wall_s,
        cpu_s=cpu,
        cpu_core_max=core,
        loop_lag_ms_p50=max(p50s) if p50s else None,  # type: ignore[type-var]
        loop_lag_ms_p99=p99,
        loop_lag_ms_max=max(maxs) if maxs else None,  # type: ignore[type-var]
        cpu_us_per_token=cpu / tokens * 1e6 if tokens else None,
        cpu_pressure_pct=pressure,
        client_bound=bool(reasons),
        reason="; ".join(reasons) if reasons else None,
        reads=read_mode(),
    )
