"""Events the core publishes: the UI and reporters subscribe; nothing flows back this way."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.state import Alert, ConnStatus, GpuSample, HostSample, ServiceStatus, TelemetryStatus


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    ts: float = Field(default_factory=time.time)


class HostStateChanged(_Event):
    kind: Literal["host"] = "host"
    host: str
    status: ConnStatus


class GpuSampleEvent(_Event):
    kind: Literal["gpu"] = "gpu"
    host: str
    host_sample: HostSample | None
    gpus: list[GpuSample]
    telemetry: TelemetryStatus


class ServiceStateChanged(_Event):
    kind: Literal["service"] = "service"
    host: str
    status: ServiceStatus


class LogLine(_Event):
    kind: Literal["log"] = "log"
    host: str
    service: str
    line: str


class BenchEventWrap(_Event):
    """A benchmark engine event (ddtree_tui.bench) as the fleet forwards it."""

    kind: Literal["bench"] = "bench"
    event: Any


class TodoChanged(_Event):
    kind: Literal["todo"] = "todo"


class Notice(_Event):
    """A message for the user: an action's result or an error, with a severity."""

    kind: Literal["notice"] = "notice"
    severity: Literal["information", "warning", "error"] = "information"
    text: str


class AlertChanged(_Event):
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
)
