"""Exponential backoff for loops that restart a broken stream (watcher, sampler, attach).

One shape everywhere: wait `first` seconds after a failure, twice as long after each further one up to `cap`,
and back to `first` once the stream worked again. No jitter: one client a host, nothing to de-synchronise.
"""

from __future__ import annotations

import asyncio


class Backoff:
    """The delay before the next restart of a stream; `sleep()` waits it and doubles it (up to `cap`)."""

    def __init__(self, first: float, cap: float, factor: float = 2.0) -> None:
        self.first = first
        self.cap = cap
        self.factor = factor
        self.delay = first

    def reset(self) -> None:
        """The stream worked: the next failure waits `first` again."""
        self.delay = self.first

    def step(self) -> float:
        """The delay to wait now; the one after it grows by `factor`, capped."""
        d = self.delay
        self.delay = min(self.delay * self.factor, self.cap)
        return d

    async def sleep(self) -> None:
        await asyncio.sleep(self.step())
