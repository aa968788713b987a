"""Immutable snapshots that cross module boundaries: what the core publishes, the UI renders, and
`status --json` prints (schema 1, documented in README.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.model.todo import TodoView

SCHEMA_VERSION = 1

HostConnState = Literal["connecting", "connected", "disconnected"]
ServiceState = Literal["stopped", "starting", "ready", "unhealthy", "crashed", "unknown"]
GpuHealth = Literal["ok", "fault"]

# A service's live values: each carries when it was observed (ServiceStatus.observed_at)
LIVE_FIELDS = (
    "accept_length", "accept_rate", "gen_throughput", "running_reqs", "queue_reqs", "token_usage",
    "health_latency_ms",
)  # fmt: skip
# A live value (a service's numbers, a GPU or host sample) observed longer ago than this is stale: the views
# dim it and show its age. Several of the slowest regular reading (/server_info and /metrics: every 5th probe
# at the 2 s default, so 10 s) and many of the samplers' (1 s).
STALE_AFTER_S = 30.0


def age(observed: float | None, now: float) -> float | None:
    """Seconds since `observed` (None: never observed, or no timestamp: a recording from before them)."""
    return None if not observed else max(0.0, now - observed)


def is_stale(observed: float | None, now: float) -> bool:
    a = age(observed, now)
    return a is not None and a > STALE_AFTER_S


class _Snap(BaseModel):
    model_config = ConfigDict(frozen=True)


class ConnStatus(_Snap):
    """A host's connection, as the transport supervisor sees it."""

    state: HostConnState = "connecting"
    error: str | None = None
    since: float = 0.0  # unix time of the last change
    next_retry_at: float | None = None  # unix time of the next reconnect attempt while disconnected
    attempts: int = 0


class GpuProcess(_Snap):
    pid: int
    name: str | None = None
    used_memory_mb: int | None = None
    service: str | None = None  # our service name when the pid is one we launched
    # what nvitop shows, from the host's /proc (None where the host could not read it)
    user: str | None = None
    cpu_percent: float | None = None
    host_mem_mb: int | None = None
    elapsed_s: float | None = None
    command: str | None = None
    ppid: int | None = None


class GpuSample(_Snap):
    """One GPU at one instant. Missing values ([N/A], [Not Supported], NVML NotSupported) are None."""

    index: int
    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    util_gpu: int | None = None
    util_mem: int | None = None
    mem_used_mb: int | None = None
    mem_total_mb: int | None = None
    temp_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    pstate: str | None = None
    throttle_reasons: list[str] | None = None
    processes: list[GpuProcess] = Field(default_factory=list)
    health: GpuHealth = "ok"
    fault: str | None = None
    fault_at: float | None = None
    service: str | None = None  # comma-joined names of our services running on it
    ts: float = 0.0  # unix time the sample was taken (every value in it was observed then)


class HostSample(_Snap):
    cpu_percent: float | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    mem_used_mb: int | None = None
    mem_total_mb: int | None = None
    disk_free_mb: int | None = None
    disk_total_mb: int | None = None
    uptime_s: float | None = None
    ts: float = 0.0  # unix time the sample was taken (every value in it was observed then)


class TelemetryStatus(_Snap):
    """Where a host's GPU numbers come from and whether that source is healthy."""

    source: Literal["nvml", "nvidia-smi", "nvidia-smi-oneshot", "replay", "none", "prometheus"] | None = None
    note: str | None = None  # e.g. "replay of a real H200 recording", "no NVIDIA GPU"
    fault: str | None = None  # host-level sampler fault ("No devices were found", "sampler not answering")
    fault_at: float | None = None
    driver_version: str | None = None
    cuda_version: str | None = None  # the CUDA version the driver supports (nvidia-smi's header)


class ServiceStatus(_Snap):
    name: str
    host: str
    algorithm: str
    mode: str | None = None
    launcher: str = "sglang"
    simulated: bool = False
    port: int
    state: ServiceState = "unknown"
    pid: int | None = None
    since: float | None = None  # unix time of entering this state
    started_at: float | None = None
    detail: str | None = None  # why: last log line while starting, health error, exit status
    accept_length: float | None = None
    accept_rate: float | None = None
    gen_throughput: float | None = None
    running_reqs: int | None = None
    queue_reqs: int | None = None
    token_usage: float | None = None
    health_latency_ms: float | None = None
    # unix time each LIVE_FIELDS value was observed at its source (the log line, the /metrics or /server_info
    # read, the health probe); a field missing here has no value or no known time
    observed_at: dict[str, float] = Field(default_factory=dict)
    version: str | None = None
    model: str | None = None
    gpus: list[int] = Field(default_factory=list)
    last_log: list[str] = Field(default_factory=list)


class ActionResult(_Snap):
    """The outcome of launch / kill / restart / move, in words a person can act on."""

    ok: bool
    message: str
    status: ServiceStatus | None = None
    suggestion: str | None = None


class HostView(_Snap):
    name: str
    address: str
    state: HostConnState = "connecting"
    error: str | None = None
    next_retry_at: float | None = None
    host: HostSample | None = None
    gpus: list[GpuSample] = Field(default_factory=list)
    telemetry: TelemetryStatus = Field(default_factory=TelemetryStatus)
    services: list[ServiceStatus] = Field(default_factory=list)


class FleetSnapshot(_Snap):
    schema_: int = Field(default=SCHEMA_VERSION, alias="schema")
    ts: float = 0.0
    hosts: list[HostView] = Field(default_factory=list)
    todos: TodoView = Field(default_factory=TodoView)  # the checklist and its evidence (Fleet is its writer)

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)

    def host(self, name: str) -> HostView | None:
        return next((h for h in self.hosts if h.name == name), None)

    def service(self, host: str, name: str) -> ServiceStatus | None:
        h = self.host(host)
        return next((s for s in h.services if s.name == name), None) if h else None


AlertKind = Literal["accept_collapse", "gpu_xid", "gpu_off_bus", "gpu_fault", "gpu_throttle", "restart_loop"]


class Alert(_Snap):
    """Something a person should look at now; `active` False when it has cleared."""

    kind: AlertKind
    host: str
    subject: str  # "gpu3" or a service name
    message: str
    severity: Literal["warning", "error"] = "error"
    since: float = 0.0
    active: bool = True
