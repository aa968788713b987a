"""Colour themes: the skins in themes/*.tcss (each names the Textual base theme it builds on) and a
high-contrast Textual theme; found next to the package in a checkout or inside it when installed."""

from __future__ import annotations

import re
from pathlib import Path

from textual.theme import Theme

HIGH_CONTRAST = Theme(
    name="ddtree-high-contrast",
    primary="#ffff00",
    secondary="#00ffff",
    accent="#ffff00",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#1c1c1c",
    success="#00ff00",
    warning="#ffff00",
    error="#ff0000",
    dark=True,
)


def themes_dir() -> Path:
    """themes/ next to the package in a checkout, or inside the package when installed."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent / "themes", here / "themes"):
        if cand.is_dir() and any(cand.glob("*.tcss")):
            return cand
    return here.parent.parent / "themes"


def discover_themes(directory: Path | None = None) -> dict[str, tuple[Path, str]]:
    """name -> (tcss file, the Textual base theme named by its `textual-theme:` header line)."""
    out: dict[str, tuple[Path, str]] = {}
    for p in sorted((directory or themes_dir()).glob("*.tcss")):
        head = p.read_text(encoding="utf-8")[:600]
        m = re.search(r"textual-theme:\s*([A-Za-z0-9_-]+)", head)
        out[p.stem] = (p, m.group(1) if m else "textual-dark")
    return out
