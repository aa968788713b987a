"""Where the measured client spends its CPU per chunk: one process of ours (bench/client.py measure_request on
the loop bench/evloop.py gives, as a worker process runs it) streams a closed loop against the exact-schedule
server (benchmarks/exact_server.py, a child process), and prints the CPU per chunk and per token, and with
`--profile` the top functions by own time (cProfile; its overhead inflates the absolute figures, so read
those from a run without it).

Run:  python benchmarks/client_profile.py [--conc 64] [--rate 1000] [--tpc 1] [--tokens 1000] [--rounds 2]
      [--profile] [--loop asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from exact_server import Config, ExactServer  # noqa: E402

from ddtree_tui.bench.client import measure_request  # noqa: E402
from ddtree_tui.bench.evloop import loop_name, new_loop  # noqa: E402
from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams  # noqa: E402
from ddtree_tui.bench.prompts import Prompt  # noqa: E402
from ddtree_tui.bench.stream import StreamClient  # noqa: E402
from ddtree_tui.bench.worker import quiet_gc  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _run(base: str, a: argparse.Namespace, prof: cProfile.Profile | None) -> tuple[float, int, int]:
    target = BenchTarget(ref="exact", base_url=base, algorithm="exact", model="exact")
    sp = SamplingParams(api="completions", max_new_tokens=a.tokens, ignore_eos=True, model="exact")
    prompt = Prompt(id="p", text="w0 w1 w2 w3 w4 w5 w6 w7", max_new_tokens=a.tokens)
    async with StreamClient() as client:

        async def one(i: int) -> RequestResult:
            return await measure_request(client, target, prompt, sp, seq=i, timeout=120)

        await asyncio.gather(*(one(i) for i in range(a.conc)))  # warm-up: connections made
        chunks = tokens = 0
        with quiet_gc():  # (its one full collection before the clock, as a run's)
            cpu0 = _cpu()
            if prof is not None:
                prof.enable()
            for _ in range(a.rounds):
                for r in await asyncio.gather(*(one(i) for i in range(a.conc))):
                    if not r.ok:
                        raise SystemExit(f"request failed: {r.error}")
                    chunks += r.chunks
                    tokens += r.output_tokens or 0
        if prof is not None:
            prof.disable()
        return _cpu() - cpu0, chunks, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conc", type=int, default=64)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--tpc", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    a = ap.parse_args()
    if a.loop == "asyncio":
        os.environ["DDTREE_BENCH_LOOP"] = "asyncio"
    prof = cProfile.Profile() if a.profile else None
    with ExactServer(Config(a.rate, a.tpc, 0.02, incremental=True)) as base:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            name = loop_name(runner.get_loop())
            cpu, chunks, tokens = runner.run(_run(base, a, prof))
    print(
        f"{name}: c={a.conc} {a.rate:g} tok/s × {a.tpc} tok/chunk, {a.rounds} round(s): {chunks} chunks, "
        f"{tokens} tokens, CPU {cpu:.2f} s = {cpu / chunks * 1e6:.1f} µs/chunk, {cpu / tokens * 1e6:.1f} µs/token"
        + (" (under cProfile)" if prof else "")
    )
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
