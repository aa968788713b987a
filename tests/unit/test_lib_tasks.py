"""lib/tasks.cancel_and_wait: the tasks are cancelled and waited for, and a timeout around the wait still
comes out (the stop's old `suppress(BaseException): await t` swallowed it and ran on without a bound)."""

from __future__ import annotations

import asyncio

import pytest

from ddtree_tui.lib.tasks import cancel_and_wait


async def test_a_timeout_around_the_wait_comes_out_while_a_task_still_cleans_up() -> None:
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await release.wait()  # its cleanup lasts until released

    async def fails() -> None:
        raise RuntimeError("its own error stays in the task")

    slow = asyncio.create_task(slow_to_stop())
    failing = asyncio.create_task(fails())
    await asyncio.sleep(0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await cancel_and_wait([slow, failing])
    assert not slow.done()  # the timeout came out before the task had finished its cleanup
    release.set()
    await asyncio.wait([slow])
    assert slow.cancelled()
    assert isinstance(failing.exception(), RuntimeError)


async def test_every_task_is_cancelled_and_finished_when_it_returns() -> None:
    tasks = [asyncio.create_task(asyncio.sleep(3600)) for _ in range(3)]
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await cancel_and_wait([*tasks, done])
    assert all(t.cancelled() for t in tasks)
    assert done.done() and not done.cancelled()
