"""The main screen's layout rules, in one place: which tab each pane is on, when every pane fits on one
screen (else tabs), each pane's share of the width there, and the CSS that agrees with those shares."""

from __future__ import annotations

from ddtree_tui.ui.widgets.base import Pane
from ddtree_tui.ui.widgets.bench import BenchPane
from ddtree_tui.ui.widgets.gpus import GpusPane
from ddtree_tui.ui.widgets.hosts import HostsPane
from ddtree_tui.ui.widgets.logs import LogsPane
from ddtree_tui.ui.widgets.services import ServicesPane
from ddtree_tui.ui.widgets.todos import TodosPane

PANE_TAB = {1: "tab-fleet", 2: "tab-fleet", 3: "tab-fleet", 4: "tab-todos", 5: "tab-bench", 6: "tab-logs"}
PANE_CLASSES: dict[int, type[Pane]] = {
    1: HostsPane,
    2: GpusPane,
    3: ServicesPane,
    4: TodosPane,
    5: BenchPane,
    6: LogsPane,
}


# at least this many columns and rows: every pane on one screen; below it, tabs
WIDE_MIN = (140, 40)
# share of the width of the panes that sit side by side in the one-screen layout (APP_CSS agrees)
WIDE_SHARE: dict[int, float] = {1: 3 / 5, 4: 2 / 5, 5: 1 / 2, 6: 1 / 2}

APP_CSS = """
    #topbar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    #tabs { height: 2; }
    #main { height: 1fr; }
    #row-top { height: auto; }
    #row-bottom { height: 1fr; }
    .-narrow #row-top > Pane { width: 1fr; }
    .-narrow #row-bottom > Pane { width: 1fr; }
    .-narrow #main > GpusPane, .-narrow #main > ServicesPane { height: 1fr; }
    .-wide #tabs { display: none; }
    .-wide #row-top { max-height: 12; }
    .-wide HostsPane { width: 3fr; }
    .-wide TodosPane { width: 2fr; height: auto; max-height: 12; }
    .-wide #main > GpusPane { height: auto; max-height: 40%; }
    .-wide #main > ServicesPane { height: auto; max-height: 35%; }
    .-wide #row-bottom { min-height: 10; }
    .-wide BenchPane { width: 1fr; }
    .-wide LogsPane { width: 1fr; }
    #message-bar { height: 1; padding: 0 1; color: $text-muted; }
    .-narrow ServicesPane DataTable { height: 1fr; }
    #message-bar.-error { color: $error; text-style: bold; }
    #message-bar.-warning { color: $warning; }
    ToastRack { display: none; }
    #filter { dock: bottom; display: none; height: 3; }
    #filter.-shown { display: block; }
    """


def shown_panes(wide: bool, active_tab: str) -> set[int]:
    """Every pane on one screen; else the active tab's panes (hidden ones are not painted)."""
    return set(PANE_TAB) if wide else {n for n, t in PANE_TAB.items() if t == active_tab}
