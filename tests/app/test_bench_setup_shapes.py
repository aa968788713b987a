"""The bench dialog (b) picks a load shape: a concurrency ladder and a poisson rate typed into its load fields
run on the demo through Fleet.run_load_shape, and the per-level table and the verdicts appear; the soak key O
(shortened through the pane's settable duration) shows windows and a live chart that grows; bad load text is
named in the dialog, which stays open. Every run lands in the history and the pane's history list."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Label, SelectionList, Sparkline

from ddtree_tui.bench.results import SoakRun
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import demo_pilot
from tests.app.presskeys import press
from tests.app.screen_text import screen_text, until
from tests.app.test_dashboard import static_fleet


async def _fill(pilot: Pilot[None], fields: dict[str, str]) -> list[str]:
    """Open the dialog (b), type each field, run (ctrl+r); the services that were ticked."""
    await press(pilot, "b")

    def dialog() -> bool:  # mounted, and its first focus given (a focus moved before that is taken back)
        screen = pilot.app.screen
        return isinstance(screen, BenchSetupScreen) and screen.focused is not None

    await until(pilot, dialog, 10, "the bench dialog, focused")
    ticked = pilot.app.screen.query_one(SelectionList).selected
    for field, text in fields.items():
        inp = pilot.app.screen.query_one(f"#{field}", Input)
        inp.focus()
        await until(pilot, lambda i=inp: pilot.app.focused is i, 10, f"the {field} field focused")
        await press(pilot, *text)
        assert inp.value == text
    await press(pilot, "ctrl+r")  # handled when press returns: the dialog has closed or named an error
    return list(ticked)


@pytest.mark.slow
@pytest.mark.timeout(200)
async def test_dialog_runs_a_ladder_and_a_poisson_rate_then_o_soaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with demo_pilot(tmp_path, monkeypatch) as pilot:
        app = pilot.app
        bench = app.query_one(BenchPane)
        levels = bench.query_one("#bench-levels", DataTable)

        ticked = await _fill(pilot, {"load": "concurrency:1,2", "requests": "4"})
        assert len(ticked) == 2, ticked
        await until(pilot, lambda: not isinstance(app.screen, BenchSetupScreen), 10, "the dialog to close")
        await until(pilot, lambda: bench.live.load_run is not None, 90, "the ladder to finish")
        await pilot.pause(0.5)
        run = bench.live.load_run
        assert run.load_text == "concurrency:1,2" and run.requests == 4 and run.failed == 0
        assert [lv.label for lv in run.levels] == ["c=1", "c=2"]
        assert levels.row_count == 4  # 2 levels × 2 services
        assert bench.live.verdicts and all(v.startswith("c=") for v in bench.live.verdicts)
        text = screen_text(app)
        assert "load finished" in text and "knee" in text and "c=2" in text

        await _fill(pilot, {"load": "poisson:4,7", "duration": "2s", "slo": "ttft=2000ms"})
        await until(pilot, lambda: bench.live.load_run is not None, 90, "the poisson level to finish")
        await pilot.pause(0.5)
        run = bench.live.load_run
        assert run.load.kind == "poisson" and run.load.seed == 7 and run.duration_s == 2.0
        assert run.slo is not None and run.slo.ttft_ms == 2000.0
        assert [lv.label for lv in run.levels] == ["4 req/s"] and levels.row_count == 2
        assert any(v.startswith("4 req/s") for v in bench.live.verdicts)
        assert "4 req/s" in screen_text(app)

        bench.soak_s, bench.soak_window_s = 6.0, 2.0
        await press(pilot, "5", "O")
        await until(pilot, lambda: bench.live.phase.startswith("soak window"), 20, "a soak window")
        spark = bench.query_one("#bench-spark-thr", Sparkline)
        await pilot.pause(0.3)
        first = list(spark.data or [])
        assert first and first == bench.live.series_thr
        await until(pilot, lambda: bench.live.status.startswith("soak finished"), 40, "the soak to end")
        await pilot.pause(0.5)

        # one point and one row a service per window of the finished soak: 3 (6 s of 2 s windows) on an idle
        # machine; a busy one can run a window's last requests and probes past the soak's end (2 seen)
        def saved() -> SoakRun | None:  # the soak as appended to the history
            return next((r for r in reversed(app.fleet.bench_history()) if isinstance(r, SoakRun)), None)

        soak = await until(pilot, saved, 10, "the soak in the history")
        assert 2 <= (n := len({w.index for w in soak.windows})) <= 3, soak.windows
        assert len(bench.live.series_thr) == n and list(spark.data or []) == bench.live.series_thr
        assert len(list(spark.data or [])) > len(first)  # the chart grew as windows came in
        assert {r["label"] for r in bench.live.levels} == {f"w{i}" for i in range(n)}
        assert levels.row_count == 2 * n  # n windows × 2 services, taking turns
        assert "soak finished (complete)" in screen_text(app)
        # each run was appended to the history as it completed; the pane's history list shows them
        hist = bench.query_one("#bench-history", DataTable)

        def listed() -> list[str]:
            return [str(hist.get_row_at(i)[2]) for i in range(hist.row_count)]

        want = ["soak 6 s", "load poisson:4,7", "load concurrency:1,2"]
        await until(pilot, lambda: listed()[:3] == want, 10, "the runs in the history list")
        kinds = [getattr(r, "kind", "plain") for r in app.fleet.bench_history()]
        assert kinds == ["load", "load", "soak"]


@pytest.mark.slow
async def test_dialog_names_bad_load_text_and_stays_open() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(110, 44)) as pilot:
        await _fill(pilot, {"load": "concurrency:1,x"})
        assert isinstance(app.screen, BenchSetupScreen)
        err = str(app.screen.query_one("#load-error", Label).render())
        assert "concurrency 'x' is not a whole number" in err
        inp = app.screen.query_one("#load", Input)
        inp.value = "sync"
        app.screen.query_one("#soak", Input).value = "1m"
        app.screen.query_one("#requests", Input).value = "5"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert isinstance(app.screen, BenchSetupScreen)
        assert "a soak runs for its duration" in str(app.screen.query_one("#load-error", Label).render())
