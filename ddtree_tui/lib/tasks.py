"""Cancelling tasks and waiting for them to finish, without swallowing a cancel of our own.

`with contextlib.suppress(BaseException): await t` after `t.cancel()` also swallows the CancelledError that
a timeout around the caller (`asyncio.timeout`, `wait_for`) sends in: the timeout is lost and the caller runs
on, unbounded, through whatever comes next (a stop under load never ended). `asyncio.wait` leaves the tasks'
own outcomes in the tasks and lets a cancel of the caller through."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


async def cancel_and_wait(tasks: Iterable[asyncio.Future[T]]) -> None:
    """Cancel `tasks` and wait until each has finished; their results and errors are dropped (read, so
    that none is reported as never retrieved). A cancel of the caller ends the wait at once."""
    pending = [t for t in tasks if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    for t in pending:
        if not t.cancelled():
            t.exception()
