"""Pure builders of the drill-down views (Enter on a host, a GPU or a service): (label, value) rows and
sub-tables from one FleetSnapshot. No Textual here; ui/screens/detail.py renders them."""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import BaseModel

from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample, HostView, ServiceStatus, age, is_stale
from ddtree_tui.ui import fmt
from ddtree_tui.ui.views import process_rows


class DetailView(BaseModel):
    """What a drill-down screen shows: a title, facts, and tables (title, columns, rows)."""

    title: str
    facts: list[tuple[str, str]]
    tables: list[tuple[str, list[str], list[list[str]]]] = []
    log: list[str] = []


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _host(snap: FleetSnapshot, name: str) -> HostView | None:
    return next((h for h in snap.hosts if h.name == name), None)


def _aged(text: str, s: ServiceStatus, now: float, *keys: str) -> str:
    """A live value's text with its age once stale (the oldest of `keys`: a pair shown together)."""
    if text == "-" or not keys:
        return text
    seen = [s.observed_at.get(k) for k in keys]
    oldest = min((t for t in seen if t), default=None)
    if not is_stale(oldest, now):
        return text
    return f"{text} · stale, {fmt.duration(age(oldest, now))} ago"


def service_facts(s: ServiceStatus, now: float) -> list[tuple[str, str]]:
    live = s.state in ("ready", "starting", "unhealthy")
    running = f"{fmt.num(s.running_reqs, '{:.0f}')} / {fmt.num(s.queue_reqs, '{:.0f}')}"
    return [
        ("state", s.state + (f" since {_when(s.since)}" if s.since else "")),
        (
            "kind",
            "SIMULATED (a stand-in SGLang server: no model, no GPU work)" if s.simulated else s.launcher,
        ),
        ("algorithm", s.algorithm + (f" · mode {s.mode}" if s.mode else "")),
        ("port", str(s.port)),
        ("pid", str(s.pid or "-")),
        ("uptime", fmt.duration(now - s.started_at) if s.started_at and live else "-"),
        (
            "accept length",
            _aged(fmt.num(s.accept_length, "{:.2f}"), s, now, "accept_length")
            if live and s.accept_length
            else "-",
        ),
        ("accept rate", _aged(fmt.num(s.accept_rate, "{:.2f}"), s, now, "accept_rate") if live else "-"),
        (
            "gen throughput",
            _aged(fmt.num(s.gen_throughput, "{:.1f}", " tok/s"), s, now, "gen_throughput") if live else "-",
        ),
        (
            "running / queued",
            _aged(running, s, now, "running_reqs", "queue_reqs") if running != "- / -" else running,
        ),
        ("KV token usage", _aged(fmt.num(s.token_usage, "{:.2f}"), s, now, "token_usage")),
        (
            "health latency",
            _aged(fmt.num(s.health_latency_ms, "{:.0f}", " ms"), s, now, "health_latency_ms")
            if live
            else "-",
        ),
        ("GPUs", ", ".join(str(g) for g in s.gpus) or "-"),
        ("model", s.model or "-"),
        ("server version", s.version or "-"),
        ("detail", s.detail or "-"),
    ]


def service_detail(snap: FleetSnapshot, ref: str, log: Sequence[str], now: float) -> DetailView | None:
    host, _, name = ref.partition("/")
    h = _host(snap, host)
    s = next((x for x in h.services if x.name == name), None) if h else None
    if h is None or s is None:
        return None
    gpus = [g for g in h.gpus if g.index in s.gpus or (g.service and name in g.service.split(","))]
    return DetailView(
        title=f"Service {ref}",
        facts=service_facts(s, now),
        tables=[("GPUs it runs on", *gpu_table(h.name, gpus))],
        log=list(log)[-200:],
    )


def gpu_table(host: str, gpus: Sequence[GpuSample]) -> tuple[list[str], list[list[str]]]:
    cols = ["GPU", "Name", "Util", "Memory", "Temp", "Power", "Service", "Health"]
    rows = [
        [
            f"{host}:{g.index}",
            g.name or "-",
            fmt.num(g.util_gpu, "{:.0f}", "%"),
            f"{fmt.mb(g.mem_used_mb)}/{fmt.mb(g.mem_total_mb)}",
            fmt.num(g.temp_c, "{:.0f}", "°C"),
            f"{fmt.num(g.power_w, '{:.0f}')}/{fmt.num(g.power_limit_w, '{:.0f}', 'W')}",
            g.service or "-",
            g.fault or g.health,
        ]
        for g in gpus
    ]
    return cols, rows


def process_table(host: str, g: GpuSample) -> tuple[list[str], list[list[str]]]:
    """Every process on the GPU as nvitop lists it, the command line whole (the GPU table clips it)."""
    cols = ["PID", "User", "CPU", "GPU memory", "Host memory", "Elapsed", "Service", "Command"]
    rows = [
        [p.name.strip(), p.user, p.cpu, p.mem, p.host_mem, p.elapsed, p.service, p.command]
        for p in process_rows(g, host)
    ]
    return cols, rows


def gpu_detail(snap: FleetSnapshot, key: str, history: Sequence[float]) -> DetailView | None:
    host, _, idx = key.partition(":")
    h = _host(snap, host)
    g = next((x for x in h.gpus if str(x.index) == idx.split(":")[0]), None) if h else None
    if h is None or g is None:
        return None
    facts = [
        ("name", g.name or "-"),
        ("uuid", g.uuid or "-"),
        ("PCI bus", g.pci_bus_id or "-"),
        ("utilisation", f"{fmt.num(g.util_gpu, '{:.0f}', '%')} (memory controller {fmt.num(g.util_mem, '{:.0f}', '%')})"),
        ("memory", f"{fmt.mb(g.mem_used_mb)} of {fmt.mb(g.mem_total_mb)}"),
        ("temperature", fmt.num(g.temp_c, "{:.0f}", " °C")),
        ("power", f"{fmt.num(g.power_w, '{:.0f}')} of {fmt.num(g.power_limit_w, '{:.0f}', ' W')}"),
        ("SM clock", fmt.num(g.sm_clock_mhz, "{:.0f}", " MHz")),
        ("P-state", g.pstate or "-"),
        ("throttle reasons", ", ".join(g.throttle_reasons or []) or "-"),
        ("services", g.service or "-"),
        ("health", g.health + (f": {g.fault} (since {_when(g.fault_at)})" if g.fault else "")),
        ("telemetry", (h.telemetry.source or "-") + (" · REPLAY of a recording" if h.telemetry.source == "replay" else "")),
        ("driver", h.telemetry.driver_version or "-"),
        ("CUDA", h.telemetry.cuda_version or "-"),
        ("util history", fmt.sparkline(history, 60) if history else "-"),
    ]  # fmt: skip
    return DetailView(
        title=f"GPU {host}:{g.index}", facts=facts, tables=[("Processes", *process_table(host, g))]
    )


def host_detail(snap: FleetSnapshot, name: str, now: float) -> DetailView | None:
    h = _host(snap, name)
    if h is None:
        return None
    s = h.host
    facts = [
        ("address", h.address),
        ("state", h.state + (f" · {h.error}" if h.error else "")),
        ("next retry", f"in {max(0, round(h.next_retry_at - now))}s" if h.next_retry_at else "-"),
        ("CPU", fmt.num(s.cpu_percent if s else None, "{:.0f}", "%")),
        (
            "load 1/5/15",
            " ".join(fmt.num(v, "{:.2f}") for v in ((s.load1, s.load5, s.load15) if s else (None,) * 3)),
        ),
        ("memory", f"{fmt.mb(s.mem_used_mb)} of {fmt.mb(s.mem_total_mb)}" if s else "-"),
        ("disk free", f"{fmt.mb(s.disk_free_mb)} of {fmt.mb(s.disk_total_mb)}" if s else "-"),
        ("uptime", fmt.duration(s.uptime_s) if s else "-"),
        ("telemetry", f"{h.telemetry.source or '-'} {h.telemetry.note or ''}".strip()),
        ("telemetry fault", h.telemetry.fault or "-"),
        ("driver", h.telemetry.driver_version or "-"),
        ("CUDA", h.telemetry.cuda_version or "-"),
    ]
    svc_cols = ["Service", "State", "Algorithm", "Port", "PID"]
    svc_rows = [
        [x.name, x.state, x.algorithm + (f" {x.mode}" if x.mode else ""), str(x.port), str(x.pid or "-")]
        for x in h.services
    ]
    return DetailView(
        title=f"Host {name}",
        facts=facts,
        tables=[("GPUs", *gpu_table(name, h.gpus)), ("Services", svc_cols, svc_rows)],
    )  # fmt: skip
