"""Issue 28 at 64 hosts x 8 GPUs: a long GPU view is built in a thread on the timer's repaint (the loop keeps
taking keys meanwhile). It must be the very view the loop would have built, and one that a paint overtook
while it was being built (a key, a filter: newer data) must be dropped, never painted over the newer one."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine

from textual.notifications import SeverityLevel

from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample, HostView, TelemetryStatus
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.controller import OFF_LOOP_GPUS, Controller

T0 = 1_750_000_000.0


class Host:
    """The little of the app the controller calls back."""

    def notify(
        self, message: str, *, severity: SeverityLevel = "information", timeout: float | None = None
    ) -> None:
        pass

    def bench_event(self, event: object) -> None:
        pass

    def spawn(
        self, work: Coroutine[object, object, object], group: str, name: str = "", exclusive: bool = False
    ) -> None:
        work.close()


def fleet(hosts: int, gpus: int) -> StaticFleet:
    views = [
        HostView(
            name=f"h{h:02d}",
            address="local",
            state="connected",
            telemetry=TelemetryStatus(source="replay"),
            gpus=[
                GpuSample(
                    index=i,
                    util_gpu=(h * 7 + i * 13) % 100,
                    mem_used_mb=1000 * i,
                    mem_total_mb=143771,
                    power_w=300.0,
                    power_limit_w=700.0,
                    temp_c=50,
                    ts=T0,
                )
                for i in range(gpus)
            ],
        )
        for h in range(hosts)
    ]
    history = {
        (f"h{h:02d}", i): [float((h + i + k) % 100) for k in range(30)]
        for h in range(hosts)
        for i in range(gpus)
    }
    return StaticFleet(FleetSnapshot(ts=T0, hosts=views), history=history)


async def test_a_long_gpu_view_built_in_a_thread_is_the_loops_view() -> None:
    ctl = Controller(fleet(8, 8), Host(), live=False)
    assert ctl.gpu_rows() == 64 >= OFF_LOOP_GPUS
    for width in (160, 80):
        assert await ctl.gpus_view_for_tick(width) == ctl.gpus_view(width)


async def test_a_thread_built_view_overtaken_by_a_paint_is_dropped() -> None:
    ctl = Controller(fleet(8, 8), Host(), live=False)
    task = asyncio.create_task(ctl.gpus_view_for_tick(160))
    await asyncio.sleep(0)  # the build is under way in its thread
    ctl.gpu_paints += 1  # the pane painted meanwhile (what the app's _paint counts)
    assert await task is None
    assert await ctl.gpus_view_for_tick(160) == ctl.gpus_view(160)  # the next tick paints


async def test_a_short_gpu_view_is_built_on_the_loop() -> None:
    """Under OFF_LOOP_GPUS nothing is handed to a thread, so nothing can be overtaken: always a view."""
    ctl = Controller(fleet(2, 2), Host(), live=False)
    task = asyncio.create_task(ctl.gpus_view_for_tick(160))
    await asyncio.sleep(0)
    ctl.gpu_paints += 1
    assert await task == ctl.gpus_view(160)
