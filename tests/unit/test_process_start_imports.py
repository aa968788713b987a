"""Issue 24: what a child process imports before it does its work. The tests start simulators and
`--run-bench` runs by the hundred; every module one of them imports at start is paid again in each. Pinned
here as module lists (never times): the simulator's start is exactly its own modules and the few it shares,
and `--run-bench` imports no report, HTML, doctor, sweep or UI code before it writes something. Checked in a
fresh interpreter, doing what `ddtree_tui.cli.main` does before it calls the handler (parse, defer the model
builds, import the handler's module)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from ddtree_tui import cli
argv = json.loads(sys.argv[1])
ns = cli.build_parser().parse_args(cli.hoist_globals(argv))
mode = ns.mode or ("run-bench" if ns.run_bench else "tui")
cli._defer_model_builds()
cli._resolve(cli.HANDLERS[mode])
if mode == "run-bench":
    from ddtree_tui.fleet import Fleet  # the handler opens one first thing
print(json.dumps(sorted(sys.modules)))
"""

# everything of the package that `ddtree-tui sim` loads before it listens: the parser (with the one bench default
# it shows), the sim mode's argument model and handler, the simulator, and the power model its /sim/gpu answers
SIM_START = {
    "ddtree_tui",
    "ddtree_tui.bench",
    "ddtree_tui.bench.defaults",
    "ddtree_tui.cli",
    "ddtree_tui.cli.argbase",
    "ddtree_tui.cli.common",
    "ddtree_tui.cli.sim",
    "ddtree_tui.cli.simargs",
    "ddtree_tui.cli.sweep_args",
    "ddtree_tui.lib",
    "ddtree_tui.lib.heap",
    "ddtree_tui.lib.http",
    "ddtree_tui.lib.jsontypes",
    "ddtree_tui.lib.lazyexports",  # the packages' lazy exports (bench/, telemetry/)
    "ddtree_tui.lib.paths",
    "ddtree_tui.sim",
    "ddtree_tui.sim.config",
    "ddtree_tui.sim.endpoints",
    "ddtree_tui.sim.engine",
    "ddtree_tui.sim.logs",
    "ddtree_tui.sim.metrics",
    "ddtree_tui.sim.prefixcache",
    "ddtree_tui.sim.server",
    "ddtree_tui.telemetry",
    "ddtree_tui.telemetry.powermodel",
}

# what --run-bench must not import before it writes a report (or ever, for the UI and the sweep)
NOT_IN_RUN_BENCH = (
    "ddtree_tui.report",
    "ddtree_tui.doctor",
    "ddtree_tui.sweep",
    "ddtree_tui.ui",
    "ddtree_tui.collector",
    "textual",
    "rich",
    "optuna",
    "numpy",
    "matplotlib",
)


def start_imports(argv: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    loaded: list[str] = json.loads(out.strip().splitlines()[-1])
    return loaded


def under(loaded: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_the_simulator_starts_on_its_own_modules_only() -> None:
    loaded = start_imports(["sim", "--port", "1"])
    assert {m for m in loaded if m.startswith("ddtree_tui")} == SIM_START
    # the models and engines it shares no code with: the bench request/result models, the fleet, the profile
    # models, the telemetry sampler
    assert under(loaded, ("ddtree_tui.bench.models", "ddtree_tui.fleet", "ddtree_tui.config")) == []


def test_run_bench_imports_no_report_doctor_sweep_or_ui_code_at_start() -> None:
    for argv in (["--run-bench", "--url", "http://127.0.0.1:1"], ["--run-bench", "--demo"]):
        loaded = start_imports(argv)
        assert under(loaded, NOT_IN_RUN_BENCH) == [], argv
        # the check can fail: it sees what --run-bench does import
        assert under(loaded, ("ddtree_tui.fleet.core", "ddtree_tui.bench.runner")) == [
            "ddtree_tui.bench.runner",
            "ddtree_tui.fleet.core",
        ]
