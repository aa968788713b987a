"""Pure formatting helpers for the panes: bars, sparklines, durations, badges. No Textual, no I/O, so they
are cheap to call on every repaint and trivial to test."""

from __future__ import annotations

from collections.abc import Sequence

SPARK = "▁▂▃▄▅▆▇█"


def bar(value: float | None, total: float | None, width: int = 10) -> str:
    """A text bar like `████░░░░░░`; blanks when the value is missing (never a fake zero)."""
    if value is None or not total:
        return "·" * width
    frac = max(0.0, min(1.0, value / total))
    full = round(frac * width)
    return "█" * full + "░" * (width - full)


def sparkline(values: Sequence[float | None], width: int = 16, top: float = 100.0) -> str:
    """The last `width` values as block characters, scaled to `top` (utilisation is 0..100)."""
    vals = list(values)[-width:]
    if not top:
        return "".join(" " if v is None else SPARK[0] for v in vals).rjust(width)
    scale, last = (len(SPARK) - 1) / top, len(SPARK) - 1  # one multiply a value: 512 GPUs a second
    return "".join(
        " " if v is None else SPARK[0 if v <= 0 else last if v >= top else int(v * scale + 0.5)] for v in vals
    ).rjust(width)


def duration(seconds: float | None) -> str:
    """Compact age: 42s, 5m03s, 3h12m, 2d04h."""
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def num(v: float | int | None, fmt: str = "{:.1f}", unit: str = "") -> str:
    return "-" if v is None else fmt.format(v) + unit


def mb(v: int | float | None) -> str:
    """Megabytes in the unit a human reads: 512M, 20.5G, 1.2T."""
    if v is None:
        return "-"
    if v >= 1024 * 1024:
        return f"{v / 1024 / 1024:.1f}T"
    if v >= 1024:
        return f"{v / 1024:.1f}G"
    return f"{int(v)}M"


def pct_delta(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    d = (value - base) / base * 100.0
    return f"{d:+.1f}%"
