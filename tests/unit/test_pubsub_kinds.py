"""lib/pubsub.py: a subscriber that names the kinds it reads gets only those, and is not woken for the rest
(the alert engine follows a fleet that publishes several bench events a request and reads none of them)."""

from __future__ import annotations

import asyncio

from ddtree_tui.alerts import ALERT_INPUTS, AlertEngine
from ddtree_tui.config import AlertOptions
from ddtree_tui.lib.pubsub import PubSub
from ddtree_tui.model.events import FleetEvent, GpuSampleEvent, Notice, ServicePlanned


async def test_a_subscriber_of_some_kinds_gets_only_those() -> None:
    bus: PubSub[object] = PubSub()
    every = bus.subscribe()
    some = bus.subscribe((int,))
    for ev in ("a", 1, 2.5, 3):
        bus.publish(ev)
    assert [every.get_nowait() for _ in range(every.qsize())] == ["a", 1, 2.5, 3]
    assert [some.get_nowait() for _ in range(some.qsize())] == [1, 3]
    bus.unsubscribe(some)
    bus.publish(4)
    assert some.empty() and every.get_nowait() == 4

    # a getter waiting on a filtered queue stays asleep through events of other kinds
    q = bus.subscribe((int,))
    got = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    bus.publish("not an int")
    await asyncio.sleep(0)
    assert not got.done()
    bus.publish(7)
    assert await asyncio.wait_for(got, 5) == 7


def test_a_subscriber_skips_kinds_and_wants_says_who_takes_what() -> None:
    """`skip` leaves kinds out of a queue (a bool is an int: skipped as one); `wants` is whether any queue
    takes a kind now, so a publisher need not make what nobody reads (bench token events)."""
    bus: PubSub[object] = PubSub()
    assert not bus.wants(int)
    no_bools = bus.subscribe((int,), skip=(bool,))
    assert bus.wants(int) and not bus.wants(bool) and not bus.wants(str)
    for ev in (1, True, "a", 2):
        bus.publish(ev)
    assert [no_bools.get_nowait() for _ in range(no_bools.qsize())] == [1, 2]
    no_str = bus.subscribe(skip=(str,))
    assert bus.wants(bool) and not bus.wants(str)
    bus.publish("b")
    bus.publish(False)
    assert no_str.get_nowait() is False and no_str.empty() and no_bools.empty()
    bus.unsubscribe(no_str)
    assert not bus.wants(bool)


def test_the_alert_engine_reads_only_the_kinds_it_subscribes_to() -> None:
    """ALERT_INPUTS is what run_alerts subscribes to: an event of any other kind must change nothing the engine
    publishes, so filtering them out before the queue loses nothing."""
    out: list[FleetEvent] = []
    engine = AlertEngine(lambda host: AlertOptions(), out.append, lambda h, s: False)
    engine.handle(Notice(severity="error", text="not an alert input"))
    engine.tick()
    assert out == []
    assert GpuSampleEvent in ALERT_INPUTS and ServicePlanned in ALERT_INPUTS
    assert not any(issubclass(Notice, k) for k in ALERT_INPUTS)
