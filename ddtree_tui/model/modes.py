"""Which mode a service runs, as every screen names it: a pure function with no pydantic model behind it, so the
simulator answers its /server_info and start-up banner without building the profile models (issue 24: every
simulator start paid for importing `ddtree_tui.config` for these four lines). `ddtree_tui.config` re-exports it."""

from __future__ import annotations


def display_mode(algorithm: str, mode: str | None) -> str:
    """The one answer to "which mode does this service run", for every place that shows it: the DDTree mode
    (shadow-linear when unset, as the simulator runs it), linear for DFlash, `-` for baseline (no speculation)."""
    if algorithm == "ddtree":
        return mode or "shadow-linear"
    if algorithm == "dflash":
        return "linear"
    return "-"
