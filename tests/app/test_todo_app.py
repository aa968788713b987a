"""The todo pane through the UI: add, toggle and delete reach the file on disk through the fleet (its one
writer), and an auto-complete merge the fleet makes at the same moment, or an editor's write, loses nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Input

from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.todo_edit import TodoEditScreen
from tests.app.screen_text import until
from tests.bench_runs import bench_run, write_history


def _disk(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    doc = json.loads(path.read_text())
    items: list[dict[str, Any]] = doc["todos"] if isinstance(doc, dict) else doc
    return items


def _on_disk(path: Path) -> list[tuple[str, str]]:
    return [(t["content"], t["status"]) for t in _disk(path)]


async def _add(pilot: Any, app: DDTreeApp, content: str, check: str = "") -> None:
    await pilot.press("t")
    await until(pilot, lambda: isinstance(app.screen, TodoEditScreen), 5, "the new-todo dialog")
    app.screen.query_one("#check", Input).value = check
    app.screen.query_one("#content", Input).value = content
    app.screen.query_one("#content", Input).focus()
    await pilot.press("enter")


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_add_toggle_delete_through_the_ui_and_a_concurrent_auto_complete(tmp_path: Path) -> None:
    todos, hist = tmp_path / "todos.json", tmp_path / "h.jsonl"
    fleet = Fleet([], todos_path=todos, history_path=hist, telemetry=False, auto_complete_todos=True)
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("4")
            await _add(pilot, app, "write notes")
            await until(pilot, lambda: _on_disk(todos) == [("write notes", "pending")], 10, "the first item")
            await _add(pilot, app, "bench dflash", "bench local/dflash seed3 ok")
            want = [("write notes", "pending"), ("bench dflash", "pending")]
            await until(pilot, lambda: _on_disk(todos) == want, 10, "the second item")
            assert _disk(todos)[1]["check"] == "bench local/dflash seed3 ok"
            # the snapshot carries the list (the pane and `status --json` read it there)
            assert [it.content for it in fleet.snapshot().todos.items] == ["write notes", "bench dflash"]

            # the evidence appears; the fleet's auto-complete and the user's toggle land together
            write_history(hist, [bench_run("seed3", [("local/dflash", None)])])
            table = app.query_one("#todos-table", DataTable)
            table.focus()
            table.move_cursor(row=0)
            await asyncio.gather(fleet.refresh_todos(), pilot.press("space"))
            want = [("write notes", "completed"), ("bench dflash", "completed")]
            await until(pilot, lambda: _on_disk(todos) == want, 10, "the toggle and the auto-complete")

            # an editor adds an item meanwhile; the next UI edit merges with it instead of overwriting
            doc = json.loads(todos.read_text())
            doc["todos"].append({"content": "from the editor", "status": "pending", "priority": "low"})
            todos.write_text(json.dumps(doc))
            await until(pilot, lambda: len(fleet.snapshot().todos.items) == 3, 10, "the editor's item")
            table.move_cursor(row=0)
            await pilot.press("space")  # back to pending
            want = [("write notes", "pending"), ("bench dflash", "completed"), ("from the editor", "pending")]
            await until(pilot, lambda: _on_disk(todos) == want, 10, "the toggle merged with the editor")

            # delete asks first (Cancel is the default); Delete removes it from the file
            table.move_cursor(row=0)
            await pilot.press("ctrl+d")  # delete is ctrl+d (issue 28)
            confirm = await until(
                pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen, 5, "the ask"
            )
            confirm.action_answer(True)
            want = [("bench dflash", "completed"), ("from the editor", "pending")]
            await until(pilot, lambda: _on_disk(todos) == want, 10, "the delete")
            await until(pilot, lambda: table.row_count == 2, 5, "the pane to follow")
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
