"""Hosts pane: connection badge (connected / reconnecting in Ns / down + reason), CPU, RAM, disk, load."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from ddtree_tui.state import HostView
from ddtree_tui.ui import fmt
from ddtree_tui.ui.messages import DrillDown, HostSelected
from ddtree_tui.ui.widgets.base import Pane, View, matches, sync_table

WIDE = ["Host", "State", "CPU", "RAM", "Disk free", "Load", "GPUs", "Telemetry", "Note"]
NARROW = ["Host", "State", "CPU", "RAM", "Disk free", "Note"]


class HostsPane(Pane):
    pane_number = 1
    pane_title = "Hosts"
    sortable = True  # a click on a header sorts by it
    DEFAULT_CSS = """
    HostsPane { height: auto; max-height: 12; }
    HostsPane DataTable { height: auto; max-height: 7; }
    HostsPane #host-errors { height: auto; max-height: 3; }
    """

    def compose(self) -> ComposeResult:
        yield DataTable(id="hosts-table", cursor_type="row", zebra_stripes=False)
        yield Static("", id="host-errors")

    def badge(self, h: HostView, now: float) -> Text:
        if h.state == "connected":
            return self.t("● connected", "ok")
        if h.state == "connecting":
            return self.t("◌ connecting", "warn")
        if h.next_retry_at is not None:
            wait = max(0, round(h.next_retry_at - now))
            return self.t(f"↻ reconnecting in {wait}s", "warn")
        return self.t("✖ down", "bad")

    def render_view(self, view: View) -> None:
        rows = []
        for h in view.snap.hosts:
            s = h.host
            cpu = fmt.num(s.cpu_percent if s else None, "{:.0f}", "%")
            ram = f"{fmt.mb(s.mem_used_mb)}/{fmt.mb(s.mem_total_mb)}" if s else "-"
            disk = fmt.mb(s.disk_free_mb) if s else "-"
            load = fmt.num(s.load1 if s else None, "{:.2f}")
            tel = h.telemetry
            if tel.source == "replay":
                tel_text = self.t("REPLAY", "replay")
            elif tel.fault:
                tel_text = self.t(f"{tel.source or '-'}: {tel.fault}", "bad")
            else:
                tel_text = self.t(tel.source or "-", "dim")
            note = self.t("✖ error (below)", "bad") if h.error else self.t(tel.note or "", "dim")
            if self.is_narrow() and tel.source == "replay" and not h.error:
                note = self.t("REPLAY telemetry", "replay")
            named = {
                "Host": self.t(h.name, "accent"),
                "State": self.badge(h, view.now),
                "CPU": cpu,
                "RAM": ram,
                "Disk free": disk,
                "Load": load,
                "GPUs": str(len(h.gpus)),
                "Telemetry": tel_text,
                "Note": note,
            }
            cells = self.pick(named, WIDE, NARROW)[1]
            if matches(self.active_filter(view), h.name, h.address, h.state, h.error):
                rows.append((h.name, cells))
        cols = self.pick({}, WIDE, NARROW)[0]
        sync_table(self.query_one(DataTable), self.sorted_rows(rows, cols), columns=self.headers(cols))
        f = self.active_filter(view)
        self.border_title = f"{self.pane_number} Hosts" + (f" · filter /{f}" if f else "")
        self._errors(view)

    def _errors(self, view: View) -> None:
        """Each host's error in full below the table (a Note column cut at the pane edge hid them)."""
        out = Text()
        for h in view.snap.hosts:
            if not h.error:
                continue
            if out:
                out.append("\n")
            out.append(f"{h.name}: ", self.style_of("accent"))
            out.append(h.error, self.style_of("bad"))
            if h.next_retry_at is not None:
                out.append(f" · retry in {max(0, round(h.next_retry_at - view.now))}s", self.style_of("dim"))
        box = self.query_one("#host-errors", Static)
        box.update(out)
        box.display = bool(out)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.has_focus_within and event.row_key.value is not None:
            self.post_message(HostSelected(str(event.row_key.value)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: drill into the row (Esc comes back)."""
        key = event.row_key.value
        if key is not None and not str(key).endswith(":fault"):
            event.stop()
            self.post_message(DrillDown("host", str(key)))
