"""The built-in telemetry sources and their registration: the host's own readers (auto, nvml, nvidia-smi,
none: `hostsource.py`), a recording played in a loop (replay), DCGM-exporter series from Prometheus
(prometheus). Importing this module registers them; `sampler.py` does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ddtree_tui.config import HostProfile
from ddtree_tui.lib import http
from ddtree_tui.lib.jsontypes import JsonObject, JsonValue
from ddtree_tui.model.snapshot import TelemetryStatus
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.host import LocalHostStats
from ddtree_tui.telemetry.hostsource import KINDS, HostSamplerSource, is_local, local_host_line
from ddtree_tui.telemetry.powermodel import follow_load, sim_running
from ddtree_tui.telemetry.prometheus import DcgmFrames, PrometheusError, read_once, shared_poller
from ddtree_tui.telemetry.replay import BUILTIN, ReplayError, load_recording
from ddtree_tui.telemetry.source import SourceFactory, TelemetrySink, TelemetrySource, Update, register_source
from ddtree_tui.transport.base import Transport


class ReplaySource:
    """A recording played in a loop, labelled as a replay (`[telemetry] replay`, or the built-in demo one)."""

    async def run(self, sink: TelemetrySink) -> None:
        sink.mode_used = "replay"
        try:
            frames, note = load_recording(sink.profile.telemetry.replay)
        except ReplayError as e:
            sink.use_builder(FrameBuilder(source_override="replay"))
            sink.stalled(str(e))
            await asyncio.Event().wait()  # nothing to play; stay (cancellable) like any sampler
            return
        sink.use_builder(FrameBuilder(source_override="replay", note=note))
        stats = LocalHostStats(sink.profile.workdir) if sink.local else None
        # the built-in demo recording follows the (simulated) services: its idle part while none of this
        # host's services runs, its under-load part while one does; a recording of the user's own plays as
        # it was recorded (a post-mortem must not be rearranged)
        follow = (sink.profile.telemetry.replay or "h200-under-load") in BUILTIN
        idle = [f for f in frames if not _busy(f)] if follow else []
        busy = [f for f in frames if _busy(f)] if follow else []
        held = _loaded_idle(idle, busy) if idle and busy else []
        i = 0
        async for _ in sink.ticks():
            part = frames
            if idle and busy:  # load frames only while requests run; a started, idle server holds memory only
                part = busy if _serving(sink) else (held if sink.service_pids else idle)
            frame = dict(part[i % len(part)])
            i += 1
            if follow and sink.local and (running := await sim_running(sink.profile)) is not None:
                frame = follow_load(frame, running)  # issue 26: power follows the simulated load (modelled)
            if stats is not None:
                frame["host"] = (await asyncio.to_thread(stats.sample)).model_dump(exclude={"ts"})
            sink.emit(frame)

    async def once(self, transport: Transport, profile: HostProfile, timeout: float) -> Update:
        try:
            frames, note = load_recording(profile.telemetry.replay)
        except ReplayError as e:
            return None, [], TelemetryStatus(source="replay", fault=str(e), fault_at=time.time())
        frame = dict(frames[0])
        if is_local(transport, profile):
            frame["host"] = await local_host_line(profile)
        return FrameBuilder(source_override="replay", note=note).build(frame)


class PrometheusSource:
    """DCGM-exporter series from a Prometheus server (no host sampler): one query per tick shared by every
    host that reads from the same server (`prometheus.SharedPoller`)."""

    async def run(self, sink: TelemetrySink) -> None:
        sink.mode_used = "prometheus"
        value = sink.profile.telemetry.host_value or sink.profile.name
        frames = DcgmFrames(value)
        poller = shared_poller(sink.profile, sink.interval)
        q = poller.subscribe(value)
        try:
            while True:
                got = await q.get()
                if isinstance(got, PrometheusError):
                    gpus, status = frames.failed(str(got))
                else:
                    series, identity = got
                    gpus, status = frames.build(series, info=identity)
                sink.publish((None, gpus, status), record=status.fault is None)
        finally:
            poller.unsubscribe(value, q)

    async def once(self, transport: Transport, profile: HostProfile, timeout: float) -> Update:
        async with http.session(timeout=timeout) as client:
            gpus, status = await read_once(
                profile, client, DcgmFrames(profile.telemetry.host_value or profile.name), timeout
            )
        return None, gpus, status


def _serving(sink: TelemetrySink) -> bool:
    """Whether one of the host's services runs requests now (HostTelemetry.serving, from the services'
    running/queued request counts); a sink without it: whether one runs at all."""
    serving = getattr(sink, "serving", None)
    return bool(serving()) if callable(serving) else bool(sink.service_pids)


def _loaded_idle(idle: list[JsonObject], busy: list[JsonObject]) -> list[JsonObject]:
    """The idle frames with the model held: each GPU's memory and processes of the fully loaded frame, its
    utilisation, power, temperature and clocks of the idle one (a server that is up and serves nothing; the
    demo's GPU read 100 % / 691 W from the moment a service was starting, issue 28)."""
    gpus = busy[-1].get("gpus")
    loaded = {g.get("index"): g for g in gpus if isinstance(g, dict)} if isinstance(gpus, list) else {}
    out: list[JsonObject] = []
    for f in idle:
        frame_gpus = f.get("gpus")
        if not isinstance(frame_gpus, list):
            out.append(f)
            continue
        new: list[JsonValue] = []
        for g in frame_gpus:
            held = loaded.get(g.get("index")) if isinstance(g, dict) else None
            if isinstance(g, dict) and held is not None:
                g = {**g, "mem_used_mb": held.get("mem_used_mb"), "processes": held.get("processes") or []}
            new.append(g)
        out.append({**f, "gpus": new})
    return out


def _busy(frame: dict[str, Any]) -> bool:
    """A recorded frame where a GPU holds a model (more than 1 GB in use)."""
    return any((g.get("mem_used_mb") or 0) > 1000 for g in frame.get("gpus") or [] if isinstance(g, dict))


def _host_sampler(kind: str) -> SourceFactory:
    def make(_profile: HostProfile) -> TelemetrySource:
        return HostSamplerSource(kind)

    return make


for _kind in KINDS:
    register_source(_kind, _host_sampler(_kind), replace=True)
register_source("replay", lambda _profile: ReplaySource(), replace=True)
register_source("prometheus", lambda _profile: PrometheusSource(), replace=True)
