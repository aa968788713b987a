"""Issue 28's "also seen" list, one test each: what a user of the demo met that was wrong in words or numbers
(a move to the host the service is on, a stopped run read as finished, the bench pane's titles over a load
run, the demo's doctor, the replayed GPU while a service idles)."""

from __future__ import annotations

import asyncio
import datetime as dt
import shlex
from html import escape
from pathlib import Path

import pytest
from textual.widgets import Static

from ddtree_tui.bench.levels import LevelResult, LevelService, Pctl
from ddtree_tui.bench.models import BenchRequest, RunFinished, RunStarted
from ddtree_tui.bench.results import LevelFinished, LevelStarted
from ddtree_tui.doctor.packages import UNNEEDED
from ddtree_tui.doctor.render import render
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.intents import Move
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.model.snapshot import GpuSample
from ddtree_tui.report.sweep import best
from ddtree_tui.report.sweep_input import LoadedSweep
from ddtree_tui.sweep.results import RankedPoint, SweepResults
from ddtree_tui.telemetry.powermodel import UTIL_ACTIVE_PCT
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import demo_fleet, fast_sims
from tests.app.snapdata import snapshot
from tests.app.test_bench_pane import bench_run


async def test_move_to_the_host_it_is_on_says_already_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`move local/ddtree-shadow local` answered "already running" (a launch was tried on the same host): it
    says the service is already on that host, and nothing is launched."""
    monkeypatch.chdir(tmp_path)
    fleet = demo_fleet(tmp_path)
    try:
        await fleet.start()
        res = await fleet.do(Move(ref=ServiceRef("local", "ddtree-shadow"), to_host="local"))
        assert not res.ok
        assert "already on local" in res.message and "already running" not in res.message, res.message
        states = {s.name: s.state for h in fleet.snapshot().hosts for s in h.services}
        assert states.get("ddtree-shadow") not in ("starting", "ready"), states
    finally:
        await fleet.stop()


def _level(i: int, label: str) -> LevelFinished:
    svc = [
        LevelService(service=ref, algorithm=algo, mode=None, n=4, output_throughput=100.0 + 10 * i + k,
                     ttft_ms=Pctl(p50=20.0 + i, p99=30.0 + i))
        for k, (ref, algo) in enumerate((("local/dflash", "dflash"), ("local/ddtree", "ddtree")))
    ]  # fmt: skip
    started = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    return LevelFinished(
        run_id="L1",
        index=i,
        result=LevelResult(level=float(2**i), label=label, started_at=started, services=svc),
    )


async def test_after_a_load_run_its_charts_are_titled_and_labelled_and_the_plain_run_title_is_over_its_tables() -> (
    None
):
    """After a load run the pane's title named an older plain run above the load run's sparklines, and the
    two sparklines ran together unlabelled: now the load charts have their own title line, each chart its own
    label naming its metric and service, and the plain run's title sits right over the plain run's tables."""
    fleet = StaticFleet(snapshot(), bench_runs=[bench_run()])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(BenchPane)
        live = pane.live
        live.reset_load("starting load on local/dflash, local/ddtree")
        for i, label in enumerate(("c=1", "c=2")):
            live.apply(LevelStarted(run_id="L1", index=i, count=2, level=float(2**i), label=label))
            live.apply(_level(i, label))
        app._dirty.add("bench")
        app.flush()
        await pilot.pause()
        text = lambda wid: str(pane.query_one(wid, Static).render())  # noqa: E731
        assert "local/dflash" in text("#bench-spark-thr-label") and "out tok/s" in text(
            "#bench-spark-thr-label"
        )
        assert "local/dflash" in text("#bench-spark-ttft-label") and "TTFT" in text("#bench-spark-ttft-label")
        assert "seed3" not in text("#bench-load-labels")  # the old plain run is not named over the charts
        thr, ttft = pane.query_one("#bench-spark-thr"), pane.query_one("#bench-spark-ttft")
        assert thr.region.right < ttft.region.x  # a gap between the two charts
        results_title = pane.query_one("#bench-results-title")
        assert results_title.region.y > pane.query_one("#bench-load").region.bottom
        assert results_title.region.y < pane.query_one("#bench-results").region.y
        assert "seed3" in text("#bench-results-title")


async def test_a_stopped_plain_run_says_stopped_and_what_was_saved() -> None:
    """A stopped plain run read "finished (⚠ INTERRUPTED)": it says stopped, how much was measured, and
    that it was saved."""
    fleet = StaticFleet(snapshot(), bench_runs=[])
    app = DDTreeApp(fleet, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(BenchPane)
        live = pane.live
        live.apply(RunStarted(run_id="r1", total=6, targets=[], prompts=["p1", "p2", "p3"]))
        live.apply(RunFinished(run=bench_run(status="interrupted")))
        await pilot.press("5")
        app._dirty.add("bench")
        app.flush()
        await pilot.pause()
        status = str(pane.query_one("#bench-status", Static).render())
        assert status.startswith("⚠ stopped"), status
        assert "finished" not in status and "saved to the history" in status
        assert "0/6 requests measured" in status


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_the_demo_doctor_says_simulated_without_gpu_and_package_noise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's doctor warned that nvidia-smi and unused packages were missing: on a simulated profile it
    says it is simulated, and those warnings (which matter only to a real SGLang host) are gone."""
    monkeypatch.chdir(tmp_path)
    fleet = demo_fleet(tmp_path)
    try:
        await fleet.start()
        report = await fleet.doctor("local")
    finally:
        await fleet.stop()
    checks = {f.check: f for f in report.findings}
    assert checks["simulated"].status == "ok" and "SIMULATED" in checks["simulated"].evidence
    assert not any(f.check == "nvidia-smi" and f.status != "ok" for f in report.findings), report.findings
    assert not any(f.evidence.endswith(UNNEEDED) for f in report.findings), report.findings
    assert "unused packages" not in render(report)
    assert checks["python"].status == "ok"  # the real checks still ran


def _gpu0(fleet: Fleet) -> GpuSample | None:
    host = next(iter(fleet.snapshot().hosts), None)
    return next((g for g in host.gpus if g.index == 0), None) if host is not None else None


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_the_demo_replay_follows_the_service_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's replayed GPU jumped to 100 % / 691 W as soon as a service was starting and stayed there while
    it idled: a started, idle service holds the GPU's memory at idle power; load frames play only while
    requests run, and idle ones again after."""
    monkeypatch.chdir(tmp_path)
    # the sims 6 times faster, the GPU sampled every 0.5 s (the profile's 1 s): the bench (six 256-token
    # requests, ~1 s each) still spans about a dozen samples (what is checked is which frames play while
    # requests run, not the simulated pace; each sample's frame follows the running requests read at that
    # tick, whatever the interval)
    fast_sims(monkeypatch, 6)
    fleet = demo_fleet(tmp_path, telemetry_ms=500)
    try:
        await fleet.start()
        res = await fleet.launch("local/dflash")
        assert res.ok, res.message
        seen: list[GpuSample] = []
        for _ in range(120):  # about 30 s at most: ready, then four samples of it idle
            await asyncio.sleep(0.25)
            g = _gpu0(fleet)
            states = [s.state for h in fleet.snapshot().hosts for s in h.services if s.name == "dflash"]
            if g is not None and states == ["ready"] and (not seen or g.ts != seen[-1].ts):
                seen.append(g)
            if len(seen) >= 4:
                break
        assert len(seen) >= 4, "the service never idled with samples"
        assert all((g.util_gpu or 0) == 0 and (g.power_w or 0) < 300 for g in seen), seen
        assert (seen[-1].mem_used_mb or 0) > 1000  # the model is held
        peak: list[float] = []

        async def watch() -> None:
            while True:
                g = _gpu0(fleet)
                peak.append(float(g.util_gpu or 0) if g is not None else 0.0)
                await asyncio.sleep(0.25)

        watcher = asyncio.create_task(watch())
        try:
            run = await fleet.run_bench(
                BenchRequest(refs=["local/dflash"], prompt_set="seed3", repeats=2, max_new_tokens=256)
            )
        finally:
            watcher.cancel()
        assert run.status == "complete"
        # load while requests ran: the recording's busy frame with the modelled utilisation of one request
        # (telemetry/powermodel.py, UTIL_ACTIVE_PCT) or more, never the idle 0 %
        assert max(peak) >= UTIL_ACTIVE_PCT, "no load frame while requests ran"
        after: list[GpuSample] = []
        for _ in range(80):  # back to idle within the serving window and a few ticks (20 s at most)
            await asyncio.sleep(0.25)
            g = _gpu0(fleet)
            if g is not None and (not after or g.ts != after[-1].ts):
                after.append(g)
            if len(after) >= 3 and all((x.util_gpu or 0) == 0 for x in after[-3:]):
                break
        assert all((x.util_gpu or 0) == 0 for x in after[-3:]), after[-3:]
    finally:
        await fleet.stop()


def test_the_sweep_report_names_the_sweep_directory_in_its_apply_hint(tmp_path: Path) -> None:
    """The sweep report's hint printed a literal `DIR`: it names the sweep's directory (that of its
    results.json), ready to paste."""
    point = RankedPoint(
        index=1, label="budget=32", overrides={"budget": "32"}, concurrency=1, status="done", rank=1
    )
    res = SweepResults(sweep_id="s1", ref="local/ddtree", baseline="#0", objective="tok_s", constraints=[],
                       points=[point], best=1)  # fmt: skip
    out = tmp_path / "my sweep"
    html = best(LoadedSweep(path=str(out / "results.json"), results=res))
    assert "sweep apply DIR" not in html
    assert f"sweep apply {escape(shlex.quote(str(out)))} --point 1" in html
