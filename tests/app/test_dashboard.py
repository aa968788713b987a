"""Issue 19: the dashboard a k9s / nvitop user expects. Log search without a crash, a crash that exits
non-zero with a pointer to its saved traceback, `?` and `q` always in the footer, every pane on one screen
when it fits, sorting, buttons, the message history and the top bar."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, DataTable, RichLog

from ddtree_tui.ui.app import DDTreeApp, exit_code
from ddtree_tui.ui.screens.messages import MessagesScreen
from ddtree_tui.ui.summary import counts, topbar
from ddtree_tui.ui.widgets.base import Pane
from ddtree_tui.ui.widgets.footer import LeanFooter
from ddtree_tui.ui.widgets.logs import LogsPane
from ddtree_tui.ui.widgets.services import ServicesPane
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import T0, snapshot, static_fleet
from tests.app.test_static import RecordingFleet


def _rows(table: DataTable[Any]) -> list[str]:
    return [str(k.value) for k in table.rows]


@pytest.mark.slow
async def test_log_search_highlights_matches_instead_of_blanking() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6", "slash", *"Decode", "enter")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        log = pane.query_one(RichLog)
        assert pane._search == "Decode"
        assert len(log.lines) == 30  # every line matches; before, Style + "reverse" raised and blanked it
        assert "/Decode" in str(pane.border_title)
        await pilot.press("slash", *"zzz", "enter")
        await pilot.pause()
        assert len(log.lines) == 0
        assert app.return_code is None  # still running


async def test_a_crash_in_a_handler_exits_1_with_a_saved_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(self: ServicesPane) -> None:
        raise RuntimeError("handler blew up")

    monkeypatch.setattr(ServicesPane, "action_smoke", boom)
    app = DDTreeApp(static_fleet(), demo=True, crash_dir=tmp_path)
    with pytest.raises(RuntimeError, match="handler blew up"):
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("3", "s")
            await pilot.pause()
    assert app.return_code == 1
    _check_saved_traceback(app, tmp_path)
    assert exit_code(app, None) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RuntimeError: handler blew up" in err[0] and str(app.crash_file) in err[0]


def _check_saved_traceback(app: DDTreeApp, where: Path) -> None:
    assert app.crash_file is not None and app.crash_file.parent == where.resolve()
    saved = app.crash_file.read_text()
    assert "Traceback" in saved and "handler blew up" in saved and "in boom" in saved


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (200, 60)])
@pytest.mark.slow
async def test_help_and_quit_always_in_the_footer(size: tuple[int, int]) -> None:
    app = DDTreeApp(static_fleet(), demo=True)

    def essentials() -> bool:  # the footer recomposes after a focus move: waited for, not a fixed pause
        last = screen_text(app).splitlines()[-1]
        return "? Help" in last and "q Quit" in last

    async with app.run_test(size=size) as pilot:
        await until(pilot, essentials, 10, "? Help and q Quit in the footer")
        await pilot.press("4")  # another pane's keys in the footer
        todos = app.query_one("#todos-table")
        await until(pilot, lambda: app.focused is todos, 10, "the todos pane focused")
        await pilot.pause()
        await until(pilot, essentials, 10, "? Help and q Quit in the footer after the focus moved")
        assert app.query_one(LeanFooter).compact == (size[0] < 120)


async def test_wide_screen_shows_every_pane_at_once() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        assert app.is_wide()
        for pane in app.query(Pane):
            assert pane.display and pane.region.height > 2, pane.pane_title
        text = screen_text(app)
        for want in ("1 Hosts", "2 GPUs", "3 Services", "4 Todos", "5 Bench", "6 Logs", "accept len: 3.41"):
            assert want in text, want
        assert not app.query_one("#tabs").display


@pytest.mark.slow
async def test_narrow_screen_uses_tabs_and_switches_panes() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.is_wide()
        shown = {p.pane_number for p in app.query(Pane) if p.display}
        assert shown == {1, 2, 3}
        await pilot.press("5")
        await pilot.pause()
        assert {p.pane_number for p in app.query(Pane) if p.display} == {5}
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert {p.pane_number for p in app.query(Pane) if p.display} == {1, 2, 3, 4, 5, 6}


async def test_sort_by_key_and_by_header_click() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        table = app.query_one("#services-table", DataTable)
        assert _rows(table) == ["local/dflash", "local/ddtree-shadow", "ct200/ddtree-tree"]
        await pilot.press("o", "s")  # by Service (o + the column's letter; was: o cycling to it)
        await pilot.pause()
        assert _rows(table) == ["ct200/ddtree-tree", "local/ddtree-shadow", "local/dflash"]
        assert "Service ▲" in screen_text(app)
        await pilot.press("O")
        await pilot.pause()
        assert _rows(table) == ["local/dflash", "local/ddtree-shadow", "ct200/ddtree-tree"]
        pane = app.query_one(ServicesPane)
        pane.sort_by("Port")
        await pilot.pause()
        assert _rows(table) == ["ct200/ddtree-tree", "local/dflash", "local/ddtree-shadow"]
        await pilot.click("#services-table", offset=(3, 0))  # the Service header
        await pilot.pause()
        assert pane.sort_col == "Service"


@pytest.mark.slow
async def test_service_buttons_post_intents_for_the_selected_service() -> None:
    fleet = RecordingFleet(static_fleet())
    app = DDTreeApp(fleet)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert [b.id for b in app.query(Button)][:4] == ["btn-launch", "btn-kill", "btn-restart", "btn-smoke"]
        await pilot.click("#btn-launch")
        await pilot.pause(0.3)
        assert ("launch", "local/dflash") in fleet.calls


async def test_fault_texts_in_full_at_80x24_and_messages_go_to_a_bar_and_a_history() -> None:
    """Two checks on one app start at 80x24 (each had its own): the fault texts as first painted, then the
    message bar and the history."""
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "ct200: Connection refused" in text
        assert "ct200:1: Xid 79: GPU has fallen off the bus" in text
        # the services columns fit: no title cut at the pane edge
        assert "Uptime" in text and "Algorithm" in text
        app.notify("first thing", severity="error")
        app.notify("second thing")
        await pilot.pause()
        assert "second thing" in screen_text(app).splitlines()[-2]
        await pilot.press("H")
        await pilot.pause()
        assert isinstance(app.screen, MessagesScreen)
        text = screen_text(app)
        assert "first thing" in text and "second thing" in text and "error" in text


@pytest.mark.slow
async def test_ctrl_c_quits_like_q() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0


def test_topbar_counts_and_fits() -> None:
    snap = snapshot()
    c = counts(snap)
    assert c["hosts"] == "hosts 1/2 up"
    assert c["gpus"] == "GPUs 2 (1 fault)"
    assert c["services"] == "services ●1 ready ◌1 starting ✖1 crashed"
    for width in (200, 120, 80, 60, 48):
        line = topbar(snap, T0, "DEMO: SIMULATED services, GPU REPLAY", width, "DEMO · SIM · REPLAY")
        assert len(line) <= width and all(w in line for w in ("DEMO", "SIM", "REPLAY")), (width, line)
        assert line.rstrip().endswith(time.strftime("%H:%M:%S", time.localtime(T0))), (width, line)
        if width >= 78:  # an 80-column terminal's bar still counts the GPUs (issue 28)
            assert "GPUs 2" in line, (width, line)
    assert "SIMULATED services, GPU REPLAY" in topbar(snap, T0, "DEMO: SIMULATED services, GPU REPLAY", 200)


DRILL_DOWNS = [
    ("3", "Service local/dflash", ["SIMULATED (a stand-in", "31010", "4242", "accept len: 3.41"]),
    ("2", "GPU local:0", ["Processes (0)", "REPLAY of a recording", "dflash,ddtree-shadow"]),
    ("1", "Host local", ["GPUs (1)", "Services (2)", "ddtree-shadow"]),
]


@pytest.mark.slow
async def test_enter_drills_down_and_escape_goes_back() -> None:
    """The three panes' drill-downs, one after another on one app (each had its own start)."""
    from ddtree_tui.ui.screens.detail import DetailScreen

    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(120, 40)) as pilot:
        for pane, title, want in DRILL_DOWNS:
            await pilot.press(pane)
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen), pane
            text = screen_text(app)
            assert title in text, (pane, title)
            for w in want:
                assert w in text, (pane, w)
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, DetailScreen), pane


async def test_move_does_not_offer_a_disconnected_host() -> None:
    from ddtree_tui.ui.screens.move import MoveScreen

    fleet = RecordingFleet(static_fleet())  # ct200 is disconnected
    app = DDTreeApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, MoveScreen)  # refused at once, before any confirm
        assert "no connected host to move to (ct200: not connected)" in app.messages[-1].text
        assert fleet.calls == []


@pytest.mark.slow
async def test_bench_dialog_fields_are_labelled() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("b")
        await pilot.pause()
        text = screen_text(app)
        for label in ("prompt set", "repeats (per prompt)", "max new tokens", "baseline (Δ columns"):
            assert label in text, label


@pytest.mark.slow
async def test_log_wrap_times_and_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        log = pane.query_one(RichLog)
        await pilot.press("w")
        await pilot.pause()
        assert pane.wrap and log.wrap and "wrap" in str(pane.border_title)
        await pilot.press("z")
        await pilot.pause()
        first = "".join(seg.text for seg in log.lines[0])
        assert first[2] == ":" and first[5] == ":" and "Decode batch" in first  # HH:MM:SS prefix
        await pilot.press("slash", *"12:00:0", "enter", "S")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert pane.saved_to is not None
        saved = _read(tmp_path / pane.saved_to)
        assert len(saved) == 10 and all("12:00:0" in ln for ln in saved)  # what the search shows


def _read(p: Path) -> list[str]:
    return p.read_text().splitlines()


@pytest.mark.slow
async def test_help_has_sections_navigation_and_terms() -> None:
    from ddtree_tui.ui.screens.help import HelpScreen

    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        keys = [k for _, k, _ in screen.rows]
        for key in ("tab, shift+tab", "enter", "space", "Esc"):
            assert key in keys, key
        text = screen_text(app)
        assert text.count("everywhere on the main screen") == 1  # a section title, not a column
        flat = " ".join(text.replace("█", " ").split())
        assert "kill the selected service (asks; Cancel is the default)" in flat  # wrapped, not cut
        table = screen.table()
        rendered = str(table.columns[0]._cells) + str(table.columns[1]._cells)
        for term in ("shadow-linear", "accept length", "TTFT", "REPLAY", "SIMULATED"):
            assert term in rendered, term


@pytest.mark.slow
async def test_todos_j_and_k_move_the_cursor_not_kill() -> None:
    from ddtree_tui.ui.screens.confirm import ConfirmScreen

    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        table = app.query_one("#todos-table", DataTable)
        assert table.cursor_row == 0
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        await pilot.pause()
        assert table.cursor_row == 1 and not isinstance(app.screen, ConfirmScreen)


@pytest.mark.slow
async def test_one_theme_system_in_the_palette() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Theme" not in titles and "Keys" in titles
        from ddtree_tui.ui.palette import palette_commands

        ours = [t for t, _, _ in palette_commands(app)]
        assert {"theme dark", "theme light", "theme high-contrast"} <= set(ours)


def test_service_metrics_show_dash_when_not_measured() -> None:
    """A crashed service kept "Health 2ms"; an idle one showed accept `0.00`."""
    from ddtree_tui.ui.widgets.services import metric

    assert metric(2.0, "{:.0f}ms", "crashed") == "-"
    assert metric(2.0, "{:.0f}ms", "ready") == "2ms"
    assert metric(0.0, "{:.2f}", "ready", zero_is_missing=True) == "-"
    assert metric(3.41, "{:.2f}", "ready", zero_is_missing=True) == "3.41"
    assert metric(0.0, "{:.1f}", "ready") == "0.0"  # an idle throughput is a true zero
