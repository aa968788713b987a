"""The fleet's reads: the immutable FleetSnapshot built from the host records, and the per-GPU history and
log tails a pane asks for. Pure reads of what the host registry keeps; nothing here reaches a host."""

from __future__ import annotations

import time

from ddtree_tui.fleet.hosts import HostRecord, Hosts
from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample, HostView, ServiceStatus
from ddtree_tui.model.todo import TodoView


def build_snapshot(hosts: Hosts, todos: TodoView) -> FleetSnapshot:
    views: list[HostView] = []
    for h in hosts.records():
        services = [h.statuses[n] for n in h.service_names() if n in h.statuses]
        views.append(
            HostView(
                name=h.profile.name,
                address=h.profile.address,
                state=h.conn.state,
                error=h.conn.error,
                next_retry_at=h.conn.next_retry_at,
                host=h.host_sample,
                gpus=label_gpus(h, services),
                telemetry=h.telemetry_status,
                services=services,
            )
        )
    return FleetSnapshot(ts=time.time(), hosts=views, todos=todos)


def label_gpus(h: HostRecord, services: list[ServiceStatus]) -> list[GpuSample]:
    """A replay or Prometheus has no pids of ours: say which running service is configured on each GPU."""
    if h.telemetry_status.source not in ("replay", "prometheus"):  # no pids of ours in these
        return h.gpus
    out = []
    for g in h.gpus:
        names = [
            s.name for s in services if s.state in ("starting", "ready", "unhealthy") and g.index in s.gpus
        ]
        label = ", ".join(names) or None
        out.append(g if g.service == label else g.model_copy(update={"service": label}))
    return out


def gpu_history(hosts: Hosts, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]:
    h = hosts.get(host)
    if h is None or h.telemetry is None:
        return []
    try:
        return list(h.telemetry.history.series(gpu_index, metric))
    except (KeyError, IndexError):
        return []


def log_lines(hosts: Hosts, ref: str) -> list[str]:
    return list(hosts.logs.get(ref, ()))
