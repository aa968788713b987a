"""Runs a benchmark: warm-up (not counted), repeats, services interleaved A B A B so drift does not favour
one, optional concurrency, then per-prompt × service rows and deltas against a baseline.

Interleaving: at concurrency 1 every prompt goes to each service in turn (p1:A p1:B p2:A p2:B …); at higher
concurrency each service gets a batch of up to N requests in flight, and the services take turns batch by
batch. Services that may share a GPU are therefore never measured at the same time. The dispatch order is
recorded in `BenchRun.order`. Concurrency means concurrency: with fewer prompts than N, the prompts are cycled
so a batch still has N requests in flight (`BenchRun.prompts_cycled`, `requests_per_batch`).

The client watches itself (loadmon.py): its CPU and event-loop lag while the counted requests run; a run the
client could not keep up with is marked `client_bound`. With `workers` > 1 the requests go to that many
child processes (worker.py), round robin, each with its own loop; their monotonic stamps merge as they are.

Events (RunStarted, PromptStarted, TokensReceived, PromptFinished, RunFinished) go to `on_event`, so the
TUI's benchmark pane and the headless reporter show the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ddtree_tui.bench.client import MeasureOpts, measure_request, served_model, server_info
from ddtree_tui.bench.loadmon import LoopMonitor, verdict
from ddtree_tui.bench.metrics import summarize
from ddtree_tui.bench.models import (
    BenchEvent,
    BenchRequest,
    BenchRun,
    BenchTarget,
    BenchUsageError,
    ClientStats,
    PromptFinished,
    PromptInfo,
    PromptStarted,
    RequestResult,
    RunFinished,
    RunStarted,
    SamplingParams,
    TargetInfo,
    TokensReceived,
    request_key,
)
from ddtree_tui.bench.prompts import Prompt, load_prompts
from ddtree_tui.bench.stream import CONNECT_TIMEOUT, StreamClient, StreamError
from ddtree_tui.bench.worker import (
    AUTO,
    NEW_WORKER_WARM_TOKENS,
    PRECONNECT,
    PRECONNECT_SLACK,
    Worker,
    WorkerError,
    plan_workers,
    quiet_gc,
    stream_chunk_rate,
)

R = TypeVar("R")

EventCallback = Callable[[BenchEvent], None]


def plan(
    prompts: Sequence[Prompt], targets: Sequence[BenchTarget], repeats: int, concurrency: int
) -> list[list[tuple[BenchTarget, Prompt, int]]]:
    """The counted requests as batches run one after another; a batch belongs to one service.

    Concurrency 1: one request a batch, services alternating per prompt. Concurrency N: every prompt of a
    repeat to one service in batches of N, services alternating per batch; with fewer than N prompts the
    prompts are cycled to fill the batch (N requests in flight, not len(prompts)).
    """
    batches: list[list[tuple[BenchTarget, Prompt, int]]] = []
    if 0 < len(prompts) < concurrency:
        prompts = [prompts[i % len(prompts)] for i in range(concurrency)]
    for rep in range(repeats):
        if concurrency <= 1:
            for p in prompts:
                for t in targets:
                    batches.append([(t, p, rep)])
        else:
            chunks = [list(prompts[i : i + concurrency]) for i in range(0, len(prompts), concurrency)]
            for chunk in chunks:
                for t in targets:
                    batches.append([(t, p, rep) for p in chunk])
    return batches


# For a service behind an SSH port forward: waits (bounded) until its host is connected again; None when it
# is, else why not. A request that fails on the connection is retried once after the gate lets it through.
Gate = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class RunHooks:
    """What a load ladder or a soak talks to while it runs (not what it measures): where its events go, the
    gates that wait out an SSH drop, where each service runs, and the event that stops it early. One value,
    so the runners and their callers do not each repeat the list."""

    on_event: Callable[[Any], None] | None = None
    gates: Mapping[str, Gate] | None = None
    where: Mapping[str, str] | None = None
    stop: asyncio.Event | None = None
    # before each load level after the first: why the ladder must stop (a target's listener is no longer
    # the service checked at the start, issue 29), or None to go on
    recheck: Callable[[], Awaitable[str | None]] | None = None
    # a soak: the unix time its measuring began (its windows' start_s/end_s count from it), read together
    # with the monotonic clock the windows use, so a server's scrapes line up with them (bench/runextras.py)
    on_measure_start: Callable[[float], None] | None = None
    # whether a request in flight's events are wanted (PromptStarted, TokensReceived: a live view's rows);
    # None: yes
    wants_live: Callable[[], bool] | None = None

    def runner(self, req: BenchRequest, targets: Sequence[BenchTarget]) -> BenchRunner:
        """The per-request machinery for `targets`, reporting through these hooks."""
        return BenchRunner(
            req, targets, self.on_event, gates=self.gates, where=self.where, wants_live=self.wants_live
        )


def _connection_error(err: str | None) -> bool:
    return bool(err) and str(err).startswith("connection")


class BenchRunner:
    """One run; keeps what was measured so an interrupted run can still be reported and saved."""

    def __init__(
        self,
        req: BenchRequest,
        targets: Sequence[BenchTarget],
        on_event: EventCallback | None = None,
        gates: Mapping[str, Gate] | None = None,
        where: Mapping[str, str] | None = None,
        wants_live: Callable[[], bool] | None = None,
    ) -> None:
        if not targets:
            raise BenchUsageError("no services to benchmark")
        refs = [t.ref for t in targets]
        if len(set(refs)) != len(refs):
            raise BenchUsageError(f"a service is listed twice: {', '.join(refs)}")
        if req.baseline and req.baseline not in refs:
            raise BenchUsageError(f"baseline {req.baseline!r} is not among the services ({', '.join(refs)})")
        self.req = req
        self.targets = list(targets)
        self.on_event = on_event
        self.wants_live = wants_live  # asked per request: a viewer may come or go during a run
        self.gates = dict(gates or {})
        self.where = dict(where or {})
        if isinstance(req.prompts, str):
            self.prompts = load_prompts(req.prompts, seed=req.seed)
            self.prompt_set = req.prompts
        else:
            self.prompts = list(req.prompts)
            self.prompt_set = "custom"
        if not self.prompts:
            raise BenchUsageError("no prompts")
        self.run_id = uuid.uuid4().hex[:12]
        self.results: list[RequestResult] = []
        self.warmup_results: list[RequestResult] = []
        self.order: list[str] = []
        self.infos: dict[str, TargetInfo] = {}
        self.busy: dict[str, float] = {}
        self.started_at = datetime.now(UTC)
        self._t0 = time.monotonic()
        self.batches = plan(self.prompts, self.targets, req.repeats, req.concurrency)
        self.total = sum(len(b) for b in self.batches)
        self.prompts_cycled = len(self.prompts) < req.concurrency
        self.per_batch = max(len(b) for b in self.batches)
        self.done = 0
        self.spans: dict[str, list[tuple[float, float]]] = {}  # per service: (send, end) of each request
        self.monitor = LoopMonitor()
        self.workers: list[Worker] = []
        self.workers_reason: str | None = None  # how many client processes, and why (plan_workers)
        self._warm_seq = -1  # warm-ups' dispatch slots count down
        self._rr = itertools.count()
        self.client_stats: ClientStats | None = None

    def _emit(self, ev: BenchEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(ev)
        except Exception:  # a listener's bug must not end the run
            pass

    async def _one(
        self, client: StreamClient, t: BenchTarget, p: Prompt, rep: int, seq: int, warmup: bool
    ) -> RequestResult:
        live = self.on_event is not None and (self.wants_live is None or self.wants_live())
        if live:  # a request in flight, as a live view shows it: made only while one reads it
            self._emit(
                PromptStarted(
                    run_id=self.run_id, service=t.ref, prompt_id=p.id, repeat=rep, seq=seq, warmup=warmup
                )
            )

        def on_tokens(n: int, elapsed: float) -> None:
            self._emit(
                TokensReceived(
                    run_id=self.run_id,
                    service=t.ref,
                    prompt_id=p.id,
                    repeat=rep,
                    seq=seq,
                    warmup=warmup,
                    tokens=n,
                    elapsed_s=elapsed,
                    tok_s=n / elapsed if elapsed > 0 else None,
                )
            )

        sp = self.req.sampling()
        cb = on_tokens if live else None
        gate = self.gates.get(t.ref)
        note = None
        for attempt in range(2):
            if gate is not None:
                note = await gate()  # the host dropped: wait for the reconnect (bounded) before sending
            res, t_send, t_end = await self._measure(client, t, p, sp, rep, seq, warmup, cb)
            if res.ok or gate is None or attempt or note or not _connection_error(res.error):
                break
            await asyncio.sleep(0.5)  # let the transport notice a dropped connection before the gate looks
        if not res.ok and _connection_error(res.error):
            # every connection error names where it went: the URL, and for a forward the host and port
            where = self.where.get(t.ref) or t.base_url
            extra = f"; {note}" if note else ""
            res = res.model_copy(update={"error": f"{res.error} ({where}){extra}"})
        if not warmup:
            self.spans.setdefault(t.ref, []).append((t_send, t_end))
        if not warmup:
            self.results.append(res)
            self.done += 1
        else:
            self.warmup_results.append(res)
        self._emit(PromptFinished(run_id=self.run_id, result=res, done=self.done, total=self.total))
        return res

    async def _measure(
        self,
        client: StreamClient,
        t: BenchTarget,
        p: Prompt,
        sp: SamplingParams,
        rep: int,
        seq: int,
        warmup: bool,
        cb: Callable[[int, float], None] | None,
    ) -> tuple[RequestResult, float, float]:
        """One request, in a worker process or on this loop: (result, send time, end time) on the one
        system-wide monotonic clock."""
        opts = MeasureOpts(
            seq=seq, repeat=rep, warmup=warmup, timeout=self.req.timeout,
            tokens_interval=self.req.tokens_event_interval,
        )  # fmt: skip
        if self.workers:
            # the worker with the fewest requests in flight (round robin among equals), so a closed loop
            # keeps every process at its share of the streams however they end
            k = len(self.workers)
            start = next(self._rr) % k
            w = min((self.workers[(start + i) % k] for i in range(k)), key=lambda x: len(x.pending))
            try:
                return await w.measure(t, p, sp, on_tokens=cb, **opts)
            except WorkerError as e:
                now = time.monotonic()
                res = RequestResult(
                    **request_key(t, p, seq=seq, repeat=rep, warmup=warmup),
                    started_at=time.time(),
                    ok=False,
                    error=str(e),
                    sampling=sp.model_copy(update={"max_new_tokens": p.max_new_tokens or sp.max_new_tokens}),
                )
                return res, now, now
        t_send = time.monotonic()
        res = await measure_request(client, t, p, sp, on_tokens=cb, **opts)
        return res, t_send, _end(t_send, res)

    async def _batch(self, client: StreamClient, batch: list[tuple[BenchTarget, Prompt, int]]) -> None:
        coros = []
        for t, p, rep in batch:
            seq = len(self.order)
            self.order.append(f"{t.ref} {p.id} #{rep + 1}")
            coros.append(self._one(client, t, p, rep, seq, False))
        n0 = len(self.spans.get(batch[0][0].ref, []))
        try:
            await asyncio.gather(*coros)
        finally:
            # the batch's span on the one system-wide monotonic clock: first send to last end, whichever
            # process sent or read them
            ref = batch[0][0].ref
            spans = self.spans.get(ref, [])[n0:]
            if spans:
                span = max(e for _, e in spans) - min(s for s, _ in spans)
                self.busy[ref] = self.busy.get(ref, 0.0) + span

    async def run(self) -> BenchRun:
        self._emit(
            RunStarted(
                run_id=self.run_id,
                total=self.total,
                targets=self.targets,
                prompts=[p.id for p in self.prompts],
                concurrency=self.req.concurrency,
                workers=max(1, self.req.workers),
                prompts_cycled=self.prompts_cycled,
            )
        )
        try:
            if self.req.workers >= 1:
                self.workers_reason = plan_workers(self.req.workers, 0, None)[1]
            if self.req.workers > 1:
                await self._start_workers(self.req.workers)
            async with StreamClient() as client:
                await self.prepare(client)
                # warm-up: not counted (but a failure is recorded); at concurrency N, N at once, so the
                # connection pools (one a worker) are as warm as they will be while measuring
                width = self.per_batch if self.req.concurrency > 1 else 1
                await self._warm(client, width, self.req.warmup, self.req.warmup_tokens or None)
                if self.req.workers == AUTO:
                    # --workers auto: the warm-up's chunk rate × the streams in flight decides; new worker
                    # processes start with their pools filled (preconnect below), or with PRECONNECT off
                    # one more warm-up round of their own
                    n, self.workers_reason = plan_workers(AUTO, width, stream_chunk_rate(self.warmup_results))
                    if n > 1:
                        await self._start_workers(n)
                        await self._warm(
                            client, width, 1, NEW_WORKER_WARM_TOKENS or self.req.warmup_tokens or None
                        )
                await self.preconnect(client, width)
                with quiet_gc():
                    await self._monitor_start()
                    for batch in self.batches:
                        await self._batch(client, batch)
                    await self._monitor_stop()
        finally:
            await asyncio.gather(*(w.close() for w in self.workers), return_exceptions=True)
        return self.build("complete")

    async def preconnect(self, client: StreamClient, width: int) -> None:
        """Before the clock starts: every process that will send holds a connection for each stream it will
        have in flight (`width` over the processes, PRECONNECT_SLACK more), so no measured TTFT includes a
        connect (a warm-up narrower than the level, or worker processes started after it, left too few).
        A connect that fails here is no error: the request that needs it connects, and fails, itself."""
        if not PRECONNECT:
            return
        for t in self.targets:
            if self.workers:
                per = math.ceil(width / len(self.workers) * PRECONNECT_SLACK)
                await asyncio.gather(
                    *(w.preconnect(t.base_url, per) for w in self.workers), return_exceptions=True
                )
            else:
                with contextlib.suppress(StreamError, OSError, TimeoutError):
                    async with asyncio.timeout(CONNECT_TIMEOUT):
                        await client.preconnect(t.base_url, width)

    async def _start_workers(self, n: int) -> None:
        self.workers = [Worker(i) for i in range(n)]
        await asyncio.gather(*(w.start() for w in self.workers))

    async def _warm(
        self, client: StreamClient, width: int, rounds: int, max_tokens: int | None = None
    ) -> None:
        """`rounds` uncounted batches of `width` requests on each target (cut to `max_tokens` new tokens when
        given: short_prompt)."""
        for t in self.targets:
            for i in range(rounds):
                warm = []
                for j in range(width):
                    p = self.prompts[(i * width + j) % len(self.prompts)]
                    if max_tokens is not None:
                        p = self.short_prompt(p, max_tokens)
                    warm.append(self._one(client, t, p, i, self._warm_seq, True))
                    self._warm_seq -= 1
                await asyncio.gather(*warm)

    def short_prompt(self, p: Prompt, max_tokens: int) -> Prompt:
        """`p` asking for at most `max_tokens` new tokens (a warm-up of new worker processes)."""
        return p.model_copy(
            update={"max_new_tokens": min(max_tokens, p.max_new_tokens or self.req.max_new_tokens)}
        )

    async def prepare(self, client: StreamClient) -> None:
        """Before the first request: OpenAI model names and each service's /server_info."""
        if self.req.api != "generate":
            self.targets = [await with_model(client, t, self.req.model) for t in self.targets]
            cur = {t.ref: t for t in self.targets}  # the plan was made before the names were known
            self.batches = [[(cur[t.ref], p, rep) for t, p, rep in b] for b in self.batches]
        for t in self.targets:
            info = await server_info(client, t.base_url)
            self.infos[t.ref] = _target_info(t, info)

    async def _monitor_start(self) -> None:
        self.monitor.start()
        self._t_measure = time.monotonic()
        for w in self.workers:
            with contextlib.suppress(WorkerError):
                await w.monitor_start()

    async def _monitor_stop(self) -> None:
        samples = []
        for w in self.workers:
            with contextlib.suppress(WorkerError, TimeoutError):
                samples.append(await w.monitor_stop())
        await self.monitor.stop()
        self.client_stats = self._verdict([self.monitor.sample(), *samples])

    def _verdict(self, samples: list[dict[str, float | None]]) -> ClientStats:
        tokens = sum(r.output_tokens or 0 for r in self.results if r.ok)
        wall = time.monotonic() - getattr(self, "_t_measure", self._t0)
        if not self.client_stats and self.monitor.running:
            wall = self.monitor.wall_s or wall
        stats = verdict(samples, tokens, wall, workers=max(1, len(self.workers)))
        return stats.model_copy(update={"workers_reason": self.workers_reason})

    def build(self, status: str) -> BenchRun:
        """The run as measured so far (the whole run when complete)."""
        ids = [p.id for p in self.prompts]
        client = self.client_stats
        if client is None and self.monitor.running:  # interrupted: what the runner's own loop saw so far
            client = self._verdict([self.monitor.sample()])
        rows, summary = summarize(self.results, self.targets, ids, self.req.baseline, self.busy)
        sp = self.req.sampling()
        return BenchRun(
            id=self.run_id,
            status=status,  # type: ignore[arg-type]
            started_at=self.started_at,
            finished_at=datetime.now(UTC),
            wall_s=time.monotonic() - self._t0,
            prompt_set=self.prompt_set,
            prompts=[PromptInfo.model_validate(p, from_attributes=True) for p in self.prompts],
            sampling=sp,
            repeats=self.req.repeats,
            warmup=self.req.warmup,
            warmup_tokens=self.req.warmup_tokens,
            concurrency=self.req.concurrency,
            timeout=self.req.timeout,
            targets=[self.infos.get(t.ref) or _target_info(t, None) for t in self.targets],
            baseline=self.req.baseline,
            order=list(self.order),
            results=sorted(self.results, key=lambda r: r.seq),
            rows=rows,
            summary=summary,
            failed=sum(1 for r in self.results if not r.ok),
            aborted=sum(1 for r in self.results if r.aborted),
            warmup_failed=sum(1 for r in self.warmup_results if not r.ok),
            requests_per_batch=self.per_batch,
            prompts_cycled=self.prompts_cycled,
            client=client,
            client_bound=bool(client and client.client_bound),
            seed=self.req.seed,
        )


def _end(t_send: float, res: RequestResult) -> float:
    """When the request ended by its own stamps (the read of its last chunk), not when its result was built:
    requests that end together are scored one after the other, and that queue is not the server's time."""
    return t_send + res.e2e_s if res.e2e_s is not None else time.monotonic()


async def with_model(client: StreamClient, t: BenchTarget, model: str | None) -> BenchTarget:
    """The target with the OpenAI "model" name: --model, else the target's own, else /v1/models' first."""
    name = model or t.model or await served_model(client, t.base_url)
    return t.model_copy(update={"model": name}) if name else t


def _target_info(t: BenchTarget, info: dict[str, Any] | None) -> TargetInfo:
    info = info or {}
    return TargetInfo(
        ref=t.ref,
        base_url=t.base_url,
        algorithm=t.algorithm,
        mode=t.mode,
        speculative_algorithm=info.get("speculative_algorithm"),
        model_path=info.get("model_path") or t.model,
        server_version=str(info["version"]) if info.get("version") is not None else None,
        simulated=bool(info["simulated"]) if "simulated" in info else (False if info else None),
        argv=t.argv,
        gpus=t.gpus,
        telemetry=t.telemetry,
        server_args=_server_args(info),
        identity=t.identity,
    )


# the serving settings of /server_info worth keeping beside a result (besides every speculative_* key)
SERVER_ARG_KEYS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "pp_size",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "attention_backend",
    "mem_fraction_static",
    "max_running_requests",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "page_size",
    "context_length",
    "stream_interval",
    "incremental_streaming_output",
)


def _server_args(info: dict[str, Any]) -> dict[str, Any] | None:
    out = {
        k: v
        for k, v in info.items()
        if (k in SERVER_ARG_KEYS or k.startswith("speculative_")) and isinstance(v, str | int | float | bool)
    }
    return out or None


async def run_bench(
    req: BenchRequest,
    targets: Sequence[BenchTarget],
    on_event: EventCallback | None = None,
    stop: asyncio.Event | None = None,
    gates: Mapping[str, Gate] | None = None,
    where: Mapping[str, str] | None = None,
    wants_live: Callable[[], bool] | None = None,
) -> BenchRun:
    """Run the benchmark. Setting `stop` (or cancelling) ends it early: requests in flight are abandoned and
    the run returned so far has status "interrupted" (cancellation re-raises after emitting RunFinished).
    `gates` (by service ref) hold requests to a host whose SSH connection dropped until it is back;
    `where` describes a service's route for connection errors ("http://127.0.0.1:N -> host:port over ssh");
    `wants_live` whether a request in flight's events (PromptStarted, TokensReceived) are made (None:
    always)."""
    runner = BenchRunner(req, targets, on_event, gates=gates, where=where, wants_live=wants_live)

    def finished(run: BenchRun) -> None:
        runner._emit(RunFinished(run=run))

    run = await until_stopped(runner.run(), stop, lambda: runner.build("interrupted"), finished)
    finished(run)
    return run


async def until_stopped(
    work: Awaitable[R],
    stop: asyncio.Event | None,
    interrupted: Callable[[], R],
    on_cancel: Callable[[R], None] | None = None,
) -> R:
    """`work`'s result, or `interrupted()` once `stop` is set (work cancelled first, so what it measured is
    final). Cancelling the caller cancels `work`, hands `interrupted()` to `on_cancel` and re-raises: the
    one stop/teardown of a plain run, a load ladder and a soak."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        await asyncio.wait({task} | ({stopper} if stopper else set()), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if on_cancel is not None:
            on_cancel(interrupted())
        raise
    finally:
        if stopper is not None:
            stopper.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    return interrupted()
