"""retry.Backoff: the restart delay of the stream loops (the service watcher first)."""

from __future__ import annotations

from ddtree_tui.lib.retry import Backoff


def test_backoff_doubles_up_to_the_cap_and_resets_after_success() -> None:
    b = Backoff(first=2.0, cap=15.0)
    assert [b.step() for _ in range(5)] == [2.0, 4.0, 8.0, 15.0, 15.0]
    b.reset()
    assert b.step() == 2.0


async def test_sleep_waits_the_current_delay_then_grows_it() -> None:
    b = Backoff(first=0.01, cap=0.02)
    await b.sleep()
    assert b.delay == 0.02
