"""Hosts pane: connection badge (connected / reconnecting in Ns / down + reason), CPU, RAM, disk, load; each
host's error in full under the table. Rows come from ui/views.py `hosts_view`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from ddtree_tui.ui.messages import HostSelected
from ddtree_tui.ui.views import HostsView
from ddtree_tui.ui.widgets.base import KeyedTable, set_static
from ddtree_tui.ui.widgets.table import TablePane


class HostsPane(TablePane):
    pane_number = 1
    pane_title = "Hosts"
    sortable = True  # a click on a header sorts by it
    drill_kind = "host"
    DEFAULT_CSS = """
    HostsPane { height: auto; max-height: 12; }
    HostsPane DataTable { height: auto; max-height: 7; }
    HostsPane #host-errors { height: auto; max-height: 3; }
    """

    def compose(self) -> ComposeResult:
        yield KeyedTable(id="hosts-table", cursor_type="row", zebra_stripes=False)
        yield Static("", id="host-errors")

    def show_view(self, view: HostsView) -> None:
        self.show_table(view.table)
        box = self.query_one("#host-errors", Static)
        set_static(box, self.text(view.errors))
        box.display = bool(view.errors)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.has_focus_within and event.row_key.value is not None:
            self.post_message(HostSelected(str(event.row_key.value)))
