"""`?`: every key binding, grouped by where it works, read from the live binding tables so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

KEY_NAMES = {"slash": "/", "question_mark": "?", "space": "space", "escape": "Esc", "delete": "Del"}


def binding_rows(groups: Iterable[tuple[str, Iterable[Any]]]) -> list[tuple[str, str, str]]:
    """(where, keys, what) for every binding with a description."""
    rows: list[tuple[str, str, str]] = []
    for where, bindings in groups:
        for b in bindings:
            if not isinstance(b, Binding):
                continue
            keys = ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in b.key.split(","))
            rows.append((where, keys, b.tooltip or b.description or b.action))
    return rows


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #dialog { width: 90%; max-width: 100; height: 90%; border: thick $accent;
        background: $surface; padding: 0 1; }
    HelpScreen DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close help")]

    def __init__(self, groups: list[tuple[str, Iterable[Any]]]) -> None:
        super().__init__()
        self.rows = binding_rows(groups)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Keys (Esc or ? closes) · ctrl+p: every action for every host and service")
            t: DataTable[Any] = DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            t.add_columns("Where", "Keys", "What")
            for i, row in enumerate(self.rows):
                t.add_row(*row, key=str(i))
            yield t

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)
