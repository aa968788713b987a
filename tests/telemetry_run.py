"""A HostTelemetry running in a task with its updates recorded: the local and the SSH telemetry tests share
it (each had its own loop and its own `until`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ddtree_tui.config import HostProfile
from ddtree_tui.telemetry import HostTelemetry
from ddtree_tui.transport.base import Transport
from tests import util

INTERVAL = 0.2


class Run:
    """A HostTelemetry running in a task, with its updates recorded."""

    def __init__(self, transport: Transport, prof: HostProfile, **kw: Any) -> None:
        self.updates: list[tuple[Any, ...]] = []
        kw = {"interval": INTERVAL, "backoff_initial": 0.2, "backoff_max": 1.0, "startup_grace": 8.0} | kw
        self.tel = HostTelemetry(transport, prof, on_update=lambda *a: self.updates.append(a), **kw)
        self.task = asyncio.create_task(self.tel.run())

    async def until(
        self, pred: Callable[[tuple[Any, ...]], bool], timeout: float = 15.0, what: str = ""
    ) -> Any:
        """The first update since the last call that `pred` accepts; the sampler's own error if it crashed."""
        seen = 0

        def found() -> tuple[Any, ...] | None:
            nonlocal seen
            hit = next((u for u in self.updates[seen:] if pred(u)), None)
            seen = len(self.updates)
            if hit is None and self.task.done():
                self.task.result()  # the sampler crashed: its error, not a timeout
            return hit

        def detail() -> str:
            return f"last update: {self.updates[-1:] or 'none'}"

        return await util.until(found, timeout, what, detail=detail)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
