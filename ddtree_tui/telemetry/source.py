"""Telemetry sources behind one small protocol and a registry (harlequin's adapters are the model).

A source is one way of reading a host's GPUs: the host sampler program or local NVML, a recording played back,
DCGM series in Prometheus. `HostTelemetry` looks the profile's `[telemetry] source` kind up here and runs what
the factory makes; a new source is `register_source("kind", factory)`, with no edit to the sampler. An unknown
kind is `UnknownTelemetrySource`, naming it and the kinds there are.

A source talks back through `TelemetrySink` (what HostTelemetry offers it: publish a frame, a fault, the tick
rhythm, the backoff settings), so this module needs nothing of the sampler's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol

from ddtree_tui.config import HostProfile
from ddtree_tui.lib.jsontypes import JsonValue
from ddtree_tui.model.snapshot import GpuSample, HostSample, TelemetryStatus
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.transport.base import Transport

Update = tuple[HostSample | None, list[GpuSample], TelemetryStatus]


class TelemetrySink(Protocol):
    """What a running source may use of the HostTelemetry that runs it."""

    transport: Transport
    profile: HostProfile
    interval: float
    backoff_initial: float
    backoff_max: float
    stall_intervals: float
    startup_grace: float
    restarts: int  # bumped by the source each time it starts again after a fault
    mode_used: str | None  # set by the source: "nvml-local", "program", "shell", "replay", "prometheus", ...

    @property
    def local(self) -> bool: ...

    @property
    def service_pids(self) -> dict[int, str]: ...

    def use_builder(self, builder: FrameBuilder) -> None:
        """Build the frames from now on with this builder (its note, its source label)."""

    def publish(self, update: Update, record: bool = True, settles: bool = True) -> None: ...

    def emit(self, line: Mapping[str, JsonValue]) -> None:
        """One sampler-protocol line (`{"v": 1, "gpus": [...], ...}`) built into a frame and published."""

    def stalled(self, reason: str) -> None:
        """Publish a fault (the last GPUs kept, marked), not recorded in the history."""

    def ticks(self) -> AsyncIterator[None]:
        """A steady tick every `interval` that never piles up."""


class TelemetrySource(Protocol):
    """One way of reading a host's GPUs."""

    async def run(self, sink: TelemetrySink) -> None:
        """Publish through `sink` until cancelled; a fault is published as state, never raised."""

    async def once(self, transport: Transport, profile: HostProfile, timeout: float) -> Update:
        """One sample, for `status`; a host problem is in the status, TransportError may escape."""


SourceFactory = Callable[[HostProfile], TelemetrySource]


class UnknownTelemetrySource(ValueError):
    """A telemetry kind no source is registered for."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(
            f"unknown telemetry source {kind!r} (known: {', '.join(sorted(_REGISTRY)) or 'none'})"
        )


_REGISTRY: dict[str, SourceFactory] = {}


def register_source(kind: str, factory: SourceFactory, *, replace: bool = False) -> None:
    """Make `kind` (the profile's `[telemetry] source`) run what `factory(profile)` returns."""
    if kind in _REGISTRY and not replace:
        raise ValueError(f"telemetry source {kind!r} is already registered")
    _REGISTRY[kind] = factory


def unregister_source(kind: str) -> None:
    _REGISTRY.pop(kind, None)


def registered_kinds() -> list[str]:
    return sorted(_REGISTRY)


def make_source(profile: HostProfile) -> TelemetrySource:
    """The source for this profile's telemetry kind; UnknownTelemetrySource when none is registered."""
    kind = profile.telemetry.source
    factory = _REGISTRY.get(kind)
    if factory is None:
        raise UnknownTelemetrySource(kind)
    return factory(profile)
