"""The client's loop monitor (bench/loadmon.py, issue 26): while read ticks run it takes its lag samples from
them and wakes the loop for one of its own only every IDLE_WAIT, not every TICK (each wake of an idle
process costs CPU); with no ticks it samples with its own timer every TICK; and a run that ends without
stop() (cancelled, or stopped mid-way) leaves no timer of it on the loop. Counted, never timed."""

from __future__ import annotations

import asyncio
import time

import pytest

from ddtree_tui.bench import loadmon, stream
from ddtree_tui.bench.loadmon import LoopMonitor


class _CountingSleep:
    """asyncio.sleep as the monitor calls it, counting the waits it asks for."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.real = asyncio.sleep

    async def __call__(self, s: float) -> None:
        self.waits.append(s)
        await self.real(s)


async def test_ticks_sample_the_lag_and_the_monitor_waits_long_while_they_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sleep = _CountingSleep()
    monkeypatch.setattr(asyncio, "sleep", sleep)
    mon = LoopMonitor()
    mon.start()
    try:
        assert mon.ticked in stream.TICK_OBSERVERS
        await sleep.real(3 * loadmon.TICK)  # no ticks yet: its own timer, every TICK
        assert sleep.waits and all(w == loadmon.TICK for w in sleep.waits)
        own = len(mon.lags)
        assert own >= 1
        before = len(sleep.waits)
        t0 = prev = time.monotonic()
        stalls = 0  # the test's own ticks late past a TICK (a busy machine): the monitor may sample then
        while time.monotonic() - t0 < 4 * loadmon.IDLE_WAIT:  # streams flow: a tick every 5 ms, 2 ms late
            for note in list(stream.TICK_OBSERVERS):
                note(0.002, time.monotonic())
            await sleep.real(0.005)
            now = time.monotonic()
            stalls += now - prev >= loadmon.TICK
            prev = now
        span = time.monotonic() - t0
        assert [x for x in mon.lags[own:] if x == 2.0]  # the ticks' lateness is what was sampled
        assert len(mon.lags) - own <= span / loadmon.TICK + 2  # at most one sample a TICK, of either source
        during = sleep.waits[before:]
        assert loadmon.IDLE_WAIT in during
        assert during.count(loadmon.TICK) <= 2 + stalls  # not a wake every TICK: ticks sample for it
    finally:
        await mon.stop()
    assert mon.ticked not in stream.TICK_OBSERVERS and not mon.running


async def test_a_run_cancelled_mid_way_leaves_no_monitor_timer() -> None:
    mon = LoopMonitor()
    started = asyncio.Event()

    async def run() -> None:  # a run's task: starts the monitor, never gets to stop() it
        mon.start()
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), 10)
    sampler = mon._task
    assert sampler is not None and not sampler.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert sampler.cancelled() or sampler.done()
    assert mon._task is None and mon.ticked not in stream.TICK_OBSERVERS
    # its figures so far stay readable, as an interrupted run reads them
    assert mon.running
    first = mon.sample()
    await asyncio.sleep(0.05)
    assert mon.sample() == first  # frozen at the halt: nothing samples any more
