"""Typed views: what each pane shows, built by pure functions from a FleetSnapshot (plus the clock, the pane's
width and the `/` filter). Panes paint a view and never call the fleet; the row builders are unit-tested
without a terminal (tests/unit/test_ui_rows.py). Cells name a badge, not a colour: the pane turns badges
into the theme's styles when it paints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from ddtree_tui.bench.results import AnyRun
from ddtree_tui.config import display_mode
from ddtree_tui.model.snapshot import (
    FleetSnapshot,
    GpuProcess,
    GpuSample,
    HostView,
    ServiceStatus,
    age,
    is_stale,
)
from ddtree_tui.model.todo import TodoView
from ddtree_tui.ui import filtering, fmt

Badge = Literal["ok", "warn", "bad", "dim", "sim", "replay", "accent"]
BADGES: tuple[Badge, ...] = ("ok", "warn", "bad", "dim", "sim", "replay", "accent")
# below this many cells a pane shows its compact column set (80x24 terminals, split tmux panes)
WIDE_MIN = 118


# Seg, Cell and Row are named tuples, not dataclasses: a view holds one a cell of every row (512 GPU rows at
# 64 hosts x 8 GPUs, rebuilt each second), and tuples of strings leave the garbage collector's lists once
# seen, so the collections they set off do not walk them again and again (most of the GPU view's time was
# the collector's, issue 28). Immutable and compared by value as before.
class Seg(NamedTuple):
    """A run of text in one badge's style (None: the cell's own style)."""

    text: str
    badge: Badge | None = None


class Cell(NamedTuple):
    """Styled text in a table cell: a base badge over the whole cell, segments with their own badges, and
    whether a cell too narrow for it ends in an ellipsis (`clip`)."""

    segs: tuple[Seg, ...]
    base: Badge | None = None
    clip: bool = True

    @property
    def plain(self) -> str:
        return "".join(s.text for s in self.segs)


CellValue = str | Cell


def styled(text: str, badge: Badge | None = None) -> Cell:
    """One-style text, cut with an ellipsis when it does not fit."""
    return Cell((Seg(text),), base=badge)


def plain_of(cell: CellValue) -> str:
    return cell.plain if isinstance(cell, Cell) else cell


def age_text(observed: float | None, now: float) -> str:
    """ "6m03s ago" for a value observed then."""
    return f"{fmt.duration(age(observed, now))} ago"


def aged(text: str, observed: float | None, now: float, *, show_age: bool = True) -> CellValue:
    """A live value as shown: as it is while fresh; once it is older than STALE_AFTER_S (the source stopped
    reporting it), dimmed, with its age. A placeholder (`-`) has no age."""
    if text == "-" or not is_stale(observed, now):
        return text
    segs = (Seg(text), Seg(f" {age_text(observed, now)}")) if show_age else (Seg(text),)
    return Cell(segs, base="dim")


class Row(NamedTuple):
    key: str
    cells: tuple[CellValue, ...]


@dataclass(frozen=True)
class TableView:
    """Columns and keyed rows of a table pane; the pane keeps its cursor on the same key across updates."""

    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    title: str


@dataclass(frozen=True)
class HostsView:
    table: TableView
    errors: tuple[Seg, ...] = ()  # each host's error in full (a cut Note column hid them)


@dataclass(frozen=True)
class ServicesView:
    table: TableView
    detail: tuple[Seg, ...] = ()  # one line about the selected service


@dataclass(frozen=True)
class GpusView:
    table: TableView
    faults: tuple[Seg, ...] = ()


@dataclass(frozen=True)
class LogsView:
    """The selected service's log: `lines` replace what is shown when `reset`, else they are appended."""

    ref: str | None
    search: str = ""
    lines: tuple[str, ...] = ()
    reset: bool = True


@dataclass(frozen=True)
class TodosView:
    """The checklist as the fleet has it now (items, evidence, a load error) and the pane's `/` filter."""

    todos: TodoView
    filter: str = ""


# a run in the bench history: what Fleet.bench_history gives, oldest first
HistoryRun = AnyRun  # bench/results.py: every run kind the bench history holds


@dataclass(frozen=True)
class BenchView:
    """The bench pane's past runs (the live run is folded from events into the pane's BenchLive)."""

    history: tuple[HistoryRun, ...] = ()
    filter: str = ""  # the pane's `/` filter: every bench table's rows (ui/filtering.py)


@dataclass(frozen=True)
class PaneInputs:
    """What the builders read besides the snapshot: the clock, a pane's width, its filter, the selection."""

    now: float
    width: int = 200
    filter: str = ""
    selected_host: str | None = None
    selected_service: str | None = None
    history: Mapping[tuple[str, int], Sequence[float]] = field(default_factory=dict)

    @property
    def narrow(self) -> bool:
        return self.width < WIDE_MIN


def matches(filter_text: str, *fields: str | None) -> bool:
    """The `/` filter over the text of a row: a case-insensitive regex (or substring), `!` inverts
    (ui/filtering.py)."""
    return filtering.matches(filter_text, *fields)


def pick(cells: Mapping[str, CellValue], columns: Sequence[str]) -> tuple[CellValue, ...]:
    return tuple(cells.get(c, "") for c in columns)


def _title(number: int, name: str, filt: str) -> str:
    return f"{number} {name}" + (f" · filter {filtering.filter_label(filt)}" if filt else "")


# --- hosts -------------------------------------------------------------------------------------------------
HOSTS_WIDE = ("Host", "State", "CPU", "RAM", "Disk free", "Load", "GPUs", "Telemetry", "Note")
HOSTS_NARROW = ("Host", "State", "CPU", "RAM", "Disk free", "Note")


def host_badge(h: HostView, now: float) -> Cell:
    """Connected, connecting, reconnecting in Ns, or down."""
    if h.state == "connected":
        return styled("● connected", "ok")
    if h.state == "connecting":
        return styled("◌ connecting", "warn")
    if h.next_retry_at is not None:
        return styled(f"↻ reconnecting in {max(0, round(h.next_retry_at - now))}s", "warn")
    return styled("✖ down", "bad")


def host_row(h: HostView, now: float, narrow: bool) -> Row:
    s = h.host
    tel = h.telemetry
    if tel.source == "replay":
        tel_cell = styled("REPLAY", "replay")
    elif tel.fault:
        tel_cell = styled(f"{tel.source or '-'}: {tel.fault}", "bad")
    else:
        tel_cell = styled(tel.source or "-", "dim")
    note = styled("✖ error (below)", "bad") if h.error else styled(tel.note or "", "dim")
    if narrow and tel.source == "replay" and not h.error:
        note = styled("REPLAY telemetry", "replay")
    seen = s.ts if s else None  # the sample's values were all observed then; the CPU cell says how long ago
    named: dict[str, CellValue] = {
        "Host": styled(h.name, "accent"),
        "State": host_badge(h, now),
        "CPU": aged(fmt.num(s.cpu_percent if s else None, "{:.0f}", "%"), seen, now),
        "RAM": aged(
            f"{fmt.mb(s.mem_used_mb)}/{fmt.mb(s.mem_total_mb)}" if s else "-", seen, now, show_age=False
        ),
        "Disk free": aged(fmt.mb(s.disk_free_mb) if s else "-", seen, now, show_age=False),
        "Load": aged(fmt.num(s.load1 if s else None, "{:.2f}"), seen, now, show_age=False),
        "GPUs": str(len(h.gpus)),
        "Telemetry": tel_cell,
        "Note": note,
    }
    return Row(h.name, pick(named, HOSTS_NARROW if narrow else HOSTS_WIDE))


def host_errors(snap: FleetSnapshot, now: float) -> tuple[Seg, ...]:
    out: list[Seg] = []
    for h in snap.hosts:
        if not h.error:
            continue
        if out:
            out.append(Seg("\n"))
        out += [Seg(f"{h.name}: ", "accent"), Seg(h.error, "bad")]
        if h.next_retry_at is not None:
            out.append(Seg(f" · retry in {max(0, round(h.next_retry_at - now))}s", "dim"))
    return tuple(out)


def hosts_view(snap: FleetSnapshot, inp: PaneInputs) -> HostsView:
    rows = tuple(
        host_row(h, inp.now, inp.narrow)
        for h in snap.hosts
        if matches(inp.filter, h.name, h.address, h.state, h.error)
    )
    cols = HOSTS_NARROW if inp.narrow else HOSTS_WIDE
    return HostsView(TableView(cols, rows, _title(1, "Hosts", inp.filter)), host_errors(snap, inp.now))


# --- services ----------------------------------------------------------------------------------------------
SERVICES_WIDE = (
    "Service",
    "State",
    "Port",
    "Algorithm",
    "Kind",
    "Accept",
    "Gen tok/s",
    "Health",
    "Uptime",
    "Detail",
)
SERVICES_NARROW = ("Service", "State", "Algorithm", "Accept", "tok/s", "Uptime")  # SIM rides on the name
STATE_BADGE: dict[str, tuple[str, Badge]] = {
    "ready": ("● ready", "ok"),
    "starting": ("◌ starting", "warn"),
    "unhealthy": ("▲ unhealthy", "warn"),
    "crashed": ("✖ crashed", "bad"),
    "stopped": ("○ stopped", "dim"),
    "unknown": ("? unknown", "dim"),
}
LIVE_STATES = ("ready", "starting", "unhealthy")


def service_ref(s: ServiceStatus) -> str:
    return f"{s.host}/{s.name}"


def live_metric(
    s: ServiceStatus, key: str, fmt_: str, now: float, zero_is_missing: bool = False
) -> CellValue:
    """A service's live value (a ServiceStatus field in LIVE_FIELDS) as shown: `metric`'s text, dimmed with
    its age once its source stopped reporting it (an idle server's last throughput)."""
    text = metric(getattr(s, key), fmt_, s.state, zero_is_missing)
    return aged(text, s.observed_at.get(key), now)


def metric(value: float | None, fmt_: str, state: str, zero_is_missing: bool = False) -> str:
    """A service metric as shown: `-` when the service is not running (a crashed service kept its last
    health latency) or when the value is a placeholder zero (accept length is at least 1 when measured)."""
    if state not in LIVE_STATES or value is None or (zero_is_missing and not value):
        return "-"
    return fmt_.format(value)


def mode_label(algorithm: str, mode: str | None, narrow: bool) -> str:
    """`ddtree tree`, `dflash linear`, `baseline`; narrow: `ddtree:shadow`, `dflash` (linear is implied).
    The mode is config.display_mode's answer, the one every screen uses."""
    shown = display_mode(algorithm, mode)
    if shown == "-" or (narrow and algorithm == "dflash"):
        return algorithm
    if narrow and shown == "shadow-linear":
        shown = "shadow"
    return algorithm + (":" if narrow else " ") + shown


def algorithm_text(s: ServiceStatus, narrow: bool) -> str:
    return mode_label(s.algorithm, s.mode, narrow)


def service_name_cell(s: ServiceStatus, narrow: bool) -> Cell:
    """HOST/SVC; in the narrow column set (no Kind column) a simulated one carries ` SIM` here."""
    segs = [Seg(service_ref(s))]
    if narrow and s.simulated:
        segs.append(Seg(" SIM", "sim"))
    return Cell(tuple(segs), base="accent", clip=False)


def _bad_if_failed(s: ServiceStatus) -> Badge:
    return "bad" if s.state in ("crashed", "unhealthy") else "dim"


def service_row(s: ServiceStatus, now: float, narrow: bool) -> Row:
    text, badge = STATE_BADGE.get(s.state, (s.state, "dim"))
    if s.simulated:
        kind = styled("SIM" if narrow else "SIMULATED", "sim")
    else:
        kind = styled(s.launcher, "dim")
    live = s.started_at and s.state in LIVE_STATES
    named: dict[str, CellValue] = {
        "Service": service_name_cell(s, narrow),
        "State": styled(text, badge),
        "Port": str(s.port),
        "Algorithm": algorithm_text(s, narrow),
        "Kind": kind,
        "Accept": live_metric(s, "accept_length", "{:.2f}", now, zero_is_missing=True),
        "Gen tok/s": live_metric(s, "gen_throughput", "{:.1f}", now),
        "tok/s": live_metric(s, "gen_throughput", "{:.1f}", now),
        "Health": live_metric(s, "health_latency_ms", "{:.0f}ms", now),
        "Uptime": fmt.duration(now - (s.started_at or 0.0)) if live else "-",
        "Detail": styled(s.detail or "", _bad_if_failed(s)),
    }
    return Row(service_ref(s), pick(named, SERVICES_NARROW if narrow else SERVICES_WIDE))


def service_detail_line(s: ServiceStatus | None, now: float | None = None) -> tuple[Seg, ...]:
    """What does not fit in the columns: port, pid, health (its age once stale), why."""
    if s is None:
        return ()
    health = metric(s.health_latency_ms, "{:.0f}ms", s.state)
    if now is not None and health != "-" and is_stale(s.observed_at.get("health_latency_ms"), now):
        health += f" {age_text(s.observed_at.get('health_latency_ms'), now)}"
    parts = [
        f":{s.port}",
        f"pid {s.pid or '-'}",
        f"health {health}",
    ]
    if s.simulated:
        parts.append("SIMULATED")
    out = [Seg(f"{service_ref(s)} ", "accent"), Seg(" · ".join(parts), "dim")]
    if s.detail:
        out.append(Seg(" · " + s.detail, _bad_if_failed(s)))
    return tuple(out)


def services_view(snap: FleetSnapshot, inp: PaneInputs) -> ServicesView:
    rows: list[Row] = []
    selected = None
    for h in snap.hosts:
        for s in h.services:
            if service_ref(s) == inp.selected_service:
                selected = s
            if matches(inp.filter, service_ref(s), s.state, algorithm_text(s, inp.narrow), s.detail or ""):
                rows.append(service_row(s, inp.now, inp.narrow))
    cols = SERVICES_NARROW if inp.narrow else SERVICES_WIDE
    return ServicesView(
        TableView(cols, tuple(rows), _title(3, "Services", inp.filter)),
        service_detail_line(selected, inp.now),
    )


# --- GPUs --------------------------------------------------------------------------------------------------
GPUS_WIDE = ("Host:GPU", "Util", "Memory", "Temp", "Power", "Util history", "Service", "Fault")
GPUS_NARROW = ("GPU", "Util", "Memory", "Temp", "Power", "History", "Service")
SPARK_MIN = 16


def load_badge(pct: float | None) -> Badge:
    """nvitop's thresholds: light load green, moderate yellow, heavy red; missing is dim."""
    if pct is None:
        return "dim"
    return "ok" if pct < 50 else ("warn" if pct < 80 else "bad")


@dataclass(frozen=True)
class ProcessRow:
    key: str
    name: str
    proc: str
    mem: str
    service: str
    # nvitop's columns, from the host's /proc ("-" where it could not be read)
    user: str = "-"
    cpu: str = "-"
    host_mem: str = "-"
    elapsed: str = "-"
    command: str = "-"


def process_rows(g: GpuSample, host: str) -> list[ProcessRow]:
    """nvitop's process list, as rows under their GPU: pid, name, GPU memory, owning service (ours or -), and
    from /proc the user, CPU %, host memory, elapsed time and the full command line. A process whose parent
    is on the same GPU (a scheduler's worker under the server's main pid) sits under it, one level in."""
    procs = sorted(g.processes, key=lambda p: -(p.used_memory_mb or 0))
    pids = {p.pid for p in procs}
    tops = [p for p in procs if p.ppid not in pids]
    ordered: list[tuple[GpuProcess, int, bool]] = []  # process, depth, last among its siblings
    for i, p in enumerate(tops or procs):
        _walk(procs, ordered, p, 0, i == len(tops or procs) - 1)
    return [
        ProcessRow(
            key=f"{host}:{g.index}:pid{p.pid}",
            name=" " + "  " * depth + f"{'└' if last else '├'} pid {p.pid}",
            proc=(p.name or "?")[:24],
            mem=fmt.mb(p.used_memory_mb),
            service=f"{host}/{p.service}" if p.service else "-",
            user=p.user or "-",
            cpu=fmt.num(p.cpu_percent, "{:.0f}", "%"),
            host_mem=fmt.mb(p.host_mem_mb),
            elapsed=fmt.duration(p.elapsed_s) if p.elapsed_s is not None else "-",
            command=p.command or p.name or "?",
        )
        for p, depth, last in ordered
    ]


def _walk(
    procs: list[GpuProcess],
    ordered: list[tuple[GpuProcess, int, bool]],
    p: GpuProcess,
    depth: int,
    last: bool,
) -> None:
    """`p` and, depth first, its children on the same GPU into `ordered`. A module function, not a closure
    that calls itself: such a closure is a reference cycle, garbage for the collector on every GPU view."""
    ordered.append((p, depth, last))
    kids = [c for c in procs if c.ppid == p.pid and c.pid != p.pid]
    for j, c in enumerate(kids):
        if depth < 4 and all(c is not o[0] for o in ordered):
            _walk(procs, ordered, c, depth + 1, j == len(kids) - 1)


def short_services(names: str | None, narrow: bool) -> str:
    """`dflash,ddtree-shadow` in full, or `dflash +1` in a narrow pane (the process rows name them all)."""
    if not names:
        return "-"
    parts = [n.strip() for n in names.split(",") if n.strip()]
    if not narrow or len(parts) < 2:
        return ", ".join(parts)
    return f"{parts[0]} +{len(parts) - 1}"


def spark_width(width: int) -> int:
    """The history widens with the pane: what the other wide columns leave, 16..60 cells; 8 when narrow."""
    if width < WIDE_MIN:
        return 8
    return max(SPARK_MIN, min(60, width - WIDE_MIN + SPARK_MIN))


def _bar(value: float | None, total: float | None, pct: float | None, width: int, tail: str) -> Cell:
    return Cell((Seg(fmt.bar(value, total, width), load_badge(pct)), Seg(tail)), clip=False)


def gpu_cells(
    g: GpuSample, host: str, replay: bool, spark: Sequence[float], inp: PaneInputs, narrow: bool | None = None
) -> dict[str, CellValue]:
    narrow = inp.narrow if narrow is None else narrow
    bw = 6 if narrow else 8
    util = _bar(g.util_gpu, 100, g.util_gpu, bw, f" {fmt.num(g.util_gpu, '{:.0f}', '%'):>4}")
    mem_pct = g.mem_used_mb / g.mem_total_mb * 100 if g.mem_used_mb is not None and g.mem_total_mb else None
    mem_tail = (
        f" {fmt.num(mem_pct, '{:.0f}', '%'):>4}"
        if narrow
        else f" {fmt.mb(g.mem_used_mb)}/{fmt.mb(g.mem_total_mb)}"
    )
    if narrow:
        power = fmt.num(g.power_w, "{:.0f}", "W")
    elif g.power_w is not None:
        power = f"{fmt.num(g.power_w, '{:.0f}')}/{fmt.num(g.power_limit_w, '{:.0f}', 'W')}"
    else:
        power = "-"
    # wide: drawn once its width is known (gpus_view measures the other columns first)
    hist = styled(fmt.sparkline(spark, 8) if narrow else "", "replay" if replay else "ok")
    label_segs = [Seg(f"{host}:{g.index}")]
    if replay and not narrow:
        label_segs.append(Seg(" REPLAY", "replay"))
    label = Cell(tuple(label_segs), base="accent", clip=False)
    faulty = g.health == "fault" or bool(g.fault)
    fault_cell = styled("✖ fault (below)", "bad")
    mem: CellValue = _bar(g.mem_used_mb, g.mem_total_mb, mem_pct, bw, mem_tail)
    temp: CellValue = fmt.num(g.temp_c, "{:.0f}", "°C")
    power_cell: CellValue = power
    if is_stale(g.ts, inp.now):  # the sampler stopped reporting it: its last numbers, dimmed, with their age
        label = Cell((*label_segs, Seg(f" {age_text(g.ts, inp.now)}", "dim")), base="accent", clip=False)
        util = Cell((Seg(util.plain),), base="dim", clip=False)
        mem = Cell((Seg(plain_of(mem)),), base="dim", clip=False)
        temp = aged(plain_of(temp), g.ts, inp.now, show_age=False)
        power_cell = aged(power, g.ts, inp.now, show_age=False)
    return {
        "Host:GPU": label,
        "GPU": label,
        "Util": util,
        "Memory": mem,
        "Temp": temp,
        "Power": power_cell,
        "Util history": hist,
        "History": hist,
        "Service": fault_cell if (faulty and narrow) else short_services(g.service, narrow),
        "Fault": fault_cell if faulty else styled("ok", "dim"),
    }


def gpus_view(snap: FleetSnapshot, inp: PaneInputs) -> GpusView:
    """The wide column set when it fits the pane with its widest cells, the history taking what is left (up
    to 60 cells); else the compact set (at 120 columns the wide set cut its last column to `Fa`)."""
    if inp.narrow:
        return _gpus_view(snap, inp, narrow=True)
    wide = _gpus_view(snap, inp, narrow=False)
    cols = wide.table.columns
    at = cols.index("Util history")
    used = sum(
        max([len(c), *(len(plain_of(r.cells[i])) for r in wide.table.rows if i < len(r.cells))])
        for i, c in enumerate(cols)
        if i != at
    )
    room = inp.width - 2 - used - 2 * len(cols)  # the pane's border; a DataTable pads each cell by 1 a side
    if room < max(SPARK_MIN, len(cols[at])):
        return _gpus_view(snap, inp, narrow=True)
    spark = min(60, room)
    rows = tuple(_widen_history(r, at, spark, inp) for r in wide.table.rows)
    return GpusView(TableView(cols, rows, wide.table.title), wide.faults)


def _widen_history(row: Row, at: int, width: int, inp: PaneInputs) -> Row:
    """A GPU row's history cell drawn `width` cells wide (process and fault rows have none)."""
    host, _, index = row.key.rpartition(":")
    cell = row.cells[at] if at < len(row.cells) else ""
    if not index.isdigit() or not isinstance(cell, Cell):
        return row
    spark = fmt.sparkline(list(inp.history.get((host, int(index)), ())), width)
    cells = (*row.cells[:at], styled(spark, cell.base), *row.cells[at + 1 :])
    return Row(row.key, cells)


def _gpus_view(snap: FleetSnapshot, inp: PaneInputs, narrow: bool) -> GpusView:
    rows: list[Row] = []
    faults: list[Seg] = []
    replay = False
    cols = GPUS_NARROW if narrow else GPUS_WIDE

    def fault(subject: str, text: str) -> None:
        if faults:
            faults.append(Seg("\n"))
        faults.extend((Seg(f"{subject}: ", "accent"), Seg(text, "bad")))

    for h in snap.hosts:
        if inp.selected_host and h.name != inp.selected_host:
            continue
        tel = h.telemetry
        replay = replay or tel.source == "replay"
        if tel.fault:
            fault(h.name, tel.fault)
            ft = styled("✖ fault (below)", "bad")
            name = styled(h.name, "accent")
            named: dict[str, CellValue] = {"Host:GPU": name, "GPU": name, "Fault": ft, "Service": ft}
            rows.append(Row(f"{h.name}:fault", pick(named, cols)))
        for g in h.gpus:
            key = f"{h.name}:{g.index}"
            if g.health == "fault" or g.fault:
                fault(key, g.fault or "fault")
            procs = process_rows(g, h.name)
            if inp.filter:  # (no filter: every row, without joining its processes' text)
                proc_text = [t for p in procs for t in (p.name, p.proc, p.mem, p.service)]
                if not matches(inp.filter, key, g.name, g.service, g.fault, *proc_text):
                    continue
            spark = inp.history.get((h.name, g.index), ())
            cells = gpu_cells(g, h.name, tel.source == "replay", spark, inp, narrow)
            rows.append(Row(key, pick(cells, cols)))
            for p in procs:  # nvitop's columns in the GPU table's own: CPU under Util, RSS under Memory
                pcells: dict[str, CellValue] = {
                    cols[0]: styled(p.name, "dim"),
                    "Util": styled(f"cpu {p.cpu}", "dim"),
                    "Memory": styled(f"{p.mem} +{p.host_mem} host" if p.host_mem != "-" else p.mem, "dim"),
                    "Temp": styled(p.user, "dim"),
                    "Power": styled(p.elapsed, "dim"),
                    "Util history": styled(p.command, "dim"),
                    "History": styled(p.command, "dim"),
                    "Service": styled(p.service, "accent" if p.service != "-" else "dim"),
                }
                rows.append(Row(p.key, pick(pcells, cols)))
    title = (
        f"2 GPUs · {inp.selected_host or 'all hosts'}"
        + (" · REPLAY of a recording" if replay else "")
        + (f" · filter {filtering.filter_label(inp.filter)}" if inp.filter else "")
    )
    return GpusView(TableView(cols, tuple(rows), title), tuple(faults))


def gpu_keys(snap: FleetSnapshot, selected_host: str | None) -> list[tuple[str, int]]:
    """The (host, index) of every GPU the GPU pane shows: whose utilisation history the controller reads."""
    return [
        (h.name, g.index) for h in snap.hosts if not selected_host or h.name == selected_host for g in h.gpus
    ]
