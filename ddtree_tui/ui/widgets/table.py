"""The one table pane (the k9s / lazydocker shape): a DataTable showing a TableView (columns + keyed rows),
updated in place so the cursor stays on the same key, sorted by a named column, Enter drilling into the row.
The hosts, services and GPU panes are this pane plus what sits under their table.

Sorting is nvitop's: `o` then a column's letter (each column gets the first free letter of its name, listed
when `o` is pressed); the same letter again reverses, `0` goes back to the fleet's own order; `O` reverses;
a click on a header sorts by it. The sort shows as ▲/▼ on the column and in the pane title."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from ddtree_tui.ui.messages import DrillDown
from ddtree_tui.ui.views import Cell, CellValue, Row, Seg, TableView
from ddtree_tui.ui.widgets.base import CellText, KeyedTable, PaintedRow, Pane, sort_key, sync_table
from ddtree_tui.ui.widgets.base import differs as _cell_differs


def sort_letters(columns: Sequence[str]) -> dict[str, str]:
    """letter -> column: each column's first letter not taken yet (then its next letters); `0` and `o` are
    kept for "unsorted" and the menu itself."""
    out: dict[str, str] = {}
    for col in columns:
        for ch in col.lower():
            if ch.isalpha() and ch not in out and ch != "o":
                out[ch] = col
                break
    return out


# a table with at least this many rows paints only the changed rows near its viewport (TablePane._paint_window)
VIRTUAL_MIN_ROWS = 200


class SortScreen(ModalScreen[str | None]):
    """`o`: the columns with their letters; a letter answers the column, `0` "unsorted" (""), Esc None."""

    DEFAULT_CSS = """
    SortScreen { align: center bottom; }
    SortScreen > #sort-box { width: 100%; height: auto; max-height: 12; border: round $accent;
        background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, pane_title: str, columns: Sequence[str], current: str | None, reverse: bool) -> None:
        super().__init__()
        self.letters = sort_letters(columns)
        self.pane_title, self.current, self.reverse = pane_title, current, reverse

    def compose(self) -> ComposeResult:
        now = f"{self.current} {'▼' if self.reverse else '▲'}" if self.current else "the fleet's order"
        menu = "  ".join(f"{k} {c}" for k, c in self.letters.items())
        with Vertical(id="sort-box"):
            yield Label(f"sort {self.pane_title} by (now: {now}; the same letter again reverses):")
            yield Label(menu, id="sort-menu")
            yield Label("0 the fleet's order · Esc cancels")

    def on_key(self, event: events.Key) -> None:
        ch = event.character or ""
        if ch == "0":
            event.stop()
            self.dismiss("")
        elif ch in self.letters:
            event.stop()
            self.dismiss(self.letters[ch])

    def action_cancel(self) -> None:
        self.dismiss(None)


class TablePane(Pane):
    """Subclasses yield the DataTable in `compose` and name what Enter on a row drills into."""

    drill_kind: ClassVar[Literal["host", "gpu", "service"] | None] = None
    sortable: ClassVar[bool] = True
    BINDINGS = [
        Binding("o", "sort_menu", "Sort", show=False,
                tooltip="sort: o then the column's letter (listed); again reverses, o 0 unsorts"),
        Binding("O", "sort_reverse", "Reverse", show=False, tooltip="reverse the sort order"),
    ]  # fmt: skip

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.table_view: TableView | None = None
        self.sort_col: str | None = None
        self.sort_reverse = False
        self._painted: tuple[object, ...] | None = None
        self._rows_painted: dict[str, tuple[Row, Sequence[CellText]]] = {}
        self._deferred: dict[str, tuple[int, Row]] = {}  # changed rows not painted yet: key -> (index, row)
        self.table_paints = 0  # views actually synced into the table: tests count work with it

    # --- painting ------------------------------------------------------------------------------------------
    def cell(self, c: CellValue) -> str | Text:
        """A view's cell as the table shows it: badges become the theme's styles."""
        if not isinstance(c, Cell):
            return c
        out = Text(
            "",
            style=self.style_of(c.base) if c.base else "",
            no_wrap=True,
            overflow="ellipsis" if c.clip else None,
        )
        for seg in c.segs:
            out.append(seg.text, self.style_of(seg.badge) if seg.badge else None)
        return out

    def text(self, segs: Sequence[Seg]) -> Text:
        """Free text under the table (errors, a detail line) from its segments."""
        out = Text()
        for seg in segs:
            out.append(seg.text, self.style_of(seg.badge) if seg.badge else None)
        return out

    def show_table(self, tv: TableView) -> None:
        """Paint the view; the same view in the same order and theme as last time does nothing at all (the
        1 Hz clock repaint and telemetry of other hosts cost no rendering here, issue 28). A long unsorted
        table whose rows are the same keys as shown paints only the changed rows near its viewport (`_window`);
        the others wait in `_deferred` until a scroll brings them near (`paint_deferred`)."""
        painted = (tv, self.sort_col, self.sort_reverse, self.app.theme, tuple(sorted(self.app.classes)))
        if painted == self._painted:
            return
        if painted[1:] != (self._painted or (None,))[1:]:  # another order or theme: every cell again
            self._rows_painted = {}
        self._painted = painted
        self.table_view = tv
        table = self.query_one(DataTable)
        if self._paint_window(table, tv):
            self._title(tv)
            return
        self._deferred = {}
        last = self._rows_painted
        rows: list[PaintedRow] = []
        for r in tv.rows:
            hit = last.get(r.key)
            # an unchanged row keeps the cells it was painted with: nothing to build, nothing to compare
            cells = hit[1] if hit is not None and hit[0] == r else [self.cell(c) for c in r.cells]
            rows.append((r.key, cells))
        self._rows_painted = {r.key: (r, cells) for r, (_, cells) in zip(tv.rows, rows, strict=True)}
        sync_table(table, self.sorted_rows(rows, tv.columns), columns=self.headers(tv.columns))
        self.table_paints += 1
        self._title(tv)

    def _title(self, tv: TableView) -> None:
        title = tv.title + self.sort_label(tv.columns)
        if self.border_title != title:
            self.border_title = title

    # --- long tables: paint what is near the viewport (512 GPU rows at 64 hosts x 8 GPUs, issue 28) -------
    def _window(self, table: DataTable[Any]) -> tuple[int, int]:
        """Row indices [lo, hi) worth painting now: the rows on screen and a screenful either side."""
        height = max(1, table.scrollable_content_region.height or table.size.height or 24)
        top = int(table.scroll_y)
        return max(0, top - height), top + 2 * height

    def _paint_window(self, table: DataTable[Any], tv: TableView) -> bool:
        """Update in place only the changed rows near the viewport, when the table is long, unsorted, and
        shows the same keys under the same columns; False (paint it whole) otherwise."""
        if len(tv.rows) < VIRTUAL_MIN_ROWS or (self.sortable and self.sort_col in tv.columns):
            return False
        if [str(c.label) for c in table.columns.values()] != list(self.headers(tv.columns)):
            return False
        if len(table.rows) != len(tv.rows) or any(
            str(rk.value) != r.key for rk, r in zip(table.rows, tv.rows, strict=True)
        ):
            return False
        lo, hi = self._window(table)
        for i, r in enumerate(tv.rows):
            hit = self._rows_painted.get(r.key)
            if hit is not None and hit[0] is r:
                continue
            if hit is None or lo <= i < hi:
                self._update_row(table, r, hit)
            else:  # not even compared: painted (if it changed) when a scroll brings it near
                self._deferred[r.key] = (i, r)
        self.table_paints += 1
        return True

    def _update_row(self, table: DataTable[Any], r: Row, hit: tuple[Row, Sequence[CellText]] | None) -> None:
        self._deferred.pop(r.key, None)
        if hit is not None and hit[0] == r:
            return
        cells = [self.cell(c) for c in r.cells]
        old = hit[1] if hit is not None else ()
        for j, (ck, value) in enumerate(zip(table.columns, cells, strict=False)):
            if j >= len(old) or _cell_differs(old[j], value):
                table.update_cell(r.key, ck, value, update_width=not isinstance(table, KeyedTable))
        self._rows_painted[r.key] = (r, cells)

    def paint_deferred(self) -> None:
        """The rows a scroll brought near the viewport, painted now (KeyedTable calls it on scroll)."""
        if not self._deferred:
            return
        table = self.query_one(DataTable)
        lo, hi = self._window(table)
        for key, (i, r) in list(self._deferred.items()):
            if lo <= i < hi and key in table.rows:
                self._update_row(table, r, self._rows_painted.get(key))

    def sort_label(self, columns: Sequence[str]) -> str:
        """` · sort Port ▼` in the pane title while sorted (the header marks the column too)."""
        if not self.sortable or self.sort_col is None or self.sort_col not in columns:
            return ""
        return f" · sort {self.sort_col} {'▼' if self.sort_reverse else '▲'}"

    # --- sorting: `o` + a column's letter, `O` reverses, a click on a header sorts by it -------------------
    def sorted_rows(self, rows: list[PaintedRow], columns: Sequence[str]) -> list[PaintedRow]:
        """Rows ordered by the sort column (numbers as numbers, `-` last); as given when unsorted."""
        if not self.sortable or self.sort_col is None or self.sort_col not in columns:
            return rows
        i = list(columns).index(self.sort_col)
        return sorted(
            rows, key=lambda r: sort_key(r[1][i] if i < len(r[1]) else ""), reverse=self.sort_reverse
        )

    def headers(self, columns: Sequence[str]) -> list[str]:
        """Column titles with ▲/▼ on the sort column."""
        if not self.sortable or self.sort_col not in columns:
            return list(columns)
        mark = " ▼" if self.sort_reverse else " ▲"
        return [c + mark if c == self.sort_col else c for c in columns]

    def action_sort_menu(self) -> None:
        if not self.sortable or self.table_view is None:
            return
        cols = self.table_view.columns
        self.app.push_screen(
            SortScreen(self.pane_title, cols, self.sort_col, self.sort_reverse), self._sort_to
        )

    def _sort_to(self, column: str | None) -> None:
        if column is None:
            return
        if column == "":
            self.sort_col, self.sort_reverse = None, False
            self._resort()
        else:
            self.sort_by(column)

    def action_sort_reverse(self) -> None:
        if self.sort_col is not None:
            self.reverse_sort()

    def reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._resort()

    def sort_by(self, column: str) -> None:
        column = column.removesuffix(" ▲").removesuffix(" ▼")
        if self.sort_col == column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_col, self.sort_reverse = column, False
        self._resort()

    def _resort(self) -> None:
        """The last view again, in the new order (a hidden pane is repainted when it shows)."""
        if self.table_view is not None and self.display:
            self.show_table(self.table_view)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if self.sortable:
            event.stop()
            self.sort_by(str(event.label.plain if isinstance(event.label, Text) else event.label))

    # --- selection -----------------------------------------------------------------------------------------
    def selected_key(self) -> str | None:
        t = self.query_one(DataTable)
        if not t.row_count or not 0 <= t.cursor_row < t.row_count:
            return None
        return str(t.coordinate_to_cell_key(Coordinate(t.cursor_row, 0)).row_key.value)

    def select_key(self, key: str) -> None:
        t = self.query_one(DataTable)
        if key in t.rows:
            t.move_cursor(row=t.get_row_index(key), animate=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: drill into the row (Esc comes back); a host's fault line has nothing to drill into."""
        key = event.row_key.value
        if self.drill_kind is not None and key is not None and not str(key).endswith(":fault"):
            event.stop()
            self.post_message(DrillDown(self.drill_kind, str(key)))
