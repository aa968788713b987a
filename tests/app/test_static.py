"""Pilot tests on a frozen fleet: keys, dialogs, palette, filter, themes and compact layout, no hosts needed."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button, DataTable

from ddtree_tui.model.intents import AnyIntent, Kill, Launch, Move, Outcome
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.palette import palette_commands
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.help import HelpScreen
from ddtree_tui.ui.widgets.hosts import HostsPane
from ddtree_tui.ui.widgets.services import ServicesPane
from tests.app.screen_text import screen_text
from tests.app.snapdata import static_fleet


class RecordingFleet(StaticFleet):
    """A frozen fleet that remembers the intents it received."""

    def __init__(self, base: StaticFleet) -> None:
        super().__init__(base.snapshot(), base.profiles(), base._history, base._logs, base.todos.items)
        self.calls: list[tuple[str, ...]] = []

    async def do(self, intent: AnyIntent) -> Outcome:
        if isinstance(intent, Move):
            self.calls.append(("move", str(intent.ref), intent.to_host))
            return Outcome(ok=True, message="moved")
        if isinstance(intent, Kill | Launch):
            self.calls.append((intent.kind, str(intent.ref)))
            return Outcome(ok=True, message="killed" if intent.kind == "kill" else "launched")
        return await super().do(intent)


def _rows(table: DataTable[Any]) -> list[str]:
    return [str(k.value) for k in table.rows]


@pytest.mark.slow
async def test_main_screen_shows_every_state_and_label() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        for want in (
            "DEMO",
            "REPLAY",
            "SIMULATED",
            "● ready",
            "◌ starting",
            "✖ crashed",
            "reconnecting in 7s",
            "Connection refused",
            "Xid 79: GPU has fallen off the bus",
            "2m05s",
            "shadow-linear",
        ):
            assert want in text, want


async def test_compact_layout_at_80x24_keeps_state_and_faults() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        for want in ("reconnecting in 7s", "● ready", "SIMULATED", "REPLAY", "Xid 79"):
            assert want in text, want
        assert "Gen tok/s" not in text  # the compact column set is in use


@pytest.mark.slow
async def test_kill_dialog_defaults_to_cancel_and_enter_cancels_and_launch_needs_no_confirmation() -> None:
    fleet = RecordingFleet(static_fleet())
    app = DDTreeApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+k")  # kill is ctrl+k (issue 28: k moves)
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert isinstance(app.focused, Button) and app.focused.id == "cancel"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("ctrl+k")  # kill is ctrl+k (issue 28: k moves)
        await pilot.press("escape")
        await pilot.pause()
        assert fleet.calls == []
        # now confirm: move to the Kill button and press it
        await pilot.press("ctrl+k")  # kill is ctrl+k (issue 28: k moves)
        await pilot.pause()
        await pilot.press("tab", "enter")
        await app.workers.wait_for_complete()
        assert fleet.calls == [("kill", "local/dflash")]
        # launch: no confirmation, and it follows the cursor (was its own test, the same fleet and app)
        await pilot.press("3", "down", "l")
        await app.workers.wait_for_complete()
        assert fleet.calls == [("kill", "local/dflash"), ("launch", "local/ddtree-shadow")]
        assert app.selected_service == "local/ddtree-shadow"


@pytest.mark.slow
async def test_move_picks_a_host_then_confirms() -> None:
    fleet = RecordingFleet(static_fleet())
    hosts = fleet._snap.hosts  # a move needs a connected destination (issue 19): connect ct200 here
    fleet._snap = fleet._snap.model_copy(
        update={"hosts": [hosts[0], hosts[1].model_copy(update={"state": "connected", "error": None})]}
    )
    app = DDTreeApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("enter")  # the only other host: ct200
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("tab", "enter")
        await app.workers.wait_for_complete()
        assert fleet.calls == [("move", "local/dflash", "ct200")]


@pytest.mark.slow
async def test_help_lists_every_binding() -> None:
    app = DDTreeApp(static_fleet())
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = {row[1] for row in app.screen.rows}
        for k in (
            "1",
            "2",
            "3",
            "4",
            "5",
            "6",
            "l",
            "k",
            "r",
            "m",
            "b",
            "L",
            "t",
            "/",
            "?",
            "ctrl+p",
            "q",
            "T",
            "space",
            "e",
            "s",
            "f",
            "ctrl+k",
            "w",
            ":",
            "o",
            "O",
        ):
            assert k in keys, k
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.slow
async def test_palette_has_every_action_number_keys_switch_tabs_and_the_filter_narrows() -> None:
    """Three checks on one app (each had its own start): the palette's commands, the number keys, the filter."""
    app = DDTreeApp(static_fleet())
    async with app.run_test(size=(100, 30)) as pilot:
        titles = {t for t, _, _ in palette_commands(app)}
        for ref in ("local/dflash", "local/ddtree-shadow", "ct200/ddtree-tree"):
            for verb in ("launch", "kill", "restart", "logs", "bench"):
                assert f"{verb} {ref}" in titles
        assert "move local/dflash → ct200" in titles
        assert "move ct200/ddtree-tree → local" in titles
        assert {"theme dark", "theme light", "theme high-contrast"} <= titles
        # the number keys switch tabs and focus (before the filter moves the services cursor)
        await pilot.press("4")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "todos-table"
        text = screen_text(app)
        assert "benchmark seed3" in text and "[~]" in text
        await pilot.press("6")
        await pilot.pause()
        assert "accept len: 3.41" in screen_text(app)
        await pilot.press("1")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "hosts-table"
        # the filter narrows the focused pane
        table = app.query_one(ServicesPane).query_one(DataTable)
        assert len(_rows(table)) == 3
        await pilot.press("3", "slash", "c", "t", "2", "0", "0")
        await pilot.pause()
        assert _rows(table) == ["ct200/ddtree-tree"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(_rows(table)) == 3


@pytest.mark.slow
async def test_theme_switch_changes_badge_colours() -> None:
    app = DDTreeApp(static_fleet(), theme_name="dark")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(HostsPane)
        dark = pane.style_of("ok")
        app.set_theme_name("high-contrast")
        await pilot.pause()
        assert app.has_class("-skin-high-contrast") and not app.has_class("-skin-dark")
        assert pane.style_of("ok") != dark
        await pilot.press("T")  # cycles to the next theme
        await pilot.pause()
        assert app.theme_name != "high-contrast"
