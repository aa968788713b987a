"""A host that drops mid-run (the real test sshd, stopped and started again) shows `reconnecting in Ns` in
its badge while the app keeps answering keys, then recovers to connected."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.help import HelpScreen
from tests.app.screen_text import screen_text, until


@pytest.mark.timeout(90)
async def test_host_drop_shows_reconnecting_and_recovers(sshd: Any, tmp_path: Path) -> None:
    prof = parse_profile(
        f"""
name = "testhost"
address = "testhost"
workdir = "{tmp_path / "work"}"
connect_timeout = 2
keepalive_interval = 1
keepalive_count_max = 2
[telemetry]
source = "none"
""",
        tmp_path / "testhost.toml",
    )
    fleet = Fleet([prof], todos_path=tmp_path / "todos.json", history_path=tmp_path / "h.jsonl")
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: "● connected" in screen_text(app), 20, "connected")
            sshd.stop()
            await until(pilot, lambda: "reconnecting in" in screen_text(app), 20, "the reconnecting badge")
            # the UI still answers keys while the host is down
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            sshd.start()
            await until(pilot, lambda: "● connected" in screen_text(app), 40, "recovery")
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
