"""Issue 28's "also seen" list, one test each: what a user of the demo met that was wrong in words or numbers
(a move to the host the service is on, a stopped run read as finished, the bench pane's titles over a load
run, the demo's doctor, the replayed GPU while a service idles)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtree_tui.model.intents import Move
from ddtree_tui.model.ref import ServiceRef
from tests.app.demo import demo_fleet


async def test_move_to_the_host_it_is_on_says_already_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`move local/ddtree-shadow local` answered "already running" (a launch was tried on the same host): it
    says the service is already on that host, and nothing is launched."""
    monkeypatch.chdir(tmp_path)
    fleet = demo_fleet(tmp_path)
    try:
        await fleet.start()
        res = await fleet.do(Move(ref=ServiceRef("local", "ddtree-shadow"), to_host="local"))
        assert not res.ok
        assert "already on local" in res.message and "already running" not in res.message, res.message
        states = {s.name: s.state for h in fleet.snapshot().hosts for s in h.services}
        assert states.get("ddtree-shadow") not in ("starting", "ready"), states
    finally:
        await fleet.stop()
