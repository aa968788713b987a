"""What starting the client's worker processes costs, per boot (issue 26): each trial is a fresh process that
imports the worker's modules (as `--run-bench` has by then), starts K workers on its event loop, sends each
one `exit` and waits for them; the CPU is user + sys of that process and of every process it waited for
(RUSAGE_CHILDREN, so a zygote's workers count once the zygote was waited for). The same trial with K = 0 is
subtracted, so a row is what K workers added, and per worker.

Boots (bench/zygote.py):
  forked   the trial forks the zygote before its loop (what `--run-bench` does: fleet/benchprocs.py)
  zygote   the first worker starts `python -m ddtree_tui.benchworker --zygote` (the TUI's and the collector's way)
  exec     each worker its own `python -m ddtree_tui.benchworker` (DDTREE_BENCH_WORKER_BOOT=exec, the old start)
Boots and K alternate trial by trial (ABC, CBA, ...), so a machine that gets busier hits them alike.

Run:  python benchmarks/worker_boot.py [--workers 1,4,16] [--runs 5] [--boots forked,zygote,exec]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def trial(boot: str, k: int) -> None:
    """One trial, in this (fresh) process."""
    from ddtree_tui.bench.worker import Worker, forked_main
    from ddtree_tui.bench.zygote import forked_zygote

    async def run() -> None:
        ws = [Worker(i) for i in range(k)]
        try:
            await asyncio.gather(*(w.start() for w in ws))
        finally:
            await asyncio.gather(*(w.close() for w in ws))

    with forked_zygote(forked_main, wanted=boot == "forked" and k > 0):
        asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,4,16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--boots", default="forked,zygote,exec")
    ap.add_argument("--trial", nargs=2, metavar=("BOOT", "K"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.trial:
        trial(a.trial[0], int(a.trial[1]))
        return
    boots = a.boots.split(",")
    ks = [0, *(int(x) for x in a.workers.split(","))]
    cpu: dict[tuple[str, int], list[float]] = {}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    for r in range(a.runs):
        order = [(b, k) for b in boots for k in ks]
        for b, k in order if r % 2 == 0 else reversed(order):
            benv = {**env, "DDTREE_BENCH_WORKER_BOOT": "exec" if b == "exec" else "zygote"}
            c0 = _children_cpu()
            subprocess.run([sys.executable, __file__, "--trial", b, str(k)], env=benv, check=True)
            cpu.setdefault((b, k), []).append(_children_cpu() - c0)
    load = os.getloadavg()[0]
    print(f"CPU s of K workers started and ended (median of {a.runs}, the K = 0 trial subtracted), "
          f"load average {load:.1f} at the end")  # fmt: skip
    print("| boot | " + " | ".join(f"K={k} (per worker)" for k in ks[1:]) + " | K=0 trial |")
    print("|---" * (len(ks) + 1) + "|")
    for b in boots:
        base = statistics.median(cpu[(b, 0)])
        cells = []
        for k in ks[1:]:
            extra = statistics.median(cpu[(b, k)]) - base
            cells.append(f"{extra:.3f} ({extra / k:.3f})")
        print(f"| {b} | " + " | ".join(cells) + f" | {base:.3f} |")


if __name__ == "__main__":
    main()
