"""The app's one theme system (split out of ui/app.py): our skins (themes/*.tcss, `T`, `theme NAME` in the
palette) applied as a CSS class plus the Textual base theme each names, and Textual's own "Theme" picker left
out of the palette (it set a Textual theme while our skin stayed, so it only half-applied)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.screen import Screen

from ddtree_tui.ui.apphost import AppHost


class ThemeSwitch(AppHost):
    """Skins for DDTreeApp: `_themes` (name -> (tcss path, base theme)) and `theme_name` are set by its
    __init__; `action_help` is the app's."""

    _themes: dict[str, tuple[Path, str]]
    theme_name: str

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's own commands minus its "Theme" picker (one theme system) and its "Keys" (ours is `?`)."""
        for cmd in super().get_system_commands(screen):
            if cmd.title not in ("Theme", "Keys"):
                yield cmd
        yield SystemCommand("Keys", "every key binding (?)", self.action_help)

    def theme_names(self) -> list[str]:
        return list(self._themes)

    def _apply_theme(self, name: str) -> None:
        for old in self._themes:
            if old != name:  # removing the skin in use, to add it again, restyled every widget twice
                self.remove_class(f"-skin-{old}")
        self.add_class(f"-skin-{name}")
        base = self._themes[name][1]
        with contextlib.suppress(Exception):
            self.theme = base
        self.theme_name = name

    def set_theme_name(self, name: str) -> None:
        if name not in self._themes:
            self.notify(f"unknown theme {name!r}", severity="error")
            return
        self._apply_theme(name)
        self.call_after_refresh(self.flush, True)  # badge colours are read at paint time
        self.notify(f"theme: {name}", timeout=2)

    def action_cycle_theme(self) -> None:
        names = self.theme_names()
        self.set_theme_name(names[(names.index(self.theme_name) + 1) % len(names)])
