"""What tests/cli_batch.py saves (issue 24): N `ddtree-tui` command lines as N child processes (`python -m
ddtree_tui.cli ARGS`, what the tests ran) against the same N command lines in ONE child process
(`tests.util.cli_batch`), side by side in one run, with the CPU time (user + sys of the children, from
os.wait4 through resource.getrusage(RUSAGE_CHILDREN)) and the wall time of each, and their ratio.

The command lines are the ones the tests batch: `report` of a bad file (the report modules' imports), `sweep
apply` to a file that is not a profile (the sweep modules'), and `smoke` of an unknown service (the fleet's).
Nothing is started and nothing listens: they print and exit. The CPU figure does not depend on how busy the
machine is (much); the wall figure does, so compare the two columns of one run.

Run: .venv/bin/python benchmarks/cli_batch.py [--n 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.util import cli_argv, cli_batch  # noqa: E402


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall s, CPU s of the children that ended meanwhile)."""
    c0, t0 = children_cpu(), time.monotonic()
    fn()
    return time.monotonic() - t0, children_cpu() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5, help="command lines a kind (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each figure is their median (default 3)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-batch-bench-") as tmp:
        d = Path(tmp)
        notes = d / "notes.md"
        notes.write_text("# not a profile\nnot = [toml\n")
        prof = d / "p.toml"
        prof.write_text('name = "loc"\naddress = "local"\n')
        kinds = {
            "report (bad file)": ["report", str(d / "missing.json")],
            "sweep apply (not a profile)": ["sweep", "apply", str(d / "nodir"), "--to", str(notes), "--yes"],
            "smoke (unknown service)": ["smoke", "loc/nope", "--profile", str(prof)],
        }
        print(f"{a.n} command lines a kind, median of {a.rounds} rounds (user+sys of the children, wall)")
        print(
            f"{'kind':30} {'N children CPU':>15} {'1 batch CPU':>12} {'ratio':>6} {'N wall':>8} {'1 wall':>8}"
        )
        for name, argv in kinds.items():
            sep: list[tuple[float, float]] = []
            one: list[tuple[float, float]] = []
            for _ in range(a.rounds):

                def separate(argv: list[str] = argv) -> None:
                    for _ in range(a.n):
                        subprocess.run(cli_argv(*argv), cwd=d, capture_output=True, text=True, timeout=120)

                def batched(argv: list[str] = argv) -> None:
                    cli_batch([argv] * a.n, d)

                sep.append(timed(separate))
                one.append(timed(batched))
            med = lambda xs, i: sorted(x[i] for x in xs)[len(xs) // 2]  # noqa: E731
            sc, bc, sw, bw = med(sep, 1), med(one, 1), med(sep, 0), med(one, 0)
            print(f"{name:30} {sc:14.2f}s {bc:11.2f}s {bc / sc:6.2f} {sw:7.1f}s {bw:7.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
