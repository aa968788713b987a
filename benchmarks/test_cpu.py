"""Where a whole test run's CPU and wall time went (issue 24), from the per-test lines that
`DDTREE_TEST_CPU_LOG=FILE` makes tests/conftest.py write: CPU per module (the test process's own, and the
children it waited for), the longest tests by CPU, and the run's tail: when each xdist worker finished its last
test, and what the others were still running meanwhile (a worker left alone with a long test at the end keeps
the whole run going on one core).

`--procs FILE` adds a `DDTREE_PROC_LOG=FILE` run's CLI and simulator processes per module (cli/proclog.py tags
each with the test that started it); a process the test waited for is in both columns, a detached one (the
fleet's simulators) only in that one.

    DDTREE_TEST_CPU_LOG=DIR/tests.jsonl DDTREE_PROC_LOG=DIR/procs.jsonl scripts/test
    .venv/bin/python benchmarks/test_cpu.py DIR/tests.jsonl --procs DIR/procs.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def read_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for ln in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            continue
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path, help="the DDTREE_TEST_CPU_LOG file")
    ap.add_argument("--procs", type=Path, help="the same run's DDTREE_PROC_LOG file")
    ap.add_argument("--top", type=int, default=30, help="rows of each table")
    ns = ap.parse_args()
    tests = read_lines(ns.log)
    procs = read_lines(ns.procs) if ns.procs else []

    own: dict[str, float] = defaultdict(float)
    kids: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    for t in tests:
        mod = t["test"].split("::", 1)[0]
        own[mod] += t["own_cpu_s"]
        kids[mod] += t["children_cpu_s"]
        wall[mod] += t["end"] - t["start"]
    logged: dict[str, float] = defaultdict(float)
    sims: dict[str, int] = defaultdict(int)
    for p in procs:
        mod = (p.get("test") or "?").split("::", 1)[0] or "?"
        logged[mod] += p.get("cpu_s") or 0.0
        if p.get("mode") == "sim":
            sims[mod] += 1

    total_own, total_kids = sum(own.values()), sum(kids.values())
    print(
        f"{len(tests)} tests; test processes' own CPU {total_own:.1f} s, waited-for children {total_kids:.1f} s"
    )
    if procs:
        print(f"{len(procs)} CLI/simulator processes logged, {sum(logged.values()):.1f} s of CPU")
    print()
    print("| module | own CPU s | waited children CPU s | logged CLI/sim CPU s | simulators | wall s (sum) |")
    print("|---|---:|---:|---:|---:|---:|")
    mods = sorted(set(own) | set(logged), key=lambda m: -(own[m] + kids[m] + logged[m]))
    for m in mods[: ns.top]:
        print(f"| {m} | {own[m]:.1f} | {kids[m]:.1f} | {logged[m]:.1f} | {sims[m]} | {wall[m]:.1f} |")

    print()
    print("| test | own CPU s | children CPU s | wall s | worker |")
    print("|---|---:|---:|---:|---|")
    for t in sorted(tests, key=lambda t: -(t["own_cpu_s"] + t["children_cpu_s"]))[: ns.top]:
        w = t["end"] - t["start"]
        print(f"| {t['test']} | {t['own_cpu_s']:.1f} | {t['children_cpu_s']:.1f} | {w:.1f} | {t['worker']} |")

    if not tests:
        return 0
    t0 = min(t["start"] for t in tests)
    last = max(t["end"] for t in tests)
    by_worker: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in tests:
        by_worker[t["worker"]].append(t)
    print()
    print(f"tail: the tests' span {last - t0:.1f} s (first start to last end)")
    print("| worker | tests | busy s | last test ends at s | idle at the end s | its last test (wall s) |")
    print("|---|---:|---:|---:|---:|---|")
    for w, ts in sorted(by_worker.items()):
        end = max(t["end"] for t in ts)
        lt = max(ts, key=lambda t: t["end"])
        busy = sum(t["end"] - t["start"] for t in ts)
        print(
            f"| {w} | {len(ts)} | {busy:.1f} | {end - t0:.1f} | {last - end:.1f} | "
            f"{lt['test']} ({lt['end'] - lt['start']:.1f}) |"
        )
    print()
    print("tests still running in the last 20 % of the span (start s → end s):")
    cut = t0 + 0.8 * (last - t0)
    for t in sorted((t for t in tests if t["end"] > cut), key=lambda t: t["start"]):
        if t["end"] - t["start"] >= 2.0:
            print(f"  {t['start'] - t0:7.1f} → {t['end'] - t0:7.1f}  {t['worker']}  {t['test']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
