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
# the core and what it alone needs (u-first): the TUI paints on fleet/starting.py's StartingFleet and imports
# these in a thread after its first frame; the doctor, the smoke client and the simulator when first used
CORE = (
    "aiohttp",
    "prometheus_client",
    "asyncssh",
    "ddtree_tui.fleet.core",
    "ddtree_tui.services.lifecycle",  # (services.logs, the log-line parser, is the bench history's: light)
    "ddtree_tui.services.probehttp",
    "ddtree_tui.services.hostscripts",
    "ddtree_tui.telemetry",
    "ddtree_tui.transport",
    "ddtree_tui.doctor",
    "ddtree_tui.bench.smoke",
    "ddtree_tui.bench.client",
    "ddtree_tui.sim",
)


def heavy_imported(module: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The `heavy` modules (and their submodules) loaded by importing `module` in a new interpreter."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in heavy)]


def test_the_app_and_its_cli_import_nothing_heavy() -> None:
    assert heavy_imported("ddtree_tui.ui.app") == []
    assert heavy_imported("ddtree_tui.cli.tui") == []


def test_the_check_sees_a_heavy_import() -> None:
    """The check itself can fail: the sweep screen imports the sweep engine."""
    assert "ddtree_tui.sweep.state" in heavy_imported("ddtree_tui.ui.sweep_screen")


def test_the_tui_imports_no_core_before_its_first_frame() -> None:
    """Issue 28: `import ddtree_tui.cli.tui` (what `ddtree-tui` imports before it paints) loads neither the
    core nor aiohttp / prometheus_client; the core is imported by StartingFleet.build after the first frame."""
    assert heavy_imported("ddtree_tui.cli.tui", CORE) == []
    assert heavy_imported("ddtree_tui.fleet.starting", CORE) == []


def test_the_core_check_sees_the_core() -> None:
    """The check can fail: the Fleet's module imports the transports and the bench client (aiohttp and the
    services' manager only where a host starts, since issue 26's lighter `--run-bench --url`)."""
    seen = heavy_imported("ddtree_tui.fleet.core", CORE)
    assert "ddtree_tui.transport" in seen and "ddtree_tui.bench.client" in seen
