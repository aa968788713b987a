"""A request in flight's events (PromptStarted, TokensReceived) are made only while someone reads them (issue
26): the headless run's progress lines show none and skip them, and then a run makes none, plain or load
shape; a live view (a subscriber of every event) gets them as before. Through a real Fleet on a local profile, against a real
simulated server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ddtree_tui.bench.models import BenchRequest, PromptStarted, ShapeRequest, TokensReceived
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.config import load_profiles
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.events import BenchEventWrap, BenchLiveWrap, FleetEvent
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer
from tests.util import local_profile

PROMPTS = [Prompt(id="p0", messages=[{"role": "user", "content": "question"}])]


def _drain(q: asyncio.Queue[FleetEvent]) -> list[FleetEvent]:
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


@pytest.mark.timeout(90)
async def test_in_flight_events_are_made_only_while_someone_reads_them(tmp_path: Path) -> None:
    # 300 tokens at 600 tok/s: half a second a request, past the reader's 200 ms wakes, so tokens come mid-run
    cfg = SimConfig(algorithm="dflash", decode_rate=600, load_time=0)
    async with SimServer(cfg, log=lambda s: None) as srv:
        profiles = load_profiles([local_profile(tmp_path, [("up", "external", srv.port)])])
        async with Fleet.open(
            profiles, telemetry=False, watch=False, history_path=tmp_path / "h.jsonl"
        ) as fleet:
            await fleet.wait_settled(10)
            made: list[object] = []
            publish = fleet.events.publish

            def counting(ev: FleetEvent) -> None:
                if isinstance(ev, BenchEventWrap) and isinstance(ev.event, PromptStarted | TokensReceived):
                    made.append(ev)
                publish(ev)

            fleet.events.publish = counting  # type: ignore[method-assign]
            lines = fleet.subscribe(skip=(BenchLiveWrap,))  # what the headless run's progress reads
            assert not fleet.wants(BenchLiveWrap) and fleet.wants(BenchEventWrap)
            req = BenchRequest(
                refs=["loc/up"], prompts=PROMPTS, warmup=0, max_new_tokens=300, tokens_event_interval=0
            )
            plain = await fleet.run_bench(req)
            shape = ShapeRequest(
                refs=["loc/up"], prompts=PROMPTS, warmup=0, max_new_tokens=300, tokens_event_interval=0,
                requests=2, load="concurrency:2",
            )  # fmt: skip
            load = await fleet.run_load_shape(shape)
            assert plain.failed == 0 and load.failed == 0
            assert made == []  # nobody reads them: none made
            got = _drain(lines)
            assert any(isinstance(ev, BenchEventWrap) for ev in got)  # the rest of the run's events came

            live = fleet.subscribe()  # a live view: every event
            assert fleet.wants(BenchLiveWrap)
            await fleet.run_bench(req)
            await fleet.run_load_shape(shape)
            seen = [ev for ev in _drain(live) if isinstance(ev, BenchLiveWrap)]
            kinds = {type(ev.event) for ev in seen}
            assert kinds == {PromptStarted, TokensReceived}
            assert len(made) == len(seen)
            assert not any(isinstance(ev, BenchLiveWrap) for ev in _drain(lines))  # skipped by that reader
            fleet.unsubscribe(live)
            assert not fleet.wants(BenchLiveWrap)
