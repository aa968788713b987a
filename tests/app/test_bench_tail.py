"""Issue 26 in the TUI at 80×24: the bench dialog's run options (energy, spec details with its API, slices,
server metrics, cache flush, the saturation test, the seed) checked by the CLI's own rules
(bench/runoptions.py), and on the demo the Bench pane's lines for what a run carries once it is finished
(J/token, accept length, server vs client TTFT, cache flushes, the saturation test) and a cancelled
request's row saying so."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Label, Select

from ddtree_tui.bench.load import LoadError
from ddtree_tui.bench.models import BenchRequest, ShapeRequest
from ddtree_tui.bench.runoptions import run_options
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.demo import demo_pilot
from tests.app.presskeys import press
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import static_fleet
from tests.app.test_dialogs_fit import fully_shown

OPTION_IDS = ("opt-energy", "opt-spec-details", "opt-server-metrics", "opt-flush-cache", "opt-api", "opt-slice",
              "opt-metrics-every", "opt-saturation", "opt-seed")  # fmt: skip


async def _dialog(pilot: Pilot[None], got: list[Any]) -> BenchSetupScreen:
    app = pilot.app
    refs = [(f"{h.name}/{s.name}", "ready") for h in app.fleet.snapshot().hosts for s in h.services]
    app.push_screen(BenchSetupScreen(refs, [refs[0][0]]), got.append)
    await until(pilot, lambda: isinstance(app.screen, BenchSetupScreen), 5, "the bench dialog")
    await until(pilot, lambda: app.screen.query("#opt-seed"), 5, "the dialog's fields")
    return app.screen  # type: ignore[return-value]


def _error(dialog: BenchSetupScreen) -> str:
    return str(dialog.query_one("#load-error", Label).render())


def _cli_words(kind: Any, **kw: Any) -> str:
    """What --run-bench says for the same options (the one copy of the rules)."""
    with pytest.raises(LoadError) as e:
        run_options(kind, **kw)
    return str(e.value)


async def test_the_dialog_options_fit_80x24_and_follow_the_cli_rules() -> None:
    app = DDTreeApp(static_fleet(), live=False)
    got: list[Any] = []
    async with app.run_test(size=(80, 24)) as pilot:
        dialog = await _dialog(pilot, got)
        for wid in OPTION_IDS:  # each option, in focus, is on screen with the buttons
            w = dialog.query_one(f"#{wid}")
            w.focus()
            for _ in range(3):  # the scroll to the focused field lands on a later refresh
                await pilot.pause()
            assert fully_shown(app, w), f"{wid} in focus but not on screen"
            assert fully_shown(app, dialog.query_one("#run"))
        # spec details on /generate: refused in place, in the CLI's words, everything kept
        dialog.query_one("#opt-spec-details", Checkbox).focus()
        await pilot.press("space")  # a keypress ticks it
        assert dialog.query_one("#opt-spec-details", Checkbox).value
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is dialog and _error(dialog) == _cli_words("plain", spec_details=True)
        # the saturation test on a plain run: the CLI's words again
        dialog.query_one("#opt-api", Select).value = "chat"
        dialog.query_one("#opt-saturation", Select).value = "trend"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is dialog and _error(dialog) == _cli_words("plain", saturation_test="trend")
        assert "--saturation-test" in _error(dialog)
        # a bad slice is named
        dialog.query_one("#opt-saturation", Select).clear()
        dialog.query_one("#opt-slice", Input).value = "5x"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is dialog and "--slice '5x'" in _error(dialog)
        # all of them given right: the request carries them
        dialog.query_one("#opt-slice", Input).value = "2s"
        dialog.query_one("#opt-metrics-every", Input).value = "0.5"
        dialog.query_one("#opt-seed", Input).value = "7"
        for wid in ("opt-energy", "opt-server-metrics", "opt-flush-cache"):
            dialog.query_one(f"#{wid}", Checkbox).value = True
        await pilot.press("ctrl+r")
        await until(pilot, lambda: bool(got), 5, "the dialog to close")
        p = got[-1]["params"]
        assert isinstance(p, BenchRequest) and not isinstance(p, ShapeRequest)
        assert (p.api, p.spec_details, p.energy, p.server_metrics, p.flush_cache) == (
            "chat",
            True,
            True,
            True,
            True,
        )
        assert (p.slice_s, p.server_metrics_every_s, p.seed) == (2.0, 0.5, 7)
        assert p.sampling().spec_details  # it reaches the request (an OpenAI API asks for the details)
        # a ladder takes the saturation test; a soak takes energy no more than --run-bench does
        dialog = await _dialog(pilot, got)
        dialog.query_one("#load", Input).value = "concurrency:1,2"
        dialog.query_one("#requests", Input).value = "4"
        dialog.query_one("#opt-saturation", Select).value = "either"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: len(got) == 2, 5, "the dialog to close")
        shape = got[-1]["shape"]
        assert isinstance(shape, ShapeRequest) and shape.saturation_test == "either" and shape.requests == 4
        dialog = await _dialog(pilot, got)
        dialog.query_one("#soak", Input).value = "30s"
        dialog.query_one("#opt-energy", Checkbox).value = True
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is dialog and _error(dialog) == _cli_words("soak", energy=True)


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_the_pane_shows_what_a_finished_run_carries_and_cancelled_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with demo_pilot(tmp_path, monkeypatch, size=(80, 24)) as pilot:
        app: Any = pilot.app
        bench = app.query_one(BenchPane)
        refs = [f"{h.name}/{s.name}" for h in app.fleet.snapshot().hosts for s in h.services]
        await press(pilot, "5")
        req = BenchRequest(
            refs=refs, max_new_tokens=48, energy=True, server_metrics=True, server_metrics_every_s=0.25,
            flush_cache=True, slice_s=1.0,
        )  # fmt: skip
        app.bench.start_bench(req)
        await until(pilot, lambda: bench.live.extras and not bench.live.running, 120, "the run's lines")
        await pilot.pause(0.5)
        run = bench.live.run
        assert run is not None and run.cache_flushes and run.server_metrics  # on the finished run's event
        lines = bench.live.extras
        assert lines[0].startswith(("J/token: ", "energy: ")), lines
        by = {ln.split(":", 1)[0]: ln for ln in lines}
        assert by["cache flushes"].startswith(f"cache flushes: {len(refs)}/{len(refs)} ok (before run)")
        ttft = by["TTFT p50 ms server/client"]
        # each service's last three 1 s windows, from the run's own slices (w0 first only while the run is
        # short: on a busy machine it spans more seconds, and a service may finish nothing in the first one)
        assert run.slices is not None
        parts = {p.split(" ", 1)[0]: p for p in ttft.split(": ", 1)[1].split("; ")}
        for sm in run.server_metrics:
            mine = [r.index for r in run.slices.rows if r.service == sm.service]
            part = parts[sm.service]
            assert mine and [int(w) for w in re.findall(r" w(\d+) ", part)] == mine[-3:], (mine, ttft)
            assert part.endswith(f"({sm.source})") and ("earlier" in part) == (len(mine) > 3), (mine, ttft)
        assert by["accept length median"].count("local/") == len(refs)
        med = {a.service: a.median for a in run.acceptance}
        assert f"{refs[0]} {med[refs[0]]:.2f}" in by["accept length median"]  # the JSON's figure
        text = screen_text(app)
        assert "cache flushes:" in text and "accept length median:" in text, text
        # a ladder with cancellation: cancelled rows say so, not counted; the saturation test's verdict
        # 16 distinct prompts (one row each in the live list), a quarter of them closed after 0.05 s
        shape = ShapeRequest(
            load="rate:8", requests=16, max_new_tokens=64, warmup=0, cancel="0.25,0.05", seed=3,
            prompts="gsp:1,16,32,16", saturation_test="either", saturation_window=10,
        )  # fmt: skip
        app.bench.start_shape(None, shape)
        await until(pilot, lambda: bench.live.load_run is not None, 120, "the ladder to finish")
        await pilot.pause(0.5)
        lr = bench.live.load_run
        w = lr.workload
        assert w is not None and w.cancelled, "the seed picks some requests"
        states = [r.get("state", "") for r in bench.live.rows.values()]
        cancelled = [s for s in states if s.startswith("cancelled")]
        assert cancelled and all(s == "cancelled after 0.05 s" for s in cancelled), states
        assert not any(s in ("sending", "streaming") or s.startswith("error") for s in states), states
        assert bench.live.done == len(lr.results)  # counted apart
        assert any(ln.startswith("saturation test: ") for ln in bench.live.extras), bench.live.extras
