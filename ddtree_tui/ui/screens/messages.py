"""`H`: every message the app showed this session (errors included), newest first, with its time; the one
under the cursor is shown whole, wrapped, under the table (a long error is never cut)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "information": ""}


@dataclass(frozen=True)
class MessageRecord:
    ts: float
    severity: str
    text: str

    def line(self) -> str:
        word = SEVERITY_WORD.get(self.severity, self.severity)  # whole words: `[:4]` read `erro`, `warn`
        return f"{time.strftime('%H:%M:%S', time.localtime(self.ts))} {word} {self.text}"


SEVERITY_WORD = {"information": "info", "warning": "warning", "error": "error"}


def bar_line(messages: list[MessageRecord], shown_until: float, now: float) -> tuple[Text, str | None]:
    """The one line above the footer: the latest message while it is held (with the count), else the count;
    and the shown message's severity (the bar's colour)."""
    last = messages[-1] if messages else None
    shown = last if last is not None and now < shown_until else None
    count = f"  (H: {len(messages)} messages)" if messages else ""
    text = shown.line() + count if shown else (count.strip(" ()") or "H: message history")
    return Text(text, no_wrap=True, overflow="ellipsis"), shown.severity if shown else None


class MessagesScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    MessagesScreen { align: center middle; }
    MessagesScreen > #dialog { width: 95%; max-width: 140; height: 90%; border: thick $accent;
        background: $surface; padding: 0 1; }
    MessagesScreen DataTable { height: 1fr; }
    MessagesScreen #message-whole { height: auto; max-height: 40%; border-top: solid $accent; }
    """
    BINDINGS = [Binding("escape,H,q", "close", "Close")]

    def __init__(self, records: list[MessageRecord]) -> None:
        super().__init__()
        self.records = list(records)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Messages of this session ({len(self.records)}, newest first) · Esc closes")
            t: DataTable[Any] = DataTable(id="messages-table", cursor_type="row", zebra_stripes=True)
            t.add_columns("Time", "Kind", "Message")
            for i, r in enumerate(reversed(self.records)):
                when = time.strftime("%H:%M:%S", time.localtime(r.ts))
                t.add_row(
                    when, Text(r.severity, style=SEVERITY_STYLE.get(r.severity, "")), r.text, key=str(i)
                )
            yield t
            with VerticalScroll(id="message-whole"):
                yield Static("", id="message-full")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The message under the cursor, whole and wrapped."""
        key = event.row_key.value
        if key is None:
            return
        r = list(reversed(self.records))[int(key)]
        when = time.strftime("%H:%M:%S", time.localtime(r.ts))
        full = Text(f"{when} {r.severity}: ", style=SEVERITY_STYLE.get(r.severity, "") or "bold")
        full.append(r.text, style="")
        self.query_one("#message-full", Static).update(full)

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)
