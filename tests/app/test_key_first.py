"""What a key waits behind (issue 28, key -> paint p95): a repaint tick that finds a key queued paints after
the key's frame; rendered lines are not garbage for the collector; the collector runs between frames once
the app is up; the footer does not rebuild its keys when they did not change. Counted, never timed."""

from __future__ import annotations

import gc
import sys
import types
from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.strip import Strip
from textual.widgets import DataTable, Input, Static

from ddtree_tui.ui import app as app_mod
from ddtree_tui.ui import gcpolicy
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.gcpolicy import (
    AUTO_THRESHOLDS,
    FULL_EVERY_S,
    UNFREEZE_EVERY_S,
    IdleCollector,
    break_strip_cycles,
)
from ddtree_tui.ui.widgets.footer import LeanFooter
from tests.app.snapdata import static_fleet


async def test_a_repaint_tick_behind_a_queued_key_paints_after_the_keys_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key goes first, its frame is drawn, then the tick's panes: the key's frame does not render the
    telemetry's changed cells (without the wait, the tick painted every pane before the key was handled).
    The wait's bound (a held key must not stop the panes) is lifted here: a busy machine may take longer
    than it to handle the key and draw, and this test is about the order, not the bound."""
    monkeypatch.setattr(app_mod, "INPUT_FIRST_S", 30.0)
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.query_one("#services-table", DataTable)
        table.focus()
        table.move_cursor(row=0)
        await pilot.pause()
        assert table.row_count >= 2  # the key moves the cursor, so its frame has something to draw
        order: list[str] = []
        paint, display, down = app._paint, app._display, table.action_cursor_down

        def spy_paint(n: int, built: Any = None) -> None:
            order.append("paint")
            paint(n, built)

        def spy_display(screen: Any, renderable: Any) -> None:
            order.append("frame")
            display(screen, renderable)

        def spy_down() -> None:
            order.append("key")
            down()

        app._paint = spy_paint  # type: ignore[method-assign]
        app._display = spy_display  # type: ignore[method-assign]
        table.action_cursor_down = spy_down  # type: ignore[method-assign]
        app.ctl.dirty.add("fleet")  # a telemetry sample: the fleet panes to paint
        app.post_message(events.Key("down", None))
        assert app.input_pending()
        await app._repaint_tick()
        await pilot.pause()
        assert "key" in order and "paint" in order, order
        key = order.index("key")
        frame = order.index("frame", key)
        assert frame < order.index("paint"), order
        assert app.ticks_deferred >= 1
        assert table.cursor_row == 1


def strip_refs(strip: Strip) -> int:
    return sys.getrefcount(strip)


def test_a_strip_does_not_cache_itself() -> None:
    """crop_extend / divide / adjust_cell_length answering the strip unchanged no longer store it in its
    own caches (a reference cycle: every rendered line was garbage only a collection could free); the
    answers are Textual's own."""
    assert getattr(Strip, "_ddtree_no_self_cache", False)  # done when the app's module is imported
    assert break_strip_cycles()
    strip = Strip([Segment("ab", Style(bold=True)), Segment("cd")])
    before = strip_refs(strip)
    assert strip.crop_extend(0, 4, None) is strip
    assert strip.divide([4]) == [strip]
    assert strip.adjust_cell_length(4) is strip
    assert strip_refs(strip) == before  # nothing of it kept in its own caches
    # the other answers as before (and still cached: the same object when asked again)
    assert strip.crop_extend(1, 6, None).text == "bcd  "
    assert strip.crop_extend(1, 6, None) is strip.crop_extend(1, 6, None)
    assert [s.text for s in strip.divide([1, 4])] == ["a", "bcd"]
    assert strip.adjust_cell_length(2).text == "ab"
    assert strip.adjust_cell_length(6).text == "abcd  "


def test_the_gpu_process_tree_leaves_no_cyclic_garbage() -> None:
    """The process tree walk made a self-referencing closure on every GPU view build."""
    from ddtree_tui.model.snapshot import GpuProcess, GpuSample
    from ddtree_tui.ui.views import process_rows

    procs = [GpuProcess(pid=10, ppid=1, name="main"), GpuProcess(pid=11, ppid=10, name="worker")]
    g = GpuSample(index=0, processes=procs)
    rows = process_rows(g, "h")
    assert [r.name.strip() for r in rows] == ["└ pid 10", "└ pid 11"]
    # what the collector frees is kept (DEBUG_SAVEALL) and searched for the walk's own objects: a count of all
    # cyclic garbage also counts what other threads of a test process make meanwhile (96 in a full run)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(20):
            process_rows(g, "h")
        gc.collect()
        mine = [
            o
            for o in gc.garbage
            if isinstance(o, types.FunctionType) and o.__qualname__.startswith("process_rows.")
        ]
        assert mine == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def test_the_idle_collector_raises_the_thresholds_and_collects_when_told() -> None:
    now = [100.0]
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    policy = IdleCollector(clock=lambda: now[0])
    assert policy.collect_idle() == -1  # not installed: nothing
    policy.install()
    try:
        assert gc.get_threshold() == AUTO_THRESHOLDS
        assert policy.collect_idle() == 1  # the young generations
        now[0] += FULL_EVERY_S
        kept = Strip([Segment("kept")])  # alive, not frozen yet
        assert policy.collect_idle() == 2  # a full one once the period is up, its survivors frozen
        assert not any(o is kept for o in gc.get_objects(2))
        assert policy.collect_idle() == 1
        now[0] += UNFREEZE_EVERY_S
        assert policy.collect_idle() == 3  # the whole heap, the frozen part too
        assert (policy.young, policy.full, policy.whole) == (2, 1, 1)
        assert gc.get_freeze_count() > 0
    finally:
        policy.uninstall()
        if not frozen:
            gc.unfreeze()  # other tests see the collector as they found it
    assert gc.get_threshold() == before


async def test_the_app_collects_between_frames_once_up_and_gives_the_thresholds_back() -> None:
    before = gc.get_threshold()
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.gc_policy.install()  # what the app does FREEZE_AFTER_S after its start (live)
        assert gc.get_threshold() == gcpolicy.AUTO_THRESHOLDS
        app._collect_idle()
        assert app.gc_policy.young == 1
        app.post_message(events.Key("x", "x"))  # input waiting: no collection now
        app._collect_idle()
        assert app.gc_policy.young == 1
        await pilot.pause()
    assert gc.get_threshold() == before


class Zapper(Static, can_focus=True):
    BINDINGS = [Binding("z", "zap", "Zap")]  # shown in the footer while it has the focus

    def action_zap(self) -> None:
        pass


class Two(App[None]):
    def compose(self) -> ComposeResult:
        yield Input(id="a")
        yield Input(id="b")
        yield Zapper("zap", id="z")
        yield LeanFooter()


async def test_the_footer_keeps_its_keys_when_a_focus_move_keeps_the_bindings() -> None:
    app = Two()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        footer = app.query_one(LeanFooter)
        composed: list[int] = []
        orig = LeanFooter.compose

        def counted(self: LeanFooter) -> Any:
            composed.append(1)
            return orig(self)

        footer.compose = counted.__get__(footer)  # type: ignore[method-assign]
        for target in ("#b", "#a", "#b"):
            app.query_one(target).focus()
            await pilot.pause()
            await pilot.pause()
        assert composed == []  # two Inputs: the same keys
        app.query_one("#z").focus()  # a widget with a key of its own: the footer's keys change
        await pilot.pause()
        await pilot.pause()
        assert composed == [1]


async def test_the_first_frame_has_no_filter_input_and_slash_still_filters() -> None:
    """The `/` filter's Input (hidden until `/`) is not composed for the first frame: mounted after it."""
    app = DDTreeApp(static_fleet(), demo=True)
    at_first_frame: list[int] = []
    display = app._display

    def spy(screen: Any, renderable: Any) -> None:
        if not at_first_frame:
            at_first_frame.append(len(app.query("#filter")))
        display(screen, renderable)

    app._display = spy  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert at_first_frame == [0]
        inp = app.query_one("#filter", Input)
        assert not inp.has_class("-shown") and inp.cursor_blink is False
        await pilot.press("slash", "d", "f")
        await pilot.pause()
        assert inp.has_class("-shown") and app.focused is inp
        assert app.filter_text == "df"
        await pilot.press("escape")
        await pilot.pause()
        assert app.filter_text == "" and not inp.has_class("-shown")
