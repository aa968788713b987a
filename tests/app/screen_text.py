"""The screen as plain text, for assertions that read like what a user sees."""

from __future__ import annotations

from textual.app import App


def screen_text(app: App[object]) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)
