"""A table updated in place for a long time keeps a bounded render cache (RSS must not grow with uptime)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from ddtree_tui.ui.widgets.base import sync_table


class _TableApp(App[None]):
    def compose(self) -> ComposeResult:
        t: DataTable[Any] = DataTable(id="t", cursor_type="row")
        t.add_columns("host", "util", "mem", "power")
        yield t


def _cached(table: DataTable[Any]) -> int:
    # DataTable's render caches, keyed by its update counter (Textual internals, read for this bound only)
    return len(table._cell_render_cache) + len(table._row_render_cache) + len(table._line_cache)


@pytest.mark.slow
async def test_in_place_updates_do_not_accumulate_renders() -> None:
    app = _TableApp()
    async with app.run_test(size=(80, 20)) as pilot:
        table = app.query_one("#t", DataTable)
        peak = 0
        # 30 updates, every cell changing: the unbounded cache kept about 24 renders an update (over 2800
        # after 120), so a leak passes the bound below within 10; a bounded one stays at one frame's worth
        for tick in range(30):
            rows = [
                (f"h{r}", [f"h{r}", f"{tick + r}%", f"{tick * 7 + r} MB", f"{tick % 50} W"]) for r in range(6)
            ]
            sync_table(table, rows)
            await pilot.pause()
            assert [str(k.value) for k in table.rows] == [f"h{r}" for r in range(6)]
            peak = max(peak, _cached(table))
        # one frame's worth (6 rows x 4 cells + lines), not one per update; unbounded-until-10k it was > 2800
        assert peak < 200, peak
        assert table.get_cell("h5", list(table.columns)[1]) == "34%"


@pytest.mark.slow
async def test_focus_changes_do_not_leak_footer_keys() -> None:
    import gc

    from textual.widgets._footer import FooterKey

    from ddtree_tui.ui.app import DDTreeApp
    from tests.app.snapdata import static_fleet

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, FooterKey))

    app = DDTreeApp(static_fleet(), demo=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        # counted as growth over the switches, not as a total: this xdist worker's earlier tests may have
        # left FooterKeys of their own apps behind (seen once in a full run: 24 alive for 10 mounted)
        before = alive()
        # each pane switch moves focus: the footer recomposes its keys. The leak kept ~37 more a switch, past
        # the bound below after the first; 10 switches show it as well as 30 did
        for _ in range(5):
            await pilot.press("5")
            await pilot.pause()
            await pilot.press("3")
            await pilot.pause()
        after = alive()
        mounted = len(app.query(FooterKey))
        assert mounted > 0
        # was ~37 more per switch (every key ever shown): ten switches would add hundreds
        assert after - before <= mounted, (before, after, mounted)
