"""The reference story through the TUI's keys (Pilot), on the same two sshd hosts as the core test: launch
with `l` (a held port refused, with the next free one suggested), quit with `q`, the profile edited, the TUI
started again, both launched, `b` + ctrl+r for seed3, the todo pane flags the in-progress lie, CT129's GPU
fault on screen, `m` moves its service to CT200, `k` kills, `q` quits — and nothing is left running.

Fewer asserts than tests/scenario/test_reference_story.py: this one checks that the keys reach the same core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.move import MoveScreen
from ddtree_tui.ui.widgets.bench import BenchPane
from ddtree_tui.ui.widgets.services import ServicesPane
from tests.app.presskeys import opened, press
from tests.app.screen_text import screen_text, until
from tests.scenario.helpers import (
    World,
    all_gone,
    build_world,
    crash,
    hold_port,
    kill_strays,
    service,
    set_profile_port,
    smoke,
    suggested_port,
)
from tests.sshd import SshEnv

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(150)]
SIZE = (160, 48)


def _state(app: DDTreeApp, ref: str) -> str | None:
    s = service(app.fleet.snapshot(), ref)  # type: ignore[arg-type]
    return s.state if s else None


def _notices(app: DDTreeApp) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


async def _select(pilot: Any, ref: str) -> None:
    """Focus the services pane (key 3) and put the cursor on a service's row."""
    await press(pilot, "3")
    pane = pilot.app.query_one(ServicesPane)
    await until(pilot, lambda: pane.has_focus_within, 10, "the services pane focused")
    pane.select_ref(ref)
    await until(pilot, lambda: pilot.app.selected_service == ref, 10, f"{ref} selected")


async def _connected(pilot: Any) -> None:
    await until(
        pilot,
        lambda: all(h.state == "connected" and h.gpus for h in pilot.app.fleet.snapshot().hosts),
        30,
        "both hosts connected with GPU samples",
    )


async def _first_session(world: World) -> int:
    """Launch CT129's service, then try CT200's DFlash on a held port; quit. Returns the suggested port."""
    app = DDTreeApp(world.fleet(), refresh_hz=10)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _select(pilot, "ct129/dflash-prod")
        await press(pilot, "l")
        await until(pilot, lambda: _state(app, "ct129/dflash-prod") == "ready", 30, "ct129 ready")
        with hold_port(world.ports["ct200/dflash"]):
            await _select(pilot, "ct200/dflash")
            await press(pilot, "l")
            await until(pilot, lambda: "already in use" in _notices(app), 20, "the port refusal")
        port = suggested_port(_notices(app))
        await pilot.press("q")
    return port


async def _second_session(world: World) -> None:
    app = DDTreeApp(world.fleet(), refresh_hz=10)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        assert _state(app, "ct129/dflash-prod") == "ready" or await until(
            pilot, lambda: _state(app, "ct129/dflash-prod") == "ready", 10, "ct129 still ready after restart"
        )
        for ref in ("ct200/dflash", "ct200/ddtree-shadow"):
            await _select(pilot, ref)
            await press(pilot, "l")
        refs = ("ct200/dflash", "ct200/ddtree-shadow")
        await until(pilot, lambda: all(_state(app, r) == "ready" for r in refs), 30, "both ready")
        for ref in refs:  # the smoke test goes through the same fleet (and port forward) as the TUI
            assert (await smoke(app.fleet, ref))["meta_info"]["completion_tokens"] == 16  # type: ignore[arg-type]
        # bench: `b` ticks every ready service; untick CT129's (the first row), run seed3 with ctrl+r
        await press(pilot, "b")
        await opened(pilot, BenchSetupScreen)
        await press(pilot, "space", "ctrl+r")
        bench = app.query_one(BenchPane)
        await until(pilot, lambda: bench.live.run is not None and not bench.live.running, 40, "bench end")
        run = bench.live.run
        assert {r.service for r in run.rows} == set(refs) and run.baseline == "ct200/dflash"
        # todos: pane 4 shows the flag on the in-progress item whose evidence holds
        await press(pilot, "4")
        await until(pilot, lambda: "evidence holds but still in_progress" in screen_text(app), 15, "flag")
        # the evidence-linked items complete themselves; the todo loop checks once a second, so wait for it
        await until(
            pilot,
            lambda: [it.status for it in app.fleet.todos.items][:2] == ["completed", "completed"],  # type: ignore[attr-defined]
            15,
            "the service-ready and bench-ok items to complete themselves",
        )
        # CT129 crashes and loses GPU 1: the GPU pane (2) shows the driver's error
        pid = service(app.fleet.snapshot(), "ct129/dflash-prod").pid  # type: ignore[arg-type,union-attr]
        world.hosts["ct129"].set_smi("handle")
        crash(pid)
        await press(pilot, "2")
        await until(pilot, lambda: "Unable to determine the device handle" in screen_text(app), 15, "fault")
        await until(pilot, lambda: _state(app, "ct129/dflash-prod") == "crashed", 15, "crashed")
        # `m`: pick CT200, confirm Move (tab from the default Cancel)
        await _select(pilot, "ct129/dflash-prod")
        await press(pilot, "m")
        await opened(pilot, MoveScreen)
        await press(pilot, "enter")
        await opened(pilot, ConfirmScreen)
        await press(pilot, "tab", "enter")
        await until(pilot, lambda: _state(app, "ct200/dflash-prod") == "ready", 40, "moved and ready")
        # `ctrl+k` on each CT200 service, confirmed
        for ref in ("ct200/dflash", "ct200/ddtree-shadow", "ct200/dflash-prod"):
            await _select(pilot, ref)
            await press(pilot, "ctrl+k")  # kill is ctrl+k (issue 28: k moves)
            await opened(pilot, ConfirmScreen)
            await press(pilot, "tab", "enter")
            await until(pilot, lambda r=ref: _state(app, r) == "stopped", 20, f"{ref} stopped")
        await pilot.press("q")


async def test_reference_story_tui(ssh_env: SshEnv, tmp_path: Path) -> None:
    world = build_world(tmp_path, ssh_env)
    try:
        old = world.ports["ct200/dflash"]
        port = await _first_session(world)
        assert port != old
        set_profile_port(world.hosts["ct200"].profile_path, old, port)  # the person edits the profile
        world.ports["ct200/dflash"], world.ports["held"] = port, old
        await _second_session(world)
        sims, left = await all_gone(world)
        assert sims == [] and left == []
    finally:
        kill_strays(world)  # only does something when the story failed half-way
