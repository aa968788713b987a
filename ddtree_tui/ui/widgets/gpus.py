"""GPU pane: a row per GPU with utilisation and memory bars, temperature, power, a utilisation sparkline,
the service on it, and faults in red. Replayed telemetry is labelled REPLAY, always."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ddtree_tui.state import GpuSample
from ddtree_tui.ui import fmt
from ddtree_tui.ui.messages import DrillDown, HostSelected
from ddtree_tui.ui.widgets.base import Pane, View, matches, sync_table

WIDE = ["Host:GPU", "Util", "Memory", "Temp", "Power", "Util history", "Service", "Fault"]
NARROW = ["GPU", "Util", "Memory", "Temp", "Power", "History", "Service"]


def load_badge(pct: float | None) -> str:
    """nvitop's thresholds: light load green, moderate yellow, heavy red; missing is dim."""
    if pct is None:
        return "dim"
    return "ok" if pct < 50 else ("warn" if pct < 80 else "bad")


def process_rows(g: GpuSample, host: str) -> list[tuple[str, dict[str, str]]]:
    """nvitop's process list, as rows under their GPU: pid, name, memory, owning service (ours or -)."""
    out = []
    procs = sorted(g.processes, key=lambda p: -(p.used_memory_mb or 0))
    for i, p in enumerate(procs):
        lead = "└" if i == len(procs) - 1 else "├"
        out.append(
            (
                f"{host}:{g.index}:pid{p.pid}",
                {
                    "name": f" {lead} pid {p.pid}",
                    "proc": (p.name or "?")[:24],
                    "mem": fmt.mb(p.used_memory_mb),
                    "service": f"{host}/{p.service}" if p.service else "-",
                },
            )
        )
    return out


def short_services(names: str | None, narrow: bool) -> str:
    """`dflash,ddtree-shadow` in full, or `dflash +1` in a narrow pane (the process rows name them all)."""
    if not names:
        return "-"
    parts = [n.strip() for n in names.split(",") if n.strip()]
    if not narrow or len(parts) < 2:
        return ", ".join(parts)
    return f"{parts[0]} +{len(parts) - 1}"


class GpusPane(Pane):
    pane_number = 2
    pane_title = "GPUs"
    BINDINGS = [Binding("a", "all_hosts", "All hosts", tooltip="show the GPUs of every host")]
    DEFAULT_CSS = "GpusPane #gpu-faults { height: auto; max-height: 4; }"
    spark_width = 16

    def compose(self) -> ComposeResult:
        yield DataTable(id="gpus-table", cursor_type="row")
        yield Static("", id="gpu-faults")

    def action_all_hosts(self) -> None:
        self.post_message(HostSelected(None))

    def _spark_width(self, narrow: bool) -> int:
        """The history widens with the pane: what the other wide columns leave, 16..60 cells."""
        if narrow:
            return 8
        room = self.layout_width() - 118
        return max(self.spark_width, min(60, room + self.spark_width))

    def render_view(self, view: View) -> None:
        rows = []
        replay = False
        faults = Text()
        narrow = self.is_narrow()
        cols = self.pick({}, WIDE, NARROW)[0]
        for h in view.snap.hosts:
            if view.selected_host and h.name != view.selected_host:
                continue
            tel = h.telemetry
            if tel.source == "replay":
                replay = True
            if tel.fault:
                if faults:
                    faults.append("\n")
                faults.append(f"{h.name}: ", self.style_of("accent"))
                faults.append(tel.fault, self.style_of("bad"))
                ft = self.t("✖ fault (below)", "bad")
                rows.append(
                    (
                        f"{h.name}:fault",
                        self.pick(
                            {
                                "Host:GPU": self.t(h.name, "accent"),
                                "GPU": self.t(h.name, "accent"),
                                "Fault": ft,
                                "Service": ft,
                            },
                            WIDE,
                            NARROW,
                        )[1],
                    )
                )
            bw = 6 if narrow else 8
            for g in h.gpus:
                util = Text(no_wrap=True)
                util.append(fmt.bar(g.util_gpu, 100, bw), self.style_of(load_badge(g.util_gpu)))
                util.append(f" {fmt.num(g.util_gpu, '{:.0f}', '%'):>4}")
                mem = Text(no_wrap=True)
                mem_pct = (
                    g.mem_used_mb / g.mem_total_mb * 100
                    if g.mem_used_mb is not None and g.mem_total_mb
                    else None
                )
                mem.append(fmt.bar(g.mem_used_mb, g.mem_total_mb, bw), self.style_of(load_badge(mem_pct)))
                if narrow:
                    mem.append(f" {fmt.num(mem_pct, '{:.0f}', '%'):>4}")
                else:
                    mem.append(f" {fmt.mb(g.mem_used_mb)}/{fmt.mb(g.mem_total_mb)}")
                if narrow:
                    power = fmt.num(g.power_w, "{:.0f}", "W")
                elif g.power_w is not None:
                    power = f"{fmt.num(g.power_w, '{:.0f}')}/{fmt.num(g.power_limit_w, '{:.0f}', 'W')}"
                else:
                    power = "-"
                hist = view.fleet.gpu_history(h.name, g.index, "util_gpu")
                spark = self.t(
                    fmt.sparkline(hist, self._spark_width(narrow)),
                    "replay" if tel.source == "replay" else "ok",
                )
                name = f"{h.name}:{g.index}"
                label = Text(name, style=self.style_of("accent"), no_wrap=True)
                if tel.source == "replay" and not narrow:
                    label.append(" REPLAY", self.style_of("replay"))
                faulty = g.health == "fault" or bool(g.fault)
                if faulty:
                    if faults:
                        faults.append("\n")
                    faults.append(f"{name}: ", self.style_of("accent"))
                    faults.append(g.fault or "fault", self.style_of("bad"))
                fault = self.t("✖ fault (below)", "bad") if faulty else self.t("ok", "dim")
                named = {
                    "Host:GPU": label,
                    "GPU": label,
                    "Util": util,
                    "Memory": mem,
                    "Temp": fmt.num(g.temp_c, "{:.0f}", "°C"),
                    "Power": power,
                    "Util history": spark,
                    "History": spark,
                    "Service": self.t("✖ fault (below)", "bad")
                    if (faulty and narrow)
                    else short_services(g.service, narrow),
                    "Fault": fault,
                }
                cells = self.pick(named, WIDE, NARROW)[1]
                procs = process_rows(g, h.name)
                proc_text = [str(v) for _, p in procs for v in p.values()]
                if matches(self.active_filter(view), name, g.name, g.service, g.fault, *proc_text):
                    rows.append((f"{h.name}:{g.index}", cells))
                    for key, p in procs:
                        pcells = {
                            cols[0]: self.t(p["name"], "dim"),
                            cols[1]: self.t(p["proc"], "dim"),
                            cols[2]: self.t(p["mem"], "dim"),
                            "Service": self.t(p["service"], "accent" if p["service"] != "-" else "dim"),
                        }
                        rows.append((key, [pcells.get(c, "") for c in cols]))
        scope = view.selected_host or "all hosts"
        f = self.active_filter(view)
        self.border_title = (
            f"{self.pane_number} GPUs · {scope}"
            + (" · REPLAY of a recording" if replay else "")
            + (f" · filter /{f}" if f else "")
        )
        sync_table(self.query_one(DataTable), rows, columns=cols)
        box = self.query_one("#gpu-faults", Static)
        box.update(faults)
        box.display = bool(faults)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: drill into the row (Esc comes back)."""
        key = event.row_key.value
        if key is not None and not str(key).endswith(":fault"):
            event.stop()
            self.post_message(DrillDown("gpu", str(key)))
