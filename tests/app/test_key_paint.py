"""What a frame costs where a key lands (issue 28, key -> paint): a log that grows asks for no layout pass of
the screen, and a changed table cell renders alone. Counted, never timed."""

from __future__ import annotations

from typing import Any

import pytest
from rich.padding import Padding
from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.renderables.styled import Styled
from textual.screen import Screen
from textual.widgets import DataTable, RichLog

from ddtree_tui.ui.views import Row, TableView, styled
from ddtree_tui.ui.widgets.base import KeyedTable
from ddtree_tui.ui.widgets.logs import TailLog
from ddtree_tui.ui.widgets.table import TablePane


class Logs(App[None]):
    CSS = "TailLog, RichLog { height: 10; }"

    def __init__(self, log: RichLog) -> None:
        super().__init__()
        self.log_widget = log

    def compose(self) -> ComposeResult:
        yield self.log_widget


@pytest.fixture
def layout_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry a layout pass of any screen (reflow of every widget, then a frame)."""
    passes: list[int] = []
    orig = Screen._refresh_layout

    def counted(self: Screen[Any], *a: Any, **kw: Any) -> None:
        passes.append(1)
        orig(self, *a, **kw)

    monkeypatch.setattr(Screen, "_refresh_layout", counted)
    return passes


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()


@pytest.mark.parametrize("cls", [TailLog, RichLog])
async def test_new_log_lines_ask_for_no_layout_pass(cls: type[RichLog], layout_passes: list[int]) -> None:
    """RichLog (the control) lays the screen out again on every write; TailLog does not, and its scrollbar
    and the followed tail still move with the lines."""
    app = Logs(cls(max_lines=500, auto_scroll=True))
    async with app.run_test(size=(60, 20)) as pilot:
        log = app.log_widget
        log.write(Text("line 0"))
        await settle(pilot)
        before = len(layout_passes)
        for i in range(1, 41):
            log.write(Text(f"line {i}"))
            await pilot.pause()
        await settle(pilot)
        extra = len(layout_passes) - before
        if cls is RichLog:
            assert extra >= 1  # what TailLog saves: the control still does it
            return
        assert extra == 0
        assert log.virtual_size.height == 41
        assert log.max_scroll_y == 41 - log.scrollable_content_region.height > 0
        assert log.scroll_y == log.max_scroll_y  # following the tail
        assert log.vertical_scrollbar.window_virtual_size == 41


async def test_replacing_the_lines_keeps_the_scrollbars_and_asks_for_no_layout(
    layout_passes: list[int],
) -> None:
    """A new service's tail (clear, then its lines) with a line wider than the log: the horizontal scrollbar
    was shown and stays so, so nothing needs laying out; a log that becomes narrow drops it (a layout)."""
    log = TailLog(max_lines=500, auto_scroll=True)
    app = Logs(log)
    async with app.run_test(size=(60, 20)) as pilot:
        log.replace(Text("\n".join(["x" * 200, *(f"a {i}" for i in range(30))])))
        await settle(pilot)
        assert log.show_horizontal_scrollbar
        before = len(layout_passes)
        log.replace(Text("\n".join(["y" * 200, *(f"b {i}" for i in range(30))])))
        await settle(pilot)
        assert len(layout_passes) == before
        assert log.show_horizontal_scrollbar and log.virtual_size.height == 31
        assert log.lines[0].text.startswith("y" * 50)
        log.replace(Text("short"))
        await settle(pilot)
        assert not log.show_horizontal_scrollbar and log.virtual_size.height == 1
        assert len(layout_passes) > before  # a scrollbar that goes is laid out as before
        log.replace(None)
        await settle(pilot)
        assert log.lines == []


class Pane(TablePane):
    pane_number = 9
    pane_title = "Test"

    def compose(self) -> ComposeResult:
        yield KeyedTable(cursor_type="row")


class Tables(App[None]):
    def compose(self) -> ComposeResult:
        yield Pane()


def gpus(utils: list[int]) -> TableView:
    rows = tuple(
        Row(f"g{i}", (styled(f"g{i}", "accent"), f"{u}%", styled("dflash", "accent")))
        for i, u in enumerate(utils)
    )
    return TableView(("GPU", "Util", "Service"), rows, "9 Test")


async def test_a_changed_cell_renders_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """One GPU's utilisation moved: its row is drawn again from its cells, of which only that one is
    rendered again (a cell render is Rich's padding, styling and cropping: most of a table's frame); the
    cursor moving onto a row restyles its cells without laying them out again."""
    app = Tables()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(Pane)
        table = pane.query_one(KeyedTable)
        utils = [10 + i for i in range(20)]
        pane.show_table(gpus(utils))
        await settle(pilot)
        table.refresh()  # the first resize bumped the table's counter: let that frame happen
        await settle(pilot)
        rendered: list[str] = []
        orig = app.console.render_lines

        def counted(renderable: Any, *a: Any, **kw: Any) -> Any:
            if isinstance(renderable, Styled | Padding):  # a cell laid out (not its content's inner render)
                rendered.append(repr(renderable))
            return orig(renderable, *a, **kw)

        monkeypatch.setattr(app.console, "render_lines", counted)
        utils[5] = 55  # same width: updated in place
        pane.show_table(gpus(utils))
        await settle(pilot)
        assert len(rendered) == 1, rendered
        lines = [table.render_line(y).text.split() for y in range(1, 21)]
        assert lines[5] == ["g5", "55%", "dflash"]  # the row on screen: the new cell and the kept ones
        assert lines[6] == ["g6", "16%", "dflash"]
        table.move_cursor(row=5, animate=False)  # under the cursor: restyled, not laid out again
        await settle(pilot)
        assert len(rendered) == 1
        assert table.render_line(6).text.split() == ["g5", "55%", "dflash"]


class Live(App[None]):
    CSS = "KeyedTable { height: auto; max-height: 6; }"

    def compose(self) -> ComposeResult:
        yield KeyedTable(cursor_type="row")


async def test_rows_added_to_a_table_cut_by_its_max_height_ask_for_no_layout(
    layout_passes: list[int],
) -> None:
    """The Bench pane's live list: a row a request. Until the table reaches its max-height a new row makes
    it taller (a layout); past it, the table's size stays and only its scrollbar follows."""
    app = Live()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.add_columns("req", "tok/s")
        table.add_row("r0", "1", key="r0")
        await settle(pilot)
        before = len(layout_passes)
        table.add_row("r1", "1", key="r1")
        await settle(pilot)
        assert len(layout_passes) > before and table.size.height == 3  # header + 2 rows: it grew
        for i in range(2, 12):
            table.add_row(f"r{i}", "1", key=f"r{i}")
            await settle(pilot)
        assert table.size.height == 6
        before = len(layout_passes)
        for i in range(12, 20):
            table.add_row(f"r{i}", "1", key=f"r{i}")
            await settle(pilot)
        assert len(layout_passes) == before
        assert table.size.height == 6 and table.virtual_size.height == 21
        assert table.max_scroll_y == 21 - table.scrollable_content_region.height
        table.move_cursor(row=19, animate=False)  # the last row can still be reached
        await settle(pilot)
        assert table.scroll_y == table.max_scroll_y
        assert "r19" in table.render_line(table.size.height - 1).text


class Twins(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(id="keyed", cursor_type="row")
        yield DataTable(id="plain", cursor_type="row")


async def test_a_cell_is_drawn_as_textual_draws_it_under_and_off_the_cursor() -> None:
    """KeyedTable keeps a cell's unstyled lines and restyles them for the cursor: the same segments, styles
    and click metadata as Textual's own DataTable gives, for every kind of cell the panes paint."""
    app = Twins()
    cells: list[Any] = [
        "55%",
        "",
        "a long plain value that is cut by its column",
        Text("● ready", style="green bold"),
        Text.assemble(("h00", "cyan"), ("/", ""), ("dflash", "magenta")),
        Text("✖ fault: a long reason that does not fit", style="red", no_wrap=True, overflow="ellipsis"),
        Text("▁▂▃▄▅▆▇█▇▆▅▄▃▂▁ wide sparkline", no_wrap=True),
        Text("日本語のホスト名", style="dim"),
    ]
    async with app.run_test(size=(100, 20)) as pilot:
        keyed, plain = app.query_one("#keyed", KeyedTable), app.query_one("#plain", DataTable)
        for t in (keyed, plain):
            t.add_column("a", width=6, key="a")
            t.add_column("b", width=12, key="b")
            t.add_column("c", key="c")
            for i, c in enumerate(cells):
                t.add_row(c, c, c, key=f"r{i}")
        await settle(pilot)

        def drawn(t: DataTable[Any], row: int, col: int, cursor: bool = False, hover: bool = False) -> Any:
            style = t._get_row_style(row, t.rich_style)
            width = t.ordered_columns[col].get_render_width(t)
            if t is keyed:
                return KeyedTable._render_cell(keyed, row, col, style, width, cursor, hover)
            return DataTable._render_cell(plain, row, col, style, width, cursor, hover)

        every = [
            (row, col, cursor, hover)
            for cursor, hover in ((False, False), (True, False), (False, True), (True, True))
            for row in range(len(cells))
            for col in range(3)
        ]
        for focused in (False, True):  # the cursor's style is another one on the focused table
            app.set_focus(keyed if focused else None)
            await settle(pilot)
            got = [drawn(keyed, *at) for at in every]
            again = [drawn(keyed, *at) for at in every]  # from its caches
            app.set_focus(plain if focused else None)
            await settle(pilot)
            want = [drawn(plain, *at) for at in every]
            for at, g, a, w in zip(every, got, again, want, strict=True):
                assert g == w == a, (at, focused)
                assert len(g) == 1 and g[0][0].style is not None
                assert g[0][0].style.meta == {"row": at[0], "column": at[1]}  # a click finds its cell
        keyed.update_cell("r0", "a", "66%")  # a new value: laid out again, not the kept lines
        plain.update_cell("r0", "a", "66%")
        app.set_focus(None)
        await settle(pilot)
        changed = drawn(keyed, 0, 0)
        assert changed == drawn(plain, 0, 0)
        assert "66%" in "".join(s.text for s in changed[0])
