"""A reusable yes/no dialog for anything destructive. The focused (default) button is Cancel, so Enter or
Escape never kills a service by accident (the k9s / lazydocker convention)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > #dialog {
        width: 60; max-width: 90%; height: auto; padding: 1 2;
        border: thick $error 70%; background: $surface;
    }
    ConfirmScreen #question { width: 100%; text-style: bold; }
    ConfirmScreen #detail { width: 100%; color: $text-muted; margin-top: 1; }
    ConfirmScreen #buttons { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("escape", "answer(False)", "Cancel"),
        Binding("left,h", "app.focus_previous", "Previous button", show=False),
        Binding("right", "app.focus_next", "Next button", show=False),
    ]
    AUTO_FOCUS = "#cancel"

    def __init__(self, question: str, detail: str = "", confirm_label: str = "Confirm") -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            if self.detail:
                yield Static(self.detail, id="detail")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(self.confirm_label, id="confirm", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
