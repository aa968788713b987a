"""A repaint does work only where something changed (issue 28: frame time went to re-rendering every visible
cell of every table on each tick). Counted, never timed: views synced into a table, rows rendered again."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.views import Row, TableView, styled
from ddtree_tui.ui.widgets.base import KeyedTable
from ddtree_tui.ui.widgets.gpus import GpusPane
from ddtree_tui.ui.widgets.hosts import HostsPane
from ddtree_tui.ui.widgets.services import ServicesPane
from ddtree_tui.ui.widgets.table import VIRTUAL_MIN_ROWS, TablePane
from tests.app.snapdata import static_fleet


class Pane(TablePane):
    pane_number = 9
    pane_title = "Test"

    def compose(self) -> ComposeResult:
        yield KeyedTable(cursor_type="row")


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Pane()


async def settled(pilot: Pilot[None], table: KeyedTable) -> int:
    """Row renders once the frames in flight are on screen (a resize or a first layout renders again)."""
    last = -1
    for _ in range(20):
        await pilot.pause(0.05)
        if table.row_renders == last:
            break
        last = table.row_renders
    return table.row_renders


def view(utils: list[int]) -> TableView:
    rows = tuple(Row(f"g{i}", (styled(f"g{i}", "accent"), f"{u}%")) for i, u in enumerate(utils))
    return TableView(("GPU", "Util"), rows, "9 Test")


@pytest.mark.slow
async def test_an_unchanged_dashboard_repaints_no_table() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panes: list[TablePane] = [
            app.query_one(HostsPane),
            app.query_one(GpusPane),
            app.query_one(ServicesPane),
        ]
        assert all(p.table_paints >= 1 for p in panes)
        paints = [p.table_paints for p in panes]
        renders = [p.query_one(KeyedTable).row_renders for p in panes]
        for _ in range(3):  # what the 1 Hz clock tick does: every fleet pane asked to paint again
            app.flush(force=True)
            await pilot.pause()
        assert [p.table_paints for p in panes] == paints
        assert [p.query_one(KeyedTable).row_renders for p in panes] == renders


async def test_one_changed_cell_renders_its_row_alone() -> None:
    app = Host()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(Pane)
        table = pane.query_one(KeyedTable)
        utils = [10 * i for i in range(20)]
        pane.show_table(view(utils))
        await settled(pilot, table)
        table.refresh()  # the table's first resize bumped its counter without a repaint: let that one happen
        first = await settled(pilot, table)
        assert first >= 20  # every visible row rendered
        pane.show_table(view(utils))  # the same view: nothing
        assert await settled(pilot, table) == first and pane.table_paints == 1
        utils[5] = 55  # one GPU moved (same width: no column resize)
        pane.show_table(view(utils))
        assert pane.table_paints == 2
        assert await settled(pilot, table) - first == 1, table.row_renders - first
        assert str(table.get_cell("g5", list(table.columns)[1])) == "55%"
        lines = [strip.text for strip in (table.render_line(y) for y in range(1, 21))]
        assert lines[5].split() == ["g5", "55%"]  # the new value is what the screen shows
        assert lines[6].split() == ["g6", "60%"]


async def test_a_long_table_paints_the_rows_near_its_viewport_and_the_rest_when_scrolled_to() -> None:
    """512 GPU rows at 64 hosts x 8 GPUs, each changing every second: a long table builds and updates only
    the changed rows near what is on screen; a row far below is painted when a scroll brings it near, so
    what is on screen is always the latest view."""
    app = Host()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(Pane)
        table = pane.query_one(KeyedTable)
        n = VIRTUAL_MIN_ROWS + 300
        pane.show_table(view([1] * n))
        await pilot.pause()
        util = list(table.columns)[1]
        pane.show_table(view([2] * n))  # every row changed
        assert str(table.get_cell("g0", util)) == "2%"  # on screen: painted
        assert str(table.get_cell(f"g{n - 1}", util)) == "1%"  # far below: left for later
        assert f"g{n - 1}" in pane._deferred
        table.move_cursor(row=n - 1, animate=False)  # the cursor (and the scroll) goes there
        await pilot.pause()
        await pilot.pause()
        assert str(table.get_cell(f"g{n - 1}", util)) == "2%"
        assert str(table.get_cell("g0", util)) == "2%"  # nothing painted is lost
        pane.sort_by("Util")  # a sorted table needs every value: painted whole
        pane.show_table(view([3] * n))
        util = list(table.columns)[1]  # the columns were set again (the header marks the sort)
        assert str(table.get_cell("g0", util)) == "3%" and str(table.get_cell(f"g{n - 1}", util)) == "3%"
