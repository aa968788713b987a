"""Services pane: a row per service with a state badge, host, port, algorithm + DDTree mode, accept length,
gen throughput, health latency and uptime. Simulated services say SIMULATED, always."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, DataTable, Static

from ddtree_tui.state import ServiceStatus
from ddtree_tui.ui import fmt
from ddtree_tui.ui.messages import DrillDown, ServiceIntent, ServiceSelected
from ddtree_tui.ui.widgets.base import Pane, View, matches, sync_table

STATE_BADGE = {
    "ready": ("● ready", "ok"),
    "starting": ("◌ starting", "warn"),
    "unhealthy": ("▲ unhealthy", "warn"),
    "crashed": ("✖ crashed", "bad"),
    "stopped": ("○ stopped", "dim"),
    "unknown": ("? unknown", "dim"),
}


def service_ref(s: ServiceStatus) -> str:
    return f"{s.host}/{s.name}"


WIDE = ["Service", "State", "Port", "Algorithm", "Kind", "Accept", "Gen tok/s", "Health", "Uptime", "Detail"]
NARROW = ["Service", "State", "Algorithm", "Accept", "tok/s", "Uptime"]  # SIM rides on the name
# the mouse's way to the common actions on the selected service (keys in brackets)
BUTTONS = (
    ("launch", "Launch l"),
    ("kill", "Kill k"),
    ("restart", "Restart r"),
    ("smoke", "Smoke s"),
    ("logs", "Logs L"),
    ("bench", "Bench b"),
    ("move", "Move m"),
)
LIVE_STATES = ("ready", "starting", "unhealthy")


def metric(value: float | None, fmt_: str, state: str, zero_is_missing: bool = False) -> str:
    """A service metric as shown: `-` when the service is not running (a crashed service kept its last
    health latency) or when the value is a placeholder zero (accept length is at least 1 when measured)."""
    if state not in LIVE_STATES or value is None or (zero_is_missing and not value):
        return "-"
    return fmt_.format(value)


class ServicesPane(Pane):
    pane_number = 3
    pane_title = "Services"
    DEFAULT_CSS = """
    ServicesPane #service-detail { height: 1; color: $text-muted; }
    ServicesPane #service-buttons { height: 1; }
    ServicesPane #service-buttons Button { margin: 0 1 0 0; min-width: 8; }
    ServicesPane DataTable { height: auto; }
    """
    sortable = True
    # show=False keeps the footer as it was; `?` lists it
    BINDINGS = [
        Binding(
            "s",
            "smoke",
            "Smoke",
            show=False,
            tooltip="smoke test: one short /generate request to the service",
        ),
        Binding("o", "sort", "Sort", show=False, tooltip="sort by the next column (again: back to none)"),
        Binding("O", "sort_reverse", "Reverse", show=False, tooltip="reverse the sort order"),
    ]

    def compose(self) -> ComposeResult:
        yield DataTable(id="services-table", cursor_type="row")
        yield Static("", id="service-detail")
        with Horizontal(id="service-buttons"):
            for verb, label in BUTTONS:
                yield Button(label, id=f"btn-{verb}", compact=True, tooltip=f"{verb} the selected service")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        verb = (event.button.id or "").removeprefix("btn-")
        ref = self.selected_ref()
        if ref is not None and verb in dict(BUTTONS):
            event.stop()
            self.post_message(ServiceIntent(verb, ref))  # type: ignore[arg-type]

    def action_sort(self) -> None:
        self.cycle_sort(self.pick({}, WIDE, NARROW)[0])

    def action_sort_reverse(self) -> None:
        self.reverse_sort()

    def render_view(self, view: View) -> None:
        rows = []
        narrow = self.is_narrow()
        selected = None
        for h in view.snap.hosts:
            for s in h.services:
                if service_ref(s) == view.selected_service:
                    selected = s
                text, badge = STATE_BADGE.get(s.state, (s.state, "dim"))
                sep = ":" if narrow else " "
                mode = s.mode or ("linear" if s.algorithm == "dflash" else "")
                if narrow and mode == "shadow-linear":
                    mode = "shadow"
                algo = s.algorithm + (
                    f"{sep}{mode}" if mode and not (narrow and s.algorithm == "dflash") else ""
                )
                if s.simulated:
                    kind = self.t("SIM" if narrow else "SIMULATED", "sim")
                else:
                    kind = self.t(s.launcher, "dim")
                up = (
                    fmt.duration(view.now - s.started_at)
                    if (s.started_at and s.state in ("ready", "starting", "unhealthy"))
                    else "-"
                )
                detail = s.detail or ""
                named = {
                    "Service": self.name_cell(s, narrow),
                    "State": self.t(text, badge),
                    "Port": str(s.port),
                    "Algorithm": algo,
                    "Kind": kind,
                    "Accept": metric(s.accept_length, "{:.2f}", s.state, zero_is_missing=True),
                    "Gen tok/s": metric(s.gen_throughput, "{:.1f}", s.state),
                    "tok/s": metric(s.gen_throughput, "{:.1f}", s.state),
                    "Health": metric(s.health_latency_ms, "{:.0f}ms", s.state),
                    "Uptime": up,
                    "Detail": self.t(detail, "bad" if s.state in ("crashed", "unhealthy") else "dim"),
                }
                cells = self.pick(named, WIDE, NARROW)[1]
                if matches(self.active_filter(view), service_ref(s), s.state, algo, detail):
                    rows.append((service_ref(s), cells))
        cols = self.pick({}, WIDE, NARROW)[0]
        sync_table(self.query_one(DataTable), self.sorted_rows(rows, cols), columns=self.headers(cols))
        f = self.active_filter(view)
        self.border_title = f"{self.pane_number} Services" + (f" · filter /{f}" if f else "")
        self._detail(selected, view.now)

    def name_cell(self, s: ServiceStatus, narrow: bool) -> Text:
        """HOST/SVC; in the narrow column set (no Kind column) a simulated one carries ` SIM` here."""
        cell = Text(service_ref(s), style=self.style_of("accent"), no_wrap=True)
        if narrow and s.simulated:
            cell.append(" SIM", self.style_of("sim"))
        return cell

    def _detail(self, s: ServiceStatus | None, now: float) -> None:
        """One line about the selected service: what does not fit in the columns (port, pid, health, why)."""
        line = Text(no_wrap=True, overflow="ellipsis")
        if s is not None:
            line.append(f"{service_ref(s)} ", self.style_of("accent"))
            parts = [
                f":{s.port}",
                f"pid {s.pid or '-'}",
                f"health {metric(s.health_latency_ms, '{:.0f}ms', s.state)}",
            ]
            if s.simulated:
                parts.append("SIMULATED")
            line.append(" · ".join(parts), self.style_of("dim"))
            if s.detail:
                line.append(
                    " · " + s.detail, self.style_of("bad" if s.state in ("crashed", "unhealthy") else "dim")
                )
        self.query_one("#service-detail", Static).update(line)

    def selected_ref(self) -> str | None:
        t = self.query_one(DataTable)
        if not t.row_count:
            return None
        try:
            return str(t.coordinate_to_cell_key((t.cursor_row, 0)).row_key.value)
        except Exception:
            return None

    def select_ref(self, ref: str) -> None:
        t = self.query_one(DataTable)
        try:
            t.move_cursor(row=t.get_row_index(ref), animate=False)
        except Exception:
            pass

    def action_smoke(self) -> None:
        ref = self.selected_ref()
        if ref is not None:
            self.post_message(ServiceIntent("smoke", ref))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.post_message(ServiceSelected(str(event.row_key.value)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: drill into the row (Esc comes back)."""
        key = event.row_key.value
        if key is not None and not str(key).endswith(":fault"):
            event.stop()
            self.post_message(DrillDown("service", str(key)))
