"""Issue 28 (first paint under 1 s): what the TUI imports before its first frame. The engines it does not
need to draw (the sweep and its optimiser, the report's charts, numeric stacks) are imported when first
used; a module-level import of one of them in the UI would put its import time before every first paint.
Checked in a fresh interpreter (a child process), where nothing was imported before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # two fresh interpreters importing the app: seconds on a busy machine

HEAVY = ("optuna", "matplotlib", "numpy", "pandas", "ddtree_tui.sweep", "ddtree_tui.ui.sweep_screen")


def heavy_imported(module: str) -> list[str]:
    """The HEAVY modules (and their submodules) loaded by importing `module` in a new interpreter."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_the_app_and_its_cli_import_nothing_heavy() -> None:
    assert heavy_imported("ddtree_tui.ui.app") == []
    assert heavy_imported("ddtree_tui.cli.tui") == []


def test_the_check_sees_a_heavy_import() -> None:
    """The check itself can fail: the sweep screen imports the sweep engine."""
    assert "ddtree_tui.sweep.state" in heavy_imported("ddtree_tui.ui.sweep_screen")
