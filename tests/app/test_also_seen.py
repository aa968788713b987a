"""Issue 28's "also seen" list, one test each: what a user of the demo met that was wrong in words or numbers
(a move to the host the service is on, a stopped run read as finished, the bench pane's titles over a load
run, the demo's doctor, the replayed GPU while a service idles)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from textual.widgets import Static

from ddtree_tui.bench.levels import LevelResult, LevelService, Pctl
from ddtree_tui.bench.models import RunFinished, RunStarted
from ddtree_tui.bench.results import LevelFinished, LevelStarted
from ddtree_tui.model.intents import Move
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import demo_fleet
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
