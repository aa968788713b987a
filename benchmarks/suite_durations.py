"""Where the test suite's time goes: each test directory run on its own (pytest-xdist, `--durations=0`), with
the sum of its tests' setup + call + teardown durations, the part of that sum in the fast subset
(scripts/test-fast's marker expression) and the directory's wall time; then the longest tests. Issue 24.

The sum of durations is the figure to compare between two versions of the suite: the wall time of a parallel
run depends on how the tests fall on the workers and on what else the machine runs; a sum moves with the
machine's load too, so compare two sums taken at about the same load (or idle).

Run: .venv/bin/python benchmarks/suite_durations.py [tests/unit tests/app ...] [--workers N] [--top N]
     .venv/bin/python benchmarks/suite_durations.py --parse LOG...   (tables from saved `--durations=0` logs)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = "not slow and not sshd and not browser and not prometheus"  # scripts/test-fast's expression
LINE = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)")


def fast_ids(paths: list[str]) -> set[str]:
    """The test functions (parameters dropped) the fast subset selects among `paths`."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-m",
            FAST,
            *paths,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    return {line.split("[")[0] for line in out.splitlines() if "::" in line}


def durations(text: str) -> Counter[str]:
    """Seconds per test function (its parameters and phases added up) from a `--durations=0` report."""
    per: Counter[str] = Counter()
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            per[m[3].split("[")[0]] += float(m[1])
    return per


def directory(test_id: str) -> str:
    return "/".join(test_id.split("/")[:2])


def table(per: Counter[str], fast: set[str], walls: dict[str, float], top: int) -> str:
    dirs = sorted({directory(t) for t in per} | set(walls))
    rows = [
        "| directory | sum of durations (s) | of it in the fast subset (s) | wall (s) |",
        "|---|---|---|---|",
    ]
    for d in dirs:
        mine = {t: s for t, s in per.items() if directory(t) == d}
        wall = f"{walls[d]:.1f}" if d in walls else ""
        rows.append(
            f"| {d} | {sum(mine.values()):.1f} | {sum(s for t, s in mine.items() if t in fast):.1f} | {wall} |"
        )
    rows.append(f"| all | {sum(per.values()):.1f} | {sum(s for t, s in per.items() if t in fast):.1f} | |")
    rows += ["", f"| the {top} longest tests | s | fast subset |", "|---|---|---|"]
    rows += [f"| {t} | {s:.1f} | {'yes' if t in fast else ''} |" for t, s in per.most_common(top)]
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--parse", nargs="+", metavar="LOG", help="saved `--durations=0` logs instead of runs")
    ns = ap.parse_args()
    per: Counter[str] = Counter()
    walls: dict[str, float] = {}
    if ns.parse:
        for log in ns.parse:
            per.update(durations(Path(log).read_text(errors="replace")))
        paths = sorted({directory(t) for t in per})
    else:
        paths = ns.dirs or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").iterdir() if p.is_dir()
                                  and any(p.glob("test_*.py")))  # fmt: skip
        for d in paths:
            t0 = time.monotonic()
            out = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                 "-n", str(ns.workers), d],
                cwd=ROOT, capture_output=True, text=True,
            ).stdout  # fmt: skip
            walls[d] = time.monotonic() - t0
            per.update(durations(out))
    print(table(per, fast_ids(paths), walls, ns.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
