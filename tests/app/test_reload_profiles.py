"""`R` re-reads the host profiles: an edited port shows without a restart; a bad edit is reported and the
old profile stays in force."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from tests.app.screen_text import screen_text, until


def _write(path: Path, work: Path, port: int) -> None:
    path.write_text(
        f"""name = "here"
address = "local"
python = "{sys.executable}"
workdir = "{work}"
[telemetry]
source = "none"

[[service]]
name = "sim"
algorithm = "dflash"
launcher = "sim"
port = {port}
"""
    )


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_reload_key_shows_the_edited_port_and_reports_a_bad_edit(tmp_path: Path) -> None:
    prof = tmp_path / "here.toml"
    _write(prof, tmp_path / "w", 39871)
    fleet = Fleet([load_profile(prof)], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl")
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await until(pilot, lambda: "39871" in screen_text(app), 20, "the first port")
            _write(prof, tmp_path / "w", 39872)
            await pilot.press("R")
            await until(pilot, lambda: "39872" in screen_text(app), 20, "the edited port")
            assert "39871" not in screen_text(app)

            prof.write_text(prof.read_text().replace("port = 39872", "port = 0"))
            await pilot.press("R")
            await until(
                pilot,
                lambda: any("profiles not reloaded" in n.message for n in app._notifications),
                20,
                "the refusal",
            )
            msg = next(n.message for n in app._notifications if "profiles not reloaded" in n.message)
            assert f"{prof}:" in msg and "service[0].port" in msg
            assert "39872" in screen_text(app)  # the last good profile stays in force
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
