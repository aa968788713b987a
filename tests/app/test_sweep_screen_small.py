"""Issue 28: the Sweep screen at 80×24 against a real simulated service: a title and key hints, a points grid
that fills as points finish (the best marked ★), Stop from the keyboard, and the same files as the headless
sweep (sweep.json, results.json, results.csv); the service is put back as it was (stopped)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from textual.widgets import DataTable

from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.sweep_screen import KEY_HINTS, SweepScreen
from tests.app.screen_text import screen_text, until
from tests.fixtures.services.support import cleanup_workdir
from tests.util import free_port


@pytest.mark.timeout(150)
@pytest.mark.slow
async def test_sweep_screen_at_80x24_fills_its_grid_stops_and_writes_the_headless_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    wd = tmp_path / "wd"
    prof_path = tmp_path / "h.toml"
    prof_path.write_text(
        f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n\n[[service]]\nname = "dd"\n'
        f'algorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = {free_port()}\n'
        "budget = 8\nstartup_timeout = 30\n[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )
    fleet = Fleet([load_profile(prof_path)], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl",
                  telemetry=False, probe_interval=0.3)  # fmt: skip
    app = DDTreeApp(fleet, refresh_hz=10)
    out = tmp_path / "sweep-out"
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "● connected" in screen_text(app), 15, "the host to connect")
            await pilot.press("3", "w")
            await until(pilot, lambda: isinstance(app.screen, SweepScreen), 5, "the sweep screen")
            screen = app.screen
            assert isinstance(screen, SweepScreen)
            screen.out = out
            text = screen_text(app)
            assert "Sweep · h/dd" in text.splitlines()[0]  # a title
            assert KEY_HINTS in text  # the keys, whole, at 80 columns
            screen.query_one("#sweep-dims").value = "budget=8,16,24,32,48"  # type: ignore[attr-defined]
            screen.query_one("#sweep-repeats").value = "1"  # type: ignore[attr-defined]
            screen.query_one("#sweep-tokens").value = "16"  # type: ignore[attr-defined]
            await pilot.press("ctrl+r")
            await until(pilot, lambda: screen.running, 5, "the sweep to start")
            grid = screen.query_one("#sweep-grid", DataTable)
            assert grid.row_count == 5
            assert "budget=48" in screen_text(app)  # the rows are on screen, not just the header

            def done_rows() -> list[list[str]]:
                rows = [[str(c) for c in grid.get_row(k)] for k in grid.rows]
                return [r for r in rows if r[2].endswith("done")]

            await until(pilot, lambda: done_rows() and done_rows()[0][3], 90, "a point measured, in the grid")
            assert "★" in done_rows()[0][7]  # the only measured point is the best so far
            await pilot.press("x")
            await until(pilot, lambda: not screen.running, 60, "the sweep to stop")
            assert len(done_rows()) < 5  # it stopped short
            for name in ("sweep.json", "results.json", "results.csv"):
                assert (out / name).is_file(), name
            state = json.loads((out / "sweep.json").read_text())
            assert state["stopped_by"] == "Stop (TUI)"
            res = json.loads((out / "results.json").read_text())
            assert res["best"] is not None and res["ref"] == "h/dd"
            assert "stopped:" in screen_text(app).splitlines()[0]
            # it was stopped before the sweep: stopped again after
            svc = lambda: fleet.snapshot().host("h").services[0].state  # noqa: E731
            await until(pilot, lambda: svc() in ("stopped",), 20, "the service put back (stopped)")
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
        cleanup_workdir(wd)
