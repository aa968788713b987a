"""The generic table pane keeps the cursor on the same row key when rows come and go or the column set
changes (wide to narrow), and sorts by a column without a new view."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import DataTable

from ddtree_tui.ui.views import Row, TableView, styled
from ddtree_tui.ui.widgets.table import TablePane


class Pane(TablePane):
    pane_number = 9
    pane_title = "Test"
    sortable = True

    def compose(self) -> ComposeResult:
        yield DataTable(cursor_type="row")


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Pane()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()


def view(keys: list[str], columns: tuple[str, ...] = ("Name", "Size")) -> TableView:
    rows = tuple(Row(k, (styled(k, "accent"), str(len(k) * 10))[: len(columns)]) for k in keys)
    return TableView(columns, rows, "9 Test")


def keys_of(table: DataTable[Any]) -> list[str]:
    return [str(k.value) for k in table.rows]


async def test_cursor_stays_on_its_key_across_updates_and_column_changes() -> None:
    app = Host()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(Pane)
        pane.show_table(view(["aa", "b", "cccc"]))
        await pilot.pause()
        pane.select_key("cccc")
        assert pane.selected_key() == "cccc"
        pane.show_table(view(["new", "aa", "b", "cccc"]))  # a row arrives above it
        assert pane.selected_key() == "cccc"
        pane.show_table(view(["x", "new", "aa", "b", "cccc"], ("Name",)))  # and the narrow column set
        assert pane.selected_key() == "cccc"
        assert pane.border_title == "9 Test"


async def test_sort_by_a_column_reuses_the_last_view() -> None:
    app = Host()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(Pane)
        table = pane.query_one(DataTable)
        pane.show_table(view(["aa", "b", "cccc"]))
        await pilot.pause()
        pane.sort_by("Size")
        assert keys_of(table) == ["b", "aa", "cccc"]
        assert [str(c.label) for c in table.columns.values()] == ["Name", "Size ▲"]
        pane.reverse_sort()
        assert keys_of(table) == ["cccc", "aa", "b"]
        # `o` then 0: back to the view's own order (was: cycle_sort past the last column)
        await pilot.press("o", "0")
        await pilot.pause()
        assert keys_of(table) == ["aa", "b", "cccc"] and pane.sort_col is None
