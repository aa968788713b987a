"""GPU and host telemetry: NVML locally, one streamed sampler per remote host, replays, Prometheus; faults are
state. A source is one kind behind the registry in `source.py`."""

from ddtree_tui.telemetry.history import GpuHistory
from ddtree_tui.telemetry.sampler import SAMPLER_PROGRAM, HostTelemetry, snapshot_once
from ddtree_tui.telemetry.source import (
    TelemetrySink,
    TelemetrySource,
    UnknownTelemetrySource,
    register_source,
)

__all__ = [
    "SAMPLER_PROGRAM",
    "GpuHistory",
    "HostTelemetry",
    "TelemetrySink",
    "TelemetrySource",
    "UnknownTelemetrySource",
    "register_source",
    "snapshot_once",
]
