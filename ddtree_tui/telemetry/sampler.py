"""Per-host telemetry: one long-lived source per host, faults as state, restarts with backoff.

`HostTelemetry` looks the profile's `[telemetry] source` kind up in the registry (`source.py`; the built-in
sources are in `sources.py` and `hostsource.py`) and runs what it gets; it keeps what every source shares: the
GPU history, the frame builder with our services' pids, the tick rhythm, the last update, "settled". A new
source is registered, never written in here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping

import ddtree_tui.telemetry.sources  # noqa: F401  (registers the built-in sources)
from ddtree_tui.config import HostProfile
from ddtree_tui.lib.jsontypes import JsonValue
from ddtree_tui.model.snapshot import GpuSample, HostSample, ServiceStatus, TelemetryStatus
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.history import GpuHistory
from ddtree_tui.telemetry.hostsource import SAMPLER_PROGRAM, is_local
from ddtree_tui.telemetry.source import TelemetrySource, UnknownTelemetrySource, Update, make_source
from ddtree_tui.transport.base import Transport, TransportError

log = logging.getLogger(__name__)

__all__ = ["SAMPLER_PROGRAM", "HostTelemetry", "OnUpdate", "Update", "snapshot_once"]

# a service counts as serving for this long after it was last seen with requests running (an SGLang server
# logs a decode line every 40 passes, about once a second while it decodes)
SERVING_FRESH_S = 5.0

OnUpdate = Callable[[HostSample | None, list[GpuSample], TelemetryStatus], None]


class HostTelemetry:
    """The telemetry of one host; `run()` until cancelled, updates through `on_update` once per tick.
    An unknown `[telemetry] source` kind is UnknownTelemetrySource here, at construction."""

    def __init__(
        self,
        transport: Transport,
        profile: HostProfile,
        *,
        on_update: OnUpdate,
        interval: float | None = None,
        history_len: int = 600,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        stall_intervals: float = 3.0,
        startup_grace: float = 10.0,
    ) -> None:
        self.transport = transport
        self.profile = profile
        self.on_update = on_update
        self.interval = float(interval if interval is not None else profile.telemetry.interval_ms / 1000.0)
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.stall_intervals = stall_intervals
        self.startup_grace = startup_grace
        self.source: TelemetrySource = make_source(profile)
        self._history = GpuHistory(history_len)
        self._builder = FrameBuilder()
        self._service_pids: dict[int, str] = {}
        self._serving: dict[str, float] = {}  # service -> when it was last seen running requests (unix time)
        self.restarts = 0  # how many times the sampler was (re)started after a fault; for tests and the UI
        self.mode_used: str | None = None  # "nvml-local", "program", "shell", "replay", "host-only", ...
        self.last: Update | None = None
        # True from the first update that says something definite about the GPUs: rows, a fault, "no GPU",
        # telemetry off. A stream's first line is often `stale` (nvidia-smi has not printed yet): not that.
        self.settled = False

    @property
    def history(self) -> GpuHistory:
        return self._history

    @property
    def local(self) -> bool:
        return is_local(self.transport, self.profile)

    @property
    def service_pids(self) -> dict[int, str]:
        return self._service_pids

    def note_service(self, st: ServiceStatus) -> None:
        """A service's latest status: when it was last seen running or queueing requests (the demo's replay
        shows load only while requests run, `serving`)."""
        if (st.running_reqs or 0) + (st.queue_reqs or 0) > 0 and st.state in ("ready", "unhealthy"):
            seen = st.observed_at.get("running_reqs") or time.time()
            self._serving[st.name] = max(self._serving.get(st.name, 0.0), seen)

    def serving(self, within: float = SERVING_FRESH_S) -> bool:
        """Whether a service of this host was seen running requests in the last `within` seconds."""
        now = time.time()
        return any(now - t <= within for t in self._serving.values())

    def set_service_pids(self, pids: dict[int, str]) -> None:
        """pid → our service name; a GPU process whose pid (or an ancestor's) is here is marked with it."""
        self._service_pids = dict(pids)
        self._builder.set_service_pids(self._service_pids)

    # --- what a source calls (TelemetrySink) ------------------------------------------------------------

    def use_builder(self, builder: FrameBuilder) -> None:
        self._builder = builder
        self._builder.set_service_pids(self._service_pids)

    def publish(self, update: Update, record: bool = True, settles: bool = True) -> None:
        host, gpus, status = update
        if record:
            self._history.add(gpus)
        self.last = update
        if settles or gpus or status.fault:
            self.settled = True
        try:
            self.on_update(host, gpus, status)
        except Exception:  # the listener's bug must not stop the sampler
            log.exception("telemetry on_update failed for %s", self.profile.name)

    def emit(self, line: Mapping[str, JsonValue]) -> None:
        self.publish(self._builder.build(line), record=not line.get("stale"), settles=not line.get("stale"))

    def stalled(self, reason: str) -> None:
        self.publish(self._builder.stalled(reason), record=False)

    async def ticks(self) -> AsyncIterator[None]:
        """Ticks at a steady rate that never pile up: a late tick is skipped, not made up."""
        next_at = time.monotonic()
        while True:
            yield
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0
            await asyncio.sleep(delay)

    # --- run ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.source.run(self)


async def snapshot_once(transport: Transport, profile: HostProfile, timeout: float = 8.0) -> Update:
    """One sample of a host, for `status`: never raises for a host problem, the status says what went wrong
    (an unknown telemetry kind included)."""
    now = time.time()
    try:
        src = make_source(profile)
    except UnknownTelemetrySource as e:
        return None, [], TelemetryStatus(fault=str(e), fault_at=now)
    try:
        async with asyncio.timeout(timeout):
            return await src.once(transport, profile, timeout)
    except TimeoutError:
        return None, [], TelemetryStatus(fault=f"no telemetry within {timeout:g} s", fault_at=now)
    except TransportError as e:
        return None, [], TelemetryStatus(fault=str(e), fault_at=now)
