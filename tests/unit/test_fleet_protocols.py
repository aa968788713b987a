"""Every fleet a face can hold answers the same protocols: the live Fleet, the frozen one, and the collector's
follower (attached, replayed) fleets; only the live one can run a sweep."""

from __future__ import annotations

from pathlib import Path

from ddtree_tui.collector.attach import AttachedFleet, FollowerFleet
from ddtree_tui.fleet import Fleet
from ddtree_tui.fleet.protocol import Door, SweepFleet
from ddtree_tui.model.intents import Kill, Move
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.ui.backend import FleetLike, StaticFleet
from tests.app.snapdata import static_fleet


def test_every_fleet_is_fleet_like_and_a_door(tmp_path: Path) -> None:
    live = Fleet([], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False)
    others: list[object] = [static_fleet(), FollowerFleet(), AttachedFleet("http://127.0.0.1:9")]
    for f in [live, *others]:
        assert isinstance(f, FleetLike), type(f).__name__
        assert isinstance(f, Door), type(f).__name__
    assert isinstance(live, SweepFleet)
    assert not any(isinstance(f, SweepFleet) for f in others)


async def test_frozen_and_follower_fleets_refuse_through_do() -> None:
    ref = ServiceRef("local", "dflash")
    frozen: StaticFleet = static_fleet()
    res = await frozen.do(Move(ref=ref, to_host="ct200"))
    assert not res.ok and res.message == "move local/dflash -> ct200: the view is frozen (snapshot mode)"
    res = await FollowerFleet().do(Kill(ref=ref))
    assert not res.ok and "takes no intents" in res.message and res.suggestion
