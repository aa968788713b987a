"""One-shot modes' view of the fleet: open it, let it settle, take one snapshot, let go (`status`, `todo
check`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddtree_tui.config import HostProfile
from ddtree_tui.fleet.core import Fleet
from ddtree_tui.model.snapshot import FleetSnapshot


async def collect_snapshot(
    profiles: Sequence[HostProfile],
    timeout: float = 8.0,
    *,
    telemetry: bool = True,
    todos_path: Path | None = None,
) -> FleetSnapshot:
    """One snapshot of every host (`status`, `todo check`): connect, wait for a first sample and service
    probe, then let go. The todo evidence it carries is judged once more against that settled snapshot, so
    the document never says a service is `stopped` while its evidence says "unknown" (issue 29)."""
    async with Fleet.open(
        profiles, telemetry=telemetry, auto_complete_todos=False, todos_path=todos_path
    ) as fleet:
        await fleet.wait_settled(timeout)
        await fleet.refresh_todos()
        return fleet.snapshot()
