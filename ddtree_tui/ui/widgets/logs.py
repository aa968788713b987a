"""Log pane: the selected service's log, following the tail; `/` filters lines by a search string."""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import RichLog

from ddtree_tui.ui.widgets.base import Pane, View

MAX_LINES = 2000


class LogsPane(Pane):
    pane_number = 6
    pane_title = "Logs"
    BINDINGS = [
        Binding("f", "toggle_follow", "Follow on/off"),
        Binding("G", "follow", "Jump to tail"),
    ]

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.ref: str | None = None
        self.following = True
        self._search = ""
        self._shown = 0

    def compose(self) -> ComposeResult:
        yield RichLog(id="log-view", max_lines=MAX_LINES, wrap=False, highlight=False, auto_scroll=True)

    def focus_main(self) -> None:
        self.query_one(RichLog).focus()

    def _title(self) -> None:
        parts = [f"{self.pane_number} Logs", self.ref or "(select a service)"]
        parts.append("following" if self.following else "paused")
        if self._search:
            parts.append(f"/{self._search}")
        self.border_title = " · ".join(parts)

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        self.query_one(RichLog).auto_scroll = self.following
        self._title()

    def action_follow(self) -> None:
        self.following = True
        log = self.query_one(RichLog)
        log.auto_scroll = True
        log.scroll_end(animate=False)
        self._title()

    def _line(self, line: str) -> Text | None:
        if self._search and self._search.lower() not in line.lower():
            return None
        text = Text(line, no_wrap=True)
        low = line.lower()
        if "error" in low or "traceback" in low:
            text.stylize(self.style_of("bad"))
        elif "warn" in low:
            text.stylize(self.style_of("warn"))
        if self._search:
            text.highlight_words([self._search], style=self.match_style(), case_sensitive=False)
        return text

    def match_style(self) -> Style:
        """How a search match is marked: the accent colour, reversed (a Style, never a str: Style + str
        raised inside the paint and blanked the pane)."""
        return self.style_of("accent") + Style(reverse=True)

    def show(self, ref: str | None, lines: Iterable[str], search: str = "") -> None:
        """Replace the content: a new service, or a new search."""
        self.ref = ref
        self._search = search
        log = self.query_one(RichLog)
        log.clear()
        for line in lines:
            t = self._line(line)
            if t is not None:
                log.write(t)
        self._title()

    def append(self, lines: Iterable[str]) -> None:
        log = self.query_one(RichLog)
        for line in lines:
            t = self._line(line)
            if t is not None:
                log.write(t)

    def render_view(self, view: View) -> None:
        search = self.active_filter(view)
        if view.selected_service != self.ref or search != self._search:
            lines = view.fleet.log_lines(view.selected_service) if view.selected_service else []
            self.show(view.selected_service, lines, search)
