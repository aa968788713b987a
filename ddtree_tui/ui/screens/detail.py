"""Enter on a host, a GPU or a service: everything about it on one screen (k9s' describe); Esc goes back."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from ddtree_tui.ui.details import DetailView


class DetailScreen(Screen[None]):
    DEFAULT_CSS = """
    DetailScreen { background: $surface; }
    DetailScreen #detail-title { height: 1; padding: 0 1; text-style: bold; background: $panel; width: 100%; }
    DetailScreen #detail-body { height: 1fr; padding: 0 1; }
    DetailScreen .detail-table { height: auto; max-height: 16; margin-bottom: 1; }
    DetailScreen .detail-caption { height: 1; text-style: bold; color: $accent; }
    DetailScreen #detail-log { height: auto; }
    """
    BINDINGS = [Binding("escape,q", "back", "Back"), Binding("question_mark", "app.help", "Help", show=False)]

    def __init__(self, view: DetailView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield Label(f"{self.view.title}   (Esc: back)", id="detail-title")
        with VerticalScroll(id="detail-body"):
            facts: DataTable[Any] = DataTable(id="detail-facts", cursor_type="row", classes="detail-table")
            facts.add_columns("", "")
            for i, (k, v) in enumerate(self.view.facts):
                facts.add_row(Text(k, style="bold"), v, key=str(i))
            yield facts
            for n, (caption, cols, rows) in enumerate(self.view.tables):
                yield Label(f"{caption} ({len(rows)})", classes="detail-caption")
                t: DataTable[Any] = DataTable(
                    id=f"detail-table-{n}", cursor_type="row", classes="detail-table"
                )
                t.add_columns(*cols)
                for i, r in enumerate(rows):
                    t.add_row(*r, key=str(i))
                yield t
            if self.view.log:
                yield Label(f"Log tail ({len(self.view.log)} lines)", classes="detail-caption")
                yield Static(Text("\n".join(self.view.log), no_wrap=False), id="detail-log")
        yield Footer()

    def on_mount(self) -> None:
        """The body scrolls as one (j/k, PgUp/PgDn, g/G, Home/End reach the log tail); Tab enters a table."""
        self.query_one("#detail-body", VerticalScroll).focus()

    def action_back(self) -> None:
        self.dismiss(None)
