"""Services pane: a row per service with a state badge, host, port, algorithm + DDTree mode, accept length,
gen throughput, health latency and uptime; a line about the selected one and buttons for its actions.
Simulated services say SIMULATED, always. Rows come from ui/views.py `services_view`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, DataTable, Static

from ddtree_tui.ui.messages import ServiceRequest, ServiceSelected, ServiceVerb
from ddtree_tui.ui.views import ServicesView, metric
from ddtree_tui.ui.widgets.base import KeyedTable, set_static
from ddtree_tui.ui.widgets.table import TablePane

__all__ = ["BUTTONS", "ServicesPane", "metric"]

# the mouse's way to the common actions on the selected service (keys in brackets)
BUTTONS: tuple[tuple[ServiceVerb, str], ...] = (
    ("launch", "Launch l"),
    ("kill", "Kill ^k"),
    ("restart", "Restart r"),
    ("smoke", "Smoke s"),
    ("logs", "Logs L"),
    ("bench", "Bench b"),
    ("move", "Move m"),
)


class ServicesPane(TablePane):
    pane_number = 3
    pane_title = "Services"
    DEFAULT_CSS = """
    ServicesPane #service-detail { height: 1; color: $text-muted; }
    ServicesPane #service-buttons { height: 1; }
    ServicesPane #service-buttons Button { margin: 0 1 0 0; min-width: 8; }
    ServicesPane DataTable { height: auto; }
    """
    sortable = True
    drill_kind = "service"
    # show=False keeps the footer as it was; `?` lists it
    BINDINGS = [
        Binding(
            "s",
            "smoke",
            "Smoke",
            show=False,
            tooltip="smoke test: one short /generate request to the service",
        ),
    ]

    def compose(self) -> ComposeResult:
        yield KeyedTable(id="services-table", cursor_type="row")
        yield Static("", id="service-detail")
        with Horizontal(id="service-buttons"):
            for verb, label in BUTTONS:
                yield Button(label, id=f"btn-{verb}", compact=True, tooltip=f"{verb} the selected service")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        verb = (event.button.id or "").removeprefix("btn-")
        ref = self.selected_ref()
        button = next((v for v, _ in BUTTONS if v == verb), None)
        if ref is not None and button is not None:
            event.stop()
            self.post_message(ServiceRequest(button, ref))

    def show_view(self, view: ServicesView) -> None:
        self.show_table(view.table)
        line = self.text(view.detail)
        line.no_wrap, line.overflow = True, "ellipsis"
        set_static(self.query_one("#service-detail", Static), line, one_line=True)

    def selected_ref(self) -> str | None:
        return self.selected_key()

    def select_ref(self, ref: str) -> None:
        self.select_key(ref)

    def action_smoke(self) -> None:
        ref = self.selected_ref()
        if ref is not None:
            self.post_message(ServiceRequest("smoke", ref))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.post_message(ServiceSelected(str(event.row_key.value)))
