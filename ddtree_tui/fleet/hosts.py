"""The fleet's host registry: one record a host (its transport, telemetry sampler, service manager and what
they last reported), started, stopped and reloaded here. The callbacks that keep the records current publish
the fleet's events. The spec lookup (a profile's service, or one moved here from another host) is written
once, here (`HostRecord.spec`, `Hosts.spec_of`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING

from ddtree_tui.config import HostProfile, ProfileError, ServiceSpec, find_service, load_profiles
from ddtree_tui.lib.tasks import cancel_and_wait
from ddtree_tui.model.events import (
    FleetEvent,
    GpuSampleEvent,
    HostStateChanged,
    LogLine,
    Notice,
    ServiceStateChanged,
)
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.model.snapshot import ConnStatus, GpuSample, HostSample, ServiceStatus, TelemetryStatus
from ddtree_tui.transport import Transport, make_transport

if TYPE_CHECKING:  # imported where a host starts: a run with no host (`--run-bench --url`) never needs them
    from ddtree_tui.services.lifecycle import ServiceManager  # aiohttp (probes), the host scripts
    from ddtree_tui.telemetry.sampler import HostTelemetry

log = logging.getLogger(__name__)

LOG_LINES_KEPT = 500

Guard = Callable[[Callable[[], Awaitable[None]], str], Coroutine[object, object, None]]


def _with_note(ts: TelemetryStatus, why: str) -> TelemetryStatus:
    """`ts` with `why` after its own note."""
    return ts.model_copy(update={"note": f"{ts.note}; {why}" if ts.note else why})


class HostRecord:
    """Everything the fleet keeps for one host."""

    def __init__(self, profile: HostProfile, transport: Transport) -> None:
        self.profile = profile
        self.transport = transport
        self.conn: ConnStatus = transport.status
        self.host_sample: HostSample | None = None
        self.gpus: list[GpuSample] = []
        self.telemetry_status = TelemetryStatus()
        self.telemetry: HostTelemetry | None = None
        self.services: ServiceManager = None  # type: ignore[assignment]  # set by start_host before any use
        self.statuses: dict[str, ServiceStatus] = {}
        self.extra_specs: dict[str, ServiceSpec] = {}  # services moved here from another host
        self.tasks: list[asyncio.Task[None]] = []
        self.sampled = asyncio.Event()
        self.unsampled_note: str | None = None  # why a settle gave up on a GPU sample; kept until one comes

    def has(self, svc: str) -> bool:
        return self.profile.get_service(svc) is not None or svc in self.extra_specs

    def spec(self, svc: str) -> ServiceSpec:
        """The service's spec as its profile has it, or as it was moved here (no launch overrides)."""
        return self.profile.get_service(svc) or self.extra_specs[svc]

    def adopt(self, spec: ServiceSpec) -> None:
        """A service moved here from another host: its spec is known here from now on (the profile's own
        service of that name wins)."""
        if self.profile.get_service(spec.name) is None:
            self.extra_specs[spec.name] = spec

    def service_names(self) -> list[str]:
        return [s.name for s in self.profile.service] + [
            n for n in self.extra_specs if self.profile.get_service(n) is None
        ]


class Hosts:
    """The registry: records by host name, the log tails, and the host half of the fleet's lifecycle."""

    def __init__(
        self,
        profiles: Sequence[HostProfile],
        publish: Callable[[FleetEvent], None],
        guard: Guard,
        *,
        watch: bool,
        telemetry: bool,
        probe_interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.profiles = list(profiles)
        self._clock = clock  # when the services' live values were observed (tests inject one)
        self._publish = publish
        self._guard = guard  # runs a background task, reporting its crash
        self._watch = watch  # False: a one-shot mode; services are probed when asked, not watched
        self.telemetry_enabled = telemetry
        self._probe_interval = probe_interval
        self.by_name: dict[str, HostRecord] = {}
        self.logs: dict[str, deque[str]] = {}

    # --- lookups -------------------------------------------------------------------------------------------
    def records(self) -> list[HostRecord]:
        return list(self.by_name.values())

    def get(self, name: str) -> HostRecord | None:
        return self.by_name.get(name)

    def host(self, name: str) -> HostRecord:
        h = self.by_name.get(name)
        if h is None:
            raise ValueError(f"no host '{name}' (known: {', '.join(self.by_name) or 'none'})")
        return h

    def split(self, ref: ServiceRef | str) -> tuple[HostRecord, str]:
        """The host record and service name of `ref`; ValueError naming what is known when either is not."""
        r = ServiceRef.parse(ref)
        h = self.host(r.host)
        if not h.has(r.service):
            find_service(self.profiles, str(r))  # raises with the known names
        return h, r.service

    def spec_of(self, ref: ServiceRef | str) -> tuple[HostProfile, ServiceSpec]:
        """The profile and the service's spec as the profile has it (no overrides)."""
        h, svc = self.split(ref)
        return h.profile, h.spec(svc)

    # --- start, stop, reload -------------------------------------------------------------------------------
    async def start_all(self) -> None:
        for prof in self.profiles:
            await self.start_host(prof)

    async def start_host(self, prof: HostProfile) -> None:
        from ddtree_tui.services.lifecycle import ServiceManager
        from ddtree_tui.telemetry.sampler import HostTelemetry

        transport = make_transport(prof)
        h = HostRecord(prof, transport)
        self.by_name[prof.name] = h
        transport.add_listener(functools.partial(self._on_conn, prof.name))
        await transport.start()
        h.services = ServiceManager(
            transport,
            prof,
            on_status=functools.partial(self._on_service, prof.name),
            on_log=functools.partial(self._on_log, prof.name),
            probe_interval=self._probe_interval,
            clock=self._clock,
        )
        for st in h.services.statuses():
            h.statuses[st.name] = st
        if self._watch:
            await h.services.start()
        if self.telemetry_enabled:
            h.telemetry = HostTelemetry(
                transport,
                prof,
                on_update=functools.partial(self._on_sample, prof.name),
            )
            h.tasks.append(asyncio.create_task(self._guard(h.telemetry.run, f"telemetry {prof.name}")))

    async def stop_all(self) -> None:
        for h in self.by_name.values():
            await self.stop_host(h)

    async def stop_host(self, h: HostRecord) -> None:
        """Stop watching a host (its services keep running; their pidfiles find them again)."""
        await cancel_and_wait(h.tasks)
        if h.services is not None:
            with contextlib.suppress(Exception):
                await h.services.stop()
        with contextlib.suppress(Exception):
            await h.transport.close()

    async def reload(self, profiles: Sequence[HostProfile] | None = None) -> list[str]:
        """Pick up edited profiles without a restart: re-read each profile's file (or take `profiles`),
        restart the watchers of hosts whose profile changed, add new hosts, drop removed ones. Running
        services are never touched. A bad profile changes nothing and is reported. Returns what changed."""
        if profiles is None:
            sources = [p.source for p in self.profiles]
            if any(src is None for src in sources):
                raise ValueError("these profiles were not loaded from files; pass the new profiles")
            try:
                profiles = load_profiles([str(src) for src in sources])
            except ProfileError as e:
                self._publish(Notice(severity="error", text=f"profiles not reloaded: {e}"))
                raise
        new = {p.name: p for p in profiles}
        changes: list[str] = []
        for name in list(self.by_name):
            if name not in new:
                await self.stop_host(self.by_name.pop(name))
                changes.append(f"removed {name}")
        for prof in profiles:
            old = self.by_name.get(prof.name)
            if old is not None and old.profile == prof:
                continue
            extra = old.extra_specs if old is not None else {}
            if old is not None:
                await self.stop_host(old)
            await self.start_host(prof)
            self.by_name[prof.name].extra_specs.update(extra)
            changes.append(f"{'reloaded' if old is not None else 'added'} {prof.name}")
        self.profiles = list(profiles)
        text = "profiles reloaded: " + (", ".join(changes) if changes else "nothing changed")
        self._publish(Notice(severity="information", text=text))
        for h in self.by_name.values():
            self._publish(HostStateChanged(host=h.profile.name, status=h.conn))
        return changes

    async def wait_settled(self, timeout: float) -> None:
        """Wait until every host has connected and sent a first sample (or the timeout passes)."""
        deadline = time.monotonic() + timeout

        async def one(h: HostRecord) -> None:
            left = max(0.0, deadline - time.monotonic())
            ok = await h.transport.wait_connected(left)
            if ok and self.telemetry_enabled:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        await h.sampled.wait()
                if not h.sampled.is_set():
                    h.unsampled_note = f"no GPU sample within the {timeout:g} s timeout"
                    h.telemetry_status = _with_note(h.telemetry_status, h.unsampled_note)
            if ok and h.services is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                        await h.services.refresh()

        await asyncio.gather(*(one(h) for h in self.by_name.values()))

    # --- what the hosts report -----------------------------------------------------------------------------
    def _on_conn(self, host: str, st: ConnStatus) -> None:
        h = self.by_name.get(host)
        if h is None:
            return
        h.conn = st
        if st.state != "connected":
            for name, s in list(h.statuses.items()):
                if s.state not in ("unknown",):
                    h.statuses[name] = s.model_copy(update={"state": "unknown", "detail": st.error})
        self._publish(HostStateChanged(host=host, status=st))

    def _on_sample(
        self, host: str, hs: HostSample | None, gpus: list[GpuSample], ts: TelemetryStatus
    ) -> None:
        h = self.by_name.get(host)
        if h is None:
            return
        if h.telemetry is None or h.telemetry.settled:
            h.sampled.set()  # not on a first `stale` line without GPU rows: `status` would report no GPUs
            h.unsampled_note = None
        elif h.unsampled_note is not None:  # a `stale` line after the settle gave up: still no GPU rows
            ts = _with_note(ts, h.unsampled_note)
        h.host_sample, h.gpus, h.telemetry_status = hs, gpus, ts
        self._publish(GpuSampleEvent(host=host, host_sample=hs, gpus=gpus, telemetry=ts))

    def _on_service(self, host: str, st: ServiceStatus) -> None:
        h = self.by_name.get(host)
        if h is None:
            return
        prev = h.statuses.get(st.name)
        h.statuses[st.name] = st
        if h.telemetry is not None and h.services is not None:
            with contextlib.suppress(Exception):
                h.telemetry.set_service_pids(h.services.service_pids())
                h.telemetry.note_service(st)  # the demo's replay shows load only while requests run
        if prev is None or prev != st:
            self._publish(ServiceStateChanged(host=host, status=st))

    def _on_log(self, host: str, svc: str, line: str) -> None:
        ref = f"{host}/{svc}"
        buf = self.logs.setdefault(ref, deque(maxlen=LOG_LINES_KEPT))
        buf.append(line)
        self._publish(LogLine(host=host, service=svc, line=line))
