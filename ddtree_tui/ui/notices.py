"""The app's messages (split out of ui/app.py): every notify goes to one line above the footer (toasts
covered the services table) and into a history that `H` shows whole (ui/screens/messages.py)."""

from __future__ import annotations

import time

from textual.notifications import SeverityLevel
from textual.widgets import Static

from ddtree_tui.ui.apphost import AppHost
from ddtree_tui.ui.screens.messages import MessageRecord, MessagesScreen, bar_line
from ddtree_tui.ui.widgets.base import set_static

MESSAGES_KEPT = 500


class MessageLine(AppHost):
    """DDTreeApp's __init__ sets `messages` (every notice, for `H`) and `_message_until` (when the bar's
    latest message stops being shown)."""

    messages: list[MessageRecord]
    _message_until: float

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        text = f"{title}: {message}" if title else str(message)
        self.messages.append(MessageRecord(time.time(), str(severity), text))
        del self.messages[:-MESSAGES_KEPT]
        hold = timeout if timeout is not None else 6.0
        self._message_until = time.monotonic() + (max(hold, 30.0) if severity == "error" else hold)
        self._paint_message_bar()

    def _paint_message_bar(self) -> None:
        try:
            bar = self.query_one("#message-bar", Static)
        except Exception:  # not composed yet
            return
        text, severity = bar_line(self.messages, self._message_until, time.monotonic())
        bar.set_class(severity == "error", "-error")
        bar.set_class(severity == "warning", "-warning")
        set_static(bar, text, one_line=True)

    def action_messages(self) -> None:
        self.push_screen(MessagesScreen(self.messages))
