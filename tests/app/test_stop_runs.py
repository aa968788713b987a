"""Issue 28: what runs can be stopped from the keyboard at 80×24, and stopping saves what was measured exactly
as Ctrl-C does headless (the run goes into the history marked interrupted). Real work: the demo's simulated
services in child processes, the real core."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button

from ddtree_tui.bench import history
from ddtree_tui.bench.models import BenchRequest
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import demo_pilot
from tests.app.presskeys import press
from tests.app.screen_text import screen_text, until


@pytest.mark.timeout(150)
@pytest.mark.slow
async def test_x_stops_a_soak_and_esc_stops_a_plain_run_saving_what_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with demo_pilot(tmp_path, monkeypatch, size=(80, 24)) as pilot:
        app = pilot.app
        assert isinstance(app, DDTreeApp)
        bench = app.query_one(BenchPane)
        bench.soak_s, bench.soak_window_s = 120.0, 1.0  # far longer than the test waits
        await press(pilot, "5", "O")
        await until(pilot, lambda: len(bench.live.levels) >= 2, 40, "two soak windows measured")
        assert bench.query_one("#bench-stop", Button).display  # the visible Stop while it runs
        assert "Stop (x)" in screen_text(app)
        await press(pilot, "x")
        await until(pilot, lambda: not app.bench.running, 20, "the soak to stop")
        await until(pilot, lambda: "soak stopped" in bench.live.status, 5, "the pane to say so")
        soaks = history.load_shapes(tmp_path / "history.jsonl")
        assert len(soaks) == 1 and soaks[0].kind == "soak" and soaks[0].status == "interrupted"
        assert len(soaks[0].windows) >= 2  # what was measured is kept
        await pilot.pause(0.3)
        assert not bench.query_one("#bench-stop", Button).display

        # a plain run: far more requests than the test waits for; Esc in the Bench pane stops it
        refs = [f"{h.name}/{s.name}" for h in app.fleet.snapshot().hosts for s in h.services]
        app.start_bench(BenchRequest(prompts="seed3", refs=refs, repeats=200, max_new_tokens=32))
        await until(pilot, lambda: bench.live.done >= 2, 40, "two requests measured")
        bench.query_one("#bench-live").focus()
        await press(pilot, "escape")
        await until(pilot, lambda: not app.bench.running, 20, "the plain run to stop")
        await until(pilot, lambda: "⚠ stopped" in screen_text(app), 5, "the stopped run marked")
        runs = history.load_tail(tmp_path / "history.jsonl")
        assert len(runs) == 1 and runs[0].status == "interrupted"
        assert 2 <= len(runs[0].results) < 200 * len(refs)
        # agentic sessions (no stop hook in their engine): the worker ends, the pane says nothing was kept
        await press(pilot, "A")
        await until(pilot, lambda: app.bench.running, 10, "agentic sessions to start")
        await press(pilot, "x")
        await until(pilot, lambda: not app.bench.running, 20, "the sessions to stop")
        assert "agentic sessions stopped" in bench.live.status
        await until(
            pilot, lambda: all(w.is_finished for w in app.workers if w.group == "bench"), 10, "no worker"
        )
        await pilot.press("x")  # nothing runs now: says so, and nothing breaks
        await pilot.pause(0.2)
        assert any("nothing is running" in n.message for n in app._notifications)
