"""`status --timeout`: a host whose GPU sampler sent no GPU rows within the timeout says so in its telemetry
note, and keeps saying so when the sampler's first `stale` line (NVML missing, `nvidia-smi -lms` not started
yet) arrives only after the wait gave up. That line replaced the note, and `status --json` showed
`"gpus": []` with only "NVML Shared Library Not Found" (a whole fresh-clone run, idle)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from ddtree_tui.config import parse_profile
from ddtree_tui.fleet.hosts import HostRecord, Hosts
from ddtree_tui.model.snapshot import ConnStatus, GpuSample, TelemetryStatus

NVML = "NVML Shared Library Not Found"


class _Transport:
    """Connected at once; the only part of a transport `wait_settled` asks."""

    status = ConnStatus(state="connected")

    async def wait_connected(self, timeout: float) -> bool:
        return True


def _hosts() -> tuple[Hosts, HostRecord, list[Any]]:
    events: list[Any] = []
    hosts = Hosts([], events.append, guard=None, watch=False, telemetry=True, probe_interval=1.0)  # type: ignore[arg-type]
    prof = parse_profile('name = "h"\naddress = "local"\n', "h.toml")
    h = HostRecord(prof, _Transport())  # type: ignore[arg-type]
    h.telemetry = SimpleNamespace(settled=False)  # type: ignore[assignment]
    hosts.by_name["h"] = h
    return hosts, h, events


def test_a_stale_line_after_the_settle_gave_up_keeps_the_timeout_in_the_note() -> None:
    hosts, h, events = _hosts()
    asyncio.run(hosts.wait_settled(0.05))  # no sample at all: the wait gives up
    assert h.telemetry_status.note == "no GPU sample within the 0.05 s timeout"
    # the sampler's first line, late: stale, no GPU rows, its own note
    hosts._on_sample("h", None, [], TelemetryStatus(source="nvidia-smi", note=NVML))
    assert h.telemetry_status.note == f"{NVML}; no GPU sample within the 0.05 s timeout"
    assert events[-1].telemetry.note == h.telemetry_status.note  # what the TUI and `status` are told
    assert not h.sampled.is_set() and h.gpus == []
    # the GPU rows come: the note is the sampler's own again
    h.telemetry.settled = True  # type: ignore[union-attr]
    gpu = GpuSample(index=0, name="H200", uuid="GPU-0", util_pct=0, mem_used_mib=0, mem_total_mib=1, ts=1.0)
    hosts._on_sample("h", None, [gpu], TelemetryStatus(source="nvidia-smi", note=NVML))
    assert h.telemetry_status.note == NVML and h.sampled.is_set() and h.gpus == [gpu]
