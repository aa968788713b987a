"""A repaint tick that waits for a key's frame (DDTreeApp._after_input) ends when it is cancelled, also when the
frame comes in the same loop turn as the cancel. Python 3.11's asyncio.wait_for returned the frame's result
then and swallowed the cancel: the repaint timer's task never ended, and the app's exit (Textual's
Timer._stop_all awaits it) hung for good — a TUI story test under load, seen in a task dump."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ddtree_tui.ui.app import DDTreeApp


class _Tick:
    """What _after_input reads of the app: one key queued, handled at once; a frame drawn on the next turn."""

    def __init__(self) -> None:
        self.ticks_deferred = 0
        self._pending = iter([True, False])

    def input_pending(self) -> bool:
        return next(self._pending, False)

    def call_after_refresh(self, cb: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(cb)


async def test_a_tick_waiting_for_a_frame_is_cancelled_even_when_the_frame_comes_in_the_same_turn() -> None:
    tick = _Tick()
    task = asyncio.create_task(DDTreeApp._after_input(tick))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the task is waiting for the frame; the frame's callback runs next turn
    task.cancel()  # delivered in that same next turn, after the frame's callback
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tick.ticks_deferred == 1  # it did wait for the key's frame


class _HeldKey(_Tick):
    """A key that stays queued and a frame that never comes: a held key on a stalled display."""

    def input_pending(self) -> bool:
        return True

    def call_after_refresh(self, cb: Callable[[], None]) -> None:
        pass


async def test_a_held_key_does_not_stop_the_panes_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait for a key's frame ends at its bound (INPUT_FIRST_S, read when the wait starts), so the tick
    paints its panes after all; without the bound this would wait for good."""
    monkeypatch.setattr("ddtree_tui.ui.app.INPUT_FIRST_S", 0.02)
    tick = _HeldKey()
    await asyncio.wait_for(DDTreeApp._after_input(tick), 10)  # type: ignore[arg-type]
    assert tick.ticks_deferred == 1
