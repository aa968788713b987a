"""GPU pane: a row per GPU with utilisation and memory bars, temperature, power, a utilisation sparkline,
the service on it, its processes, and faults in red under the table. Replayed telemetry is labelled REPLAY,
always. Rows come from ui/views.py `gpus_view`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from ddtree_tui.ui.messages import HostSelected
from ddtree_tui.ui.views import GpusView
from ddtree_tui.ui.widgets.base import KeyedTable, set_static
from ddtree_tui.ui.widgets.table import TablePane


class GpusPane(TablePane):
    pane_number = 2
    pane_title = "GPUs"
    drill_kind = "gpu"
    BINDINGS = [Binding("a", "all_hosts", "All hosts", tooltip="show the GPUs of every host")]
    DEFAULT_CSS = "GpusPane #gpu-faults { height: auto; max-height: 4; }"

    def compose(self) -> ComposeResult:
        yield KeyedTable(id="gpus-table", cursor_type="row")
        yield Static("", id="gpu-faults")

    def action_all_hosts(self) -> None:
        self.post_message(HostSelected(None))

    def show_view(self, view: GpusView) -> None:
        self.show_table(view.table)
        box = self.query_one("#gpu-faults", Static)
        set_static(box, self.text(view.faults))
        box.display = bool(view.faults)
