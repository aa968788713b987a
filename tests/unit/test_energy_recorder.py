"""The bench's GPU recorder (fleet/bench_energy.py) on a fleet's event stream: only the targets' hosts and
healthy samples kept, a GPU tied to a service by the pids the fleet joined (NVML), by the profile's `gpus`
for a replay (its pids are not ours), by the whole host when the profile names none; the run's energy and
each request's joules put on the run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from ddtree_tui.bench.models import BenchRun, BenchTarget, RequestResult, SamplingParams, TargetInfo
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.fleet.bench_energy import GpuRecorder, finish
from ddtree_tui.lib.pubsub import PubSub
from ddtree_tui.model.events import FleetEvent, GpuSampleEvent
from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample, TelemetryStatus


class FakeFleet:
    """spec_of, snapshot, subscribe, unsubscribe: what the recorder asks of a fleet."""

    def __init__(self, hosts: list[HostProfile]) -> None:
        self.hosts = {h.name: h for h in hosts}
        self.events: PubSub[FleetEvent] = PubSub()

    def spec_of(self, ref: str) -> tuple[HostProfile, ServiceSpec]:
        host, _, svc = ref.partition("/")
        h = self.hosts[host]
        return h, next(s for s in h.service if s.name == svc)

    def snapshot(self) -> FleetSnapshot:
        return FleetSnapshot()

    def subscribe(self) -> asyncio.Queue[FleetEvent]:
        return self.events.subscribe()

    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None:
        self.events.unsubscribe(q)


def _host(name: str, services: list[dict[str, object]]) -> HostProfile:
    return HostProfile.model_validate(
        {
            "name": name,
            "address": "local",
            "telemetry": {"interval_ms": 100},
            "service": [{"launcher": "external", **s} for s in services],
        }
    )


def _gpu(index: int, ts: float, w: float, service: str | None = None, health: str = "ok") -> GpuSample:
    return GpuSample(index=index, ts=ts, power_w=w, service=service, health=health)  # type: ignore[arg-type]


def _target(ref: str) -> BenchTarget:
    return BenchTarget(ref=ref, base_url="http://127.0.0.1:1", algorithm="dflash", mode="linear")


async def test_the_recorder_joins_gpus_by_pid_profile_or_host_and_puts_energy_on_the_run() -> None:
    a = _host("a", [{"name": "s1", "port": 30001, "gpus": [0]}, {"name": "s2", "port": 30002, "gpus": [1]}])
    b = _host("b", [{"name": "s3", "port": 30003}])  # no gpus named: every GPU of the host is its
    fleet = FakeFleet([a, b, _host("c", [])])
    rec = GpuRecorder(fleet, [_target("a/s1"), _target("a/s2"), _target("b/s3")])
    rec.start()
    nvml, replay = TelemetryStatus(source="nvml"), TelemetryStatus(source="replay")
    for t in range(11):  # 10 s at 200 W on every GPU
        ts = 1000.0 + t
        # host a by NVML: s2's processes are on GPU 0, although its profile says GPU 1 (the pids win); GPU 1
        # has no process of ours and no other service names it: left out
        fleet.events.publish(GpuSampleEvent(host="a", host_sample=None, telemetry=nvml,
                                            gpus=[_gpu(0, ts, 200.0, "s2"), _gpu(1, ts, 200.0)]))  # fmt: skip
        fleet.events.publish(GpuSampleEvent(host="b", host_sample=None, telemetry=replay,
                                            gpus=[_gpu(0, ts, 200.0, "s9"), _gpu(1, ts, 200.0)]))  # fmt: skip
        fleet.events.publish(
            GpuSampleEvent(host="c", host_sample=None, telemetry=nvml, gpus=[_gpu(0, ts, 1.0)])
        )
        fleet.events.publish(GpuSampleEvent(host="a", host_sample=None, telemetry=nvml,
                                            gpus=[_gpu(0, ts + 0.5, 9999.0, "s2", health="fault")]))  # fmt: skip
    await asyncio.sleep(0.05)  # the recorder's task drains the queue
    await rec.stop(1010.0)
    tracks = {(t.host, t.gpu): t for t in rec.tracks()}
    assert set(tracks) == {("a", 0), ("b", 0), ("b", 1)}  # host c not a target's; a's GPU 1 not joined
    # s2's pids were seen on GPU 0 (not on GPU 1, its profile's); s1's nowhere, so its profile's GPU 0
    assert (tracks[("a", 0)].services, tracks[("a", 0)].join) == (["a/s1", "a/s2"], "pid+profile")
    # a replay's process names are not ours: the profile decides (none named: the whole host)
    assert (tracks[("b", 0)].services, tracks[("b", 0)].join) == (["b/s3"], "host")
    assert len(tracks[("a", 0)].points) == 11  # the faulted samples are not kept

    results = [
        RequestResult(service="a/s2", algorithm="dflash", mode="linear", prompt_id="p", repeat=0, seq=0,
                      started_at=1000.0, e2e_s=10.0, output_tokens=500),
        RequestResult(service="b/s3", algorithm="dflash", mode="linear", prompt_id="p", repeat=0, seq=1,
                      started_at=1000.0, e2e_s=10.0, output_tokens=1000),
    ]  # fmt: skip
    run = BenchRun(
        id="r", started_at=datetime.now(UTC), prompt_set="seed3", sampling=SamplingParams(), repeats=1,
        warmup=0, concurrency=1, results=results,
        targets=[TargetInfo(ref=r, base_url="u", algorithm="dflash", mode="linear") for r in ("a/s1", "a/s2", "b/s3")],
    )  # fmt: skip
    rec2 = GpuRecorder(fleet, [_target("a/s2"), _target("b/s3")])
    rec2.samples, rec2.sources = rec.samples, rec.sources
    await finish(rec2, run)
    en = run.energy
    assert en is not None and en.energy_j == pytest.approx(3 * 2000.0)  # three GPUs, 200 W for 10 s
    assert run.results[0].energy_j == pytest.approx(2000.0) and run.results[1].energy_j == pytest.approx(
        4000.0
    )
    by = {s.service: s for s in en.services}
    assert by["a/s2"].j_per_token == pytest.approx(4.0) and by["b/s3"].j_per_token == pytest.approx(4.0)
    assert by["a/s1"].energy_j is None and by["a/s1"].note == "none of its GPUs was sampled"
    assert (
        en.source == "NVML; replay/simulated (a recording whose power follows the simulated load: modelled)"
    )
