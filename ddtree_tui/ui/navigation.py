"""Movement keys that mean the same in every table, list, log and scrolling screen (k9s, less): `j`/`k`,
`g`/`G`, Home/End. Bound once on the app with priority (ui/keys.py NAV_KEYS); here they act on the focused
widget: a table moves its cursor (Textual's Home/End only scroll it), a scrolling container or log scrolls.
Anywhere else (an input, a button, a list with its own keys) the key is passed on (SkipAction), and so is a
key that a pane binds itself (the log's `G` follows the tail), so movement never eats a typed letter."""

from __future__ import annotations

from typing import Any

from textual.actions import SkipAction
from textual.app import App
from textual.containers import ScrollableContainer
from textual.scroll_view import ScrollView
from textual.widget import Widget
from textual.widgets import DataTable, Input, OptionList, TextArea

# the key as bound -> what it does
MOVES = {"j": "down", "k": "up", "home": "top", "end": "bottom", "g": "top", "G": "bottom"}


def _bound_below_app(widget: Widget, key: str) -> bool:
    """Does the focused widget or a pane above it (not the app, not the screen) bind `key` itself?"""
    for node in [widget, *widget.ancestors]:
        if isinstance(node, App) or node is widget.screen:
            return False
        if key in node._bindings.key_to_bindings:
            return True
    return False


def move(app: App[Any], key: str) -> None:
    """Do what `key` (a NAV_KEYS key) means for the focused widget, or raise SkipAction to pass it on."""
    how = MOVES.get(key)
    w = app.focused
    if how is None or w is None:
        raise SkipAction()
    if isinstance(w, Input | TextArea):
        raise SkipAction()  # a typed letter (and Home/End in the text)
    if isinstance(w, OptionList):  # a list (the bench dialog's services, the move dialog's hosts)
        {"down": w.action_cursor_down, "up": w.action_cursor_up, "top": w.action_first,
         "bottom": w.action_last}[how]()  # fmt: skip
        return
    if isinstance(w, DataTable):
        if not w.row_count:
            return
        row = {"down": w.cursor_row + 1, "up": w.cursor_row - 1, "top": 0, "bottom": w.row_count - 1}[how]
        w.move_cursor(row=max(0, min(w.row_count - 1, row)), animate=False)
        return
    if key in ("G", "g", "j", "k") and _bound_below_app(w, key):
        raise SkipAction()
    if isinstance(w, ScrollableContainer | ScrollView):
        if how == "down":
            w.scroll_down(animate=False)
        elif how == "up":
            w.scroll_up(animate=False)
        elif how == "top":
            w.scroll_home(animate=False)
        else:
            w.scroll_end(animate=False)
        return
    raise SkipAction()


# every pane scrolls: a pane whose tables do not fit (the Bench pane at 80x24: live list, results, per-prompt
# table, history) scrolls, and Tab to a table scrolls it into view; the live list no longer takes the rest of
# the pane (it pushed the results below the edge). Appended to the app's CSS (ui/app.py).
SCROLL_CSS = """
    BenchPane { overflow-y: auto; scrollbar-size-vertical: 1; }
    BenchPane #bench-live { max-height: 8; }
    """
