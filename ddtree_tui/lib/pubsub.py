"""Fan-out of events to subscriber queues, the base of the fleet, an attached fleet and the frozen one: a
slow reader loses its oldest events and the publisher never waits for it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Generic, TypeVar

T = TypeVar("T")

QUEUE_SIZE = 2000


class PubSub(Generic[T]):
    """Bounded queues, one a subscriber; `publish` puts an event on each, dropping the oldest when full."""

    def __init__(self, maxsize: int = QUEUE_SIZE) -> None:
        self.maxsize = maxsize
        self._queues: list[tuple[asyncio.Queue[T], tuple[type, ...], tuple[type, ...]]] = []

    def subscribe(self, kinds: tuple[type, ...] = (), skip: tuple[type, ...] = ()) -> asyncio.Queue[T]:
        """A queue of every event from now on, or only of those of `kinds` (instances of), less those of
        `skip`: a reader that wants a few kinds is not woken for the rest (a bench run publishes several
        events a request), and an event nobody takes need not be made (`wants`)."""
        q: asyncio.Queue[T] = asyncio.Queue(maxsize=self.maxsize)
        self._queues.append((q, kinds, skip))
        return q

    def unsubscribe(self, q: asyncio.Queue[T]) -> None:
        self._queues = [(x, k, s) for x, k, s in self._queues if x is not q]

    def wants(self, kind: type) -> bool:
        """Whether any subscriber takes an event of type `kind` now."""
        return any((not k or issubclass(kind, k)) and not issubclass(kind, s) for _, k, s in self._queues)

    def publish(self, ev: T) -> None:
        """Put `ev` on every subscriber's queue (the fleet's parts and the alert engine publish this way)."""
        for q, kinds, skip in self._queues:
            if (kinds and not isinstance(ev, kinds)) or isinstance(ev, skip):
                continue
            if q.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(ev)

    _publish = publish  # the name the fleets' own parts use
