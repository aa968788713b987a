"""Issue 28: the dialogs work at 80×24. The bench dialog scrolls to the field in focus and keeps Cancel/Run on
screen, and a bad entry is said in place with everything typed kept; the todo dialog keeps what was typed when
its evidence check is bad (it used to close and throw it away)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widget import Widget
from textual.widgets import Button, Input, Label

from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.screens.todo_edit import TodoEditScreen
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import static_fleet


def fully_shown(app: DDTreeApp, w: Widget) -> bool:
    """Every cell of `w` is on the screen (not scrolled away, not clipped by its container)."""
    visible = app.screen._compositor.visible_widgets
    if w not in visible:
        return False
    region, clip = visible[w]
    return bool(region.area) and clip.intersection(region) == region


@pytest.mark.slow
async def test_bench_dialog_at_80x24_scrolls_to_each_field_and_reaches_run() -> None:
    app = DDTreeApp(static_fleet(), live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchSetupScreen), 5, "the bench dialog")
        dialog = app.screen
        run, cancel = dialog.query_one("#run", Button), dialog.query_one("#cancel", Button)
        assert fully_shown(app, run) and fully_shown(app, cancel)  # from the start, at 80×24
        seen: list[str] = []
        for _ in range(40):  # Tab through every field: each one in focus is on screen
            await pilot.press("tab")
            await pilot.pause()
            w = app.focused
            assert w is not None
            assert fully_shown(app, w), f"{w.id} in focus but not on screen"
            assert fully_shown(app, run)  # the buttons never scroll away
            seen.append(str(w.id))
            if w.id == "run":
                break
        for field in ("requests", "duration", "slo", "soak", "window", "sessions", "think-time", "run"):
            assert field in seen, seen
        # the load-shape hint is whole once scrolled to
        dialog.query_one("#load", Input).focus()
        await pilot.pause()
        hint = next(w for w in dialog.query(Label) if "load shape" in str(w.render()))
        assert fully_shown(app, hint) and "| sweep" in screen_text(app), screen_text(app)
        # a bad load shape: said in place, the dialog stays with what was typed, Run still reachable
        dialog.query_one("#load", Input).value = "bogus:1"
        dialog.query_one("#requests", Input).value = "16"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.screen is dialog
        err = str(dialog.query_one("#load-error", Label).render())
        assert "bogus" in err and fully_shown(app, dialog.query_one("#load-error")), screen_text(app)
        assert dialog.query_one("#load", Input).value == "bogus:1"
        assert dialog.query_one("#requests", Input).value == "16"
        assert fully_shown(app, run)


@pytest.mark.timeout(60)
@pytest.mark.slow
async def test_a_bad_evidence_check_keeps_what_was_typed(tmp_path: Path) -> None:
    todos = tmp_path / "todos.json"
    fleet = Fleet([], todos_path=todos, history_path=tmp_path / "h.jsonl", telemetry=False)
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4", "t")
            await until(pilot, lambda: isinstance(app.screen, TodoEditScreen), 5, "the new-todo dialog")
            dialog = app.screen
            await pilot.press(*"rerun the bench")
            await pilot.press("tab", "tab")
            assert app.focused is dialog.query_one("#check", Input)
            await pilot.press(*"service nothost ready", "enter")
            await pilot.pause()
            assert app.screen is dialog  # still open
            err = dialog.query_one("#todo-error", Label)
            assert fully_shown(app, err) and "bad check" in str(err.render())
            assert dialog.query_one("#content", Input).value == "rerun the bench"
            assert dialog.query_one("#check", Input).value == "service nothost ready"
            assert not todos.exists() or "rerun" not in todos.read_text()
            dialog.query_one("#check", Input).value = "service local/dflash ready"
            await pilot.press("enter")
            await until(pilot, lambda: todos.exists() and "rerun" in todos.read_text(), 10, "the saved item")
            doc = json.loads(todos.read_text())
            items = doc["todos"] if isinstance(doc, dict) else doc
            assert items[-1]["check"] == "service local/dflash ready"
    finally:
        await fleet.stop()
