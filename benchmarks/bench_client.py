"""How well the benchmark client measures: ours against SGLang's own client, side by side, against a server
whose rate is exactly known (benchmarks/exact_server.py, a child process).

For each scenario (per-request rate, tokens per chunk, concurrency), round by round, the same server process
is measured by our client (`run_bench`, in this process; with `--workers` also in worker processes) and by
SGLang's `bench_serving` (benchmarks/sglang_client.py, a child process in its own virtual environment), one
after the other. The truth comes from the server itself: for every request the monotonic times it arrived,
its first chunk left and its last chunk left (the server's timers can be late; its own stamps are what
happened). Warm-up requests are left out of the truth (the last n arrivals are the counted ones).

Columns:
  tok/s/req   true per-request rate (median over requests: tokens / (last send − arrival))
  err req     the client's median per-request tok/s vs that
  agg true    Σ tokens / (last send − first arrival) over the counted requests
  err agg     the client's aggregate output throughput vs that
  TTFT true   median first send − arrival;  err ms: the client's median TTFT minus that
  CPU µs/tok  the client's CPU time while streaming / output tokens (ours: the measured phase, all
              processes; SGLang's: benchmark() start to calculate_metrics(), i.e. its warm-up + streaming)
  bound       ours: client-bound verdict (busiest process's % of a core, loop lag p99)
  late p99    how late the server's chunks left (ms, p99): a loaded machine shows here first
  ITL true    median over requests of (last send − first send) / (tokens − tokens of the first chunk)
  ITL ours    the client's median per-request ITL p50 (sglang: its median ITL); coalesced: % of the
              client's socket reads that held several chunks (ours only)

Run:  python benchmarks/bench_client.py [--quick] [--rounds N] [--workers N]
      [--sglang-python VENV/bin/python --sglang-src DIR]   (DIR: the sglang wheel, unzipped)
Without --sglang-python the SGLang columns are skipped (and the reason printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exact_server import Config, ExactServer

from ddtree_tui.bench import BenchRequest, BenchTarget
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.runner import run_bench

HERE = Path(__file__).resolve().parent


@dataclass
class Scenario:
    rate: float
    tpc: int
    conc: int
    tokens: int

    @property
    def name(self) -> str:
        return f"{self.rate:g} tok/s × {self.tpc} tok/chunk, c={self.conc}"


@dataclass
class Measured:
    client: str
    tok_s: float | None  # median per request
    agg: float | None
    ttft_ms: float | None
    cpu_us_tok: float | None
    bound: str = ""
    ok: int = 0
    note: str = ""
    itl_ms: float | None = None
    coalesced_pct: float | None = None


@dataclass
class Truth:
    tok_s: float
    agg: float
    ttft_ms: float
    late_p99: float | None
    itl_ms: float | None = None


def truth(stats: dict[str, Any], n: int, tpc: int = 1) -> Truth:
    done = sorted(stats["done"], key=lambda d: d["t_arrival"])[-n:]
    rates = [d["tokens"] / (d["t_last"] - d["t_arrival"]) for d in done]
    span = max(d["t_last"] for d in done) - min(d["t_arrival"] for d in done)
    return Truth(
        tok_s=statistics.median(rates),
        agg=sum(d["tokens"] for d in done) / span,
        ttft_ms=statistics.median((d["t_first"] - d["t_arrival"]) * 1000 for d in done),
        late_p99=stats.get("late_ms_p99"),
        itl_ms=statistics.median(
            (d["t_last"] - d["t_first"]) / (d["tokens"] - tpc) * 1000 for d in done if d["tokens"] > tpc
        )
        if any(d["tokens"] > tpc for d in done)
        else None,
    )


async def ours(base: str, sc: Scenario, n: int, workers: int) -> Measured:
    target = BenchTarget(ref="local/exact", base_url=base, algorithm="baseline")
    prompts = [Prompt(id=f"p{i}", text=f"hello {i}") for i in range(n)]
    req = BenchRequest(
        prompts=prompts,
        warmup=1,
        concurrency=sc.conc,
        max_new_tokens=sc.tokens,
        timeout=120,
        workers=workers,
    )
    run = await run_bench(req, [target], on_event=lambda ev: None)  # events on, as in the TUI
    s = run.summary[0]
    c = run.client
    assert c is not None
    lag = f"{c.loop_lag_ms_p99:.1f}" if c.loop_lag_ms_p99 is not None else "-"
    bound = ("CLIENT-BOUND " if run.client_bound else "") + f"{c.cpu_core_max * 100:.0f}%/lag {lag}"
    name = "ours" if workers == 1 else f"ours×{workers}"
    itls = [r.itl_p50_ms for r in run.results if r.ok and r.itl_p50_ms is not None]
    reads = sum(getattr(r, "reads", 0) for r in run.results if r.ok)
    coalesced = sum(getattr(r, "coalesced_reads", 0) for r in run.results if r.ok)
    return Measured(
        name, s.tok_s_median, s.output_throughput, s.ttft_ms_median, c.cpu_us_per_token, bound, s.n,
        itl_ms=statistics.median(itls) if itls else None,
        coalesced_pct=coalesced / reads * 100 if reads else None,
    )  # fmt: skip


def sglang(a: argparse.Namespace, base: str, sc: Scenario, n: int, tok_dir: Path) -> Measured:
    with tempfile.TemporaryDirectory() as d:
        out, cpu = Path(d) / "out.jsonl", Path(d) / "cpu.json"
        argv = [a.sglang_python, str(HERE / "sglang_client.py"), "--sglang-src", a.sglang_src, "--"]
        argv += [
            "--backend",
            "sglang",
            "--base-url",
            base,
            "--tokenizer",
            str(tok_dir),
            "--model",
            str(tok_dir),
        ]
        argv += ["--dataset-name", "random-ids", "--random-input-len", "8", "--random-range-ratio", "1.0"]
        argv += [
            "--random-output-len",
            str(sc.tokens),
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(sc.conc),
        ]
        argv += ["--disable-tqdm", "--output-file", str(out), "--warmup-requests", "1"]
        env = {
            **os.environ,
            "SGLANG_CLIENT_CPU_FILE": str(cpu),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, cwd=d)
        if p.returncode != 0 or not out.exists():
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
            return Measured("sglang", None, None, None, None, note=f"failed: {tail[0][:80]}")
        r = json.loads(out.read_text().splitlines()[-1])
        c = json.loads(cpu.read_text())
        toks = r["total_output_tokens"]
        e2e = r["median_e2e_latency_ms"] / 1000
        return Measured(
            "sglang",
            sc.tokens / e2e if e2e else None,
            r["output_throughput"],
            r["median_ttft_ms"],
            c["cpu_s"] / toks * 1e6 if toks else None,
            ok=r["completed"],
            itl_ms=r.get("median_itl_ms"),
        )


def _pct(x: float | None, t: float) -> str:
    return "-" if x is None else f"{(x - t) / t * 100:+.2f}%"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="c=1 and c=64 only, one round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--workers", type=int, default=2, help="also run ours with this many worker processes at c>=64"
    )
    ap.add_argument("--sglang-python", help="python of a venv with bench_serving's requirements")
    ap.add_argument("--sglang-src", help="the sglang wheel, unzipped (holds sglang/benchmark/)")
    ap.add_argument("--only", help="comma list of scenario indexes to run (0-based)")
    a = ap.parse_args()
    scenarios = [
        Scenario(150, 1, 1, 300),
        Scenario(150, 4, 1, 300),
        Scenario(1000, 1, 16, 1000),
        Scenario(1000, 4, 16, 1000),
        Scenario(1000, 1, 64, 1000),
        Scenario(1000, 4, 64, 1000),
        Scenario(1000, 1, 128, 1000),
        Scenario(1000, 4, 128, 1000),
    ]
    if a.quick:
        scenarios = [scenarios[0], scenarios[5]]
        a.rounds = 1
    if a.only:
        scenarios = [scenarios[int(i)] for i in a.only.split(",")]
    use_sg = bool(a.sglang_python and a.sglang_src)
    if not use_sg:
        print("SGLang's client skipped: give --sglang-python and --sglang-src", file=sys.stderr)
    tok_dir = Path(tempfile.mkdtemp(prefix="sgtok-"))
    if use_sg:
        subprocess.run(
            [
                a.sglang_python,
                str(HERE / "sglang_client.py"),
                "--sglang-src",
                a.sglang_src,
                "--make-tokenizer",
                str(tok_dir),
            ],
            check=True,
        )
    rows: list[list[str]] = []
    for sc in scenarios:
        n = sc.conc * (2 if sc.conc == 1 else 1)  # c=1: two requests one after the other
        res: dict[str, list[tuple[Measured, Truth]]] = {}
        srv = ExactServer(Config(sc.rate, sc.tpc, 0.02))
        with srv as base:
            for rnd in range(a.rounds):
                clients = (
                    ["ours"]
                    + (["workers"] if sc.conc >= 64 and a.workers > 1 else [])
                    + (["sglang"] if use_sg else [])
                )
                if rnd % 2:
                    clients.reverse()
                for cl in clients:
                    srv.reset()
                    if cl == "sglang":
                        m = sglang(a, base, sc, n, tok_dir)
                    else:
                        m = asyncio.run(ours(base, sc, n, a.workers if cl == "workers" else 1))
                    t = truth(srv.get("/stats"), n, sc.tpc) if m.ok else None
                    if t is not None:
                        res.setdefault(m.client, []).append((m, t))
                    print(f"{sc.name} round {rnd + 1} {m.client}: {m} {t}", file=sys.stderr, flush=True)
        for cl, ms in res.items():

            def med(f: Any, ms: list[tuple[Measured, Truth]] = ms) -> float:
                return statistics.median(v for v in (f(m, t) for m, t in ms) if v is not None)

            t_tok = med(lambda m, t: t.tok_s)
            t_agg = med(lambda m, t: t.agg)
            t_ttft = med(lambda m, t: t.ttft_ms)
            err_req = med(lambda m, t: (m.tok_s - t.tok_s) / t.tok_s * 100 if m.tok_s else None)
            err_agg = med(lambda m, t: (m.agg - t.agg) / t.agg * 100 if m.agg else None)
            err_ttft = med(lambda m, t: m.ttft_ms - t.ttft_ms if m.ttft_ms is not None else None)
            cpu = med(lambda m, t: m.cpu_us_tok)
            late = med(lambda m, t: t.late_p99)
            itl_t = [t.itl_ms for m, t in ms if t.itl_ms is not None]
            itl_m = [m.itl_ms for m, t in ms if m.itl_ms is not None]
            coal = [m.coalesced_pct for m, t in ms if m.coalesced_pct is not None]
            rows.append(
                [
                    sc.name,
                    cl,
                    f"{t_tok:.1f}",
                    f"{err_req:+.2f}%",
                    f"{t_agg:.0f}",
                    f"{err_agg:+.2f}%",
                    f"{t_ttft:.1f}",
                    f"{err_ttft:+.2f}",
                    f"{cpu:.1f}",
                    ms[-1][0].bound or "-",
                    f"{late:.2f}",
                    f"{statistics.median(itl_t):.3f}" if itl_t else "-",
                    f"{statistics.median(itl_m):.3f}" if itl_m else "-",
                    f"{statistics.median(coal):.0f}%" if coal else "-",
                ]
            )
    headers = [
        "scenario",
        "client",
        "tok/s/req",
        "err req",
        "agg true",
        "err agg",
        "TTFT true",
        "err ms",
        "CPU µs/tok",
        "bound",
        "late p99",
        "ITL true",
        "ITL ours",
        "coalesced",
    ]
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"median of {a.rounds} round(s); truth from the exact server's own send times")
    print("  ".join(h.rjust(w[i]) for i, h in enumerate(headers)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(c.rjust(w[i]) for i, c in enumerate(r)))


if __name__ == "__main__":
    main()
