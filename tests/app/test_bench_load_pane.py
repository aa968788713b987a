"""The Bench pane runs the load shapes through the real core on the demo (simulated services in child
processes): a concurrency ladder with its per-level table, chart points and verdicts, then agentic
sessions, then a soak, started from keys in the pane (one demo fleet, both services launched once)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Sparkline

from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import demo_pilot
from tests.app.presskeys import press
from tests.app.screen_text import screen_text, until


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_bench_pane_runs_a_ladder_agentic_sessions_and_a_soak_that_never_passes_100_percent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with demo_pilot(tmp_path, monkeypatch) as pilot:
        app = pilot.app
        bench = app.query_one(BenchPane)
        bench.load_text = "concurrency:1,2,4"
        await press(pilot, "5", "C")
        await until(pilot, lambda: bench.live.phase.startswith("level"), 20, "a level in progress")
        await until(pilot, lambda: bench.live.load_run is not None, 90, "the ladder to finish")
        await pilot.pause(0.5)
        run = bench.live.load_run
        assert [lv.label for lv in run.levels] == ["c=1", "c=2", "c=4"] and run.failed == 0
        levels = bench.query_one("#bench-levels", DataTable)
        assert levels.row_count == 6  # 3 levels × 2 services
        assert len(bench.live.series_thr) == 3 and bench.live.series_thr[2] > bench.live.series_thr[0]
        assert list(bench.query_one("#bench-spark-thr", Sparkline).data or []) == bench.live.series_thr
        assert any("local/ddtree-shadow tok/s per request" in v for v in bench.live.verdicts)
        text = screen_text(app)
        assert "load finished" in text and "c=4" in text
        await press(pilot, "A")
        await until(pilot, lambda: bench.live.phase.startswith("agentic"), 20, "agentic turns")
        await until(
            pilot, lambda: bench.live.status.startswith("agentic finished"), 90, "the sessions to end"
        )
        assert "0 failed" in bench.live.status
        assert max(bench.live.series_thr) > 0  # cached tokens seen across turns
        await _soak_counts_requests_without_a_total(pilot)


async def _soak_counts_requests_without_a_total(pilot: Pilot[None]) -> None:
    """Issue 29: the TUI soak showed `running · 9/3 requests` (the soak's runner plans one pass of the
    prompts, then keeps sending for its duration). The pane counts a soak's requests without a total."""
    import re

    app = pilot.app
    bench = app.query_one(BenchPane)
    bench.soak_s, bench.soak_window_s = 4.0, 1.0
    await press(pilot, "5")
    seen: list[str] = []

    def finished() -> bool:
        seen.append(bench.live.status)
        return bench.live.status.startswith("soak finished")

    await press(pilot, "O")
    await until(pilot, finished, 90, "the soak to finish")
    counted = [s for s in seen if s.endswith(" requests")]
    assert counted, seen  # it counted while it ran
    for s in seen:
        m = re.search(r"(\d+)/(\d+) requests", s)
        assert m is None, s  # no planned total for a time-bounded run: never `9/3`
    assert bench.live.fraction is None and bench.live.done > 0
