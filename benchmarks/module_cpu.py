"""CPU and wall time of test modules, one `pytest -n 0` run each, for this checkout's tests and, side by side,
another revision's (--base REV: its tests/, pyproject.toml and README.md taken out with `git archive`, run on
this checkout's package and environment), module by module in turn so both see about the same machine load.
Issue 24: on a machine busy with other work a module's wall time moves with the load; its CPU time (user +
sys of pytest and of every child process it waited for) moves much less, and is what the suite's two cores
have to give. Not counted: processes that leave the tree (a tmux server and the TUI it runs).

Run: .venv/bin/python benchmarks/module_cpu.py tests/app/test_keys.py tests/app/test_snapshots.py [--base main] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    """One module's run: CPU seconds (user + sys, the whole waited-for tree), wall seconds, pytest's last line,
    and the sum of the per-test durations pytest reported (setup + call + teardown, what --durations lists)."""

    cpu_s: float
    wall_s: float
    summary: str
    durations_s: float = 0.0


def durations_sum(stdout: str) -> float:
    """The sum of the `--durations=0` lines of a pytest run ("1.23s call     tests/..."); those under 5 ms are
    left out by pytest and here."""
    total = 0.0
    for line in stdout.splitlines():
        head, _, rest = line.partition("s ")
        if rest.lstrip().startswith(("call ", "setup ", "teardown ")):
            try:
                total += float(head)
            except ValueError:
                continue
    return total


def run_module(cwd: Path, module: str) -> Run:
    """`pytest -q -n 0 MODULE` in `cwd` with this interpreter; bytecode cached (as scripts/test runs it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--durations=0",
        module,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    return Run(cpu, wall, lines[-1].strip("= ") if lines else f"exit {p.returncode}", durations_sum(p.stdout))


def extract(rev: str, into: Path) -> Path:
    """REV's tests/, pyproject.toml and README.md under `into` (the tests read the README's key table)."""
    archive = into / "base.tar"
    with archive.open("wb") as f:
        subprocess.run(
            ["git", "archive", rev, "tests", "pyproject.toml", "README.md"], cwd=ROOT, stdout=f, check=True
        )
    with tarfile.open(archive) as t:
        t.extractall(into / "base", filter="data")
    return into / "base"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="+", help="test modules, relative to the checkout's root")
    ap.add_argument(
        "--base", metavar="REV", help="also run REV's version of each module, just before this one's"
    )
    ap.add_argument(
        "--rounds", type=int, default=1, help="run each pair this many times, in turn (a row each)"
    )
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = extract(ns.base, Path(tmp)) if ns.base else None
        rows = []
        for module in ns.modules:
            for _ in range(ns.rounds):
                load0 = os.getloadavg()[0]
                b = run_module(base, module) if base else None
                a = run_module(ROOT, module)
                rows.append((module, b, a, load0, os.getloadavg()[0]))
                # each pair as it ends (stderr), so a long list cut short still leaves its figures
                print(
                    f"{module}: done; CPU s {b.cpu_s if b else float('nan'):.1f} -> {a.cpu_s:.1f}, "
                    f"sum of durations s {b.durations_s if b else float('nan'):.1f} -> {a.durations_s:.1f}, "
                    f"wall s {b.wall_s if b else float('nan'):.1f} -> {a.wall_s:.1f}, "
                    f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}; {b.summary if b else ''} / {a.summary}",
                    file=sys.stderr,
                )
    head = "| module | load 1 min | "
    head += (
        f"{ns.base} CPU s | this CPU s | CPU ratio | {ns.base} sum of durations s | this sum s | "
        f"{ns.base} wall s | this wall s | "
        if ns.base
        else "CPU s | sum of durations s | wall s | "
    )
    print(head + "result |")
    print("|" + "---|" * (head.count("|")))
    for module, b, a, l0, l1 in rows:
        cells = [module, f"{l0:.1f} → {l1:.1f}"]
        if b is not None:
            ratio = a.cpu_s / b.cpu_s if b.cpu_s else float("nan")
            cells += [
                f"{b.cpu_s:.1f}",
                f"{a.cpu_s:.1f}",
                f"{ratio:.2f}",
                f"{b.durations_s:.1f}",
                f"{a.durations_s:.1f}",
                f"{b.wall_s:.1f}",
                f"{a.wall_s:.1f}",
            ]
            cells.append(f"{b.summary} / {a.summary}")
        else:
            cells += [f"{a.cpu_s:.1f}", f"{a.durations_s:.1f}", f"{a.wall_s:.1f}", a.summary]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
