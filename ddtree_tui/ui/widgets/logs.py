"""Log pane: the selected service's log, following the tail; `/` filters lines with the tables' grammar
(ui/filtering.py: a regex or substring, `!` inverts)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import RichLog

from ddtree_tui.lib import paths
from ddtree_tui.ui.filtering import matches, parse_filter
from ddtree_tui.ui.views import LogsView
from ddtree_tui.ui.widgets.base import Pane

MAX_LINES = 2000


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
        yield RichLog(id="log-view", max_lines=MAX_LINES, wrap=False, highlight=False, auto_scroll=True)

    def focus_main(self) -> None:
        self.query_one(RichLog).focus()

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
        log = self.query_one(RichLog)
        log.clear()
        for ts, line in self._lines:
            t = self._line(line, ts)
            if t is not None:
                log.write(t)
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
        log = self.query_one(RichLog)
        log.clear()
        now = time.time()
        self._lines = [(now, line) for line in lines][-MAX_LINES:]
        self._write(log, [t for _, line in self._lines if (t := self._line(line, now)) is not None])
        self._title()

    @staticmethod
    def _write(log: RichLog, texts: list[Text]) -> None:
        """All the lines in one write: RichLog measures and lays out once a write, so a service's tail written
        line by line cost a layout pass of the screen each (a key press that selects a service, issue 28)."""
        if texts:
            joined = Text("\n").join(texts)
            joined.no_wrap = texts[0].no_wrap
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
