"""Events the core publishes: the UI and reporters subscribe; nothing flows back this way."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.model.snapshot import Alert, ConnStatus, GpuSample, HostSample, ServiceStatus, TelemetryStatus


class Event(BaseModel):
    """Every fleet event: when, and which kind (each subclass pins `kind` to its own literal)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    ts: float = Field(default_factory=time.time)
    kind: str


class _HostEvent(Event):
    host: str


class HostStateChanged(_HostEvent):
    kind: Literal["host"] = "host"
    status: ConnStatus


class GpuSampleEvent(_HostEvent):
    kind: Literal["gpu"] = "gpu"
    host_sample: HostSample | None
    gpus: list[GpuSample]
    telemetry: TelemetryStatus


class ServiceStateChanged(_HostEvent):
    kind: Literal["service"] = "service"
    status: ServiceStatus


class LogLine(_HostEvent):
    kind: Literal["log"] = "log"
    service: str
    line: str


class BenchEventWrap(Event):
    """A benchmark engine event (ddtree_tui.bench) as the fleet forwards it."""

    kind: Literal["bench"] = "bench"
    event: Any


class BenchLiveWrap(BenchEventWrap):
    """A request in flight (bench PromptStarted, TokensReceived): what a live view's rows show, its state and
    tok/s so far. Its own type, so a reader that shows none (the headless run's progress lines) skips it,
    and a run that nobody watches live makes none (fleet/benching.py)."""


class TodoChanged(Event):
    kind: Literal["todo"] = "todo"


class Notice(Event):
    """A message for the user: an action's result or an error, with a severity."""

    kind: Literal["notice"] = "notice"
    severity: Literal["information", "warning", "error"] = "information"
    text: str


PlannedVerb = Literal["launch", "kill", "restart", "move", "deploy", "hold", "release"]


class ServicePlanned(_HostEvent):
    """A change of a service that someone asked for, published before it is carried out: a launch, kill,
    restart, move or deploy through the fleet's service desk (`by` "user", or the sweep that holds it), or a
    sweep's hold / release (while held, the sweep's relaunches are its plan). The alert engine reads it:
    a restart that was asked for is not a restart loop, and a fresh server starts a fresh accept window."""

    kind: Literal["planned"] = "planned"
    service: str
    verb: PlannedVerb
    by: str = "user"


class AlertChanged(Event):
    """An alert was raised or cleared (ddtree_tui.alerts)."""

    kind: Literal["alert"] = "alert"
    alert: Alert


FleetEvent = (
    HostStateChanged
    | GpuSampleEvent
    | ServiceStateChanged
    | LogLine
    | BenchEventWrap
    | TodoChanged
    | Notice
    | AlertChanged
    | ServicePlanned
)
