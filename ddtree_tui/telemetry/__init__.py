"""GPU and host telemetry: NVML locally, one streamed sampler per remote host, replays; faults are state."""

from ddtree_tui.telemetry.history import GpuHistory
from ddtree_tui.telemetry.sampler import SAMPLER_PROGRAM, HostTelemetry, snapshot_once

__all__ = ["SAMPLER_PROGRAM", "GpuHistory", "HostTelemetry", "snapshot_once"]
