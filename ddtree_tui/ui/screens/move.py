"""Pick the host a service moves to; the move itself is confirmed afterwards."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class MoveScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    MoveScreen { align: center middle; }
    MoveScreen > #dialog { width: 60; max-width: 90%; height: auto; max-height: 80%; padding: 1 2;
        border: thick $accent; background: $surface; }
    MoveScreen OptionList { height: auto; max-height: 12; margin-top: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, ref: str, hosts: Sequence[tuple[str, str]]) -> None:
        """hosts: (name, state) of every other host."""
        super().__init__()
        self.ref = ref
        self.hosts = hosts

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Move {self.ref} to which host?")
            # a host that is not connected cannot take the service: shown, but not offered
            yield OptionList(
                *[
                    Option(f"{n}  ({st})" if st == "connected" else f"{n}  ({st}: cannot move there now)",
                           id=n, disabled=st != "connected")
                    for n, st in self.hosts
                ],
                id="hosts",
            )  # fmt: skip

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
