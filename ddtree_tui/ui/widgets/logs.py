"""Log pane: the selected service's log, following the tail; `/` filters lines with the tables' grammar
(ui/filtering.py: a regex or substring, `!` inverts)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import RichLog

from ddtree_tui.lib import paths
from ddtree_tui.ui.filtering import matches, parse_filter
from ddtree_tui.ui.views import LogsView
from ddtree_tui.ui.widgets.base import Pane

MAX_LINES = 2000


class TailLog(RichLog):
    """A RichLog whose new lines never ask for a layout pass of the whole screen.

    RichLog.write and .clear set `virtual_size`, a reactive that asks for a layout of the screen on every
    change, although the log's own size (1fr in its pane) does not depend on its lines: with a service
    logging, most layout passes of the dashboard were this (each a reflow of every widget and a frame
    rendered across the screen, which a key press landing then waited for: benchmarks/ui.py, issue 28).
    Here such a change updates the scrollbars in place instead (what the layout pass did for it); a
    scrollbar that appears or goes still asks for a layout itself, and a log sized by its content (height
    or width auto) keeps the layout pass. `replace` (a new service or search) updates them once, after the
    new lines: clearing first hid the horizontal scrollbar and the lines showed it again, a layout pass for a
    change that was none."""

    _lines_changing = False  # inside write/clear: a layout asked for is the virtual size's
    _replacing = False  # inside replace: the scrollbars are updated once, at its end

    def write(self, *args: Any, **kw: Any) -> TailLog:
        self._lines_changing = True
        try:
            super().write(*args, **kw)
        finally:
            self._lines_changing = False
        return self

    def clear(self) -> TailLog:
        self._lines_changing = True
        try:
            super().clear()
        finally:
            self._lines_changing = False
        return self

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> TailLog:
        if layout and self._lines_changing and self.is_mounted and not self.styles.auto_dimensions:
            self._lines_changing = False  # the scrollbars' own changes (below) may ask for a layout
            layout = False
            if not self._replacing:
                self._scroll_update(self.virtual_size)
        super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        return self

    def replace(self, content: Text | None) -> None:
        """Every line replaced by `content` (None: none), the scrollbars updated once."""
        self._replacing = True
        try:
            self.clear()
            if content is not None:
                self.write(content)
        finally:
            self._replacing = False
        if self.is_mounted and not self.styles.auto_dimensions:
            self._scroll_update(self.virtual_size)


class LogsPane(Pane):
    pane_number = 6
    pane_title = "Logs"
    BINDINGS = [
        Binding("f", "toggle_follow", "Follow on/off"),
        Binding("G", "follow", "Jump to tail"),
        Binding("w", "toggle_wrap", "Wrap", tooltip="wrap long lines on/off"),
        Binding("z", "toggle_times", "Times", tooltip="show when each line arrived (HH:MM:SS) on/off"),
        Binding("S", "save", "Save", tooltip="save the lines shown (after the search) to .ddtree/logs/"),
    ]

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.ref: str | None = None
        self.following = True
        self._search = ""
        self._shown = 0
        self.wrap = False
        self.times = False
        self._lines: list[tuple[float, str]] = []
        self.saved_to: Path | None = None  # what is shown: (arrival time, line), for re-render/save

    def compose(self) -> ComposeResult:
        yield TailLog(id="log-view", max_lines=MAX_LINES, wrap=False, highlight=False, auto_scroll=True)

    def main_widget(self) -> Widget:
        return self.query_one(RichLog)

    def _title(self) -> None:
        parts = [f"{self.pane_number} Logs", self.ref or "(select a service)"]
        parts.append("following" if self.following else "paused")
        if self.wrap:
            parts.append("wrap")
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

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self.query_one(RichLog).wrap = self.wrap
        self._rerender()

    def action_toggle_times(self) -> None:
        self.times = not self.times
        self._rerender()

    def _rerender(self) -> None:
        log = self.query_one(TailLog)
        log.replace(self._joined([t for ts, line in self._lines if (t := self._line(line, ts)) is not None]))
        self._title()

    def action_save(self) -> None:
        """The lines shown, to a file; the write runs in a worker (off the UI path)."""
        lines = [line for _, line in self._lines if matches(self._search, line)]
        ref = (self.ref or "log").replace("/", "_")
        path = paths.SAVED_LOGS / time.strftime(f"{ref}-%Y%m%d-%H%M%S.log")
        self.run_worker(self._save(path, lines), group="log-save", exclusive=True)

    async def _save(self, path: Path, lines: list[str]) -> None:
        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")

        try:
            await asyncio.to_thread(write)
        except OSError as e:
            self.app.notify(f"log not saved: {e}", severity="error")
            return
        self.app.notify(f"saved {len(lines)} lines to {path}")
        self.saved_to = path

    def _line(self, line: str, ts: float | None = None) -> Text | None:
        if self._search and not matches(self._search, line):  # the `/` grammar: regex, `!` inverts
            return None
        text = Text(line, no_wrap=not self.wrap)
        if self.times:
            text = Text.assemble((time.strftime("%H:%M:%S ", time.localtime(ts or time.time())), "dim"), text)
            text.no_wrap = not self.wrap
        low = line.lower()
        if "error" in low or "traceback" in low:
            text.stylize(self.style_of("bad"))
        elif "warn" in low:
            text.stylize(self.style_of("warn"))
        found = parse_filter(self._search)
        if found.pattern is not None and not found.invert:
            text.highlight_regex(found.pattern, style=self.match_style())
        return text

    def match_style(self) -> Style:
        """How a search match is marked: the accent colour, reversed (a Style, never a str: Style + str
        raised inside the paint and blanked the pane)."""
        return self.style_of("accent") + Style(reverse=True)

    def show(self, ref: str | None, lines: Iterable[str], search: str = "") -> None:
        """Replace the content: a new service, or a new search."""
        self.ref = ref
        self._search = search
        now = time.time()
        self._lines = [(now, line) for line in lines][-MAX_LINES:]
        texts = [t for _, line in self._lines if (t := self._line(line, now)) is not None]
        self.query_one(TailLog).replace(self._joined(texts))
        self._title()

    @staticmethod
    def _joined(texts: list[Text]) -> Text | None:
        """All the lines as one Text, written at once: RichLog measures once a write, so a service's tail
        written line by line cost a measure (and, before TailLog, a layout pass) a line (issue 28)."""
        if not texts:
            return None
        joined = Text("\n").join(texts)
        joined.no_wrap = texts[0].no_wrap
        return joined

    @classmethod
    def _write(cls, log: RichLog, texts: list[Text]) -> None:
        joined = cls._joined(texts)
        if joined is not None:
            log.write(joined)

    def append(self, lines: Iterable[str]) -> None:
        log = self.query_one(RichLog)
        now = time.time()
        texts: list[Text] = []
        for line in lines:
            self._lines.append((now, line))
            t = self._line(line, now)
            if t is not None:
                texts.append(t)
        self._write(log, texts)
        del self._lines[:-MAX_LINES]

    def show_view(self, view: LogsView) -> None:
        """A new service or search replaces the lines; otherwise the new ones follow the tail."""
        if view.reset:
            self.show(view.ref, view.lines, view.search)
        else:
            self.append(view.lines)
            self._title()
