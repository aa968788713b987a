"""The demo fleet for Pilot tests that run real work: the shipped demo profile on free ports (parallel runs
hold 31010/1), and both its simulated services launched from the keyboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddtree_tui.config import load_profiles
from ddtree_tui.fleet import Fleet
from tests.app.screen_text import screen_text, until
from tests.app.test_tmux import demo_profile


def demo_fleet(tmp_path: Path) -> Fleet:
    return Fleet(
        load_profiles([demo_profile(tmp_path)]),
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "history.jsonl",
        demo=True,
    )


async def launch_both(pilot: Any) -> None:
    """Wait for the host, launch both services (`l`, `down`, `l` in the services pane), wait until they are
    ready and the painted snapshot (which `b` preselects from) has caught up."""
    app = pilot.app
    await until(pilot, lambda: "● connected" in screen_text(app), 15, "the host to connect")
    await pilot.press("3", "l", "down", "l")
    snap = lambda: [s.state for h in app.fleet.snapshot().hosts for s in h.services]  # noqa: E731
    await until(pilot, lambda: snap().count("ready") == 2, 40, "both services ready")
    await pilot.pause(0.5)
