"""The `/` filter bar (split out of ui/app.py): which pane it filters (the focused one, else the tab's main
pane), the input under the panes, Enter keeps the filter and Esc clears it; the panes show it in their titles
and the controller applies it to their views (ui/filtering.py). The Input is not in the first frame: the app
mounts it once that frame is out (`filter_input`), or `/` does, whichever comes first (issue 28: each
widget and widget type at start-up is CSS parsed, matched and applied before the first frame)."""

from __future__ import annotations

import contextlib

from textual.css.query import NoMatches
from textual.widget import MountError
from textual.widgets import Footer, Input

from ddtree_tui.ui.apphost import AppHost
from ddtree_tui.ui.layout import PANE_CLASSES
from ddtree_tui.ui.widgets.base import Pane

# what a changed filter repaints: every pane that can be filtered
FILTERED = frozenset({"fleet", "todos", "logs", "bench"})


class FilterBar(AppHost):
    """DDTreeApp keeps `active_tab` and defines `pane` and `_visible` (the panes the layout shows)."""

    active_tab: str

    def pane(self, n: int) -> Pane:
        raise NotImplementedError

    def _visible(self) -> set[int]:
        raise NotImplementedError

    def filter_input(self) -> Input:
        """The filter's Input, mounted (above the footer, docked at the bottom, hidden) if it is not yet."""
        try:
            return self.query_one("#filter", Input)
        except NoMatches:
            pass
        inp = Input(placeholder="filter", id="filter")
        inp.cursor_blink = False
        footers = self.query(Footer)
        if footers:
            self.mount(inp, before=footers.first())
        else:
            self.mount(inp)
        return inp

    def mount_filter_later(self) -> None:
        """After the first frame: the Input mounted, unless the app is already leaving (a `q` at once)."""
        try:
            attached = self.screen.is_attached and not self.screen._closing
        except Exception:  # no screen: torn down
            return
        if attached and self.is_running:
            with contextlib.suppress(MountError):
                self.filter_input()

    def action_filter(self) -> None:
        focused_pane = next(
            (a for a in (self.focused.ancestors if self.focused else []) if isinstance(a, Pane)), None
        )
        tab = self.active_tab
        if focused_pane is not None and focused_pane.display and focused_pane.pane_number in self._visible():
            n = focused_pane.pane_number  # (a key right after `6` may come before the focus moved)
        else:
            n = {"tab-todos": 4, "tab-bench": 5, "tab-logs": 6}.get(tab, 3)
        self.ctl.filter_pane = n
        inp = self.filter_input()
        inp.placeholder = (
            f"{'search' if n == 6 else 'filter'} {PANE_CLASSES[n].pane_title} (Enter keeps, Esc clears)"
        )
        inp.value = self.ctl.filter_text
        inp.add_class("-shown")
        if inp.is_mounted:
            inp.focus()
        else:  # mounted just now (a `/` before the first frame was out)
            self.call_after_refresh(inp.focus)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.ctl.filter_text = event.value
            self.ctl.dirty |= FILTERED
            self.flush()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.remove_class("-shown")
            self.pane(self.ctl.filter_pane).focus_main()

    def action_clear_filter(self) -> None:
        inp = self.filter_input()
        if not self.ctl.filter_text and not inp.has_class("-shown"):
            return
        self.ctl.filter_text = ""
        inp.value = ""
        inp.remove_class("-shown")
        self.ctl.dirty |= FILTERED
        self.flush()
        if self.ctl.filter_pane:
            self.pane(self.ctl.filter_pane).focus_main()
