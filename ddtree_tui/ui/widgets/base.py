"""The common shape of a pane: a bordered container with the theme's badge styles, and the in-place DataTable
update (sync_table) every table uses, so repaints are cheap and keep the cursor. Every pane paints a typed
view (ui/views.py) through its own `show_view`; none reads the fleet while painting."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.containers import Vertical
from textual.widgets import DataTable

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

    def focus_main(self) -> None:
        """Give focus to the pane's main widget (its table)."""
        tables = self.query(DataTable)
        if tables:
            tables.first().focus()
        else:
            self.focus()


# a rendered row: its key and the cells as the DataTable takes them
PaintedRow = tuple[str, Sequence[CellText]]


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
                if _differs(old, value):
                    table.update_cell(key, ck, value, update_width=True)
                    changed = True
        if changed:
            _drop_stale_renders(table)
        return
    cursor_key: str | None = None
    if table.row_count and 0 <= table.cursor_row < table.row_count:
        cursor_key = current[table.cursor_row] if table.cursor_row < len(current) else None
    table.clear(columns=False)
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if cursor_key in keys:
        table.move_cursor(row=keys.index(cursor_key), animate=False)


def _drop_stale_renders(table: DataTable[Any]) -> None:
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


def _differs(a: object, b: object) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain != b.plain or a.style != b.style or a.spans != b.spans
    return bool(a != b)


def matches(filter_text: str, *fields: CellText | None) -> bool:
    """Case-insensitive substring filter over the visible text of a row."""
    return matches_text(
        filter_text, *(None if x is None else str(x.plain if isinstance(x, Text) else x) for x in fields)
    )
