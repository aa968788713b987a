"""Fair arms (sweep/fairness.py): the cache flush against a real HTTP server on loopback (retried while it
refuses, a server without the endpoint said so), the GPU check's reasons, and the baseline drift: a
baseline that moved beyond its noise flags and scales the points measured next to it, one that did not
leaves them alone."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from ddtree_tui.bench.models import BenchTarget
from ddtree_tui.sweep.fairness import FairnessSettings, baseline_drift, flush_cache, why_unsettled
from ddtree_tui.sweep.results import analyse
from ddtree_tui.sweep.spec import Dimension
from ddtree_tui.sweep.state import BaselineRecord, GpuCheck, Measurement, PointRecord, Sample, SweepState


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int]]]:
    """/flush_cache answers 400 (requests running) twice, then 200; /404/flush_cache is not found."""
    calls: list[int] = []

    async def flush(_req: web.Request) -> web.Response:
        calls.append(1)
        if len(calls) < 3:
            return web.Response(status=400, text="Cache not flushed: 2 running requests")
        return web.Response(text="Cache flushed.")

    app = web.Application()
    app.router.add_post("/flush_cache", flush)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", calls
    finally:
        await runner.cleanup()


async def test_flush_is_retried_while_refused_and_a_missing_endpoint_is_said(
    server: tuple[str, list[int]],
) -> None:
    url, calls = server
    ok, why = await flush_cache(BenchTarget(ref="h/s", base_url=url, algorithm="dflash"))
    assert ok and why is None and len(calls) == 3
    ok, why = await flush_cache(BenchTarget(ref="h/s", base_url=url + "/404", algorithm="dflash"))
    assert not ok and why is not None and "HTTP 404" in why and "/flush_cache" in why and "exists" in why


def test_gpu_reasons() -> None:
    s = FairnessSettings(max_temp_c=80)
    assert why_unsettled([GpuCheck(index=0, temp_c=70, throttle_reasons=["gpu_idle"])], s) == []
    hot = why_unsettled(
        [GpuCheck(index=1, temp_c=85, sm_clock_mhz=1200, throttle_reasons=["hw_thermal_slowdown"])], s
    )
    assert hot == ["GPU 1 at 85 °C (bound 80 °C)", "GPU 1 slowed at 1200 MHz: hw_thermal_slowdown"]
    assert why_unsettled([GpuCheck(index=0, temp_c=99)], FairnessSettings(max_temp_c=None)) == []


def _m(rng: random.Random, mean: float, t0: float) -> Measurement:
    return Measurement(
        concurrency=1,
        samples=[
            Sample(
                prompt_id=p,
                repeat=r,
                ok=True,
                tok_s=mean * rng.lognormvariate(0, 0.01),
                started_at=t0,
                e2e_s=1.0,
            )
            for r in range(3)
            for p in ("a", "b", "c")
        ],
    )


def _state(late_baseline: float) -> SweepState:
    rng = random.Random(0)
    points = [
        PointRecord(index=i, overrides={"budget": str(8 * (i + 1))}, status="done", measurement=_m(rng, 100.0, i),
                    finished_at=float(i), baseline_seqs=[0, 1] if i < 2 else [1, 2])
        for i in range(4)
    ]  # fmt: skip
    baselines = [
        BaselineRecord(seq=0, at=0.0, after_point=-1, measurement=_m(rng, 40.0, 0)),
        BaselineRecord(seq=1, at=1.5, after_point=1, measurement=_m(rng, 40.0, 0)),
        BaselineRecord(seq=2, at=4.0, after_point=3, measurement=_m(rng, late_baseline, 0)),
    ]
    return SweepState(
        id="t", ref="h/s", dims=[Dimension(key="budget", values=["8", "16", "24", "32"])], loads=[1],
        strategy="grid", prompts="seed3", repeats=3, warmup=1, max_new_tokens=64, objective="tok_s",
        points=points, baselines=baselines, started_at=0.0, updated_at=0.0,
    )  # fmt: skip


def test_baseline_drift_beyond_its_noise_flags_and_scales_the_points_next_to_it() -> None:
    d = baseline_drift(_state(30.0))
    assert [s.beyond_noise for s in d.steps] == [False, False, True]
    assert d.steps[2].delta_pct is not None and -27 < d.steps[2].delta_pct < -23
    assert set(d.flagged) == {2, 3} and set(d.factors) == {2, 3}
    assert d.factors[2] == pytest.approx(40.0 / 35.0, rel=0.02)  # first / mean of the two linked baselines
    assert "drifted" in d.text and "2 point(s) scaled and flagged" in d.text
    res = analyse(_state(30.0))
    p2 = next(p for p in res.points if p.index == 2)
    assert p2.drift_factor == d.factors[2] and any("drifted" in f for f in p2.flags)
    assert res.schedule is not None
    cell = next(c for c in res.schedule.cells if c.points == [2])
    assert cell.drift_factor == d.factors[2] and cell.median is not None and cell.median > 105  # scaled up
    flagged_only = baseline_drift(_state(30.0), correct=False)
    assert set(flagged_only.flagged) == {2, 3} and not flagged_only.factors


def test_a_steady_baseline_touches_nothing() -> None:
    d = baseline_drift(_state(40.0))
    assert not any(s.beyond_noise for s in d.steps) and not d.flagged and not d.factors
    assert d.text.startswith("baseline stable")
