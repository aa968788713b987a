"""The TUI draws at 120 frames a second unless the user set TEXTUAL_FPS (ddtree_tui/ui/__init__.py, issue 28:
a key handled just after a frame waited up to 16.7 ms at Textual's default 60)."""

from __future__ import annotations

import os
import subprocess
import sys


def _fps(env: dict[str, str]) -> int:
    code = "import ddtree_tui.cli.tui, textual.screen as s, textual.constants as c; print(c.MAX_FPS, s.UPDATE_PERIOD)"
    base = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**base, **env}
    )
    assert p.returncode == 0, p.stderr[-2000:]
    fps, period = p.stdout.split()
    assert abs(float(period) - 1 / int(fps)) < 1e-9  # the screen's update timer uses it
    return int(fps)


def test_the_tui_draws_at_120_fps_and_keeps_a_users_setting() -> None:
    assert _fps({}) == 120
    assert _fps({"TEXTUAL_FPS": "30"}) == 30
