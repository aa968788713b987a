"""The screen as plain text, for assertions that read like what a user sees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App

from tests import util


def screen_text(app: App[object]) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def until(pilot: Any, cond: Callable[[], Any], timeout: float, what: str, step: float = 0.1) -> Any:
    """Poll `cond` between repaints; on timeout fail with the notices and the screen as the user sees it."""

    def seen() -> str:
        notes = [n.message for n in pilot.app._notifications]
        return f"notices: {notes}; text:\n{screen_text(pilot.app)}"

    return await util.until(cond, timeout, what, tick=step, detail=seen, sleep=pilot.pause)
