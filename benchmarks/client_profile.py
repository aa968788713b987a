"""Where the measured client spends its CPU per chunk, and where its TTFT error comes from: one process of
ours (bench/client.py measure_request on the loop bench/evloop.py gives, as a worker process runs it) streams
a closed loop against the exact-schedule server (benchmarks/exact_server.py, a child process), and prints the
CPU per chunk and per token, and with `--profile` the top functions by own time (cProfile; its overhead
inflates the absolute figures, so read those from a run without it).

TTFT error, split in two (every round; all four stamps are CLOCK_MONOTONIC, one clock for both processes):
  send delay    server's arrival stamp of the request − our send stamp (t_send): what our process does
                between its stamp and the write, loopback, and the server's own loop being busy
  read delay    our first-chunk stamp (the read that brought it) − the server's send stamp of that chunk:
                loopback, and our loop reading other sockets (and running other work) first
Their sum is the client's TTFT minus the true one (first send − arrival). Means are exact whatever the pairing
(a sum of differences is a difference of sums); quantiles pair the k-th earliest of each side (sorted), which
is exact when the order is kept and close otherwise.

`--turns`: also how late, within its loop turn, each read was stamped: the stamps of the reads the loop found
ready together (one turn: from one read to the next `call_soon` callback) minus the turn's first stamp. This is
what parsing inside `data_received` adds to the reads after it (DDTREE_BENCH_PARSE=inline) and what stamping
them all first removes (the default): CPU-bound, so a busy machine moves it less than the end-to-end delays.

`--via-worker`: the same requests through one real worker process (what a run with worker processes does):
the CPU is the worker's own (its LoopMonitor), the TTFT split as above; `--turns` does not reach into it.

`--worker-starts N`: instead, the CPU one bench worker process (`python -m ddtree_tui.benchworker`, what a
run starts per process) takes from its start to its exit on an empty job stream, N times per variant,
alternating; a variant (`--start-variant NAME:VAR=VALUE[,VAR=VALUE]`, repeatable) is an environment, e.g.
`plain:DDTREE_BENCH_WORKER_BOOT=plain` or `main:PYTHONPATH=DIR` (another tree's ddtree_tui).

Run:  python benchmarks/client_profile.py [--conc 64] [--rate 1000] [--tpc 1] [--tokens 1000] [--rounds 2]
      [--profile] [--loop asyncio]
      python benchmarks/client_profile.py --worker-starts 5 [--start-variant plain:DDTREE_BENCH_WORKER_BOOT=plain]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from exact_server import Config, ExactServer  # noqa: E402

from ddtree_tui.bench import stream as stream_mod  # noqa: E402
from ddtree_tui.bench.client import measure_request  # noqa: E402
from ddtree_tui.bench.evloop import loop_name, new_loop  # noqa: E402
from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams  # noqa: E402
from ddtree_tui.bench.prompts import Prompt  # noqa: E402
from ddtree_tui.bench.stream import StreamClient  # noqa: E402
from ddtree_tui.bench.worker import Worker, quiet_gc  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _q(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * (len(s) - 1)))]


class TurnStamps:
    """Wraps the transport's data_received to note, per read, its loop turn and its stamp (`--turns`)."""

    def __init__(self) -> None:
        self.turn = 0
        self.marked = False
        self.reads: list[tuple[int, float]] = []
        self.on = False
        real = stream_mod._Conn.data_received
        me = self

        def recv(conn: stream_mod._Conn, data: bytes) -> None:
            real(conn, data)
            if me.on:
                pending = getattr(conn, "pending", None)  # (a tree without the deferred parse has none)
                t = pending[-1][0] if pending else conn.t_read  # the stamp the read got
                me.reads.append((me.turn, t))
                if not me.marked:
                    me.marked = True
                    asyncio.get_running_loop().call_soon(me._next)

        stream_mod._Conn.data_received = recv  # type: ignore[method-assign]

    def _next(self) -> None:
        self.turn += 1
        self.marked = False

    def summary(self) -> str:
        first: dict[int, float] = {}
        size: dict[int, int] = {}
        for turn, t in self.reads:
            first.setdefault(turn, t)
            size[turn] = size.get(turn, 0) + 1
        late = [(t - first[turn]) * 1e6 for turn, t in self.reads if size[turn] > 1]
        shared = len(late)
        if not late:
            return f"turns: {len(self.reads)} reads, none shared a turn"
        return (
            f"turns: {len(self.reads)} reads in {len(size)} turns ({shared} shared a turn with others); "
            f"stamp after the turn's first read, those: mean {statistics.fmean(late):.1f} µs, "
            f"p50 {_q(late, 0.5):.1f}, p90 {_q(late, 0.9):.1f}, p99 {_q(late, 0.99):.1f}"
        )


def split_ttft(results: list[RequestResult], done: list[dict[str, float]], offset: float) -> dict[str, float]:
    """The TTFT error split into send delay and read delay (module docstring), in µs: mean, p50, p90."""
    sends = sorted(r.started_at - offset for r in results)
    firsts = sorted(r.started_at - offset + (r.ttft_s or 0.0) for r in results)
    arrivals = sorted(d["t_arrival"] for d in done)
    sent = sorted(d["t_first"] for d in done)
    send_d = [(a - s) * 1e6 for a, s in zip(arrivals, sends, strict=True)]
    read_d = [(f - s) * 1e6 for f, s in zip(firsts, sent, strict=True)]
    err = statistics.median(r.ttft_s or 0.0 for r in results) - statistics.median(
        d["t_first"] - d["t_arrival"] for d in done
    )
    return {
        "send_mean": statistics.fmean(send_d),
        "send_p50": _q(send_d, 0.5),
        "send_p90": _q(send_d, 0.9),
        "read_mean": statistics.fmean(read_d),
        "read_p50": _q(read_d, 0.5),
        "read_p90": _q(read_d, 0.9),
        "err_p50": err * 1e6,
    }


async def _run(
    srv: ExactServer, a: argparse.Namespace, prof: cProfile.Profile | None, turns: TurnStamps | None
) -> tuple[float, int, int, list[dict[str, float]]]:
    target = BenchTarget(ref="exact", base_url=srv.base_url, algorithm="exact", model="exact")
    sp = SamplingParams(api="completions", max_new_tokens=a.tokens, ignore_eos=True, model="exact")
    prompt = Prompt(id="p", text="w0 w1 w2 w3 w4 w5 w6 w7", max_new_tokens=a.tokens)
    # started_at is time.time() taken next to the monotonic send stamp: this converts it back
    offset = time.time() - time.monotonic()
    splits: list[dict[str, float]] = []
    worker = Worker(0) if a.via_worker else None
    if worker is not None:
        await worker.start()
    async with StreamClient() as client:

        async def one(i: int) -> RequestResult:
            if worker is not None:
                r, _, _ = await worker.measure(
                    target, prompt, sp, on_tokens=None, seq=i, repeat=0, warmup=False, timeout=120,
                    tokens_interval=0.1,
                )  # fmt: skip
                return r
            return await measure_request(client, target, prompt, sp, seq=i, timeout=120)

        await asyncio.gather(*(one(i) for i in range(a.conc)))  # warm-up: connections made
        chunks = tokens = 0
        cpu = 0.0
        with quiet_gc():  # (its one full collection before the clock, as a run's)
            for _ in range(a.rounds):
                await asyncio.to_thread(srv.reset)
                if worker is not None:  # the worker's own CPU (its LoopMonitor), not this process's
                    await worker.monitor_start()
                cpu0 = _cpu()
                if prof is not None:
                    prof.enable()
                if turns is not None:
                    turns.on = True
                results = await asyncio.gather(*(one(i) for i in range(a.conc)))
                if turns is not None:
                    turns.on = False
                if prof is not None:
                    prof.disable()
                cpu += _cpu() - cpu0 if worker is None else (await worker.monitor_stop())["cpu_s"] or 0.0
                for r in results:
                    if not r.ok:
                        raise SystemExit(f"request failed: {r.error}")
                    chunks += r.chunks
                    tokens += r.output_tokens or 0
                done = (await asyncio.to_thread(srv.get, "/stats"))["done"]
                if len(done) == len(results):
                    splits.append(split_ttft(results, done, offset))
    if worker is not None:
        await worker.close()
    return cpu, chunks, tokens, splits


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def worker_starts(n: int, variants: list[str]) -> None:
    """CPU of one worker process from start to exit, n times per variant, alternating (module docstring)."""
    envs: list[tuple[str, dict[str, str]]] = [("this tree", {})]
    for v in variants:
        name, _, settings = v.partition(":")
        envs.append((name, dict(kv.split("=", 1) for kv in settings.split(",") if kv)))
    cpu: dict[str, list[float]] = {name: [] for name, _ in envs}
    for _ in range(n):
        for name, extra in envs:
            c0 = _children_cpu()
            subprocess.run(
                [sys.executable, "-m", "ddtree_tui.benchworker"],
                input=b'{"op": "exit"}\n',
                env={**os.environ, **extra},
                check=True,
                stdout=subprocess.DEVNULL,
            )
            cpu[name].append(_children_cpu() - c0)
    load = os.getloadavg()[0]
    print(f"worker start to exit, CPU s (user+sys), {n} alternations, load average {load:.1f} at the end:")
    for name, xs in cpu.items():
        print(f"  {name:12s} median {statistics.median(xs):.3f}  all " + " ".join(f"{x:.3f}" for x in xs))


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
    ap.add_argument("--turns", action="store_true")
    ap.add_argument("--via-worker", action="store_true", help="through one worker process; its CPU")
    ap.add_argument("--worker-starts", type=int, default=0, metavar="N")
    ap.add_argument("--start-variant", action="append", default=[], metavar="NAME:VAR=VALUE")
    a = ap.parse_args()
    if a.worker_starts:
        worker_starts(a.worker_starts, a.start_variant)
        return
    if a.loop == "asyncio":
        os.environ["DDTREE_BENCH_LOOP"] = "asyncio"
    prof = cProfile.Profile() if a.profile else None
    turns = TurnStamps() if a.turns else None
    srv = ExactServer(Config(a.rate, a.tpc, 0.02, incremental=True))
    with srv, asyncio.Runner(loop_factory=new_loop) as runner:
        name = loop_name(runner.get_loop())
        cpu, chunks, tokens, splits = runner.run(_run(srv, a, prof, turns))
    print(
        f"{name}: c={a.conc} {a.rate:g} tok/s × {a.tpc} tok/chunk, {a.rounds} round(s): {chunks} chunks, "
        f"{tokens} tokens, CPU {cpu:.2f} s = {cpu / chunks * 1e6:.1f} µs/chunk, {cpu / tokens * 1e6:.1f} µs/token"
        + (" (under cProfile)" if prof else "")
    )
    for i, s in enumerate(splits, 1):
        print(
            f"  round {i}: TTFT err p50 {s['err_p50']:+.0f} µs = send delay mean {s['send_mean']:.0f} "
            f"(p50 {s['send_p50']:.0f}, p90 {s['send_p90']:.0f}) + read delay mean {s['read_mean']:.0f} "
            f"(p50 {s['read_p50']:.0f}, p90 {s['read_p90']:.0f}) µs"
        )
    if turns is not None:
        print(
            "  "
            + turns.summary()
            + f" (parse: {'after the turn' if getattr(stream_mod, 'defer_parse', bool)() else 'inline'})"
        )
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
