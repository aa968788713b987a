"""`--attach`: TUIs on a real collector process (`serve --demo`) over real HTTP; two share it; when the
collector goes away the screen says so and keeps answering keys, and the view comes back when it returns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtree_tui.collector.attach import AttachedFleet, decode_event, parse_sse
from ddtree_tui.model.events import GpuSampleEvent
from ddtree_tui.model.intents import Launch
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.ui.app import DDTreeApp
from tests import httpc
from tests.app.screen_text import screen_text, until
from tests.collector.conftest import ServeProc


async def _metric(url: str, name: str) -> float | None:
    text = (await httpc.aget(f"{url}/metrics", timeout=5)).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_attached_tui_follows_collector_survives_its_loss_and_reconnects(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    srv = await asyncio.to_thread(serve_demo)
    fleet = AttachedFleet(srv.url, backoff_max=1.0)
    other = AttachedFleet(srv.url)  # a second view sharing the same collector
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(120, 40)) as pilot:  # tabs below 140 columns
            await until(
                pilot, lambda: f"ATTACHED to {srv.url}" in screen_text(app), 20, "the attached banner"
            )
            await until(pilot, lambda: "local:0" in screen_text(app), 20, "the collector's GPUs")
            assert "dflash" in screen_text(app) and "● connected" in screen_text(app)
            await other.start()
            await until(pilot, lambda: other.connected, 10, "the second view to attach")
            clients = await _metric(srv.url, "ddtree_collector_event_clients")
            assert clients == 2.0
            # the view keeps following: the demo's GPU samples arrive as events
            n = len(fleet.gpu_history("local", 0))
            await until(pilot, lambda: len(fleet.gpu_history("local", 0)) > n + 1, 10, "new GPU samples")

            assert await asyncio.to_thread(srv.stop) == 0  # the collector goes away
            await until(pilot, lambda: "COLLECTOR LOST" in screen_text(app), 15, "the lost banner")
            # the hosts' notes follow the banner on the next repaint
            await until(pilot, lambda: "collector unreachable" in screen_text(app), 10, "the hosts' notes")
            await pilot.press("4")  # not frozen: keys still switch tabs
            await until(pilot, lambda: app.active_tab == "tab-todos", 5, "the todo tab")
            await pilot.press("1")
            await until(pilot, lambda: app.active_tab == "tab-fleet", 5, "the fleet tab")

            srv2 = await asyncio.to_thread(serve_demo, port=srv.port)  # it comes back on the same address
            await until(pilot, lambda: f"ATTACHED to {srv2.url}" in screen_text(app), 30, "the reconnect")
            assert fleet.connects == 2
            await until(
                pilot, lambda: "collector unreachable" not in screen_text(app), 10, "host errors cleared"
            )
            res = await fleet.do(Launch(ref=ServiceRef.parse("local/dflash")))
            assert not res.ok and "intents are off" in res.message  # serve runs without --intents
    finally:
        await other.stop()
        await fleet.stop()


def test_sse_messages_decode_back_into_fleet_events() -> None:
    name, data = parse_sse(
        [
            ": comment",
            "event: gpu",
            'data: {"kind":"gpu","host":"h","host_sample":null,"gpus":[{"index":0,"util_gpu":5}],'
            '"telemetry":{"source":"prometheus"}}',
        ]
    )
    assert name == "gpu"
    ev = decode_event(data)
    assert isinstance(ev, GpuSampleEvent) and ev.gpus[0].util_gpu == 5
    assert decode_event("not json") is None and decode_event('{"kind":"nope"}') is None
