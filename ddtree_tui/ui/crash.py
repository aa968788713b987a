"""Where an unhandled error's traceback goes: a file, so the terminal gets one line instead of a screenful."""

from __future__ import annotations

import time
import traceback
from pathlib import Path


def save_traceback(error: BaseException, directory: Path) -> Path | None:
    """Write the full traceback to DIRECTORY/crash-YYYYmmdd-HHMMSS.txt; None when that fails too."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / time.strftime("crash-%Y%m%d-%H%M%S.txt")
        path.write_text(f"ddtree-tui crash at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n{text}", "utf-8")
        return path.resolve()
    except OSError:
        return None
