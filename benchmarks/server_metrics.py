"""What scraping the server's /metrics during a run costs (issue 26, `--server-metrics`): the same plain run
against one simulated server (a child process), without and with the scraper, round by round (A B A B …), so
the machine's drift hits both; then the parse cost of one /metrics body.

Columns (medians over the rounds; ratio = with / without):
  out tok/s   the run's Σ output tokens / measured wall time (summary output_throughput)
  TTFT p50    median time to first token, ms
  CPU µs/tok  the client's CPU time in the measured phase / output tokens (run.client, bench/loadmon.py)
  scrapes     /metrics answers parsed during the run (with the scraper)
Parse: µs per parse_metrics() of the simulator's /metrics body, and of a body with 8 ranks' series.

Run:  python benchmarks/server_metrics.py [--rounds N] [--every S] [--concurrency N] [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from ddtree_tui.bench.models import BenchRequest, BenchTarget
from ddtree_tui.bench.runner import run_bench
from ddtree_tui.bench.servermetrics import ScrapeTarget, ServerScrape, parse_metrics
from ddtree_tui.lib import http
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess


async def _one(
    target: BenchTarget, req: BenchRequest, every: float | None
) -> tuple[float, float, float, int]:
    async def run() -> tuple[float, float, float]:
        r = await run_bench(req, [target])
        s = r.summary[0]
        cpu = r.client.cpu_us_per_token if r.client and r.client.cpu_us_per_token else float("nan")
        return s.output_throughput or float("nan"), s.ttft_ms_median or float("nan"), cpu

    if every is None:
        return (*await run(), 0)
    async with ServerScrape([ScrapeTarget(ref=target.ref, base_url=target.base_url)], every) as sc:
        got = await run()
    return (*got, sc.states[0].tick)


async def _metrics_text(base: str) -> str:
    async with http.session() as s, s.get(base + "/metrics") as r:  # no proxy: loopback
        return await http.read_text(r)


def _parse_cost(body: str, n: int = 200) -> float:
    t = time.perf_counter()
    for _ in range(n):
        parse_metrics(body, 0.0)
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=8)
    a = ap.parse_args()
    cfg = SimConfig(algorithm="dflash", accept_length=3.0, decode_rate=200.0, seed=1)
    with SimProcess(cfg) as sim:
        target = BenchTarget(ref="sim/a", base_url=sim.base_url, algorithm="dflash", mode="linear")
        req = BenchRequest(prompts="seed3", repeats=a.repeats, concurrency=a.concurrency, max_new_tokens=128,
                           warmup=1, ignore_eos=True)  # fmt: skip
        rows: dict[str, list[tuple[float, float, float, int]]] = {"without": [], "with": []}
        for _ in range(a.rounds):
            rows["without"].append(asyncio.run(_one(target, req, None)))
            rows["with"].append(asyncio.run(_one(target, req, a.every)))
        body = asyncio.run(_metrics_text(sim.base_url))
    med = {k: [statistics.median(x[i] for x in v) for i in range(4)] for k, v in rows.items()}
    print(
        f"server metrics scraped every {a.every:g} s; {a.rounds} rounds of {a.repeats * 3} requests at c={a.concurrency}"
    )
    print(f"{'':10} {'out tok/s':>10} {'TTFT p50':>9} {'CPU µs/tok':>11} {'scrapes':>8}")
    for k in ("without", "with"):
        m = med[k]
        print(f"{k:10} {m[0]:10.1f} {m[1]:9.1f} {m[2]:11.1f} {m[3]:8.0f}")
    w, o = med["with"], med["without"]
    print(f"{'ratio':10} {w[0] / o[0]:10.3f} {w[1] / o[1]:9.3f} {w[2] / o[2]:11.3f}")
    ranks = "\n".join(
        line.replace('tp_rank="0"', f'tp_rank="{k}"')
        for k in range(8)
        for line in body.splitlines()
        if not line.startswith("#")
    )
    print(f"parse: {_parse_cost(body):.0f} µs per body ({len(body)} bytes); 8 ranks: {_parse_cost(ranks):.0f} µs "
          f"({len(ranks)} bytes)")  # fmt: skip


if __name__ == "__main__":
    main()
