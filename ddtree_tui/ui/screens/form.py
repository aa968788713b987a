"""What the form dialogs (bench setup, todo edit) share: their Cancel / primary button row and inputs that
do not blink (a blinking cursor would make every screenshot differ)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, Input


def form_buttons(label: str, button_id: str) -> ComposeResult:
    """Cancel, then the dialog's primary button, in the `#buttons` row the dialogs' CSS lays out."""
    with Horizontal(id="buttons"):
        yield Button("Cancel", id="cancel")
        yield Button(label, id=button_id, variant="primary")


def steady_inputs(root: Widget) -> None:
    """No blinking cursor in any input under `root`."""
    for inp in root.query(Input):
        inp.cursor_blink = False
