"""The Sweep screen through the real core: key w on the selected service opens it, a budget sweep runs against a
real simulated service (grid rows go to done, the best and the Pareto chart appear), Apply asks first with
Cancel as the default (the profile is untouched), then writes the best into the profile keeping its comments."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from ddtree_tui.config import load_profile, parse_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.sim.config import TIME_SCALE_ENV
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.palette import palette_commands
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.sweep_screen import SweepScreen
from tests.app.screen_text import screen_text, until
from tests.fixtures.services.support import cleanup_workdir
from tests.util import free_port


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_sweep_screen_runs_and_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    # the simulators the fleet launches run 10x fast: the screen shows what was measured, whatever the pace
    monkeypatch.setenv(TIME_SCALE_ENV, "10")
    wd = tmp_path / "wd"
    prof_path = tmp_path / "h.toml"
    prof_path.write_text(
        f'# the lab host\nname = "h"\naddress = "local"\nworkdir = "{wd}"\n\n[[service]]\nname = "dd"\n'
        f'algorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = {free_port()}\n'
        "budget = 8  # by hand\nstartup_timeout = 30\n[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )
    original = prof_path.read_text()
    fleet = Fleet([load_profile(prof_path)], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl",
                  telemetry=False, probe_interval=0.3)  # fmt: skip
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            await until(pilot, lambda: "● connected" in screen_text(app), 15, "the host to connect")
            assert any(t == "sweep h/dd" for t, _, _ in palette_commands(app))
            await pilot.press("3")
            await pilot.pause()
            app.query_one("#pane-3").select_ref("h/dd")  # type: ignore[attr-defined]
            await pilot.pause()
            await pilot.press("w")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, SweepScreen) and screen.ref == "h/dd"
            screen.query_one("#sweep-dims", Input).value = "budget=8,32 env.SGLANG_DDTREE_MAX_TOPK=2"
            screen.query_one("#sweep-repeats", Input).value = "1"
            screen.query_one("#sweep-tokens", Input).value = "24"
            await pilot.press("ctrl+r")
            await until(pilot, lambda: screen.running, 5, "the sweep to start")
            await until(pilot, lambda: not screen.running, 100, "the sweep to finish")
            await pilot.pause(0.3)
            grid = screen.query_one("#sweep-grid", DataTable)
            statuses = [str(grid.get_row(k)[2]) for k in grid.rows]
            assert statuses == ["● done", "● done"], statuses
            best = str(screen.query_one("#sweep-best", Static).render())
            assert best.startswith("best: #"), best
            assert screen.results is not None and screen.results.best is not None
            assert "tok/s" in str(screen.query_one("#sweep-chart", Static).render())
            # Apply: Cancel is the default, nothing written
            await pilot.press("ctrl+a")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("enter")
            await pilot.pause(0.5)
            assert prof_path.read_text() == original
            # confirm this time
            await pilot.press("ctrl+a")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.click("#confirm")
            await until(pilot, lambda: prof_path.read_text() != original, 10, "the profile to be written")
            new = prof_path.read_text()
            assert "# the lab host" in new and "# by hand" in new
            chosen = screen.results.points[screen.results.best].overrides
            svc = parse_profile(new).get_service("dd")
            assert (
                svc is not None
                and svc.budget == int(chosen["budget"])
                and svc.env == {"SGLANG_DDTREE_MAX_TOPK": "2"}
            )
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
        cleanup_workdir(wd)
