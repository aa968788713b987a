"""Issue 28: read-only mode. `--readonly`, an attach without a token and a replay offer no intents and refuse
each at once with the reason (no `launch …` that is never answered); when the collector dies the hosts stop
saying `● connected` and the banner keeps its whole time. At 80×24."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtree_tui.collector.attach import AttachedFleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.palette import palette_commands
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import static_fleet
from tests.collector.conftest import ServeProc


def _notices(app: DDTreeApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_readonly_flag_refuses_every_intent_at_once_and_the_palette_offers_none() -> None:
    app = DDTreeApp(static_fleet(), live=False, readonly=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "READ-ONLY" in screen_text(app)
        for key, what in (("l", "launch"), ("r", "restart"), ("b", "bench"), ("t", "new todo")):
            before = len(_notices(app))
            await pilot.press("3", key)
            await pilot.pause()
            new = _notices(app)[before:]
            assert new and what in new[-1] and "read-only (--readonly)" in new[-1], new
            assert len(app.screen_stack) == 1  # no dialog opened
        titles = [t for t, _, _ in palette_commands(app)]
        assert not [t for t in titles if t.split(" ", 1)[0] in ("launch", "kill", "restart", "sweep", "move")]
        assert "help: keys" in titles


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_attach_without_a_token_is_read_only_and_a_lost_collector_shows_lost(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    srv = await asyncio.to_thread(serve_demo)
    fleet = AttachedFleet(srv.url, backoff_max=1.0)
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "● connected" in screen_text(app), 20, "the collector's hosts")
            await until(pilot, lambda: app.selected_service is not None, 10, "a service to act on")
            before = len(_notices(app))
            await pilot.press("3", "l")
            await pilot.pause()
            new = _notices(app)[before:]
            assert new and "without a token: read-only" in new[-1] and "--token-file" in new[-1], new
            assert "READ-ONLY" in screen_text(app)

            assert await asyncio.to_thread(srv.stop) == 0  # the collector goes away
            await until(pilot, lambda: "COLLECTOR LOST" in screen_text(app), 15, "the lost banner")
            await until(pilot, lambda: "● connected" not in screen_text(app), 10, "hosts not connected")
            top = screen_text(app).splitlines()[0]
            assert re.search(r"COLLECTOR LOST at \d\d:\d\d:\d\d", top), top  # never cut at its colon
    finally:
        await fleet.stop()


def test_readonly_is_a_tui_option() -> None:
    from ddtree_tui.cli import build_parser, hoist_globals
    from ddtree_tui.cli.args import TuiArgs

    parser = build_parser()
    assert TuiArgs.of(parser.parse_args(hoist_globals(["--demo", "--readonly"]))).readonly is True
    assert TuiArgs.of(parser.parse_args(hoist_globals(["--demo"]))).readonly is False
