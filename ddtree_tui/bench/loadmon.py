"""Is the benchmark client itself the bottleneck? CPU time and event-loop lag of one client process.

A client that cannot keep up reads chunks late: it then reports a slower server and a longer TTFT than the
truth. Two signs, measured while the counted requests run:
- CPU: the process's CPU time / wall time; near 1.0 the loop has no idle time left (a core).
- loop lag: how late a timer runs, every 25 ms; a busy or starved loop (own work, or other processes taking
  the cores) runs it late, and reads sockets as late. While streams flow, the read tick (bench/stream.py
  _Ticker, every 5 ms) is that timer, sampled every 25 ms; the monitor's own timer wakes the loop only when
  no tick has run for a while. Each wake of an idle process costs: on the 2-core VM of issue 26 the monitor's
  own 25 ms timer was ~8 ms of CPU a second, ~9 % of a poisson run's measured phase.

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

from ddtree_tui.bench import stream
from ddtree_tui.bench.stream import read_mode
from ddtree_tui.bench.timeline import percentile

if TYPE_CHECKING:  # a worker process runs LoopMonitor and never imports the result models (bench/timeline.py)
    from ddtree_tui.bench.models import ClientStats

TICK = 0.025
IDLE_WAIT = 0.25  # the monitor's own timer while read ticks sample the lag for it
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
        self._sampled = 0.0  # time.monotonic() of the last lag sample, of either source
        self._tick_seen = 0.0  # of the last read tick told (bench/stream.py TICK_OBSERVERS)
        self._cpu0 = 0.0
        self._t0 = 0.0
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self._on = False  # started and not stopped
        self._halted = False

    def start(self) -> None:
        self.lags = []
        self._cpu0 = time.process_time()
        self._t0 = time.monotonic()
        self._sampled = self._tick_seen = self._t0 - 2 * TICK  # none yet: the own timer samples first
        self._on, self._halted = True, False
        stream.TICK_OBSERVERS.append(self.ticked)
        self._task = asyncio.ensure_future(self._run())
        owner = asyncio.current_task()
        if owner is not None:  # a run cancelled or stopped mid-way never calls stop(): its end halts us
            owner.add_done_callback(self._owner_done)

    def _owner_done(self, _task: object) -> None:
        self.halt()

    def halt(self) -> None:
        """Sampling ends now, without stop(): the task that started the monitor ended (a run cancelled or
        stopped mid-way). Its figures so far stay for `sample` (an interrupted run's client figures), and
        no timer of it is left on the loop (a live view's loop outlives every run it starts)."""
        if not self._on or self._halted:
            return
        self.cpu_s = time.process_time() - self._cpu0
        self.wall_s = time.monotonic() - self._t0
        self._halted = True
        self._detach()

    def _detach(self) -> asyncio.Task[None] | None:
        """No more samples: off the read ticks, and the own timer's task cancelled (returned, to await)."""
        with contextlib.suppress(ValueError):
            stream.TICK_OBSERVERS.remove(self.ticked)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    def ticked(self, late: float, now: float) -> None:
        """A read tick ran `late` s after it was due: a lag sample, at most one every TICK."""
        self._tick_seen = now
        if now - self._sampled >= TICK:
            self._sampled = now
            self.lags.append(max(0.0, late * 1000.0))

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            # ticks sampled lately (they come every TICK while they run): they will go on; else this timer
            # is the sample, every TICK
            wait = IDLE_WAIT if t - self._tick_seen < 2 * TICK else TICK
            await asyncio.sleep(wait)
            now = time.monotonic()
            if now - self._sampled >= TICK or wait == TICK:
                self._sampled = now
                self.lags.append(max(0.0, (now - t - wait) * 1000.0))

    async def stop(self) -> None:
        if not self._halted:
            self.cpu_s = time.process_time() - self._cpu0
            self.wall_s = time.monotonic() - self._t0
        self._on = False
        task = self._detach()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        """Started and not stopped (also once halted: a stopped run's figures so far are read then)."""
        return self._on

    def sample(self) -> dict[str, float | None]:
        """This process's numbers (so far, while running), as a worker sends them to the runner."""
        if self._on and not self._halted:
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
