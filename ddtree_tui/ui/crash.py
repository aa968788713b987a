"""Where an unhandled error's traceback goes: a file, so the terminal gets one line instead of a screenful
(`save_traceback`); the app's side of it (`CrashReporter`, split out of ui/app.py) and the exit status."""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from ddtree_tui.ui.apphost import AppHost


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


class CrashReporter(AppHost):
    """An unhandled error in any handler: the traceback to a file under `crash_dir`, one line on the
    terminal (`crash_line`), exit status 1. DDTreeApp's __init__ sets the three attributes."""

    crash_dir: Path
    crash_file: Path | None  # where the traceback of an unhandled error went
    crash_summary: str | None

    def _handle_exception(self, error: Exception) -> None:
        """Save the traceback to a file, exit non-zero (Textual sets the return code to 1), and leave a
        one-line pointer instead of a screenful of traceback."""
        if self.crash_file is None:
            self.crash_summary = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            self.crash_file = save_traceback(error, self.crash_dir)
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Textual's fatal path minus the full-screen traceback (it is in `crash_file`)."""
        self.bell()
        self._close_messages_no_wait()

    def crash_line(self) -> str | None:
        """The one line printed after a crash: what broke and where the traceback is."""
        if self.crash_summary is None:
            return None
        where = f"traceback saved to {self.crash_file}" if self.crash_file else "traceback could not be saved"
        return f"ddtree-tui: crashed ({self.crash_summary}); {where}"


def exit_code(app: CrashReporter, rc: int | None) -> int:
    """The process exit status after the app has left: a crash prints its one-line pointer and gives 1."""
    line = app.crash_line()
    if line is not None:
        print(line, file=sys.stderr)
        return int(app.return_code or 1)
    return int(rc or app.return_code or 0)
