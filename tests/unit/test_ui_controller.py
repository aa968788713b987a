"""The controller without a terminal: which panes an event repaints, the log tail it hands the log pane, and
intents carried to a (frozen) fleet with their results reported."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from ddtree_tui.bench.models import ServiceSummary
from ddtree_tui.model.events import LogLine, Notice, ServiceStateChanged, TodoChanged
from ddtree_tui.model.intents import Kill
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.ui.backend import StaticFleet, StaticTodo
from ddtree_tui.ui.controller import Controller
from ddtree_tui.ui.screens.messages import MessageRecord, bar_line
from ddtree_tui.ui.widgets.bench import _mode as bench_mode
from ddtree_tui.ui.widgets.bench import short_mode
from tests.app.snapdata import T0, snapshot, static_fleet
from tests.bench_runs import bench_run


class Host:
    """Records what the controller asks of the app."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []
        self.spawned: list[tuple[Coroutine[Any, Any, Any], str]] = []
        self.bench: list[Any] = []

    def notify(self, message: str, *, severity: Any = "information", timeout: float | None = None) -> None:
        self.notes.append((str(severity), message))

    def bench_event(self, event: Any) -> None:
        self.bench.append(event)

    def spawn(
        self, work: Coroutine[Any, Any, Any], group: str, name: str = "", exclusive: bool = False
    ) -> None:
        self.spawned.append((work, group))


def controller(fleet: StaticFleet | None = None) -> tuple[Controller, Host]:
    host = Host()
    ctl = Controller(fleet or static_fleet(), host, live=False)
    return ctl, host


def test_events_mark_only_their_panes_and_a_frozen_clock() -> None:
    ctl, host = controller()
    assert ctl.take_dirty() == {1, 2, 3, 4, 5, 6}  # everything once at start
    assert ctl.selected_service == "local/dflash"  # the first service, picked with the snapshot
    assert ctl.take_dirty() == set()
    status = ctl.snap.hosts[0].services[0]
    ctl.on_event(ServiceStateChanged(host="local", status=status))
    ctl.on_event(TodoChanged())
    ctl.stale.add(6)
    assert ctl.take_dirty() == {1, 2, 3, 4, 6}
    ctl.on_event(Notice(severity="error", text="it broke"))
    assert host.notes == [("error", "it broke")]
    assert ctl.now() == T0


def test_the_log_pane_gets_the_tail_then_only_new_lines() -> None:
    fleet = static_fleet()
    fleet._logs["local/dflash"] = ["one", "two"]
    ctl, _ = controller(fleet)
    ctl.take_dirty()
    first = ctl.logs_view()
    assert (first.ref, first.lines, first.reset) == ("local/dflash", ("one", "two"), True)
    ctl.on_event(LogLine(host="local", service="dflash", line="three"))
    ctl.on_event(LogLine(host="local", service="ddtree-shadow", line="not shown"))
    assert ctl.take_dirty() == {6}
    more = ctl.logs_view()
    assert (more.lines, more.reset) == (("three",), False)
    ctl.filter_text, ctl.filter_pane = "tw", 6  # a search reloads every line
    searched = ctl.logs_view()
    assert (searched.search, searched.reset, searched.lines) == ("tw", True, ("one", "two"))


async def test_intents_run_in_workers_and_a_frozen_fleet_says_so() -> None:
    ctl, host = controller()
    ctl.start_intent(Kill(ref=ServiceRef("local", "dflash")))
    ctl.start_intent(Kill(ref=ServiceRef("local", "dflash")))  # refused while the first runs
    assert [g for _, g in host.spawned] == ["svc:local/dflash"]
    assert ("warning", "local/dflash is busy with another action") in host.notes
    work, _ = host.spawned[0]
    res = await work
    assert res.ok is False and "frozen" in res.message
    assert host.notes[-1] == ("error", "kill local/dflash: the view is frozen (snapshot mode)")
    assert "local/dflash" not in ctl.busy and "fleet" in ctl.dirty


def test_doctor_host_follows_the_selection() -> None:
    ctl, _ = controller()
    ctl.take_dirty()
    assert ctl.doctor_host() == "local"
    assert ctl.select_host("ct200") and not ctl.select_host("ct200")
    assert ctl.doctor_host() == "ct200"
    view = ctl.gpus_view(200)
    assert [r.key for r in view.table.rows] == ["ct200:1"]


def test_todos_and_bench_panes_get_typed_views_with_their_own_filter() -> None:
    run = bench_run("seed3", [("local/dflash", None)])
    fleet = StaticFleet(snapshot(), todos=[StaticTodo(content="ship it"), StaticTodo(content="bench")])
    ctl, _ = controller(fleet)
    ctl.filter_text, ctl.filter_pane = "ship", 3  # the filter of another pane
    view = ctl.todos_view()
    assert view.filter == "" and [it.content for it in view.todos.items] == ["ship it", "bench"]
    ctl.filter_pane = 4
    assert ctl.todos_view().filter == "ship"
    ctl.bench_history = [run]
    assert ctl.bench_view().history == (run,)


def test_bench_mode_is_the_one_display_mode_answer() -> None:
    def summary(algorithm: str, mode: str | None) -> ServiceSummary:
        return ServiceSummary(service="h/s", algorithm=algorithm, mode=mode)

    assert bench_mode(summary("dflash", None)) == "dflash linear"
    assert bench_mode(summary("ddtree", None)) == "ddtree shadow-linear"
    assert bench_mode(summary("ddtree", "tree")) == "ddtree tree"
    assert bench_mode(summary("baseline", "-")) == "baseline"
    assert short_mode(bench_mode(summary("dflash", None))) == "dflash"


def test_message_bar_holds_the_latest_message_then_shows_the_count() -> None:
    msgs = [MessageRecord(T0, "information", "one"), MessageRecord(T0, "error", "two")]
    text, severity = bar_line(msgs, shown_until=10.0, now=5.0)
    assert severity == "error" and text.plain.endswith("two  (H: 2 messages)")
    text, severity = bar_line(msgs, shown_until=10.0, now=11.0)
    assert severity is None and text.plain == "H: 2 messages"
    assert bar_line([], 0.0, 1.0)[0].plain == "H: message history"


class SlowStop(StaticFleet):
    """A fleet whose stop swallows the first cancel and then waits until released: as Fleet.stop did, whose
    `suppress(BaseException): await t` swallowed the cancel of the `asyncio.timeout` meant to bound it."""

    def __init__(self) -> None:
        super().__init__(snapshot())
        self.stops = 0
        self.release = asyncio.Event()
        self.ended = asyncio.Event()

    async def stop(self) -> None:
        self.stops += 1
        try:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                pass  # the first cancel, swallowed
            await self.release.wait()
        finally:
            self.ended.set()


async def test_shutdown_is_bounded_even_when_the_fleets_stop_swallows_the_cancel() -> None:
    """`q` (and the run's last stop after it) must return within the stop timeout whatever the stop does
    with a cancel; the second caller waits on the same one stop, none is started twice."""
    fleet = SlowStop()
    ctl = Controller(fleet, Host(), live=True, stop_timeout=0.2)
    ctl.fleet_started = True  # what run_fleet marks (this fleet is never started)
    try:
        async with asyncio.timeout(10):  # a hang bound, not a measurement: the old code hit it
            await ctl.shutdown()
            await ctl.shutdown(running=False)
        assert fleet.stops == 1
        assert ctl.fleet_stopped
    finally:
        fleet.release.set()
        await asyncio.wait_for(fleet.ended.wait(), 10)
