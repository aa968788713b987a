"""The whole story in the demo, driven by keys through the real core: launch dflash and ddtree (simulated
SGLang servers, real child processes and HTTP on 127.0.0.1) -> both ready -> seed3 bench -> the comparison
table shows both with deltas -> Cancel on the kill dialog keeps it running -> kill with confirm -> stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import DataTable

from ddtree_tui.config import load_profiles
from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import fast_sims
from tests.app.presskeys import opened, press
from tests.app.screen_text import screen_text, until
from tests.app.test_tmux import demo_profile


def _state(app: DDTreeApp, svc: str) -> str | None:
    s = app.fleet.snapshot().service("local", svc)
    return s.state if s else None


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_demo_story(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo profile's workdir is relative
    fast_sims(monkeypatch)
    fleet = Fleet(
        load_profiles(
            [demo_profile(tmp_path)]
        ),  # the shipped demo on free ports (parallel runs hold 31010/1)
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "history.jsonl",
        demo=True,
    )
    app = DDTreeApp(fleet, demo=True, refresh_hz=10)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "● connected" in screen_text(app), 15, "the host to connect")
            assert "DEMO" in screen_text(app) and "REPLAY" in screen_text(app)
            # launch both: the cursor starts on dflash, `down` selects ddtree-shadow
            await press(pilot, "3", "l", "down", "l")
            await until(
                pilot,
                lambda: _state(app, "dflash") == "ready" and _state(app, "ddtree-shadow") == "ready",
                40,
                "both services ready",
            )
            await until(pilot, lambda: screen_text(app).count("● ready") == 2, 5, "both badges ready")
            # benchmark: `b` preselects the ready services; ctrl+r runs seed3
            await press(pilot, "b")
            await opened(pilot, BenchSetupScreen)
            await press(pilot, "ctrl+r")
            bench = app.query_one(BenchPane)
            await until(pilot, lambda: bench.live.rows and bench.live.running, 20, "the bench to stream")
            await until(pilot, lambda: bench.live.run is not None and not bench.live.running, 60, "bench end")
            await pilot.pause(0.3)
            results = bench.query_one("#bench-results", DataTable)
            assert sorted(str(k.value) for k in results.rows) == ["local/ddtree-shadow", "local/dflash"]
            for key in results.rows:
                row = [str(c) for c in results.get_row(key)]
                assert row[-1] == "0", row  # no failed requests
                assert row[3] == "baseline" or row[3].endswith("%"), row  # a delta vs the baseline
            text = screen_text(app)
            assert "baseline" in text and "%" in text and "shadow-linear" in text
            # kill dflash: Cancel (the default) keeps it running
            await press(pilot, "3")
            pane = app.query_one("#pane-3")
            await until(pilot, lambda: pane.has_focus_within, 10, "the services pane focused")
            pane.select_ref("local/dflash")  # type: ignore[attr-defined]
            await until(pilot, lambda: app.selected_service == "local/dflash", 10, "dflash selected")
            await press(pilot, "ctrl+k")  # kill is ctrl+k (issue 28: k moves)
            await opened(pilot, ConfirmScreen)
            await press(pilot, "enter")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), 10, "the dialog closed")
            await pilot.pause(1.0)  # time for a kill, were one sent, to show
            assert _state(app, "dflash") == "ready"
            # confirm this time
            await press(pilot, "ctrl+k")  # kill is ctrl+k (issue 28: k moves)
            await opened(pilot, ConfirmScreen)
            await press(pilot, "tab", "enter")
            await until(pilot, lambda: _state(app, "dflash") == "stopped", 20, "dflash stopped")
            await until(pilot, lambda: "○ stopped" in screen_text(app), 5, "the stopped badge")
            assert _state(app, "ddtree-shadow") == "ready"
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
