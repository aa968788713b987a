"""What the TUI imports before its first frame (issue 28), REV's tree and this one side by side: `-X importtime`
of `import ddtree_tui.cli.tui` (self time summed by package: which packages' import bodies cost; it is wall
time, so the least of the runs is shown), the CPU time of that import (median and min), and the modules
loaded. Fresh interpreters, the two trees alternated, `--runs` each (a shared machine's load moves single runs
by tens of percent: read the ratios).

    .venv/bin/python benchmarks/ui_imports.py --compare main --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = (
    "import sys, time; sys.path.insert(0, {code!r}); c = time.process_time(); import ddtree_tui.cli.tui; "
    "print('CPU', (time.process_time() - c) * 1000, len(sys.modules))"
)


def group(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "ddtree_tui" else parts[0]


def one(code: Path) -> tuple[Counter[str], float, int]:
    """Self µs by package, import CPU ms, modules loaded: one fresh interpreter."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE.format(code=str(code))],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    by: Counter[str] = Counter()
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cum, name = line.removeprefix("import time:").split("|")
        by[group(name.strip())] += int(self_us)
    _, cpu, mods = r.stdout.split()
    return by, float(cpu), int(mods)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", default="main", metavar="REV")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=22, help="packages shown (by this tree's or REV's self time)")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddtree-ui-imports-") as tmp:
        base = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", ns.compare, "ddtree_tui"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        got: dict[str, list[tuple[Counter[str], float, int]]] = {"rev": [], "tree": []}
        for _ in range(ns.runs):
            got["rev"].append(one(base))
            got["tree"].append(one(REPO))

    def least(side: str, key: str) -> float:  # the least of the runs: the nearest to an idle core
        return min(r[0][key] for r in got[side]) / 1000

    keys = Counter[str]()
    for side in got.values():
        for by, _, _ in side:
            keys.update(by)
    shown = sorted(keys, key=lambda k: -max(least("rev", k), least("tree", k)))[: ns.top]
    print(f"{'import of ddtree_tui.cli.tui':<34}  {ns.compare:>10}  {'this tree':>10}  {'ratio':>6}")

    def row(name: str, a: float, b: float, unit: str = "ms") -> None:
        ratio = f"{b / a:.2f}" if a else ""
        print(f"{name:<34}  {a:>7.0f} {unit:<2}  {b:>7.0f} {unit:<2}  {ratio:>6}")

    row("CPU of the import (median)", *(statistics.median(r[1] for r in got[s]) for s in ("rev", "tree")))
    row("  min", *(min(r[1] for r in got[s]) for s in ("rev", "tree")))
    row("modules loaded", *(statistics.median(r[2] for r in got[s]) for s in ("rev", "tree")), "")
    row(
        "-X importtime self, all (min)",
        *(min(sum(r[0].values()) / 1000 for r in got[s]) for s in ("rev", "tree")),
    )
    for k in shown:
        row(f"  {k}", least("rev", k), least("tree", k))
    print(
        f"({ns.runs} fresh interpreters each, alternated; CPU: median and min; -X importtime: wall, the min)"
    )


if __name__ == "__main__":
    main()
