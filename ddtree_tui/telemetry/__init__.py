"""GPU and host telemetry: NVML locally, one streamed sampler per remote host, replays, Prometheus; faults are
state. A source is one kind behind the registry in `source.py`.

The names below are loaded when first asked for (PEP 562 `__getattr__`): importing one small module of this
package (the simulator's `telemetry.powermodel`) must not import the sampler, the sources and their
registry (issue 24: every simulator process paid for them)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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


def __getattr__(name: str) -> object:
    """`HostTelemetry`, `snapshot_once`, ... imported from their module the first time they are named."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
