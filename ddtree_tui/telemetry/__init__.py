"""GPU and host telemetry: NVML locally, one streamed sampler per remote host, replays, Prometheus; faults are
state. A source is one kind behind the registry in `source.py`.

The names below are loaded when first asked for (PEP 562 `__getattr__`): importing one small module of this
package (the simulator's `telemetry.powermodel`) must not import the sampler, the sources and their
registry (issue 24: every simulator process paid for them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtree_tui.lib.lazyexports import lazy_getattr

if TYPE_CHECKING:
    from ddtree_tui.telemetry.history import GpuHistory
    from ddtree_tui.telemetry.sampler import SAMPLER_PROGRAM, HostTelemetry, snapshot_once
    from ddtree_tui.telemetry.source import (
        TelemetrySink,
        TelemetrySource,
        UnknownTelemetrySource,
        register_source,
    )

_WHERE = {
    "GpuHistory": "ddtree_tui.telemetry.history",
    "SAMPLER_PROGRAM": "ddtree_tui.telemetry.sampler",
    "HostTelemetry": "ddtree_tui.telemetry.sampler",
    "snapshot_once": "ddtree_tui.telemetry.sampler",
    "TelemetrySink": "ddtree_tui.telemetry.source",
    "TelemetrySource": "ddtree_tui.telemetry.source",
    "UnknownTelemetrySource": "ddtree_tui.telemetry.source",
    "register_source": "ddtree_tui.telemetry.source",
}

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


# each name imported from its module the first time it is named
__getattr__ = lazy_getattr(globals(), _WHERE, __name__)
