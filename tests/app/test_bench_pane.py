"""Issue 19, the bench pane: one statistic for tok/s and Δ, the per-prompt table, which run is shown (this
one, the previous one during a new run, one from history), interrupted runs marked, headless runs picked up
from the history file, the live list following the streaming request, 1-based repeats, TTFT while streaming."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from ddtree_tui.bench import history
from ddtree_tui.bench.models import (
    BenchRun,
    PromptRow,
    PromptStarted,
    RunStarted,
    SamplingParams,
    ServiceSummary,
    TokensReceived,
)
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import snapshot, static_fleet


def bench_run(run_id: str = "r1", status: str = "complete") -> BenchRun:
    """The issue's numbers: medians 145.2 vs 129.2, but Δ computed on the mean of prompts (−11.0 %)."""
    return BenchRun(
        id=run_id,
        status=status,  # type: ignore[arg-type]
        started_at=dt.datetime(2026, 6, 15, 12, 0, tzinfo=dt.UTC),
        prompt_set="seed3",
        sampling=SamplingParams(),
        repeats=1,
        warmup=0,
        concurrency=1,
        baseline="local/dflash",
        rows=[
            PromptRow(prompt_id="p1", service="local/dflash", algorithm="dflash", mode=None, n=1,
                      tok_s_median=150.0, tok_s_min=150.0, tok_s_max=150.0, ttft_ms_median=40.0),
            PromptRow(prompt_id="p1", service="local/ddtree", algorithm="ddtree", mode="tree", n=1,
                      tok_s_median=133.5, tok_s_min=133.5, tok_s_max=133.5, ttft_ms_median=45.0,
                      delta_tok_s_pct=-11.0),
        ],
        summary=[
            ServiceSummary(service="local/dflash", algorithm="dflash", mode=None, n=3, tok_s_median=145.2,
                           tok_s_mean_of_prompts=150.0),
            ServiceSummary(service="local/ddtree", algorithm="ddtree", mode="tree", n=3, tok_s_median=129.2,
                           tok_s_mean_of_prompts=133.5, delta_tok_s_pct=-11.0),
        ],
    )  # fmt: skip


def _cells(table: DataTable[Any], key: str) -> list[str]:
    return [str(c.plain if hasattr(c, "plain") else c) for c in table.get_row(key)]


def _named(table: DataTable[Any], key: str) -> dict[str, str]:
    labels = [str(c.label) for c in table.columns.values()]
    return dict(zip(labels, _cells(table, key), strict=True))


@pytest.mark.slow
async def test_tok_s_and_delta_use_one_statistic_and_prompts_table_is_shown() -> None:
    fleet = StaticFleet(snapshot(), bench_runs=[bench_run()])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        pane = app.query_one(BenchPane)
        res = pane.query_one("#bench-results", DataTable)
        ddtree = _named(res, "local/ddtree")
        assert ddtree["tok/s (mean)"] == "133.5" and ddtree["Δ vs base"] == "-11.0%"  # one statistic
        assert ddtree["median"] == "129.2"  # the median, labelled as such
        assert (133.5 - 150.0) / 150.0 * 100 == -11.0
        per = pane.query_one("#bench-prompts", DataTable)
        assert _named(per, "local/ddtree|p1")["tok/s"] == "133.5"
        assert "last run from history (seed3" in str(pane.query_one("#bench-results-title", Static).render())
        await pilot.resize_terminal(80, 24)  # the compact columns keep the same statistic
        await pilot.pause()
        app.flush(force=True)
        await pilot.pause()
        ddtree = _named(res, "local/ddtree")
        assert ddtree["tok/s"] == "133.5" and ddtree["Δ vs base"] == "-11.0%"


@pytest.mark.slow
async def test_interrupted_run_is_marked() -> None:
    fleet = StaticFleet(snapshot(), bench_runs=[bench_run(status="interrupted")])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "INTERRUPTED: some prompts never ran" in text
        assert "⚠ interrupted" in text  # in the history table too


@pytest.mark.slow
async def test_during_a_new_run_the_old_results_are_labelled_previous() -> None:
    fleet = StaticFleet(snapshot(), bench_runs=[bench_run()])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(BenchPane)
        live = pane.live
        live.apply(RunStarted(run_id="r2", total=3, targets=[], prompts=["p1", "p2", "p3"]))
        for i, p in enumerate(("p1", "p2", "p3")):
            live.apply(PromptStarted(run_id="r2", service="local/dflash", prompt_id=p, repeat=0, seq=i))
        live.apply(
            TokensReceived(
                run_id="r2", service="local/dflash", prompt_id="p3", repeat=0, seq=2, tokens=12,
                elapsed_s=0.25, tok_s=48.0,
            )
        )  # fmt: skip
        await pilot.press("5")
        app._dirty.add("bench")
        app.flush()
        await pilot.pause()
        title = str(pane.query_one("#bench-results-title", Static).render())
        assert title.startswith("previous run (seed3"), title
        table = pane.query_one("#bench-live", DataTable)
        assert str(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value) == "local/dflash|p3|0"
        row = _cells(table, "local/dflash|p3|0")
        assert row[1] == "p3 #1"  # 1-based, as headless prints it
        assert row[4] == "250ms" and row[5] == "streaming"  # TTFT while streaming


@pytest.mark.slow
async def test_a_headless_run_appears_while_the_tui_is_open(tmp_path: Path) -> None:
    path = tmp_path / "bench-history.jsonl"

    class HistoryFleet(StaticFleet):
        history_path = path

        def bench_history(self) -> list[Any]:
            return history.load(path)

    base = static_fleet()
    app = DDTreeApp(HistoryFleet(base.snapshot(), base.profiles()))
    app.live = True  # the history watch runs; the frozen fleet starts nothing
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        hist = app.query_one("#bench-history", DataTable)
        assert hist.row_count == 0
        history.append(bench_run("headless-1"), path)  # what `ddtree-tui --run-bench` does
        await until(pilot, lambda: hist.row_count == 1, 10, "the headless run in the history table")
        assert "last run from history (seed3" in screen_text(app)
        await app.action_quit()


@pytest.mark.slow
async def test_history_keeps_per_request_and_aggregate_tok_s_in_their_own_labelled_columns() -> None:
    """Issue 29: the history's one `Best tok/s` column held per-request tok/s for plain runs and aggregate
    output throughput for load runs. Each is a column of its own now, for every kind of run."""
    from ddtree_tui.bench.load import parse_load
    from ddtree_tui.bench.results import LevelResult, LevelService, LoadRun

    plain = bench_run("plain-1")
    plain = plain.model_copy(update={"summary": [
        s.model_copy(update={"tok_s_mean": t, "output_throughput": o})
        for s, t, o in zip(plain.summary, (151.0, 134.0), (150.5, 133.0), strict=True)
    ]})  # fmt: skip
    lv = LevelResult(level=8.0, label="c=8", started_at=plain.started_at, services=[
        LevelService(service="local/dflash", algorithm="dflash", mode=None, n=16, tok_s_mean=41.5, output_throughput=612.0),
    ])  # fmt: skip
    load = LoadRun(id="load-1", status="complete", started_at=plain.started_at, load=parse_load("concurrency:8"),
                   load_text="concurrency:8", prompt_set="seed3", levels=[lv])  # fmt: skip
    fleet = StaticFleet(snapshot(), bench_runs=[plain, load])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        hist = app.query_one(BenchPane).query_one("#bench-history", DataTable)
        labels = [str(c.label) for c in hist.columns.values()]
        assert "Best tok/s" not in labels and {"best tok/s/req", "best out tok/s"} <= set(labels)
        keys = [str(k.value) for k in hist.rows]
        rows = {k.split("#")[0]: _named(hist, k) for k in keys}
        assert rows["plain-1"]["best tok/s/req"] == "151.0" and rows["plain-1"]["best out tok/s"] == "150.5"
        assert rows["load-1"]["best tok/s/req"] == "41.5" and rows["load-1"]["best out tok/s"] == "612.0"
