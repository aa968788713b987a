"""How closely our open loop keeps to its planned schedule (issue 26): each arrival shape against one
simulated server in a child process, side by side in one run: sends planned and sent, on time (lag ≤ 10 ms)
and late, the lag p50/p99/max, and the rates: offered (the shape's), planned (this schedule's own sends: a
bursty schedule of 60 draws is not exactly its nominal rate) and sent, and sent / planned.

Lag is a request's start on the client's loop minus its planned send time (bench/workloads/record.py).
The server is fast (short answers) so what is measured is the client's sender, not a queue.

Run:  python benchmarks/workload_schedules.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.models import BenchTarget, ShapeRequest
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess

SAMPLE = Path(__file__).resolve().parents[1] / "ddtree_tui" / "data" / "mooncake-sample.jsonl"
SHAPES = [
    "rate:20",
    "poisson:20",
    "gamma:20,0.25",
    "gamma:20,4",
    "ramp:linear,5,40,3s",
    "ramp:exp,5,40,3s",
    "trace:4",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=60, help="per shape (a ramp and the trace run in full)")
    a = ap.parse_args()
    rows = []
    with SimProcess(SimConfig.realistic(algorithm="dflash", decode_rate=400.0, accept_length=3.0)) as sim:
        t = BenchTarget(ref="sim/a", base_url=sim.base_url, algorithm="dflash", mode="linear")
        for text in SHAPES:
            spec = parse_load(text)
            trace = str(SAMPLE) if spec.kind == "trace" else None
            req = ShapeRequest(load=spec.text, trace=trace, max_new_tokens=16, warmup=1, seed=1)
            n = None if spec.kind in ("ramp", "trace") else a.requests
            run = asyncio.run(run_load(req, [t], spec, LoadSettings(requests=n)))
            assert run.workload is not None
            for s in run.workload.schedules:
                ratio = s.achieved_rate / s.planned_rate if s.achieved_rate and s.planned_rate else None
                rows.append((text, s, ratio))
    print(f"{'shape':22} {'planned':>7} {'sent':>5} {'on time':>7} {'late':>5} {'lag p50':>8} {'p99':>7} {'max':>7}"
          f" {'offered':>8} {'planned':>8} {'sent':>8} {'sent/plan':>9}")  # fmt: skip
    for text, s, ratio in rows:
        f = lambda x, fmt="{:.2f}": fmt.format(x) if x is not None else "-"  # noqa: E731
        print(f"{text:22} {s.planned:7d} {s.sent:5d} {s.on_time:7d} {s.late:5d} {f(s.lag_ms_p50, '{:.1f}'):>8}"
              f" {f(s.lag_ms_p99, '{:.1f}'):>7} {f(s.lag_ms_max, '{:.1f}'):>7} {f(s.offered_rate):>8} {f(s.planned_rate):>8}"
              f" {f(s.achieved_rate):>8} {f(ratio, '{:.3f}'):>9}")  # fmt: skip
    print(
        "lag in ms; on time: lag ≤ 10 ms; rates in requests/s (planned and sent: sends after the first / first → last send)"
    )


if __name__ == "__main__":
    main()
