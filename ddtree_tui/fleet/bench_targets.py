"""What the bench desk (fleet/benching.py) needs around a run: the fleet as it sees it (`BenchFleet`), the
targets of running servers given by URL (`--url`), what a run's manifest shows of a service, and a soak's
GPU probe per target. Split from the desk so each stays small."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Protocol, TypedDict

from ddtree_tui.bench.client import server_info
from ddtree_tui.bench.models import BenchTarget
from ddtree_tui.bench.results import GpuWindow
from ddtree_tui.bench.soak import GpuProbe, gpu_windows, host_gpu_probe, sim_gpu_probe
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.urls import url_ref
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.model.events import FleetEvent
from ddtree_tui.model.identity import TargetIdentity
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.transport import Transport


class BenchFleet(Protocol):
    """What the desk takes from the fleet: the services' specs and where they run, their status, the hosts'
    transports, and the event stream it publishes on."""

    @property
    def history_path(self) -> Path: ...
    def spec_of(self, ref: str) -> tuple[HostProfile, ServiceSpec]: ...
    async def service_url(self, ref: str) -> str: ...
    def snapshot(self) -> FleetSnapshot: ...
    def transport(self, host: str) -> Transport: ...
    def publish(self, ev: FleetEvent) -> None: ...
    def wants(self, kind: type) -> bool: ...  # whether any subscriber takes an event of this type
    async def identify(self, ref: str) -> TargetIdentity: ...
    def follow_log(self, ref: str) -> AsyncIterator[str]: ...  # issue 26: the metrics' log fallback


class Manifest(TypedDict):
    """A target's manifest fields (BenchTarget's argv, gpus, telemetry)."""

    argv: list[str] | None
    gpus: list[int] | None
    telemetry: str


def manifest(host: HostProfile, spec: ServiceSpec) -> Manifest:
    """What the report's manifest shows of a service: its launch argv (as the profile builds it), GPUs and
    the host's telemetry source (replay: the GPU numbers are a recording)."""
    # a profile's service only: a `--url` run never imports the launch line (the simulator's, psutil, urllib)
    from ddtree_tui.services.launchline import build_launch

    try:
        argv: list[str] | None = build_launch(host, spec).argv
    except Exception:  # a manifest must never stop a benchmark
        argv = None
    return Manifest(argv=argv, gpus=list(spec.gpus) or None, telemetry=host.telemetry.source)


_ALGOS = {"DFLASH": "dflash", "DDTREE": "ddtree"}


async def url_targets(urls: Sequence[str], timeout: float = 5.0) -> list[BenchTarget]:
    """A target for each running server given by URL: what it runs comes from its /server_info (SGLang),
    else it is measured as a plain server ("baseline"). Never through a proxy: these are our own ports."""
    out: list[BenchTarget] = []
    async with StreamClient(connect_timeout=timeout) as client:
        for u in urls:
            info = await server_info(client, u, timeout) or {}
            spec = info.get("speculative_algorithm")
            algo = _ALGOS.get(str(spec).upper(), str(spec).lower()) if spec else "baseline"
            mode = "linear" if algo == "dflash" else None
            if algo == "ddtree":
                mode = "shadow-linear" if info.get("speculative_ddtree_shadow_linear") else "tree"
            out.append(BenchTarget(ref=url_ref(u), base_url=u, algorithm=algo, mode=mode))
    return out


async def gpu_probe(fleet: BenchFleet, targets: Sequence[BenchTarget]) -> GpuProbe:
    """A soak's GPU probe: the simulator's modelled GPU for a simulated service (or a --url server),
    else the fleet's telemetry of the service's GPUs, else a probe over the host's transport."""
    probes: dict[str, GpuProbe] = {}
    for t in targets:
        if "/" not in t.ref:
            probes[t.ref] = sim_gpu_probe
            continue
        host, spec = fleet.spec_of(t.ref)
        if spec.launcher == "sim":
            probes[t.ref] = sim_gpu_probe
        else:
            probes[t.ref] = _host_probe(fleet, host, spec)

    async def probe(t: BenchTarget) -> tuple[list[GpuWindow], str | None]:
        return await probes.get(t.ref, sim_gpu_probe)(t)

    return probe


def _host_probe(fleet: BenchFleet, host: HostProfile, spec: ServiceSpec) -> GpuProbe:
    over_ssh = host_gpu_probe(fleet.transport(host.name), host, list(spec.gpus) or None)

    async def probe(t: BenchTarget) -> tuple[list[GpuWindow], str | None]:
        view = fleet.snapshot().host(host.name)
        if view is not None and view.gpus:  # the fleet samples this host: its latest numbers
            return gpu_windows(view.gpus, spec.gpus), host.telemetry.source
        return await over_ssh(t)

    return probe


__all__ = ["BenchFleet", "gpu_probe", "manifest", "url_targets"]
