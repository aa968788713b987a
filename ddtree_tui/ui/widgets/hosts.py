"""Hosts pane: connection badge (connected / reconnecting in Ns / down + reason), CPU, RAM, disk, load."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable

from ddtree_tui.state import HostView
from ddtree_tui.ui import fmt
from ddtree_tui.ui.messages import HostSelected
from ddtree_tui.ui.widgets.base import Pane, View, matches, sync_table

WIDE = ["Host", "State", "CPU", "RAM", "Disk free", "Load", "GPUs", "Telemetry", "Note"]
NARROW = ["Host", "State", "CPU", "RAM", "Disk free", "Note"]


class HostsPane(Pane):
    pane_number = 1
    pane_title = "Hosts"
    DEFAULT_CSS = "HostsPane { height: auto; max-height: 8; } HostsPane DataTable { height: auto; }"

    def compose(self) -> ComposeResult:
        yield DataTable(id="hosts-table", cursor_type="row", zebra_stripes=False)

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
            note = self.t(h.error, "bad") if h.error else self.t(tel.note or "", "dim")
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
        sync_table(self.query_one(DataTable), rows, columns=self.pick({}, WIDE, NARROW)[0])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.has_focus_within and event.row_key.value is not None:
            self.post_message(HostSelected(str(event.row_key.value)))
