"""`D` opens the doctor of the selected host: the real checks on a local host run in a worker and show as a
table of findings; a doctor that fails (a host that is down) is shown in the screen, never raised."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.doctor import DoctorReport, Finding
from ddtree_tui.fleet import Fleet
from ddtree_tui.transport.base import TransportError
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.palette import palette_commands
from ddtree_tui.ui.screens.doctor import DoctorScreen
from ddtree_tui.ui.screens.help import HelpScreen
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import static_fleet


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_doctor_key_runs_the_real_checks_on_a_local_host(tmp_path: Path) -> None:
    prof = parse_profile(
        f"""
name = "here"
address = "local"
python = "{sys.executable}"
workdir = "{tmp_path / "work"}"
[telemetry]
source = "none"
""",
        tmp_path / "here.toml",
    )
    fleet = Fleet([prof], todos_path=tmp_path / "todos.json", history_path=tmp_path / "h.jsonl")
    app = DDTreeApp(fleet, refresh_hz=10)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await until(pilot, lambda: "● connected" in screen_text(app), 20, "connected")
            await pilot.press("D")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DoctorScreen)
            assert screen.host == "here"
            await until(pilot, lambda: screen.report is not None or screen.error, 90, "the findings")
            assert screen.error is None, screen.error
            checks = {f.check: f for f in screen.report.findings}
            assert checks["python"].status == "ok"
            await pilot.pause()
            text = screen_text(app)
            assert "doctor here (local):" in text
            assert sys.version.split()[0] in text  # the python finding's evidence
            assert "workdir" in text
            # the app still answers while the screen is up, and Esc closes it
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, DoctorScreen)
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)


class DownFleet(StaticFleet):
    """A frozen fleet whose hosts cannot be reached."""

    def __init__(self, base: StaticFleet) -> None:
        super().__init__(base.snapshot(), base.profiles(), base._history, base._logs, base.todos.items)
        self.asked: list[str] = []

    async def doctor(self, host: str) -> Any:
        self.asked.append(host)
        raise TransportError(f"{host}: ssh exited 255: Connection refused")


@pytest.mark.slow
async def test_doctor_error_is_shown_in_the_screen() -> None:
    fleet = DownFleet(static_fleet())
    app = DDTreeApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("D")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        await until(pilot, lambda: screen.error is not None, 5, "the error")
        await pilot.pause()
        text = screen_text(app)
        assert "Connection refused" in text and "did not run" in text
        host = app.selected_service.split("/", 1)[0] if app.selected_service else None
        assert fleet.asked == [host]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DoctorScreen)


@pytest.mark.slow
async def test_doctor_given_report_palette_and_help() -> None:
    base = static_fleet()
    host = base.snapshot().hosts[-1].name
    report = DoctorReport(
        host=host,
        address="ct200",
        findings=[
            Finding(check="python", status="ok", evidence="Python 3.12.3 at /opt/venv/bin/python"),
            Finding(
                check="cuda-runtimes",
                status="fail",
                evidence="libcudart .so.12 and .so.13 both loaded",
                fix="one consistent set for one CUDA major",
            ),
        ],
    )
    fleet = StaticFleet(base.snapshot(), base.profiles(), doctor_reports={host: report})
    app = DDTreeApp(fleet)
    async with app.run_test(size=(140, 36)) as pilot:
        titles = {t: cb for t, _, cb in palette_commands(app)}
        for h in fleet.snapshot().hosts:
            assert f"doctor {h.name}" in titles
        titles[f"doctor {host}"]()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        await until(pilot, lambda: screen.report is not None, 5, "the report")
        await pilot.pause()
        text = screen_text(app)
        for want in ("1 ok, 0 warn, 1 fail", "FAIL", "cuda-runtimes", "one consistent set", "/opt/venv"):
            assert want in text, want
        await pilot.press("q")  # closes the dialog, does not quit the app
        await pilot.pause()
        assert not isinstance(screen, HelpScreen) and not isinstance(app.screen, DoctorScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "D" in {row[1] for row in app.screen.rows}
