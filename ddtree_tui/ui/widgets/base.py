"""The common shape of a pane: a bordered container with the theme's badge styles, and the in-place DataTable
update (sync_table) every table uses, so repaints are cheap and keep the cursor. Every pane paints a typed
view (ui/views.py) through its own `show_view`; none reads the fleet while painting."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.widgets._data_table import CellType, ColumnKey, RowKey

from ddtree_tui.ui.views import BADGES
from ddtree_tui.ui.views import matches as matches_text

# what a table cell holds as the panes paint it: plain text or Rich Text in a badge's style
CellText = str | Text


class Pane(Vertical, can_focus=False):
    """A titled pane. Colours of badges come from the theme's component classes (themes/*.tcss)."""

    COMPONENT_CLASSES = {f"badge--{b}" for b in BADGES}
    DEFAULT_CSS = """
    Pane { border: round $primary 40%; height: 1fr; }
    Pane:focus-within { border: round $accent; }
    Pane > .badge--ok { color: green; text-style: bold; }
    Pane > .badge--warn { color: yellow; text-style: bold; }
    Pane > .badge--bad { color: red; text-style: bold; }
    Pane > .badge--dim { color: $text-muted; }
    Pane > .badge--sim { color: magenta; text-style: bold; }
    Pane > .badge--replay { color: cyan; text-style: bold; }
    Pane > .badge--accent { color: $accent; text-style: bold; }
    """
    pane_number: int = 0
    pane_title: str = ""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.border_title = f"{self.pane_number} {self.pane_title}"
        self.filter = ""
        self.planned_width: int | None = None

    def style_of(self, badge: str) -> Style:
        try:
            return self.get_component_rich_style(f"badge--{badge}", partial=True)
        except Exception:  # before mount the stylesheet is not there yet
            return Style()

    def t(self, text: str, badge: str | None = None) -> Text:
        return Text(text, style=self.style_of(badge) if badge else "", no_wrap=True, overflow="ellipsis")

    wide_min = 118

    def is_narrow(self) -> bool:
        """Compact columns when the pane is narrower than `wide_min` cells (80x24 terminals, split tmux
        panes, a pane sharing a row in the one-screen layout); the app's width before the first layout."""
        return self.layout_width() < self.wide_min

    def layout_width(self) -> int:
        """The pane's width from the app's layout rules (`planned_width`, set before each paint: known before
        the first layout pass, so the first paint already picks the right columns), else its measured width."""
        return self.planned_width or self.size.width or self.app.size.width or 80

    def pick(
        self, cells: dict[str, CellText], wide: Sequence[str], narrow: Sequence[str]
    ) -> tuple[list[str], list[CellText]]:
        cols = list(narrow if self.is_narrow() else wide)
        return cols, [cells.get(c, "") for c in cols]

    def main_widget(self) -> Widget:
        """The pane's main widget (its table), which takes the focus when the pane is chosen."""
        tables = self.query(DataTable)
        return tables.first() if tables else self

    def focus_main(self) -> None:
        """Give focus to the pane's main widget (its table)."""
        self.main_widget().focus()


# a rendered row: its key and the cells as the DataTable takes them
PaintedRow = tuple[str, Sequence[CellText]]


class KeyedTable(DataTable[Any]):
    """A DataTable whose in-place cell updates re-render only their own row.

    Textual's DataTable keys every render cache (cells, rows, lines) by one table-wide update counter that
    `update_cell` bumps, so one changed cell (a GPU's utilisation, a service's uptime) made every visible
    cell of the table render again on the next frame, and a key press that lands after it paid for that too:
    with 512 GPU rows that was most of the frame (benchmarks/ui.py, issue 28). Here a cell update bumps a
    version of its row instead; the row and cell caches see (table counter, row version), so unchanged rows
    hit their caches and only the changed rows render again. Anything structural (rows added or
    removed, sorting, a resize, a width that grows) still goes through the table-wide counter. Caches are
    smaller than Textual's (a few screens' worth), so superseded versions cannot pile up (RSS).

    A cell keeps a version of its own too: a changed row renders again only its changed cells (a GPU's
    utilisation and power, not its name, host or service), the others hit the cell cache. Rendering a cell
    (Rich's padding, styling and cropping of its Text) is most of a table's frame: a 32-GPU table's
    once-a-second update re-rendered ~400 cells, which a key landing on that frame waited for.

    New rows ask for a layout pass of the screen only when they can change the table's size: not when its
    size does not follow its content, nor when it grows in a table already cut by its max-height (the Bench
    pane's live list adds a row a request; each was a layout of the whole screen, issue 28)."""

    _dims_from: Size | None = None  # inside _update_dimensions: the virtual size before it

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._row_versions: dict[RowKey, int] = {}
        self._cell_versions: dict[tuple[RowKey, ColumnKey], int] = {}
        # a body cell's padded, unstyled lines: (the value they are of, width, lines); see _render_plain_cell
        self._plain_lines: LRUCache[tuple[RowKey, ColumnKey], tuple[object, int, list[list[Segment]]]]
        self._plain_lines = LRUCache(1000)  # a few screens of cells: more only adds to what the GC walks
        self._cell_render_cache = LRUCache(2400)
        self._row_render_cache = LRUCache(400)
        self._row_renderable_cache = LRUCache(400)
        self._line_cache = LRUCache(400)
        self.row_renders = 0  # rows actually rendered (cache misses): tests count work with it

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: CellType,
        *,
        update_width: bool = False,
    ) -> None:
        rk = RowKey(row_key) if isinstance(row_key, str) else row_key
        ck = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        column = self.columns.get(ck)
        if (
            update_width
            or column is None
            or rk not in self._row_locations
            or _width(value) > column.content_width
        ):
            super().update_cell(rk, ck, value, update_width=True)  # the table-wide path: widths change
            return
        self._data[rk][ck] = value
        self._row_versions[rk] = self._row_versions.get(rk, 0) + 1
        self._cell_versions[rk, ck] = self._cell_versions.get((rk, ck), 0) + 1
        self._line_cache.clear()  # lines are keyed by y, not row: cheap to rebuild from the row cache
        self.refresh()  # not refresh_row: finding a row's region sums the heights above it (O(rows) a cell)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        self._dims_from = self.virtual_size
        try:
            super()._update_dimensions(new_rows)
        finally:
            self._dims_from = None

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> KeyedTable:
        old = self._dims_from
        if layout and old is not None and self.is_mounted and self._size_kept(old, self.virtual_size):
            self._dims_from = None  # the scrollbars' own changes (below) may ask for a layout
            layout = False
            self._scroll_update(self.virtual_size)
        super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        return self

    def _size_kept(self, old: Size, new: Size) -> bool:
        """Whether the virtual size going from `old` to `new` leaves the table's own size as it is."""
        if not self.styles.auto_dimensions:
            return True
        return new.width == old.width and new.height >= old.height > self.scrollable_content_region.height

    def _versioned(self, row_key: RowKey) -> Any:
        return (self._update_count, self._row_versions.get(row_key, 0))

    def _render_line_in_row(self, row_key: RowKey, *args: Any, **kw: Any) -> Any:
        count = self._update_count
        self._update_count = self._versioned(row_key)  # what the row and cell caches key by, for this row
        try:
            return super()._render_line_in_row(row_key, *args, **kw)
        finally:
            self._update_count = count

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Any:
        """Textual's, with the cell cache keyed by (table counter, the cell's version) for a body cell."""
        count = self._update_count
        if row_index < 0 or column_index < 0:  # the header, a row label: as Textual keys them
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        rk = self._row_locations.get_key(row_index)
        ck = self._column_locations.get_key(column_index)
        version = self._cell_versions.get((rk, ck), 0) if rk is not None and ck is not None else 0
        self._update_count = _count_key(count, "cell", version)
        try:
            if rk is not None and ck is not None and self._plain_cell(rk, row_index, column_index, width):
                return self._render_plain_cell(
                    rk, ck, row_index, column_index, base_style, width, cursor, hover
                )
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        finally:
            self._update_count = count

    # --- a body cell's rendering, its unstyled part kept (the cursor moving onto a row restyles it) ----------
    def _plain_cell(self, rk: RowKey, row_index: int, column_index: int, width: int) -> bool:
        """A one-line body cell outside the fixed rows and columns: what _render_plain_cell renders."""
        row = self.rows.get(rk)
        return (
            row is not None
            and row.height == 1
            and not row.auto_height
            and row_index >= self.fixed_rows
            and column_index >= self.fixed_columns
            and width > 2 * self.cell_padding
        )

    def _render_plain_cell(
        self,
        rk: RowKey,
        ck: ColumnKey,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> Any:
        """DataTable._render_cell for a plain cell, the same lines, with the cell's padded, unstyled lines
        kept while its value is the same object: Textual renders `Styled(Padding(cell), pre, post)` and a
        Styled only applies its two styles to what its content rendered, so a cell under the cursor, or no
        longer under it, is restyled rather than laid out by Rich again (the cursor moving one row rendered
        both rows' cells whole: most of a key's frame, issue 28)."""
        key = (
            rk,
            ck,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(key)
        if cached is not None:
            return cached
        datum = self._data[rk][ck]
        kept = self._plain_lines.get((rk, ck))
        if kept is not None and kept[0] is datum and kept[1] == width:
            plain = kept[2]
        else:
            cell = self._get_row_renderables(row_index)[1][column_index]
            options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
            plain = self.app.console.render_lines(Padding(cell, (0, self.cell_padding)), options)
            self._plain_lines.discard((rk, ck))  # (LRUCache.set keeps a key's old value)
            self._plain_lines[rk, ck] = (datum, width, plain)
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component_style
        lines = [list(Segment.apply_style(line, pre_style, post_style)) for line in plain]
        self._cell_render_cache[key] = lines
        return lines

    def _get_row_renderables(self, row_index: int) -> Any:
        """Textual's, keyed by (table counter, the row's version) also when a cell asks for them."""
        count = self._update_count
        if not (isinstance(count, tuple) and len(count) == 3):  # not from _render_cell
            return super()._get_row_renderables(row_index)
        rk = self._row_locations.get_key(row_index)
        self._update_count = _count_key(count, "row", self._row_versions.get(rk, 0) if rk is not None else 0)
        try:
            return super()._get_row_renderables(row_index)
        finally:
            self._update_count = count

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._row_versions.clear()  # the caches they key are empty: a version starts again at 0
        self._cell_versions.clear()
        self._plain_lines.clear()

    def _compute_row_renderables(self, row_index: int) -> Any:
        self.row_renders += 1  # a row's cells formatted again: a cache miss
        return super()._compute_row_renderables(row_index)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        pane = self.parent
        paint = getattr(pane, "paint_deferred", None)  # a TablePane: rows it left unpainted off-screen
        if callable(paint) and int(old_value) != int(new_value):
            paint()


def _count_key(count: object, kind: str, version: int) -> Any:
    """What KeyedTable puts in DataTable's `_update_count` while a cell or a row's renderables are looked up:
    (the table-wide counter, kind, version); `count` may already be (counter, row version)."""
    table = count[0] if isinstance(count, tuple) else count
    return (table, kind, version)


def sync_table(
    table: DataTable[CellText],
    rows: Sequence[PaintedRow],
    on_key: Callable[[str], None] | None = None,
    columns: Sequence[str] | None = None,
) -> None:
    """Make `table` show `rows` (key, cells): update cells in place when the keys are unchanged, rebuild
    otherwise while keeping the cursor on the same key. Cheap enough for 10 Hz on a few hundred rows.
    With `columns`, the column set is changed first when it differs (compact vs wide layouts)."""
    keys = [k for k, _ in rows]
    current = [str(rk.value) for rk in table.rows]
    if columns is not None and [str(c.label) for c in table.columns.values()] != list(columns):
        cursor = table.cursor_row
        at = current[cursor] if 0 <= cursor < len(current) else None
        table.clear(columns=True)
        table.add_columns(*columns)
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if rows:
            row = keys.index(at) if at in keys else min(cursor, len(rows) - 1)
            table.move_cursor(row=row, animate=False)
        return
    col_keys = list(table.columns)
    if keys == current:
        changed = False
        for key, cells in rows:
            for ck, value in zip(col_keys, cells, strict=False):
                old = table.get_cell(key, ck)
                if differs(old, value):
                    table.update_cell(key, ck, value, update_width=not isinstance(table, KeyedTable))
                    changed = True
        if changed and not isinstance(table, KeyedTable):  # a KeyedTable keeps what is still current
            drop_stale_renders(table)
        return
    cursor_key: str | None = None
    if table.row_count and 0 <= table.cursor_row < table.row_count:
        cursor_key = current[table.cursor_row] if table.cursor_row < len(current) else None
    table.clear(columns=False)
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if cursor_key in keys:
        table.move_cursor(row=keys.index(cursor_key), animate=False)


def set_static(widget: Static, content: CellText, *, one_line: bool = False) -> None:
    """`Static.update` only when the content changed: every update asks for a layout pass of the screen,
    unless `one_line` (a bar of fixed height: the top bar, a detail line), where its size cannot change."""
    old = getattr(widget, "_ddtree_shown", None)
    if old is not None and not differs(old, content):
        return
    widget._ddtree_shown = content  # type: ignore[attr-defined]
    widget.update(content, layout=not one_line)


def _width(value: object) -> int:
    """Cells a value takes in one line (what DataTable measures a column by)."""
    if isinstance(value, Text):
        return value.cell_len
    return cell_len(str(value))


def drop_stale_renders(table: DataTable[Any]) -> None:
    """Free the table's render caches after `update_cell`.

    DataTable keys its cell/row/line render caches by an update counter that `update_cell` bumps without
    clearing them (Textual 8.2), so every in-place update leaves the previous renders unreachable but held
    until the LRU evicts them: up to 10,000 cells + 1,000 rows + 1,000 lines per table. At 1 Hz updates a
    table with few rows takes many minutes to reach that bound, which showed as RSS growing with uptime
    (benchmarks/ui.py). Entries of an older count can never be hit again, so dropping them costs nothing.
    """
    table._clear_caches()  # private, but there in every Textual the project allows (>=8.2,<9)


def sort_key(cell: object) -> tuple[int, float, str]:
    """Numbers (`12%`, `3.41`, `2m05s` is text) sort numerically before text; `-` and blanks sort last."""
    text = str(cell.plain if isinstance(cell, Text) else cell).strip()
    if text in ("", "-"):
        return (2, 0.0, "")
    num = text.rstrip("%MGTWs°C").split("/")[0]
    try:
        return (0, float(num), "")
    except ValueError:
        return (1, 0.0, text.lower())


def differs(a: object, b: object) -> bool:
    """Whether two cells show something different (text, style or spans); the same object never does."""
    if a is b:  # a row whose view did not change keeps its painted cells (TablePane.show_table)
        return False
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain != b.plain or a.style != b.style or a.spans != b.spans
    return bool(a != b)


def matches(filter_text: str, *fields: CellText | None) -> bool:
    """Case-insensitive substring filter over the visible text of a row."""
    return matches_text(
        filter_text, *(None if x is None else str(x.plain if isinstance(x, Text) else x) for x in fields)
    )
