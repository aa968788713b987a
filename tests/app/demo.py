"""The demo fleet for Pilot tests that run real work: the shipped demo profile on free ports (parallel runs
hold 31010/1), and both its simulated services launched from the keyboard."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from ddtree_tui.config import load_profiles
from ddtree_tui.fleet import Fleet
from ddtree_tui.sim.config import TIME_SCALE_ENV
from ddtree_tui.ui.app import DDTreeApp
from tests.app.presskeys import press
from tests.app.screen_text import screen_text, until
from tests.app.test_tmux import demo_profile


def demo_fleet(tmp_path: Path, telemetry_ms: int | None = None) -> Fleet:
    """The demo fleet; `telemetry_ms`: its replayed GPU sampled this often instead of the profile's 1000 ms."""
    prof = demo_profile(tmp_path)
    if telemetry_ms is not None:
        text = prof.read_text(encoding="utf-8")
        assert "interval_ms = 1000" in text, "the demo profile's telemetry interval moved"
        prof.write_text(text.replace("interval_ms = 1000", f"interval_ms = {telemetry_ms}"), encoding="utf-8")
    return Fleet(
        load_profiles([prof]),
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "history.jsonl",
        demo=True,
    )


def fast_sims(monkeypatch: pytest.MonkeyPatch, scale: float = 10) -> None:
    """The demo's simulators (children of the fleet, which hands them this environment) fast-forwarded: what
    these tests check is what the app shows of a run, not the simulated pace; the soak's windows and a
    poisson level's duration stay real seconds on the client's clock."""
    monkeypatch.setenv(TIME_SCALE_ENV, f"{scale:g}")


async def launch_both(pilot: Any) -> None:
    """Wait for the host, launch both services (`l`, `down`, `l` in the services pane), wait until they are
    ready and the painted snapshot (which `b` preselects from) has caught up."""
    app = pilot.app
    await until(pilot, lambda: "● connected" in screen_text(app), 15, "the host to connect")
    await press(pilot, "3", "l", "down", "l")
    snap = lambda: [s.state for h in app.fleet.snapshot().hosts for s in h.services]  # noqa: E731
    await until(pilot, lambda: snap().count("ready") == 2, 40, "both services ready")
    # the keys act on the painted snapshot (`b` preselects from it, C/O/A load "the ready services"), which
    # follows the fleet's by a frame or more: waited for, not assumed (a 0.5 s pause was once too short, in an
    # idle fresh-clone run: C then found no ready service)
    painted = lambda: [s.state for h in app.ctl.snap.hosts for s in h.services]  # noqa: E731
    await until(pilot, lambda: painted().count("ready") == 2, 20, "the painted snapshot to show both ready")


@contextlib.asynccontextmanager
async def demo_pilot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int] = (120, 44)
) -> AsyncIterator[Pilot[None]]:
    """The app on the demo fleet (cwd: tmp_path, the demo's workdir is relative), both services ready; the
    fleet stopped however the test ends. 120×44 by default: with tabs, the Bench tab gets the screen."""
    monkeypatch.chdir(tmp_path)
    fast_sims(monkeypatch)
    fleet = demo_fleet(tmp_path)
    app = DDTreeApp(fleet, demo=True, refresh_hz=10)
    try:
        async with app.run_test(size=size) as pilot:
            await launch_both(pilot)
            yield pilot
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
