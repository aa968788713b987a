"""Load shapes (`--load`): a ladder of levels, each measured on every service, services interleaved.

At each level every service runs `rounds` segments in turn (A B A B …: two rounds when there is more than
one service), so a drift in the machine hits them alike. A segment is either

- closed loop (sync, concurrency:N, sweep): N requests kept in flight, a finished one replaced at once; or
- open loop (rate:R, poisson:R): requests sent at R per second whatever is in flight (even spacing, or
  exponential gaps from a seeded generator), capped at MAX_IN_FLIGHT outstanding;

and lasts `--requests N` counted requests or `--duration S` seconds per service per level (split over the
rounds). Before each level each service gets `warmup` uncounted requests at that level's width.

Workloads (issue 26, bench/workloads/): an open loop's send times come from arrivals.py (rate, poisson,
gamma, ramp; a trace's timestamps / speed, each service replaying the whole trace, one round); each send's
lag behind its planned time is logged, `--max-concurrency` caps what is in flight, `--cancel` aborts a
seeded share of the requests after a delay (counted apart, never failed). What was planned and what was
done is `LoadRun.workload`.

Saturation (the stop of a ladder, and the knee) is defined in levels.py, with the level statistics. What each
level reached is counted here (`_Flight`: requests in flight over time, sends) and judged there: a level that
did not reach what was asked is shown as such and never used for saturation or the knee.
When every service is saturated at a level the ladder stops there (unless `stop_on_saturation` is off);
a service's knee is the last level before its first saturated one.

The per-request machinery (workers, gates for SSH drops, events) is BenchRunner's: one runner serves the
whole ladder, so the TUI gets the same PromptStarted / PromptFinished events plus LevelStarted /
LevelFinished.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ddtree_tui.bench import stats
from ddtree_tui.bench.levels import (
    LevelDelta,
    LevelResult,
    LevelService,
    compare,
    knee_verdict,
    level_delta,
    level_service,
    saturation,
    with_reach,
)
from ddtree_tui.bench.load import LoadSpec, Slo
from ddtree_tui.bench.models import (
    BenchRequest,
    BenchTarget,
    BenchUsageError,
    ClientStats,
    PromptCancelled,
    RequestResult,
    TargetInfo,
)
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.results import LevelFinished, LevelStarted, LoadFinished, LoadRun
from ddtree_tui.bench.runner import RunHooks, until_stopped
from ddtree_tui.bench.saturation import DEFAULT_ALPHA, DEFAULT_WINDOW, level_test
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.windows import SaturationTest
from ddtree_tui.bench.worker import (
    AUTO,
    NEW_WORKER_WARM_TOKENS,
    Worker,
    plan_workers,
    quiet_gc,
    stream_chunk_rate,
)
from ddtree_tui.bench.workloads import arrivals, cancel
from ddtree_tui.bench.workloads.base import WorkloadError
from ddtree_tui.bench.workloads.record import (
    CancelledRequest,
    CancelStats,
    ScheduleLog,
    ScheduleStats,
    TraceInfo,
    WorkloadRecord,
)
from ddtree_tui.bench.workloads.trace import Trace, load_trace

MAX_IN_FLIGHT = 512


class LoadSettings(BaseModel):
    """How long a ladder measures each level (`duration_s` or `requests` per service per level; neither: a
    count from the level's width), the SLO of its goodput, and whether saturation stops it."""

    model_config = ConfigDict(frozen=True)

    duration_s: float | None = None
    requests: int | None = None
    slo: Slo | None = None
    stop_on_saturation: bool = True
    # issue 26 (w-server): which test marks a level saturated (bench/saturation.py for "trend")
    saturation_test: Literal["fixed", "trend", "either"] = "fixed"
    saturation_alpha: float = DEFAULT_ALPHA
    saturation_window: int = DEFAULT_WINDOW


class _Flight:
    """What one service reached at one level: requests in flight over time (time-weighted mean, max) and the
    sends of each segment (for the rate an open loop actually sent)."""

    def __init__(self) -> None:
        self.now = 0
        self.top = 0
        self.area = 0.0  # Σ in-flight × seconds over the segments
        self.span = 0.0  # Σ segment length (first send → last end)
        self.sent = 0  # sends after a segment's first
        self.send_span = 0.0  # Σ first send → last send
        self._t = 0.0
        self._seg: tuple[float, float, float, int] | None = None  # first send, last send, last end, sends

    def _tick(self, t: float) -> None:
        self.area += self.now * (t - self._t)
        self._t = t

    def enter(self) -> None:
        t = time.monotonic()
        if self._seg is None:
            self._t = t
            self._seg = (t, t, t, 0)
        self._tick(t)
        a, _, c, n = self._seg
        self._seg = (a, t, c, n + 1)
        self.now += 1
        self.top = max(self.top, self.now)

    def leave(self) -> None:
        t = time.monotonic()
        self._tick(t)
        self.now -= 1
        if self._seg is not None:
            a, b, _, n = self._seg
            self._seg = (a, b, t, n)

    def close_segment(self) -> None:
        if self._seg is not None:
            a, b, c, n = self._seg
            self.span += max(0.0, c - a)
            self.sent += n - 1
            self.send_span += b - a
        self._seg = None

    def reached(self, ls: LevelService, closed_loop: bool, width: int) -> LevelService:
        """`ls` with what was asked, what was reached, and the judgement (levels.with_reach)."""
        upd: dict[str, Any] = {
            "max_in_flight": self.top,
            "mean_in_flight": self.area / self.span if self.span > 0 else float(self.top),
        }
        if closed_loop:
            upd["target_concurrency"] = width
        else:
            upd["sent_rate"] = self.sent / self.send_span if self.sent > 0 and self.send_span > 0 else None
        return with_reach(ls.model_copy(update=upd))


class LoadRunner:
    """One ladder; keeps what was measured so Ctrl-C still reports every finished level."""

    def __init__(
        self,
        req: BenchRequest,
        targets: Sequence[BenchTarget],
        load: LoadSpec,
        settings: LoadSettings | None = None,
        hooks: RunHooks | None = None,
    ) -> None:
        self.settings = settings = settings or LoadSettings()
        hooks = hooks or RunHooks()
        trace_file = getattr(req, "trace", None)
        if load.kind == "trace" and trace_file and req.prompts != f"trace:{trace_file}":
            req = req.model_copy(update={"prompts": f"trace:{trace_file}"})  # the trace's own prompts
        if settings.duration_s is not None and settings.requests is not None:
            raise ValueError("give --duration or --requests, not both")
        self.runner = hooks.runner(req, targets)
        self._recheck = hooks.recheck
        self.req = req
        self.load = load
        self.rounds = 2 if len(targets) > 1 else 1
        self.levels: list[LevelResult] = []
        self.stopped: str | None = None
        self.started_at = datetime.now(UTC)
        self.saturation_tests: list[SaturationTest] = []  # issue 26: the trend test, per level × service
        self._t0 = time.monotonic()
        self.id = self.runner.run_id
        self._rng = random.Random(load.seed if load.seed is not None else 0)
        self._next = 0
        self.current: tuple[int, LevelStarted] | None = None
        self._label = ""
        self._cur_level = 0.0
        self._flights: dict[str, _Flight] = {}
        self._picker: cancel.Picker | None = None
        # the client's CPU and loop lag, each level's measured part
        self._client_levels: list[ClientStats] = []
        self._workload_init(req, load)

    @property
    def prompts(self) -> list[Prompt]:
        return self.runner.prompts

    def _emit(self, ev: Any) -> None:
        self.runner._emit(ev)

    def _budget(self, level: float) -> int | None:
        """Counted requests per service per level (None: by duration, or a ramp's or trace's own end)."""
        if self.settings.duration_s is not None:
            return None
        if self.load.kind in ("ramp", "trace"):
            return self.settings.requests
        if self.settings.requests is not None:
            return self.settings.requests
        return max(2 * int(level), 4) if self.load.closed_loop else max(8, int(4 * level))

    def _prompt(self) -> Prompt:
        p = self.prompts[self._next % len(self.prompts)]
        self._next += 1
        return p

    async def _closed(
        self,
        client: StreamClient,
        t: BenchTarget,
        width: int,
        n: int | None,
        deadline: float | None,
        rnd: int,
    ) -> None:
        issued = 0

        async def lane() -> None:
            nonlocal issued
            while (n is None or issued < n) and (deadline is None or time.monotonic() < deadline):
                issued += 1
                await self._send(client, t, self._prompt(), rnd)

        await asyncio.gather(*(lane() for _ in range(width)))

    async def _open(
        self,
        client: StreamClient,
        t: BenchTarget,
        rate: float,
        n: int | None,
        deadline: float | None,
        rnd: int,
    ) -> None:
        tasks: set[asyncio.Task[Any]] = set()
        issued = 0
        t0 = time.monotonic()
        cap = min(MAX_IN_FLIGHT, self._max_conc or MAX_IN_FLIGHT)
        log = self._sched_log(t)
        try:
            for off in self._offsets(rate):
                at = t0 + off
                if not ((n is None or issued < n) and (deadline is None or at < deadline)):
                    break
                log.plan(off)
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                while len(tasks) >= cap:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                task = asyncio.ensure_future(self._send(client, t, self._prompt(), rnd, planned=at))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                issued += 1
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _send(
        self, client: StreamClient, t: BenchTarget, p: Prompt, rnd: int, planned: float | None = None
    ) -> None:
        r = self.runner
        seq = len(r.order)
        r.order.append(f"{t.ref} {p.id} {self._label} r{rnd + 1}")
        if planned is not None:
            self._sched_log(t).sent(time.monotonic() - planned)
        flight = self._flights.setdefault(t.ref, _Flight())
        flight.enter()
        try:
            if self._picker is not None and self._picker.pick():
                await self._cancellable(client, t, p, rnd, seq)
                return
            await r._one(client, t, p, rnd, seq, False)
        finally:
            flight.leave()
        # tag the result just appended with its level (the runner appends counted results in order of end)
        for i in range(len(r.results) - 1, -1, -1):
            if r.results[i].seq == seq:
                r.results[i] = r.results[i].model_copy(update={"level": self._cur_level, "round": rnd})
                break

    async def _warmup(
        self, client: StreamClient, t: BenchTarget, width: int, max_tokens: int | None = None
    ) -> None:
        # a trace's warm-up would fill the very prefix cache the replay measures
        if self.req.warmup <= 0 or self.load.kind == "trace":
            return
        n = self.req.warmup * max(1, min(width, 64))
        r = self.runner
        coros = []
        for i in range(n):
            p = self.prompts[i % len(self.prompts)]
            p = r.short_prompt(p, max_tokens) if max_tokens is not None else p
            coros.append(r._one(client, t, p, i, -1 - i, True))
        for i in range(0, len(coros), max(1, width)):
            await asyncio.gather(*coros[i : i + max(1, width)])

    async def _auto_workers(
        self, client: StreamClient, level: float, width: int, warm: list[RequestResult]
    ) -> None:
        """--workers auto: this level's planned chunk rate (streams in flight × a warm-up stream's chunks/s;
        open loop: in flight = rate × a warm-up request's e2e) decides how many worker processes; more are
        started (never fewer: a ladder climbs) and warmed with one more warm-up of their own (its requests cut
        to NEW_WORKER_WARM_TOKENS where set); their pools are filled before the level's clock starts (runner.py
        preconnect)."""
        r = self.runner
        in_flight = float(width)
        if not self.load.closed_loop:
            e2es = [x.e2e_s for x in warm if x.ok and x.e2e_s]
            in_flight = min(MAX_IN_FLIGHT, level * statistics.median(e2es)) if e2es else 0.0
        n, why = plan_workers(AUTO, in_flight, stream_chunk_rate(warm))
        if n <= max(1, len(r.workers)):
            if not r.workers:
                r.workers_reason = why
            return
        r.workers_reason = why
        new = [Worker(i) for i in range(len(r.workers), n)]
        await asyncio.gather(*(w.start() for w in new))
        r.workers.extend(new)
        for t in r.targets:
            await self._warmup(client, t, width, NEW_WORKER_WARM_TOKENS or self.req.warmup_tokens or None)

    async def _level(self, client: StreamClient, idx: int, level: float) -> LevelResult:
        r = self.runner
        label = self.load.label(level)
        self._label, self._cur_level = label, level
        ev = LevelStarted(run_id=self.id, index=idx, count=len(self.load.levels), level=level, label=label)
        self.current = (idx, ev)
        self._emit(ev)
        started = datetime.now(UTC)
        t_level = time.monotonic()
        width = int(level) if self.load.closed_loop else max(1, int(level))
        n_warm = len(r.warmup_results)
        for t in r.targets:
            await self._warmup(client, t, width, self.req.warmup_tokens or None)
        if self.req.workers == AUTO and self._cancel is None:  # a cancel closes requests on this loop only
            await self._auto_workers(client, level, width, r.warmup_results[n_warm:])
        await r.preconnect(client, width)
        busy: dict[str, float] = {}
        self._flights = {t.ref: _Flight() for t in r.targets}
        seg_thr: dict[str, list[float]] = {}
        n_total = self._budget(level)
        await r._monitor_start()  # the client's CPU of the measured part (warm-up and worker starts excluded)
        for rnd in range(self.rounds):
            for t in r.targets:
                n = None if n_total is None else max(1, -(-n_total // self.rounds))
                if n_total is not None and rnd == self.rounds - 1:
                    n = max(1, n_total - (self.rounds - 1) * -(-n_total // self.rounds))
                deadline = (
                    time.monotonic() + self.settings.duration_s / self.rounds
                    if self.settings.duration_s is not None
                    else None
                )
                # every service of a round sees the same arrivals and the same prompts in the same order
                self._rng = random.Random(hash((self._arrival_seed, idx, rnd)))
                if self._cancel is not None:  # and the same requests cancelled
                    self._picker = cancel.Picker(self._cancel, f"{self._seed}:{idx}:{rnd}")
                self._next = rnd * 7919
                k0 = len(r.spans.get(t.ref, []))
                res0 = {x.seq for x in r.results}
                if self.load.closed_loop:
                    await self._closed(client, t, width, n, deadline, rnd)
                else:
                    await self._open(client, t, level, n, deadline, rnd)
                self._flights[t.ref].close_segment()
                spans = r.spans.get(t.ref, [])[k0:]
                if spans:
                    span = max(e for _, e in spans) - min(s for s, _ in spans)
                    busy[t.ref] = busy.get(t.ref, 0.0) + span
                    toks = sum(
                        x.output_tokens or 0
                        for x in r.results
                        if x.seq not in res0 and x.service == t.ref and x.ok
                    )
                    if span > 0:
                        seg_thr.setdefault(t.ref, []).append(toks / span)
        await r._monitor_stop()
        if r.client_stats is not None:
            self._client_levels.append(r.client_stats)
        services = []
        for t in r.targets:
            rs = [x for x in r.results if x.level == level and x.service == t.ref]
            ls = level_service(
                t, rs, busy.get(t.ref, 0.0), self.settings.slo, None if self.load.closed_loop else level
            )
            ls = ls.model_copy(update={"segment_throughput": seg_thr.get(t.ref, [])})
            ls = self._offered(t, label, ls)
            ls = self._flights[t.ref].reached(ls, self.load.closed_loop, width)
            self._level_record(t, label, ls)
            # against the last level this service reached (one it did not reach is no reference)
            prev = next(
                (s for lv in reversed(self.levels) for s in lv.services if s.service == t.ref and s.reached),
                None,
            )
            why = self._saturated(saturation(prev, ls, self.load.closed_loop), ls, rs, label)
            services.append(ls.model_copy(update={"saturated": why is not None, "saturation": why}))
        deltas: list[LevelDelta] = []
        base = self.req.baseline
        if base:
            base_rs = [x for x in r.results if x.level == level and x.service == base]
            base_seg = next((s.segment_throughput for s in services if s.service == base), [])
            for t in r.targets:
                if t.ref == base:
                    continue
                rs = [x for x in r.results if x.level == level and x.service == t.ref]
                missed = [s for s in services if s.service in (base, t.ref) and not s.reached]
                other = next((s.segment_throughput for s in services if s.service == t.ref), [])
                pairs = list(zip(base_seg, other, strict=False))
                for metric, d in (
                    ("tok/s per request", compare(base_rs, rs)),
                    ("output throughput", stats.paired_delta(pairs)),
                ):
                    ld = level_delta(t.ref, metric, d, t.ref)
                    if missed:  # measured, but no verdict from a level that was not reached
                        why = "; ".join(f"{s.service}: {s.shortfall}" for s in missed)
                        ld = ld.model_copy(
                            update={
                                "verdict": f"no verdict: {label} not reached ({why}); Δ {stats.fmt_pct(d.pct)} %"
                            }
                        )
                    deltas.append(ld)
        res = LevelResult(
            level=level,
            label=label,
            started_at=started,
            wall_s=time.monotonic() - t_level,
            services=services,
            deltas=deltas,
            saturated=bool(services) and all(s.saturated for s in services),
        )
        self.levels.append(res)
        self.current = None
        self._emit(LevelFinished(run_id=self.id, index=idx, result=res))
        return res

    def _saturated(
        self, fixed: str | None, ls: LevelService, rs: Sequence[RequestResult], label: str
    ) -> str | None:
        """Issue 26: the level's saturation under the rule asked: the fixed one of levels.py, the trend test
        of bench/saturation.py (recorded whatever the rule), or either."""
        st = self.settings
        test = level_test(
            rs, service=ls.service, level=label, alpha=st.saturation_alpha, window=st.saturation_window,
            origin=self.started_at.timestamp(),
        )  # fmt: skip
        if test is not None:
            self.saturation_tests.append(test)
        trend = test.verdict if test is not None and test.tripped and ls.reached else None
        if st.saturation_test == "fixed":
            return fixed
        if st.saturation_test == "trend":
            return trend
        return fixed or trend

    async def run(self) -> LoadRun:
        r = self.runner
        try:
            if self.req.workers >= 1:
                r.workers_reason = plan_workers(self.req.workers, 0, None)[1]
            if self.req.workers > 1:
                r.workers = [Worker(i) for i in range(self.req.workers)]
                await asyncio.gather(*(w.start() for w in r.workers))
            with quiet_gc():  # what exists before the ladder is frozen out of the collector (worker.py)
                async with StreamClient() as client:
                    await r.prepare(client)
                    for idx, level in enumerate(self.load.levels):
                        if idx and self._recheck is not None and (why := await self._recheck()) is not None:
                            self.stopped = why  # no figure of this level under a name it may not have
                            break
                        res = await self._level(client, idx, level)
                        if (
                            res.saturated
                            and self.settings.stop_on_saturation
                            and idx < len(self.load.levels) - 1
                        ):
                            self.stopped = f"saturated at {res.label}: " + "; ".join(
                                f"{s.service}: {s.saturation}" for s in res.services
                            )
                            break
        finally:
            await asyncio.gather(*(w.close() for w in r.workers), return_exceptions=True)
        return self.build("complete")

    def build(self, status: str) -> LoadRun:
        r = self.runner
        knee: dict[str, str | None] = {}
        knee_text: dict[str, str] = {}
        for t in r.targets:
            knee[t.ref], knee_text[t.ref] = knee_verdict(self.levels, t.ref)
        sp = self.req.sampling()
        return LoadRun(
            id=self.id,
            status=status,  # type: ignore[arg-type]
            started_at=self.started_at,
            finished_at=datetime.now(UTC),
            wall_s=time.monotonic() - self._t0,
            load=self.load,
            load_text=self.load.text,
            duration_s=self.settings.duration_s,
            requests=self.settings.requests,
            rounds=self.rounds,
            warmup=0 if self.load.kind == "trace" else self.req.warmup,  # a trace replay has none
            warmup_tokens=self.req.warmup_tokens,
            slo=self.settings.slo,
            prompt_set=r.prompt_set,
            sampling=sp.model_dump(mode="json"),
            targets=[
                r.infos.get(t.ref)
                or TargetInfo(ref=t.ref, base_url=t.base_url, algorithm=t.algorithm, mode=t.mode)
                for t in r.targets
            ],
            baseline=self.req.baseline,
            levels=list(self.levels),
            knee=knee,
            knee_verdict=knee_text,
            stopped=self.stopped,
            failed=sum(1 for x in r.results if not x.ok),
            results=sorted(r.results, key=lambda x: x.seq),
            workload=self._workload_record(),
            saturation_tests=list(self.saturation_tests),
            client_workers=max(1, len(r.workers)),
            client_workers_reason=r.workers_reason,
            client=self._client_stats(),
        )

    def _client_stats(self) -> ClientStats | None:
        """The client's figures over every level's measured part, as a plain run records them (ClientStats):
        CPU and wall time summed over the levels, CPU per counted output token, the busiest process and the
        worst loop lag of any level, client-bound if any level was."""
        levels = list(self._client_levels)
        r = self.runner
        if r.monitor.running:  # interrupted inside a level: what the runner's own loop saw of it so far
            levels.append(r._verdict([r.monitor.sample()]))
        if not levels:
            return None
        tokens = sum(x.output_tokens or 0 for x in r.results if x.ok)
        cpu = sum(c.cpu_s for c in levels)

        def worst(xs: list[float | None]) -> float | None:
            return max((x for x in xs if x is not None), default=None)

        bound = [c for c in levels if c.client_bound]
        return ClientStats(
            workers=max(c.workers for c in levels),
            workers_reason=r.workers_reason,
            wall_s=sum(c.wall_s for c in levels),
            cpu_s=cpu,
            cpu_core_max=max(c.cpu_core_max for c in levels),
            loop_lag_ms_p50=worst([c.loop_lag_ms_p50 for c in levels]),
            loop_lag_ms_p99=worst([c.loop_lag_ms_p99 for c in levels]),
            loop_lag_ms_max=worst([c.loop_lag_ms_max for c in levels]),
            cpu_us_per_token=cpu / tokens * 1e6 if tokens else None,
            reads=levels[0].reads,
            cpu_pressure_pct=worst([c.cpu_pressure_pct for c in levels]),
            client_bound=bool(bound),
            reason=bound[0].reason if bound else None,
        )

    # --- workloads (issue 26): schedules, trace replay, max concurrency, cancellation ---------------------------
    def _workload_init(self, req: BenchRequest, load: LoadSpec) -> None:
        self._seed = req.seed if req.seed is not None else (load.seed or 0)
        # arrivals: the shape's own seed (poisson:R,SEED), else --seed (issue 26), else 0 as before
        self._arrival_seed = load.seed if load.seed is not None else (req.seed or 0)
        self._max_conc: int | None = getattr(req, "max_concurrency", None)
        self._trace_file: str | None = getattr(req, "trace", None)
        cancel_text: str | None = getattr(req, "cancel", None)
        self._trace: Trace | None = None
        self._trace_offsets: list[float] = []
        try:
            self._cancel = cancel.parse_cancel(cancel_text) if cancel_text else None
            if load.kind == "trace":
                if not self._trace_file:
                    raise BenchUsageError("a trace load needs the trace file (--trace FILE)")
                self._trace = load_trace(self._trace_file)
                self._trace_offsets = self._trace.offsets(load.levels[0])
        except WorkloadError as e:
            raise BenchUsageError(str(e)) from None
        if self._cancel is not None and req.workers > 1:
            raise BenchUsageError("--cancel closes requests on this process's loop: use --workers 1")
        if load.kind in ("ramp", "trace"):
            self.rounds = 1  # a ramp and a trace run their whole schedule once per service
        self._picker = None
        self._sched: dict[tuple[str, str], ScheduleLog] = {}
        self._schedules: list[ScheduleStats] = []
        self._cancel_counts: dict[tuple[str, str], CancelStats] = {}
        self._cancelled: list[CancelledRequest] = []

    @property
    def _workload_used(self) -> bool:
        req = self.req
        return bool(
            not self.load.closed_loop  # every open loop has a schedule to compare with what it sent
            or self._max_conc
            or self._cancel
            or req.seed is not None
            or (isinstance(req.prompts, str) and req.prompts.startswith(("gsp:", "sharegpt:", "trace:")))
        )

    def _offsets(self, rate: float) -> Iterator[float]:
        """The planned send times of one segment (arrivals.py), seconds after its start."""
        kind = self.load.kind
        if kind == "trace":
            return arrivals.fixed_offsets(self._trace_offsets)
        if kind == "ramp" and self.load.ramp is not None:
            return arrivals.ramp_offsets(self.load.ramp)
        if kind == "gamma":
            return arrivals.gamma_offsets(rate, self.load.burstiness or 1.0, self._rng)
        if kind == "poisson":
            return arrivals.poisson_offsets(rate, self._rng)
        return arrivals.rate_offsets(rate)

    def _sched_log(self, t: BenchTarget) -> ScheduleLog:
        return self._sched.setdefault((t.ref, self._label), ScheduleLog())

    def _offered(self, t: BenchTarget, label: str, ls: LevelService) -> LevelService:
        """A ramp's or a trace's offered rate is what its schedule planned (its mean), not one level; so is a
        gamma or poisson level's (a random schedule of a few dozen draws can be far from its nominal rate, and
        "reached" must judge the client's sending, not the draw). The nominal rate stays in the workload
        record (`schedules[].offered_rate`)."""
        log = self._sched.get((t.ref, label))
        if self.load.kind in ("ramp", "trace", "gamma", "poisson") and log is not None:
            return ls.model_copy(update={"offered_rate": arrivals.planned_rate(log.planned)})
        return ls

    def _level_record(self, t: BenchTarget, label: str, ls: LevelService) -> None:
        log = self._sched.get((t.ref, label))
        if log is None:
            return
        nominal = self._cur_level if self.load.kind in ("rate", "poisson", "gamma") else ls.offered_rate
        st = log.stats(t.ref, label, nominal)
        self._schedules.append(
            st.model_copy(
                update={
                    "achieved_rate": ls.sent_rate,
                    "max_concurrency": self._max_conc,
                    "mean_in_flight": ls.mean_in_flight,
                    "max_in_flight": ls.max_in_flight,
                }
            )
        )

    async def _cancellable(self, client: StreamClient, t: BenchTarget, p: Prompt, rnd: int, seq: int) -> None:
        """A request picked for cancellation: measured as usual when it ends within the delay, else its
        connection is closed and it is recorded apart."""
        assert self._cancel is not None
        key = (t.ref, self._label)
        sent = time.time()
        cancelled, _ = await cancel.cancel_after(
            self.runner._one(client, t, p, rnd, seq, False), self._cancel.delay_s
        )
        # read after the wait: other requests of the level were counted meanwhile
        cs = self._cancel_counts.setdefault(key, CancelStats(service=t.ref, level=key[1]))
        upd = {"picked": cs.picked + 1}
        if cancelled:
            upd["cancelled"] = cs.cancelled + 1
            # its own event: a live list's "started" row says cancelled (not failed, not counted)
            self.runner._emit(
                PromptCancelled(
                    run_id=self.runner.run_id, service=t.ref, prompt_id=p.id, repeat=rnd, seq=seq,
                    delay_s=self._cancel.delay_s,
                )
            )  # fmt: skip
            self._cancelled.append(
                CancelledRequest(
                    service=t.ref, prompt_id=p.id, seq=seq, level=self._cur_level, started_at=sent,
                    delay_s=self._cancel.delay_s,
                )
            )  # fmt: skip
        else:
            upd["finished_first"] = cs.finished_first + 1
        self._cancel_counts[key] = cs.model_copy(update=upd)

    def _workload_record(self) -> WorkloadRecord | None:
        if not self._workload_used:
            return None
        trace = None
        if self._trace is not None:
            tr = self._trace
            cached: dict[str, int] = {}
            share: dict[str, float | None] = {}
            for t in self.runner.targets:
                ok = [x for x in self.runner.results if x.service == t.ref and x.ok]
                cached[t.ref] = sum(x.cached_tokens or 0 for x in ok)
                sent = sum(x.prompt_tokens or 0 for x in ok)
                share[t.ref] = cached[t.ref] / sent if sent else None
            offs = self._trace_offsets
            trace = TraceInfo(
                path=tr.path, sha256=tr.sha256, requests=len(tr.records), speed=self.load.levels[0],
                planned_duration_s=(offs[-1] - offs[0]) if offs else 0.0,
                prompt_tokens=sum(x.input_length for x in tr.records), ideal_hit_tokens=tr.ideal_hit_tokens(),
                cached_tokens=cached, cached_share=share,
            )  # fmt: skip
        return WorkloadRecord(
            seed=self._seed,
            prompts=self.runner.prompt_set,
            arrival=self.load.text,
            max_concurrency=self._max_conc,
            trace=trace,
            schedules=list(self._schedules),
            cancel=self._cancel.text if self._cancel else None,
            cancels=list(self._cancel_counts.values()),
            cancelled=list(self._cancelled),
        )


async def run_load(
    req: BenchRequest,
    targets: Sequence[BenchTarget],
    load: LoadSpec,
    settings: LoadSettings | None = None,
    hooks: RunHooks | None = None,
) -> LoadRun:
    """Run the ladder; `hooks.stop` (or cancelling) ends it with status "interrupted" and every finished
    level."""
    lr = LoadRunner(req, targets, load, settings, hooks)

    def finished(run: LoadRun) -> None:
        lr._emit(LoadFinished(run=run))

    run = await until_stopped(lr.run(), (hooks or RunHooks()).stop, lambda: lr.build("interrupted"), finished)
    finished(run)
    return run
