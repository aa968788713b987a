"""The collector's bench counters (/metrics) come from the bench engine's typed events."""

from __future__ import annotations

import asyncio
from typing import Any

from ddtree_tui.bench.models import BenchRun, PromptFinished, RequestResult, RunFinished, RunStarted
from ddtree_tui.collector.server import Collector
from ddtree_tui.model.events import BenchEventWrap
from ddtree_tui.model.snapshot import FleetSnapshot


class _QuietFleet:
    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def snapshot(self) -> FleetSnapshot:
        return FleetSnapshot()

    def subscribe(self) -> asyncio.Queue[Any]:
        return asyncio.Queue()

    def unsubscribe(self, q: asyncio.Queue[Any]) -> None:
        return None

    def log_lines(self, ref: str) -> list[str]:
        return []


def _finished(done: int, error: str | None) -> BenchEventWrap:
    result = RequestResult.model_construct(error=error)
    return BenchEventWrap(event=PromptFinished(run_id="r", result=result, done=done, total=3))


def test_bench_events_drive_the_counters() -> None:
    coll = Collector(_QuietFleet())
    c = coll.counters
    coll.handle_event(BenchEventWrap(event=RunStarted(run_id="r", total=3, targets=[], prompts=[])))
    assert (c.bench_running, c.bench_done, c.bench_total) == (True, 0, 3)
    coll.handle_event(_finished(1, None))
    coll.handle_event(_finished(2, "HTTP 500"))
    assert (c.bench_done, c.bench_failed_requests) == (2, 1)
    coll.handle_event(BenchEventWrap(event=RunFinished(run=BenchRun.model_construct())))
    assert (c.bench_running, c.bench_runs) == (False, 1)
    assert c.events["bench"] == 4


def test_a_bench_event_that_did_not_parse_still_counts_by_its_kind() -> None:
    coll = Collector(_QuietFleet())
    c = coll.counters
    coll.handle_event(BenchEventWrap(event={"kind": "run_started", "total": "?"}))
    assert (c.bench_running, c.bench_total) == (True, 0)
    coll.handle_event(BenchEventWrap(event={"kind": "run_finished"}))
    assert (c.bench_running, c.bench_runs) == (False, 1)
