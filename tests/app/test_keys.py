"""Issue 28, keyboard part 1: one set of movement keys in every table, list and scrolling screen (k moves,
ctrl+k kills), every Bench table reachable at 80x24, command mode (`:` jumps, completion, history), the `/`
filter (regex, `!` inverts, in the title, Esc clears), sorting by a column's letter with reverse shown in the
header and the title, `?` equal to the screen's real bindings, README's key table equal to the bindings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input

from ddtree_tui.bench.models import PromptStarted, RunStarted
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from ddtree_tui.ui.command import CommandError, CommandScreen, Names, candidates, complete, parse
from ddtree_tui.ui.filtering import matches, parse_filter
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.detail import DetailScreen
from ddtree_tui.ui.screens.help import NAVIGATION, HelpScreen, listed_keys, readme_key_table
from ddtree_tui.ui.screens.messages import MessagesScreen
from ddtree_tui.ui.widgets.bench import BenchPane
from ddtree_tui.ui.widgets.logs import LogsPane
from ddtree_tui.ui.widgets.table import SortScreen, TablePane, sort_letters
from tests.app.screen_text import screen_text
from tests.app.snapdata import snapshot, static_fleet
from tests.app.test_bench_pane import bench_run

SIZES = [(80, 24), (200, 60)]
TABLES = [("1", "#hosts-table"), ("2", "#gpus-table"), ("3", "#services-table"), ("4", "#todos-table")]


def _rows(table: DataTable[Any]) -> list[str]:
    return [str(k.value) for k in table.rows]


# --- navigation ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.slow
async def test_j_k_g_G_home_end_move_the_cursor_in_every_table(size: tuple[int, int]) -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=size) as pilot:
        for key, table_id in TABLES:
            await pilot.press(key)
            if key == "2":
                await pilot.press("a")  # every host's GPUs (the hosts pane's cursor picked one host)
            await pilot.pause()
            table = app.query_one(table_id, DataTable)
            assert app.focused is table and table.row_count >= 2, table_id
            last = table.row_count - 1
            table.move_cursor(row=0)
            for keys, row in ((("j",), 1), (("k",), 0), (("G",), last), (("g",), 0), (("end",), last),
                              (("home",), 0), (("k",), 0)):  # fmt: skip
                await pilot.press(*keys)
                assert table.cursor_row == row, (table_id, keys)
            assert not isinstance(app.screen, ConfirmScreen)  # `k` never kills


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.slow
async def test_every_bench_table_is_reachable_and_shown_when_focused(size: tuple[int, int]) -> None:
    fleet = StaticFleet(snapshot(), bench_runs=[bench_run(), bench_run("r2")])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(BenchPane)
        pane.live.apply(RunStarted(run_id="r3", total=12, targets=[], prompts=[f"p{i}" for i in range(12)]))
        for i in range(12):  # a long live list: it pushed the results below the pane's edge
            pane.live.apply(
                PromptStarted(run_id="r3", service="local/dflash", prompt_id=f"p{i}", repeat=0, seq=i)
            )
        pane.live.running = False
        await pilot.press("5")
        app._dirty.add("bench")
        app.flush()
        await pilot.pause()
        seen = []
        for _ in range(4):
            focused = app.focused
            assert focused is not None
            seen.append(focused.id)
            await pilot.pause()
            assert pane.region.contains_region(focused.region), (focused.id, focused.region, pane.region)
            await pilot.press("tab")
        assert seen == ["bench-live", "bench-results", "bench-prompts", "bench-history"]


async def test_a_key_typed_right_behind_a_panes_number_reaches_that_pane() -> None:
    """`5` then `C` (or `6` then `f`) read together, as tmux send-keys, a paste or a fast typist deliver them:
    both keys are queued before the app handles the first, so the second must find the new pane focused (the
    focus used to move only after the next refresh, and the key went to the table left behind, which has no
    such binding: nothing happened, and once a CI run's ladder never started)."""
    from tests.app.presskeys import key_event

    app = DDTreeApp(StaticFleet(snapshot()), live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.query_one("#services-table", DataTable).focus()
        await pilot.pause()
        bench, logs = app.query_one(BenchPane), app.query_one(LogsPane)
        ladders: list[str] = []
        bench.action_load_ladder = lambda: ladders.append(bench.load_text)  # type: ignore[method-assign]
        following = logs.following
        for pane, key in (("5", "C"), ("6", "f")):
            for k in (pane, key):  # queued together: nothing handled in between
                ev = key_event(k)
                ev.set_sender(app)
                assert app.post_message(ev)
            await pilot.pause()
            await pilot.pause()
        assert ladders == [bench.load_text]  # C reached the Bench pane
        assert logs.following is not following  # f reached the log pane
        assert app.focused is logs.main_widget()


@pytest.mark.slow
async def test_the_log_keeps_its_own_G_and_f_while_j_k_scroll_and_its_search_takes_the_same_grammar() -> None:
    """Two checks of the log pane on one app start (each had its own)."""
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        logs = app.query_one(LogsPane)
        logs.show("local/dflash", [f"line {i}" for i in range(200)])
        await pilot.pause()
        await pilot.press("f")
        assert not logs.following
        view = logs.query_one("#log-view")
        await pilot.press("g")
        assert view.scroll_y == 0
        await pilot.press("j", "j")
        assert view.scroll_y == 2
        await pilot.press("G")  # the pane's own G: jump to the tail and follow again
        await pilot.pause()
        assert logs.following and view.scroll_y == view.max_scroll_y
        # the log search takes the filter's grammar
        lines = ["INFO ready", "ERROR oom", "debug tick", "WARN slow", "debug tock"]
        logs.show("local/dflash", lines, search="^(error|warn)")
        await pilot.pause()
        assert [s.text for s in logs.query_one("#log-view").lines] == ["ERROR oom", "WARN slow"]
        logs.show("local/dflash", lines, search="!debug")
        await pilot.pause()
        assert [s.text for s in logs.query_one("#log-view").lines] == ["INFO ready", "ERROR oom", "WARN slow"]
        assert logs.border_title is not None and "/!debug" in str(logs.border_title)


@pytest.mark.slow
async def test_ctrl_k_kills_after_a_confirm_and_k_does_not_then_drill_down_scrolls_with_end_and_j() -> None:
    """Two checks on one app start (each had its own): `k` moves and ctrl+k asks, on the services pane; then
    the drill-down of the same (first) row scrolls to its log tail with end and j."""
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3", "j", "k")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("ctrl+k")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        # the drill-down
        await pilot.press("3", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        body = app.screen.query_one("#detail-body", VerticalScroll)
        assert app.focused is body and body.max_scroll_y > 0
        await pilot.press("j", "j")
        assert body.scroll_y == 2
        await pilot.press("end")
        await pilot.pause()
        assert body.scroll_y == body.max_scroll_y
        await pilot.press("g")
        await pilot.pause()
        assert body.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert body.scroll_y > 2


async def test_messages_history_shows_a_long_message_whole() -> None:
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    long = "host ct200 refused the launch: " + " ".join(f"reason-{i}" for i in range(60)) + " END"
    async with app.run_test(size=(80, 24)) as pilot:
        app.notify(long, severity="error")
        app.notify("short one")
        await pilot.press("H")
        await pilot.pause()
        assert isinstance(app.screen, MessagesScreen)
        await pilot.press("j")  # the long (older) message: whole, wrapped, under the table
        await pilot.pause()
        assert "reason-30" in screen_text(app)
        await pilot.press("tab", "end")  # its box scrolls to the end
        await pilot.pause()
        text = screen_text(app)
        assert "reason-59 END" in text


# --- command mode --------------------------------------------------------------------------------------------
NAMES = Names(("local", "ct200"), ("local/dflash", "local/ddtree-shadow", "ct200/ddtree-tree"))


def test_command_parse_resolves_names_and_refuses_the_unknown() -> None:
    assert parse(":svc", NAMES) == ("svc", None)
    assert parse("services", NAMES) == ("svc", None)
    assert parse("logs dflash", NAMES) == ("logs", "local/dflash")
    assert parse("sweep ct200/ddtree-tree", NAMES) == ("sweep", "ct200/ddtree-tree")
    assert parse("host ct200", NAMES) == ("host", "ct200")
    assert parse("gpus", NAMES) == ("gpus", None)
    for bad, said in (("bogus", "unknown command"), ("host nowhere", "no host"), ("logs nope", "no service"),
                      ("svc extra", "takes no argument"), ("", "empty")):  # fmt: skip
        with pytest.raises(CommandError, match=said):
            parse(bad, NAMES)


def test_command_completion() -> None:
    assert complete("lo", NAMES) == "logs "
    assert complete("h", NAMES) == "h"  # hosts, host, help: nothing common beyond what was typed
    assert complete("ho", NAMES) == "host"
    assert complete("logs dfl", NAMES) == "logs local/dflash"  # a bare service name becomes HOST/SVC
    assert complete("logs local/d", NAMES) == "logs local/d"  # two candidates
    assert candidates("logs local/d", NAMES) == ["logs local/dflash", "logs local/ddtree-shadow"]
    assert complete("host c", NAMES) == "host ct200"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.slow
async def test_command_mode_jumps_completes_and_remembers(size: tuple[int, int]) -> None:
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, CommandScreen)
        await pilot.press(*"gpus ct200", "enter")
        await pilot.pause()
        assert app.selected_host == "ct200"
        assert app.focused is app.query_one("#gpus-table")
        # completion: `lo` Tab -> `logs `, `dfl` Tab -> `logs local/dflash`
        await pilot.press("colon", "l", "o", "tab")
        inp = app.screen.query_one(Input)
        assert inp.value == "logs "
        await pilot.press("d", "f", "l", "tab")
        assert inp.value == "logs local/dflash"
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert app.selected_service == "local/dflash"
        assert app.focused is app.query_one(LogsPane).query_one("#log-view")
        # :host NAME puts the hosts cursor on it
        await pilot.press("colon", *"host local", "enter")
        await pilot.pause()
        await pilot.pause()
        hosts = app.query_one("#hosts-table", DataTable)
        assert app.focused is hosts and _rows(hosts)[hosts.cursor_row] == "local"
        # history: up walks back through what ran
        await pilot.press("colon", "up")
        inp = app.screen.query_one(Input)
        assert inp.value == "host local"
        await pilot.press("up")
        assert inp.value == "logs local/dflash"
        await pilot.press("down")
        assert inp.value == "host local"
        inp.value = ""
        await pilot.press(*"gjkG", "home", "end")  # movement keys type into a text field
        assert inp.value == "gjkG"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CommandScreen)
        # a bad command says so and changes nothing
        await pilot.press("colon", *"svc nope", "enter")
        await pilot.pause()
        assert app.focused is hosts
        assert "takes no argument" in app.messages[-1].text and app.messages[-1].severity == "error"


# --- filter --------------------------------------------------------------------------------------------------
def test_filter_grammar() -> None:
    assert matches("dfl", "local/dflash") and not matches("dfl", "ct200/ddtree")
    assert matches("^LOCAL/d(flash|dtree)", "local/ddtree-shadow")  # a regex, case-insensitive
    assert not matches("!local", "local/dflash") and matches("!local", "ct200/ddtree-tree")
    f = parse_filter("a(b")  # not a regex: a literal substring, and the title says so
    assert f.literal and matches("a(b", "xa(by") and not matches("a(b", "ab")
    assert f.label() == "/a(b (substring)"
    assert matches("", "anything") and matches("!", "anything")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.slow
async def test_filter_regex_invert_title_and_escape(size: tuple[int, int]) -> None:
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("3")
        await pilot.pause()
        table = app.query_one("#services-table", DataTable)
        pane = app.query_one("#pane-3", TablePane)
        all_rows = _rows(table)
        await pilot.press("slash", *"^local/d(flash|dtree)")
        await pilot.pause()
        assert _rows(table) == ["local/dflash", "local/ddtree-shadow"]
        assert "filter /^local/d(flash|dtree)" in str(pane.border_title)
        inp = app.query_one("#filter", Input)
        inp.value = "!local"
        await pilot.pause()
        assert _rows(table) == ["ct200/ddtree-tree"]
        assert "filter /!local" in str(pane.border_title)
        await pilot.press("escape")
        await pilot.pause()
        assert _rows(table) == all_rows and "filter" not in str(pane.border_title)
        # the GPU pane and the hosts pane take the same grammar
        await pilot.press("1", "slash", "!", "l", "o", "c")
        await pilot.pause()
        assert _rows(app.query_one("#hosts-table", DataTable)) == ["ct200"]
        await pilot.press("escape")


# --- sorting -------------------------------------------------------------------------------------------------
def test_sort_letters_are_unique_and_skip_o() -> None:
    letters = sort_letters(["Service", "State", "Algorithm", "Accept", "tok/s", "Uptime", "Port"])
    assert letters == {"s": "Service", "t": "State", "a": "Algorithm", "c": "Accept", "k": "tok/s",
                       "u": "Uptime", "p": "Port"}  # fmt: skip


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.slow
async def test_sort_by_a_letter_reverse_and_back(size: tuple[int, int]) -> None:
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("3")
        await pilot.pause()
        table = app.query_one("#services-table", DataTable)
        pane = app.query_one("#pane-3", TablePane)
        before = _rows(table)
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, SortScreen)
        assert "s Service" in screen_text(app)  # the menu names each column's letter
        await pilot.press("s")
        await pilot.pause()
        assert _rows(table) == sorted(before)
        assert "Service ▲" in [str(c.label) for c in table.columns.values()]
        assert str(pane.border_title).endswith("sort Service ▲")
        await pilot.press("o", "s")  # the same letter again: reversed
        await pilot.pause()
        assert _rows(table) == sorted(before, reverse=True)
        assert "Service ▼" in [str(c.label) for c in table.columns.values()]
        assert str(pane.border_title).endswith("sort Service ▼")
        await pilot.press("O")
        await pilot.pause()
        assert _rows(table) == sorted(before)
        await pilot.press("o", "0")
        await pilot.pause()
        assert _rows(table) == before and "sort" not in str(pane.border_title)
        await pilot.press("o", "escape")  # Esc: no change
        await pilot.pause()
        assert not isinstance(app.screen, SortScreen) and _rows(table) == before
        # the GPU pane sorts too (by Util, its letter from the menu)
        await pilot.press("2", "o", "u")
        await pilot.pause()
        gpus = app.query_one("#gpus-table", DataTable)
        assert "Util ▲" in [str(c.label) for c in gpus.columns.values()]


# --- `?` and README ------------------------------------------------------------------------------------------
def _enabled_keys(app: DDTreeApp) -> set[str]:
    return {k for k, ab in app.screen.active_bindings.items() if ab.enabled}


@pytest.mark.slow
async def test_help_lists_every_key_that_works_on_each_pane_and_on_a_detail_screen() -> None:
    """One app for the six panes and a detail screen (each was its own app start: ~0.6 s of CPU apiece);
    what works is read in place, on the pane or screen in focus, just before `?` is pressed there."""
    app = DDTreeApp(static_fleet(), demo=True, live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        for pane in ("1", "2", "3", "4", "5", "6"):
            await pilot.press(pane)
            await pilot.pause()
            working = _enabled_keys(app)
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen), pane
            assert working <= app.screen.keys, (pane, working - app.screen.keys)
            assert {"w", "colon", "ctrl+k", "o", "O", "ctrl+r", "ctrl+a"} <= app.screen.keys, (
                pane
            )  # w, sweep keys
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen), pane
        # a detail screen: its keys are listed, and only those that work there
        await pilot.press("3", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        working = _enabled_keys(app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = app.screen.keys
        assert working <= listed, working - listed
        docs = listed_keys([("", NAVIGATION)])
        assert listed - docs <= working, listed - docs - working  # nothing listed that does not work there


def test_readme_key_table_is_the_bindings() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start, end = "<!-- keys:start -->\n", "<!-- keys:end -->"
    assert start in readme and end in readme
    block = readme.split(start, 1)[1].split(end, 1)[0]
    want = readme_key_table(DDTreeApp)
    assert block == want, "README's key table differs from the bindings: run scripts/readme_keys.py\n" + want
    assert "`ctrl+k`" in block and "| `k` |" in block  # kill and movement, as bound


@pytest.mark.slow
async def test_the_bench_tables_take_the_filter_too() -> None:
    fleet = StaticFleet(snapshot(), bench_runs=[bench_run()])
    app = DDTreeApp(fleet, live=False)
    app._bench_history = fleet.bench_history()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        pane = app.query_one(BenchPane)
        results = pane.query_one("#bench-results", DataTable)
        prompts = pane.query_one("#bench-prompts", DataTable)
        assert _rows(results) == ["local/dflash", "local/ddtree"]
        await pilot.press("slash", *"!dflash")
        await pilot.pause()
        assert _rows(results) == ["local/ddtree"] and _rows(prompts) == ["local/ddtree|p1"]
        assert "filter /!dflash" in str(pane.border_title)
        await pilot.press("escape")
        await pilot.pause()
        assert _rows(results) == ["local/dflash", "local/ddtree"] and "filter" not in str(pane.border_title)
