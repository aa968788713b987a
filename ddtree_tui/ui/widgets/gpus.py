"""GPU pane: a row per GPU with utilisation and memory bars, temperature, power, a utilisation sparkline,
the service on it, and faults in red. Replayed telemetry is labelled REPLAY, always."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from ddtree_tui.ui import fmt
from ddtree_tui.ui.messages import HostSelected
from ddtree_tui.ui.widgets.base import Pane, View, matches, sync_table

WIDE = ["Host:GPU", "Util", "Memory", "Temp", "Power", "Util history", "Service", "Fault"]
NARROW = ["Host:GPU", "Util", "Memory", "Temp", "Power", "History", "Service / fault"]


class GpusPane(Pane):
    pane_number = 2
    pane_title = "GPUs"
    BINDINGS = [Binding("a", "all_hosts", "All hosts", tooltip="show the GPUs of every host")]
    spark_width = 16

    def compose(self) -> ComposeResult:
        yield DataTable(id="gpus-table", cursor_type="row")

    def action_all_hosts(self) -> None:
        self.post_message(HostSelected(None))

    def render_view(self, view: View) -> None:
        rows = []
        replay = False
        for h in view.snap.hosts:
            if view.selected_host and h.name != view.selected_host:
                continue
            tel = h.telemetry
            if tel.source == "replay":
                replay = True
            if tel.fault:
                ft = self.t(tel.fault, "bad")
                rows.append(
                    (
                        f"{h.name}:fault",
                        self.pick(
                            {"Host:GPU": self.t(h.name, "accent"), "Fault": ft, "Service / fault": ft},
                            WIDE,
                            NARROW,
                        )[1],
                    )
                )
            narrow = self.is_narrow()
            bw = 6 if narrow else 8
            for g in h.gpus:
                util = Text(no_wrap=True)
                ub = "bad" if (g.util_gpu or 0) >= 95 else "ok"
                util.append(fmt.bar(g.util_gpu, 100, bw), self.style_of(ub))
                util.append(f" {fmt.num(g.util_gpu, '{:.0f}', '%'):>4}")
                mem = Text(no_wrap=True)
                mem.append(fmt.bar(g.mem_used_mb, g.mem_total_mb, bw), self.style_of("accent"))
                if narrow:
                    pct = (
                        g.mem_used_mb / g.mem_total_mb * 100
                        if g.mem_used_mb is not None and g.mem_total_mb
                        else None
                    )
                    mem.append(f" {fmt.num(pct, '{:.0f}', '%'):>4}")
                else:
                    mem.append(f" {fmt.mb(g.mem_used_mb)}/{fmt.mb(g.mem_total_mb)}")
                if narrow:
                    power = fmt.num(g.power_w, "{:.0f}", "W")
                elif g.power_w is not None:
                    power = f"{fmt.num(g.power_w, '{:.0f}')}/{fmt.num(g.power_limit_w, '{:.0f}', 'W')}"
                else:
                    power = "-"
                hist = view.fleet.gpu_history(h.name, g.index, "util_gpu")
                sw = 8 if narrow else self.spark_width
                spark = self.t(fmt.sparkline(hist, sw), "replay" if tel.source == "replay" else "ok")
                name = f"{h.name}:{g.index}"
                label = Text(name, style=self.style_of("accent"), no_wrap=True)
                if tel.source == "replay":
                    label.append(" REPLAY", self.style_of("replay"))
                faulty = g.health == "fault" or bool(g.fault)
                fault = self.t(g.fault or "fault", "bad") if faulty else self.t("ok", "dim")
                named = {
                    "Host:GPU": label,
                    "Util": util,
                    "Memory": mem,
                    "Temp": fmt.num(g.temp_c, "{:.0f}", "°C"),
                    "Power": power,
                    "Util history": spark,
                    "History": spark,
                    "Service": g.service or "-",
                    "Fault": fault,
                    "Service / fault": fault if faulty else (g.service or "-"),
                }
                cells = self.pick(named, WIDE, NARROW)[1]
                if matches(self.active_filter(view), name, g.name, g.service, g.fault):
                    rows.append((f"{h.name}:{g.index}", cells))
        scope = view.selected_host or "all hosts"
        self.border_title = f"{self.pane_number} GPUs · {scope}" + (
            " · REPLAY of a recording" if replay else ""
        )
        sync_table(self.query_one(DataTable), rows, columns=self.pick({}, WIDE, NARROW)[0])
