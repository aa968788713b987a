"""Prometheus exposition of the fleet, made with the official client library: a custom collector that reads
the latest snapshot at scrape time (nothing is copied per sample) plus the counters the collector keeps from
the event stream (restarts, bench progress, events seen).

Naming follows the Prometheus rules: base units (bytes, seconds, watts, celsius, ratios 0..1), `_total` for
counters, `_info` for series that carry labels and the value 1, and low label cardinality (host, gpu, service,
a small closed set of `state` values; never a pid, a uuid on a value series, or a free-text error)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TypeVar, get_args

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ddtree_tui import __version__
from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample, HostConnState, ServiceState, ServiceStatus

MIB = 1024 * 1024
HOST_STATES: tuple[str, ...] = get_args(HostConnState)
SERVICE_STATES: tuple[str, ...] = get_args(ServiceState)


@dataclass
class CollectorCounters:
    """What the collector counts from the fleet's event stream (the snapshot holds no history)."""

    restarts: dict[tuple[str, str], int] = field(default_factory=dict)  # (host, service) -> restarts
    events: dict[str, int] = field(default_factory=dict)  # event kind -> count
    bench_running: bool = False
    bench_done: int = 0
    bench_total: int = 0
    bench_runs: int = 0
    bench_failed_requests: int = 0
    alerts_active: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (kind, host, subject)
    alerts_fired: dict[str, int] = field(default_factory=dict)  # kind -> count
    event_clients: int = 0  # /events streams open now (attached TUIs, browsers)
    refused: dict[str, int] = field(default_factory=dict)  # host / origin / connections -> refusals

    def copy(self) -> CollectorCounters:
        """A copy that the loop's later updates do not touch (for a scrape made in a thread)."""
        return replace(
            self,
            restarts=dict(self.restarts),
            events=dict(self.events),
            alerts_active=dict(self.alerts_active),
            alerts_fired=dict(self.alerts_fired),
            refused=dict(self.refused),
        )


def _div(v: float | None, d: float) -> float | None:
    return None if v is None else v / d


def _mul(v: int | None, k: int) -> float | None:
    return None if v is None else float(v * k)


T = TypeVar("T")
# A value series of a GPU or a service: name, help, and the value (None: no sample, the series is left out).
_Values = tuple[tuple[str, str, Callable[[T], float | None]], ...]
_GPU_VALUES: _Values[GpuSample] = (
    ("ddtree_gpu_utilization_ratio", "GPU utilisation, 0..1", lambda g: _div(g.util_gpu, 100.0)),
    ("ddtree_gpu_memory_used_bytes", "GPU memory in use", lambda g: _mul(g.mem_used_mb, MIB)),
    ("ddtree_gpu_memory_total_bytes", "GPU memory size", lambda g: _mul(g.mem_total_mb, MIB)),
    ("ddtree_gpu_power_watts", "GPU power draw", lambda g: g.power_w),
    ("ddtree_gpu_power_limit_watts", "GPU power limit", lambda g: g.power_limit_w),
    ("ddtree_gpu_temperature_celsius", "GPU temperature", lambda g: _mul(g.temp_c, 1)),
)
_SERVICE_VALUES: _Values[ServiceStatus] = (
    ("ddtree_service_accept_length", "Mean accepted tokens per verify step", lambda s: s.accept_length),
    (
        "ddtree_service_generation_throughput_tokens_per_second",
        "Generated tokens per second (the server's own number)",
        lambda s: s.gen_throughput,
    ),
    (
        "ddtree_service_health_latency_seconds",
        "Latency of the last health probe",
        lambda s: _div(s.health_latency_ms, 1000.0),
    ),
    ("ddtree_service_running_requests", "Requests running", lambda s: _mul(s.running_reqs, 1)),
)


def _add_values(
    fams: list[tuple[GaugeMetricFamily, Callable[[T], float | None]]], lab: list[str], obj: T
) -> None:
    for fam, value in fams:
        v = value(obj)
        if v is not None:
            fam.add_metric(lab, v)


F = TypeVar("F", GaugeMetricFamily, CounterMetricFamily)


def _labelled(fam: F, samples: Iterable[tuple[list[str], float]]) -> F:
    """`fam` with one sample per (label values, value)."""
    for labels, v in samples:
        fam.add_metric(labels, float(v))
    return fam


class FleetMetrics(Collector):
    """Reads `snapshot()` and `counters` on every scrape; registered in its own registry."""

    def __init__(self, snapshot: Callable[[], FleetSnapshot], counters: CollectorCounters) -> None:
        self._snapshot = snapshot
        self.counters = counters

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: families depend on the fleet

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        c = self.counters
        up = GaugeMetricFamily("ddtree_up", "1 while the collector runs and its fleet answers")
        up.add_metric([], 1.0)
        yield up
        build = InfoMetricFamily("ddtree_build", "The ddtree-tui build serving these metrics")
        build.add_metric([], {"version": __version__})
        yield build

        host_up = GaugeMetricFamily("ddtree_host_up", "1 when the host's connection is up", labels=["host"])
        host_state = GaugeMetricFamily(
            "ddtree_host_connection_state",
            "1 for the host's current connection state",
            labels=["host", "state"],
        )
        telemetry_ok = GaugeMetricFamily(
            "ddtree_host_telemetry_ok", "1 when the host's GPU sampler reports no fault", labels=["host"]
        )
        host_cpu = GaugeMetricFamily("ddtree_host_cpu_ratio", "Host CPU use, 0..1", labels=["host"])
        host_mem = GaugeMetricFamily("ddtree_host_memory_used_bytes", "Host memory in use", labels=["host"])
        g_vals = [(GaugeMetricFamily(n, doc, labels=["host", "gpu"]), fn) for n, doc, fn in _GPU_VALUES]
        g_ok = GaugeMetricFamily(
            "ddtree_gpu_healthy", "1 when the GPU reports no fault", labels=["host", "gpu"]
        )
        g_info = InfoMetricFamily("ddtree_gpu", "A GPU's model and uuid", labels=["host", "gpu"])
        g_svc = InfoMetricFamily(
            "ddtree_gpu_service",
            "Joins a GPU to the service configured on it (join on host and gpu)",
            labels=["host", "gpu"],
        )
        s_info = InfoMetricFamily(
            "ddtree_service", "A service's algorithm and launcher", labels=["host", "service"]
        )
        s_state = GaugeMetricFamily(
            "ddtree_service_state", "1 for the service's current state", labels=["host", "service", "state"]
        )
        s_vals = [
            (GaugeMetricFamily(n, doc, labels=["host", "service"]), fn) for n, doc, fn in _SERVICE_VALUES
        ]
        s_rst = CounterMetricFamily(
            "ddtree_service_restarts",
            "Times the service went back to starting after it had run (seen by this collector)",
            labels=["host", "service"],
        )
        for h in snap.hosts:
            host_up.add_metric([h.name], 1.0 if h.state == "connected" else 0.0)
            for st in HOST_STATES:
                host_state.add_metric([h.name, st], 1.0 if h.state == st else 0.0)
            telemetry_ok.add_metric([h.name], 0.0 if h.telemetry.fault else 1.0)
            if h.host is not None:
                if h.host.cpu_percent is not None:
                    host_cpu.add_metric([h.name], h.host.cpu_percent / 100.0)
                if h.host.mem_used_mb is not None:
                    host_mem.add_metric([h.name], float(h.host.mem_used_mb * MIB))
            for g in h.gpus:
                lab = [h.name, str(g.index)]
                _add_values(g_vals, lab, g)
                g_ok.add_metric(lab, 1.0 if g.health == "ok" else 0.0)
                g_info.add_metric(lab, {"model": g.name or "", "uuid": g.uuid or ""})
            for s in h.services:
                lab = [h.name, s.name]
                s_info.add_metric(
                    lab,
                    {
                        "algorithm": s.algorithm,
                        "mode": s.mode or "",
                        "launcher": s.launcher,
                        "simulated": "true" if s.simulated else "false",
                        "port": str(s.port),
                    },
                )
                for gpu in s.gpus:
                    g_svc.add_metric([h.name, str(gpu)], {"service": s.name})
                for st in SERVICE_STATES:
                    s_state.add_metric([*lab, st], 1.0 if s.state == st else 0.0)
                _add_values(s_vals, lab, s)
                s_rst.add_metric(lab, float(c.restarts.get((h.name, s.name), 0)))
        yield from (host_up, host_state, telemetry_ok, host_cpu, host_mem)
        yield from (fam for fam, _ in g_vals)
        yield from (g_ok, g_info, g_svc)
        yield from (s_info, s_state)
        yield from (fam for fam, _ in s_vals)
        yield s_rst

        b_run = GaugeMetricFamily("ddtree_bench_running", "1 while a benchmark runs")
        b_run.add_metric([], 1.0 if c.bench_running else 0.0)
        b_done = GaugeMetricFamily(
            "ddtree_bench_requests_done", "Counted requests finished in the current run"
        )
        b_done.add_metric([], float(c.bench_done))
        b_tot = GaugeMetricFamily(
            "ddtree_bench_requests_planned", "Counted requests planned in the current run"
        )
        b_tot.add_metric([], float(c.bench_total))
        b_runs = CounterMetricFamily("ddtree_bench_runs", "Benchmark runs finished")
        b_runs.add_metric([], float(c.bench_runs))
        b_fail = CounterMetricFamily("ddtree_bench_failed_requests", "Benchmark requests that failed")
        b_fail.add_metric([], float(c.bench_failed_requests))
        yield from (b_run, b_done, b_tot, b_runs, b_fail)

        cl = GaugeMetricFamily("ddtree_collector_event_clients", "Event streams (/events) open now")
        cl.add_metric([], float(c.event_clients))
        yield cl
        yield _labelled(
            CounterMetricFamily(
                "ddtree_collector_events", "Fleet events seen by the collector", labels=["kind"]
            ),
            (([kind], n) for kind, n in sorted(c.events.items())),
        )
        yield _labelled(
            CounterMetricFamily(
                "ddtree_collector_refused",
                "Requests refused for their Host or Origin, connections refused over the cap",
                labels=["reason"],
            ),
            (([why], n) for why, n in sorted(c.refused.items())),
        )
        yield _labelled(
            GaugeMetricFamily(
                "ddtree_alert_active", "1 while an alert holds", labels=["alert", "host", "subject"]
            ),
            ((list(key), v) for key, v in sorted(c.alerts_active.items())),
        )
        yield _labelled(
            CounterMetricFamily(
                "ddtree_alerts_fired", "Alerts raised since the collector started", labels=["alert"]
            ),
            (([kind], n) for kind, n in sorted(c.alerts_fired.items())),
        )


def make_registry(snapshot: Callable[[], FleetSnapshot], counters: CollectorCounters) -> CollectorRegistry:
    """A registry of its own (not the process-global default) holding only the fleet's metrics."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(FleetMetrics(snapshot, counters))
    return reg
