"""What an 80x24 terminal cut, and what a 200x60 one must still show whole (issue 28): the GPU count in the
top bar, whole footer keys (never `t New▏`), message severities as words, the GPU table's last column."""

from __future__ import annotations

import pytest

from ddtree_tui.ui.app import DDTreeApp
from tests.app.screen_text import screen_text, until
from tests.app.snapdata import static_fleet

KEYS = ("l Launch", "k Kill", "r Restart", "m Move", "b Bench", "L Logs", "t New todo")


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=["80x24", "200x60"])
@pytest.mark.slow
async def test_top_bar_footer_and_messages_fit(size: tuple[int, int]) -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: "^p" in screen_text(app).splitlines()[-1], 10, "the footer")
        lines = screen_text(app).splitlines()
        assert "GPUs 2" in lines[0], lines[0]
        footer = lines[-1]
        for essential in ("^p Commands", "? Help", "q Quit"):
            assert essential in footer, footer
        shown = [k for k in KEYS if k in footer]
        if size[0] >= 200:
            assert shown == list(KEYS), footer
        else:
            assert shown and len(shown) < len(KEYS), footer
            assert "t New▏" not in footer and "t New " not in footer.replace("t New todo", ""), footer
        app.notify("the disk is full", severity="error")
        app.notify("a slow host", severity="warning")
        await pilot.pause()
        bar = screen_text(app).splitlines()[-2]
        assert " warning a slow host" in bar, bar
        assert app.messages[-2].line().split()[1] == "error"


@pytest.mark.slow
async def test_gpu_table_shows_its_last_column_whole_at_120() -> None:
    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        gpu_header = next(ln for ln in text.splitlines() if "Util" in ln and "Memory" in ln)
        assert gpu_header.rstrip().endswith("│"), gpu_header
        assert "Fa│" not in gpu_header and "Faul│" not in gpu_header, gpu_header
        assert "✖ fault (below)" in text  # the fault is still named in the compact set's Service column
