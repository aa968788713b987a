"""Issue 28, first paint under 1 s: the TUI paints on a StartingFleet (fleet/starting.py) before the core is
imported, then builds the real Fleet on the same event stream and starts it. Until then the screen must stay
truthful: every host of the profiles `connecting`, nothing sampled, no service claimed; the todo list and the
bench history as their files say. A quit before the core is built starts nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from ddtree_tui.bench import history
from ddtree_tui.bench.models import BenchRun, SamplingParams
from ddtree_tui.config import HostProfile, parse_profile
from ddtree_tui.fleet.core import Fleet
from ddtree_tui.fleet.starting import FleetStopped, StartingFleet
from ddtree_tui.model.events import HostStateChanged
from ddtree_tui.todo import TodoStore
from ddtree_tui.ui.app import DDTreeApp
from tests.app.screen_text import screen_text, until


def _profiles(tmp_path: Path, n: int) -> list[HostProfile]:
    """`n` local hosts, no telemetry and no services: starting them spawns nothing."""
    return [
        parse_profile(
            f'name = "h{i}"\naddress = "local"\nworkdir = "{tmp_path / f"w{i}"}"\n[telemetry]\nsource = "none"\n',
            f"h{i}.toml",
        )
        for i in range(n)
    ]


def _one_run(tmp_path: Path) -> None:
    """A plain run `r1` in the history file."""
    run = BenchRun(
        id="r1", started_at=datetime(2026, 12, 2, tzinfo=UTC), prompt_set="seed3",
        sampling=SamplingParams(max_new_tokens=8), repeats=1, warmup=0, concurrency=1,
    )  # fmt: skip
    history.append(run, tmp_path / "history.jsonl")


def _starting(tmp_path: Path, n: int = 3) -> StartingFleet:
    return StartingFleet(
        _profiles(tmp_path, n), todos_path=tmp_path / "todos.json", history_path=tmp_path / "history.jsonl"
    )


def test_before_the_core_every_host_is_connecting_and_nothing_is_measured(tmp_path: Path) -> None:
    store = TodoStore(tmp_path / "todos.json")
    store.load()
    store.add("measure the baseline")
    store.save()
    _one_run(tmp_path)
    fleet = _starting(tmp_path)
    snap = fleet.snapshot()
    assert [(h.name, h.state) for h in snap.hosts] == [
        ("h0", "connecting"),
        ("h1", "connecting"),
        ("h2", "connecting"),
    ]
    assert all(h.host is None and not h.gpus and not h.services for h in snap.hosts)
    assert [i.content for i in snap.todos.items] == ["measure the baseline"]
    assert [r.id for r in fleet.bench_history()] == ["r1"]
    assert fleet.gpu_history("h0", 0) == [] and fleet.log_lines("h0/x") == [] and fleet.todo_evidence() == []


async def test_the_real_fleet_publishes_on_the_stream_subscribed_before_it_was_built(tmp_path: Path) -> None:
    fleet = _starting(tmp_path, 1)
    q = fleet.subscribe()
    real = await fleet.build()
    assert isinstance(real, Fleet)
    assert await fleet.build() is real  # built once
    try:
        await real.start()
        ev = await asyncio.wait_for(q.get(), 10)
        assert isinstance(ev, HostStateChanged) and ev.host == "h0" and ev.status.state == "connected"
        assert real.snapshot().hosts[0].state == "connected"
    finally:
        await fleet.stop()  # stops the built fleet


async def test_stopped_before_it_was_built_nothing_is_built_or_started(tmp_path: Path) -> None:
    fleet = _starting(tmp_path, 1)
    await fleet.stop()
    assert await fleet.build() is None
    try:
        await fleet.reload_profiles()
    except FleetStopped:
        pass
    else:
        raise AssertionError("a call that needs the core must say the fleet was stopped")


async def test_the_app_paints_hosts_connecting_then_swaps_in_the_started_fleet(tmp_path: Path) -> None:
    _one_run(tmp_path)
    fleet = _starting(tmp_path, 2)
    app = DDTreeApp(fleet, refresh_hz=10)
    first: list[list[str]] = []
    orig = app.ctl.refresh_snapshot

    def spy() -> None:  # the snapshot of the first frame: read in on_mount, before the fleet starts
        orig()
        if not first:
            first.append([h.state for h in app.ctl.snap.hosts])

    app.ctl.refresh_snapshot = spy  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            assert first == [["connecting", "connecting"]]
            await until(pilot, lambda: isinstance(app.fleet, Fleet), 30, "the core built and swapped in")
            await until(pilot, lambda: screen_text(app).count("● connected") == 2, 30, "both hosts connected")
            assert app.ctl.fleet_started
            await until(
                pilot, lambda: [r.id for r in app.ctl.bench_history] == ["r1"], 10, "the history read"
            )
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
