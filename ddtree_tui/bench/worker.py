"""Client worker processes: when one event loop cannot keep up, the runner spreads requests over several.

The way established load generators do it (wrk's threads, locust's workers, k6's VUs over cores): each worker
is a child process (`python -m ddtree_tui.benchworker`) with its own event loop and connection pool; the
runner sends it jobs and gets each request's RequestResult back, one JSON line each way over its pipes.

Clocks: every duration (TTFT, ITL, e2e, tok/s) is measured inside the process that read the socket, so none
crosses a process. What does cross is when a request was sent and ended (for the aggregate throughput and
the service's busy time): those are `time.monotonic()`, which on Linux is CLOCK_MONOTONIC, one system-wide
clock that every process of the machine reads alike, so the runner merges the workers' stamps with its own
as they are, without an offset. (Unix times, `started_at`, are for people, never for arithmetic.)

How many (`plan_workers`, `--workers auto`, the default): one process reads chunks until its loop falls
behind, and what it costs is per chunk, so the client plans the chunk rate it will read (streams in flight ×
the chunks/s one stream brought in the warm-up) and gives every PER_WORKER_CHUNKS_S of it a process, and
every PER_WORKER_STREAMS of the streams too (requests started together wait for each other in one loop:
their TTFT), whichever needs more, never more than the cores it may run on (os.sched_getaffinity) or the streams in flight. `--workers N` overrides.
The run records how many and why (ClientStats.workers_reason).

Inside each process (`quiet_gc`, `new_loop`): the objects made before the run are frozen out of the garbage
collector and its first generation is collected less often, so a full collection over a run's results
does not stall the loop while chunks arrive; a worker runs on uvloop (bench/evloop.py), as the runner's own
process does. Each can be turned off for a side-by-side measurement (DDTREE_BENCH_GC=default, DDTREE_BENCH_LOOP=asyncio).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, Unpack

import orjson

from ddtree_tui.bench.client import MeasureOpts, TokensCallback, measure_raw, prepare, to_result
from ddtree_tui.bench.evloop import loop_name, new_loop
from ddtree_tui.bench.loadmon import LoopMonitor
from ddtree_tui.bench.stream import CONNECT_TIMEOUT, StreamClient, StreamError
from ddtree_tui.bench.zygote import ForkedProcess, boot_mode, spawn_worker
from ddtree_tui.lib.heap import froze_more, frozen_by_app
from ddtree_tui.lib.jsontypes import JsonObject

if TYPE_CHECKING:  # the runner's side only: a worker process imports no request or result model
    from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams
    from ddtree_tui.bench.prompts import Prompt

STREAM_LIMIT = 16 * 1024 * 1024
# What one process takes on, measured side by side on a 16-core host against the exact server
# (benchmarks/results/issue-26-peers-16core.md, fifth and sixth device runs): the client stamps every ready
# socket of a loop turn before parsing any, so one process reads 16000 chunks/s (c=64 × 250 chunks/s in one
# process: e2e +0.04 %, TTFT +0.39 ms) about as well as four of 4000 did, at 0.6 of their CPU; but at c=256
# sixteen processes of 16 streams read TTFT +0.47 and +0.61 ms in two runs where eight of 32 read +0.64,
# +1.72 and +2.18 ms in three (AIPerf: +0.47..+0.95), for 1.5× the CPU. So a process for each share of the
# chunk rate and for each share of the streams in flight, whichever needs more: accuracy first.
# DDTREE_BENCH_CHUNKS_PER_WORKER and DDTREE_BENCH_STREAMS_PER_WORKER set other shares, for side-by-side runs.
PER_WORKER_CHUNKS_S = float(os.environ.get("DDTREE_BENCH_CHUNKS_PER_WORKER") or 16000.0)
PER_WORKER_STREAMS = float(os.environ.get("DDTREE_BENCH_STREAMS_PER_WORKER") or 16.0)
# a planned rate this little over a whole number of shares needs no process more: the warm-up's chunk rate is
# measured (16 streams × 250.06 chunks/s = 4001 gave c=16 × 250 chunks/s a second process, issue 26)
PLAN_SLACK = 0.05
MAX_WORKERS = 64
AUTO = 0  # BenchRequest.workers: 0 = choose (`--workers auto`)
# DDTREE_BENCH_PRECONNECT=1: before a measured phase each sending process opens a connection per stream it
# will have in flight, this much over its share (runner.py preconnect). Off by default: on a 16-core host it
# made TTFT worse, not better (benchmarks/peers.py side by side, c=256 × 4 tok/chunk, three runs: +1.33..+1.86
# ms with it, +0.63..+0.79 ms without; c=64 × 1 tok/chunk: +0.25/+0.81 with, +0.14/+0.23 without; issue 26)
PRECONNECT = os.environ.get("DDTREE_BENCH_PRECONNECT", "0") == "1"
PRECONNECT_SLACK = 1.25
# new worker processes warm up on one round of the level's width, cut as the level's own warm-up is
# (BenchRequest.warmup_tokens); DDTREE_BENCH_NEW_WORKER_WARM_TOKENS=N cuts it to N new tokens instead
NEW_WORKER_WARM_TOKENS = int(os.environ.get("DDTREE_BENCH_NEW_WORKER_WARM_TOKENS") or 0) or None


GC_GEN0 = 50_000  # allocations between young collections while measuring (Python's default: 2000)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """While measuring: what exists now is frozen out of the collector and young collections are rarer
    (cycles made during the run are still collected); restored after. Frozen as it is, without a full
    collection first: at a `--run-bench` start that pass found 42 garbage objects among 46,000 and cost
    20 ms, 0.4 µs a token of a poisson run's CPU (issue 26); the few it would free are freed after the run.

    Where the process has frozen its heap already, other than a headless mode's imports (lib/heap.py; the TUI
    does, after its start, and collects between its frames: ui/gcpolicy.py), its policy is left as it is: no
    full collection on the app's loop at a run's start, no raised young threshold (it made young collections
    of 77-99 ms inside the app), and no `unfreeze` at its end, which would put the app's frozen objects back
    into every later full collection."""
    if os.environ.get("DDTREE_BENCH_GC") == "default" or frozen_by_app():
        yield
        return
    old = gc.get_threshold()
    gc.freeze()
    froze_more()
    gc.set_threshold(max(old[0], GC_GEN0), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def usable_cores() -> int:
    """The cores this process may run on (its affinity, e.g. a container's cpuset), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def stream_chunk_rate(results: Iterable[RequestResult]) -> float | None:
    """Chunks per second one stream brought (median over successful requests: chunks after the first /
    time after the first chunk); None without a streamed request to tell."""
    rates = [
        (r.chunks - 1) / (r.e2e_s - r.ttft_s)
        for r in results
        if r.ok and r.chunks > 1 and r.e2e_s is not None and r.ttft_s is not None and r.e2e_s > r.ttft_s
    ]
    return statistics.median(rates) if rates else None


def plan_workers(
    requested: int, in_flight: float, chunk_rate: float | None, cores: int | None = None
) -> tuple[int, str]:
    """How many client processes, and why in words: `requested` when given (>= 1), else one per
    PER_WORKER_CHUNKS_S of the planned chunk rate (in_flight × chunk_rate) or one per PER_WORKER_STREAMS of
    the streams in flight, whichever is more (PLAN_SLACK of a share over is still that share), at most the
    usable cores but one and the streams in flight. 1 means this process alone (no worker processes).

    The core left over is for what else runs beside the workers: this process (it sends their jobs and
    gathers their results), the zygote, an SSH forward's loop, a server on the same host. On 2 cores two
    client processes beside a local server read TTFT no better than one (issue 26, since streams are read on
    a tick: +0.95/+0.96 ms at c=64 × 1 token a chunk, +0.50/+0.44 at × 4) for a quarter more CPU."""
    if requested >= 1:
        return requested, f"--workers {requested}"
    cores = cores or usable_cores()
    if chunk_rate is None or in_flight <= 0:
        return 1, "auto: one process (no warm-up stream to measure the chunk rate by)"
    planned = in_flight * chunk_rate
    need = max(
        1,
        math.ceil(planned / PER_WORKER_CHUNKS_S - PLAN_SLACK),
        math.ceil(in_flight / PER_WORKER_STREAMS - PLAN_SLACK),
    )
    n = max(1, min(need, cores - 1, math.ceil(in_flight), MAX_WORKERS))
    why = (
        f"auto: {in_flight:g} streams × {chunk_rate:.0f} chunks/s = {planned:.0f} chunks/s planned, one "
        f"process per {PER_WORKER_CHUNKS_S:.0f} chunks/s and per {PER_WORKER_STREAMS:g} streams"
    )
    if n < need:
        why += (
            f" (wanted {need}; {cores} usable cores, one left for the rest)"
            if n == max(1, cores - 1)
            else f" (wanted {need})"
        )
    return n, why


# How a worker process starts: `python -m ddtree_tui.benchworker` (see its docstring). The protocol carries
# what a request sends (its URL, body, headers, API and max_new_tokens, built by the runner: client.prepare)
# and what it measured (client.measure_raw's fields, made a RequestResult by the runner: client.to_result),
# so a worker process imports no request or result model: its start is the stream client's imports.
WORKER_MODULE = "ddtree_tui.benchworker"


class WorkerError(RuntimeError):
    """A worker process died or broke the protocol."""


class WorkerProc(Protocol):
    """What Worker uses of its process: an asyncio subprocess (exec'd) or a zygote's fork (bench/zygote.py)."""

    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...
    @property
    def stdout(self) -> asyncio.StreamReader | None: ...
    @property
    def stderr(self) -> asyncio.StreamReader | None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...


class Worker:
    """The runner's handle on one worker process."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: WorkerProc | None = None
        self.pending: dict[int, asyncio.Future[tuple[JsonObject, float, float]]] = {}
        self.on_tokens: dict[int, TokensCallback] = {}
        self.monitor: asyncio.Future[dict[str, Any]] | None = None
        self.connected: asyncio.Future[dict[str, Any]] | None = None
        self.err_tail = b""
        self._reader: asyncio.Task[None] | None = None
        self._err_reader: asyncio.Task[None] | None = None
        self._next = 0

    async def start(self) -> None:
        """Forked from a zygote (bench/zygote.py), or with DDTREE_BENCH_WORKER_BOOT=exec|plain its own
        `python -m ddtree_tui.benchworker`."""
        if boot_mode() == "zygote":
            self.proc = await spawn_worker(STREAM_LIMIT)
        else:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                WORKER_MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=STREAM_LIMIT,
            )
        self._reader = asyncio.ensure_future(self._read())
        self._err_reader = asyncio.ensure_future(self._read_err())

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        if self.proc.returncode is not None or self.proc.stdin.is_closing():
            raise WorkerError(self._died())
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")

    def _died(self) -> str:
        rc = self.proc.returncode if self.proc is not None else None
        tail = self.err_tail.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return f"client worker {self.index} exited ({rc}){': ' + tail[0] if tail[0] else ''}"

    async def _read_err(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(4096):
            self.err_tail = (self.err_tail + chunk)[-4096:]

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                msg = orjson.loads(line)
                op = msg.get("op")
                if op == "result":
                    fut = self.pending.pop(msg["id"], None)
                    self.on_tokens.pop(msg["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result((msg["fields"], msg["t_send"], msg["t_end"]))
                elif op == "tokens":
                    cb = self.on_tokens.get(msg["id"])
                    if cb is not None:
                        cb(msg["n"], msg["elapsed"])
                elif op == "monitor" and self.monitor is not None and not self.monitor.done():
                    self.monitor.set_result(msg["sample"])
                elif op == "connected" and self.connected is not None and not self.connected.done():
                    self.connected.set_result(msg)
        except (ValueError, KeyError) as e:
            self._fail(f"client worker {self.index} sent a bad line: {e}")
            return
        if self.proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self.proc.wait()
        if self._err_reader is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    await self._err_reader
        self._fail(self._died())

    def _fail(self, why: str) -> None:
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(WorkerError(why))
        self.pending.clear()
        for f in (self.monitor, self.connected):
            if f is not None and not f.done():
                f.set_exception(WorkerError(why))

    async def measure(
        self,
        target: BenchTarget,
        prompt: Prompt,
        sp: SamplingParams,
        *,
        on_tokens: TokensCallback | None,
        **opts: Unpack[MeasureOpts],
    ) -> tuple[RequestResult, float, float]:
        """One request in this worker: its result and its send and end times (system-wide monotonic)."""
        url, payload, sp = prepare(target, prompt, sp)
        self._next += 1
        jid = self._next
        fut: asyncio.Future[tuple[JsonObject, float, float]] = asyncio.get_running_loop().create_future()
        self.pending[jid] = fut
        if on_tokens is not None:
            self.on_tokens[jid] = on_tokens
        self._send(
            {
                "op": "job",
                "id": jid,
                "url": url,
                "payload": payload.decode(),
                "headers": target.headers or None,
                "api": sp.api,
                "max_new_tokens": sp.max_new_tokens,
                "timeout": opts["timeout"],
                "tokens_interval": opts["tokens_interval"],
                "tokens": on_tokens is not None,
            }
        )
        try:
            fields, t_send, t_end = await fut
        finally:
            self.pending.pop(jid, None)
            self.on_tokens.pop(jid, None)
        res = to_result(
            fields, target, prompt, sp, seq=opts["seq"], repeat=opts["repeat"], warmup=opts["warmup"]
        )
        return res, t_send, t_end

    async def preconnect(self, url: str, n: int, timeout: float = 30.0) -> tuple[int, str]:
        """Have this worker's pool hold `n` idle connections to `url` (StreamClient.preconnect): how many it
        holds, and which event loop the worker runs on (bench/evloop.py loop_name). A failed connect is no
        error here (the request that needs one connects, and fails, itself): the count says it."""
        self.connected = asyncio.get_running_loop().create_future()
        self._send({"op": "connect", "url": url, "n": n})
        async with asyncio.timeout(timeout):
            msg = await self.connected
        return int(msg["n"]), str(msg["loop"])

    async def monitor_start(self) -> None:
        self._send({"op": "monitor_start"})

    async def monitor_stop(self) -> dict[str, float | None]:
        self.monitor = asyncio.get_running_loop().create_future()
        self._send({"op": "monitor_stop"})
        async with asyncio.timeout(10):
            return await self.monitor

    async def close(self) -> None:
        p = self.proc
        if p is None:
            return
        if p.returncode is None:
            with contextlib.suppress(Exception):
                self._send({"op": "exit"})
                assert p.stdin is not None
                p.stdin.close()
            try:
                async with asyncio.timeout(2):
                    await p.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                await p.wait()
        for t in (self._reader, self._err_reader):
            if t is not None:
                t.cancel()
                with contextlib.suppress(BaseException):
                    await t
        if isinstance(p, ForkedProcess):
            await p.zygote.settle()  # an exec'd zygote ends with its last worker, and is waited for


async def _worker_main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    mon = LoopMonitor()
    tasks: set[asyncio.Task[None]] = set()

    def send(msg: dict[str, Any]) -> None:
        out.write(orjson.dumps(msg, option=orjson.OPT_NON_STR_KEYS) + b"\n")  # a histogram has int keys
        out.flush()

    async def job(client: StreamClient, m: dict[str, Any]) -> None:
        jid = m["id"]
        cb: Callable[[int, float], None] | None = None
        if m["tokens"]:

            def cb(n: int, elapsed: float) -> None:
                send({"op": "tokens", "id": jid, "n": n, "elapsed": elapsed})

        fields, t_send = await measure_raw(
            client,
            m["url"],
            m["payload"].encode(),
            m["headers"],
            m["api"],
            m["max_new_tokens"],
            timeout=m["timeout"],
            on_tokens=cb,
            tokens_interval=m["tokens_interval"],
        )
        e2e = fields.get("e2e_s")
        t_end = t_send + e2e if isinstance(e2e, float) else time.monotonic()  # its own stamps
        send({"op": "result", "id": jid, "fields": fields, "t_send": t_send, "t_end": t_end})

    async with StreamClient() as client:
        while line := await reader.readline():
            m = orjson.loads(line)
            op = m.get("op")
            if op == "job":
                t = asyncio.ensure_future(job(client, m))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            elif op == "connect":
                held = 0
                with contextlib.suppress(StreamError, OSError, TimeoutError):
                    async with asyncio.timeout(CONNECT_TIMEOUT):
                        await client.preconnect(m["url"], m["n"])
                held = client.idle_count(m["url"])
                send({"op": "connected", "n": held, "loop": loop_name(loop)})
            elif op == "monitor_start":
                mon.start()
            elif op == "monitor_stop":
                await mon.stop()
                send({"op": "monitor", "sample": mon.sample()})
            elif op == "exit":
                break
        for t in list(tasks):
            t.cancel()


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt), quiet_gc(), asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(_worker_main())


def forked_main() -> None:
    """A worker forked from a zygote (bench/zygote.py): main's GC policy, except that the inherited heap is
    frozen without a collection first (a collection would walk, and so copy, every page the fork shares)."""
    if os.environ.get("DDTREE_BENCH_GC") != "default":
        gc.freeze()
        gc.set_threshold(max(gc.get_threshold()[0], GC_GEN0), *gc.get_threshold()[1:])
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(_worker_main())


if __name__ == "__main__":
    main()
