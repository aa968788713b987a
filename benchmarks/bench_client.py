"""How well the benchmark client measures, against the simulator (a child process) emitting at known rates.

(a) accuracy: one stream at 150 tok/s (baseline: 150 passes/s x 1 token; dflash: accept length 3.4 at
    150/3.4 passes/s): measured tok/s and decode tok/s vs the true rate from the simulator's schedule.
(b) overhead: 64 concurrent streams, per-stream rate raised step by step; for each step the aggregate rate,
    the median and p90 drift of the measured per-request tok/s from the truth, the drift against the
    server's own e2e_latency (isolates the client when the simulator itself falls behind), and the client's
    CPU time per 1,000 tokens. The highest aggregate rate with median decode tok/s drift <= 2 % is reported.

Run: python benchmarks/bench_client.py [--quick]
The simulator shares the machine's cores with the client, so on a small machine the simulator can be the
limit; the "vs server" column shows which side drifted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from ddtree_tui.bench import BenchRequest, BenchTarget, run_bench
from ddtree_tui.bench.models import BenchRun
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.sim.process import SimProcess
from ddtree_tui.sim.server import SimConfig


def _prompts(n: int, tag: str) -> list[Prompt]:
    return [
        Prompt(id=f"{tag}{i}", messages=[{"role": "user", "content": f"{tag} question {i}"}])
        for i in range(n)
    ]


def _truth(cfg: SimConfig, p: Prompt, max_new: int) -> tuple[float, float]:
    """True tok/s (tokens / (passes / rate)) and true decode tok/s for one request."""
    s = cfg.schedule(p.as_text(), max_new)
    tok_s = max_new / (len(s) / cfg.decode_rate)
    dec = (max_new - s[0]) / ((len(s) - 1) / cfg.decode_rate) if len(s) > 1 else float("nan")
    return tok_s, dec


async def _run(
    cfg: SimConfig, prompts: list[Prompt], max_new: int, concurrency: int, repeats: int
) -> tuple[BenchRun, float]:
    with SimProcess(cfg) as sim:
        target = BenchTarget(
            ref="local/sim", base_url=sim.base_url, algorithm=cfg.algorithm, mode=cfg.display_mode
        )
        req = BenchRequest(
            prompts=prompts,
            repeats=repeats,
            warmup=0,
            concurrency=concurrency,
            max_new_tokens=max_new,
            timeout=120,
        )
        cpu0 = time.process_time()
        run = await run_bench(req, [target], on_event=lambda ev: None)  # events on, as in the TUI
        cpu = time.process_time() - cpu0
    return run, cpu


def _pct(x: float) -> str:
    return f"{x:+.2f}%"


async def accuracy(quick: bool) -> list[list[str]]:
    rows = []
    for algo, rate, acc in (("baseline", 150.0, None), ("dflash", 150.0 / 3.4, 3.4)):
        cfg = SimConfig(algorithm=algo, decode_rate=rate, accept_length=acc, seed=3)
        prompts = _prompts(2 if quick else 5, "acc")
        max_new = 300
        run, _ = await _run(cfg, prompts, max_new, 1, 1)
        for r in run.results:
            p = next(p for p in prompts if p.id == r.prompt_id)
            t, d = _truth(cfg, p, max_new)
            rows.append(
                [
                    algo,
                    r.prompt_id,
                    f"{t:.2f}",
                    f"{r.tok_s:.2f}" if r.tok_s else "-",
                    _pct((r.tok_s - t) / t * 100) if r.tok_s else "-",
                    f"{d:.2f}",
                    f"{r.decode_tok_s:.2f}" if r.decode_tok_s else "-",
                    _pct((r.decode_tok_s - d) / d * 100) if r.decode_tok_s else "-",
                    f"{r.ttft_s * 1000:.1f}" if r.ttft_s else "-",
                    f"{1000 / cfg.decode_rate:.1f}",
                ]
            )
    return rows


async def overhead(
    quick: bool, algo: str, rates: list[float], seconds: float
) -> tuple[list[list[str]], float | None]:
    rows = []
    best: float | None = None
    conc = 64
    acc = 3.4 if algo == "dflash" else None
    mean_k = acc or 1.0
    for per_stream in rates:
        cfg = SimConfig(algorithm=algo, decode_rate=per_stream / mean_k, accept_length=acc, seed=5)
        max_new = max(16, int(per_stream * seconds))
        prompts = _prompts(conc, f"r{int(per_stream)}-")
        t0 = time.monotonic()
        run, cpu = await _run(cfg, prompts, max_new, conc, 1)
        wall = time.monotonic() - t0
        ok = [r for r in run.results if r.ok and r.tok_s]
        drifts, ddrifts, sdrifts, truths = [], [], [], []
        for r in ok:
            p = next(p for p in prompts if p.id == r.prompt_id)
            t, d = _truth(cfg, p, max_new)
            truths.append(t)
            drifts.append(abs(r.tok_s - t) / t * 100)
            if r.decode_tok_s:
                ddrifts.append(abs(r.decode_tok_s - d) / d * 100)
            if r.server_e2e_s and r.e2e_s:
                sdrifts.append(abs(r.e2e_s - r.server_e2e_s) / r.server_e2e_s * 100)
        tokens = sum(r.output_tokens or 0 for r in ok)
        agg = sum(truths)
        med = statistics.median(drifts) if drifts else float("inf")
        p90 = sorted(drifts)[int(0.9 * (len(drifts) - 1))] if drifts else float("inf")
        smed = statistics.median(sdrifts) if sdrifts else float("nan")
        dmed = statistics.median(ddrifts) if ddrifts else float("inf")
        if dmed <= 2.0 and len(ok) == conc:
            best = agg
        rows.append(
            [
                algo,
                f"{per_stream:.0f}",
                f"{agg:.0f}",
                f"{len(ok)}/{conc}",
                f"{med:.2f}%",
                f"{p90:.2f}%",
                f"{dmed:.2f}%",
                f"{smed:.2f}%",
                f"{cpu / tokens * 1000 * 1000:.1f}" if tokens else "-",
                f"{wall:.1f}",
            ]
        )
        print(" ".join(rows[-1]), file=sys.stderr, flush=True)
        if med > 10 and dmed > 10:
            break
    return rows, best


def _table(headers: list[str], rows: list[list[str]]) -> str:
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = ["  ".join(h.rjust(w[i]) for i, h in enumerate(headers)), "  ".join("-" * x for x in w)]
    out += ["  ".join(c.rjust(w[i]) for i, c in enumerate(r)) for r in rows]
    return "\n".join(out)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer requests and steps")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each stream in (b)")
    a = ap.parse_args()
    print("(a) accuracy, single stream at 150 tok/s", flush=True)
    rows = await accuracy(a.quick)
    print(
        _table(
            [
                "algorithm",
                "prompt",
                "true tok/s",
                "measured",
                "error",
                "true decode",
                "measured",
                "error",
                "TTFT ms",
                "1 pass ms",
            ],
            rows,
        ),
        flush=True,
    )
    print("\n(b) overhead, 64 concurrent streams", flush=True)
    rates = [10.0, 40.0, 100.0] if a.quick else [10.0, 50.0, 100.0, 200.0, 400.0, 800.0]
    all_rows = []
    bests = {}
    for algo in ("dflash", "baseline"):
        r, best = await overhead(a.quick, algo, rates, a.seconds)
        all_rows += r
        bests[algo] = best
    print(
        _table(
            [
                "algorithm",
                "tok/s/stream",
                "aggregate tok/s",
                "ok",
                "tok/s drift med",
                "p90",
                "decode drift med",
                "e2e vs server",
                "client CPU ms/1k tok",
                "wall s",
            ],
            all_rows,
        )
    )
    for algo, best in bests.items():
        chunks = "~3.4 tokens/chunk" if algo == "dflash" else "1 token/chunk"
        b = f"{best:.0f} tok/s" if best else "none of the steps"
        print(f"highest aggregate rate with median decode tok/s drift <= 2 % ({algo}, {chunks}): {b}")


if __name__ == "__main__":
    asyncio.run(main())
