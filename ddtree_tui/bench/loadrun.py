"""Load shapes (`--load`): a ladder of levels, each measured on every service, services interleaved.

At each level every service runs `rounds` segments in turn (A B A B …: two rounds when there is more than
one service), so a drift in the machine hits them alike. A segment is either

- closed loop (sync, concurrency:N, sweep): N requests kept in flight, a finished one replaced at once; or
- open loop (rate:R, poisson:R): requests sent at R per second whatever is in flight (even spacing, or
  exponential gaps from a seeded generator), capped at MAX_IN_FLIGHT outstanding;

and lasts `--requests N` counted requests or `--duration S` seconds per service per level (split over the
rounds). Before each level each service gets `warmup` uncounted requests at that level's width.

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
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

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
from ddtree_tui.bench.models import BenchRequest, BenchTarget, RequestResult, TargetInfo
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.results import LevelFinished, LevelStarted, LoadFinished, LoadRun
from ddtree_tui.bench.runner import RunHooks, until_stopped
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.worker import AUTO, Worker, plan_workers, quiet_gc, stream_chunk_rate

MAX_IN_FLIGHT = 512


class LoadSettings(BaseModel):
    """How long a ladder measures each level (`duration_s` or `requests` per service per level; neither: a
    count from the level's width), the SLO of its goodput, and whether saturation stops it."""

    model_config = ConfigDict(frozen=True)

    duration_s: float | None = None
    requests: int | None = None
    slo: Slo | None = None
    stop_on_saturation: bool = True


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
        self._t0 = time.monotonic()
        self.id = self.runner.run_id
        self._rng = random.Random(load.seed if load.seed is not None else 0)
        self._next = 0
        self.current: tuple[int, LevelStarted] | None = None
        self._label = ""
        self._cur_level = 0.0
        self._flights: dict[str, _Flight] = {}

    @property
    def prompts(self) -> list[Prompt]:
        return self.runner.prompts

    def _emit(self, ev: Any) -> None:
        self.runner._emit(ev)

    def _budget(self, level: float) -> int | None:
        """Counted requests per service per level (None: by duration)."""
        if self.settings.duration_s is not None:
            return None
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
        at = time.monotonic()
        try:
            while (n is None or issued < n) and (deadline is None or at < deadline):
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                while len(tasks) >= MAX_IN_FLIGHT:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                task = asyncio.ensure_future(self._send(client, t, self._prompt(), rnd))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                issued += 1
                gap = self._rng.expovariate(rate) if self.load.kind == "poisson" else 1.0 / rate
                at += gap
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _send(self, client: StreamClient, t: BenchTarget, p: Prompt, rnd: int) -> None:
        r = self.runner
        seq = len(r.order)
        r.order.append(f"{t.ref} {p.id} {self._label} r{rnd + 1}")
        flight = self._flights.setdefault(t.ref, _Flight())
        flight.enter()
        try:
            await r._one(client, t, p, rnd, seq, False)
        finally:
            flight.leave()
        # tag the result just appended with its level (the runner appends counted results in order of end)
        for i in range(len(r.results) - 1, -1, -1):
            if r.results[i].seq == seq:
                r.results[i] = r.results[i].model_copy(update={"level": self._cur_level, "round": rnd})
                break

    async def _warmup(self, client: StreamClient, t: BenchTarget, width: int) -> None:
        if self.req.warmup <= 0:
            return
        n = self.req.warmup * max(1, min(width, 64))
        r = self.runner
        coros = []
        for i in range(n):
            coros.append(r._one(client, t, self.prompts[i % len(self.prompts)], i, -1 - i, True))
        for i in range(0, len(coros), max(1, width)):
            await asyncio.gather(*coros[i : i + max(1, width)])

    async def _auto_workers(
        self, client: StreamClient, level: float, width: int, warm: list[RequestResult]
    ) -> None:
        """--workers auto: this level's planned chunk rate (streams in flight × a warm-up stream's chunks/s;
        open loop: in flight = rate × a warm-up request's e2e) decides how many worker processes; more are
        started (never fewer: a ladder climbs) and warmed with one more warm-up of their own."""
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
            await self._warmup(client, t, width)

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
            await self._warmup(client, t, width)
        if self.req.workers == AUTO:
            await self._auto_workers(client, level, width, r.warmup_results[n_warm:])
        busy: dict[str, float] = {}
        self._flights = {t.ref: _Flight() for t in r.targets}
        seg_thr: dict[str, list[float]] = {}
        n_total = self._budget(level)
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
                self._rng = random.Random(hash((self.load.seed or 0, idx, rnd)))
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
        services = []
        for t in r.targets:
            rs = [x for x in r.results if x.level == level and x.service == t.ref]
            ls = level_service(
                t, rs, busy.get(t.ref, 0.0), self.settings.slo, None if self.load.closed_loop else level
            )
            ls = ls.model_copy(update={"segment_throughput": seg_thr.get(t.ref, [])})
            ls = self._flights[t.ref].reached(ls, self.load.closed_loop, width)
            # against the last level this service reached (one it did not reach is no reference)
            prev = next(
                (s for lv in reversed(self.levels) for s in lv.services if s.service == t.ref and s.reached),
                None,
            )
            why = saturation(prev, ls, self.load.closed_loop)
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
            warmup=self.req.warmup,
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
            client_workers=max(1, len(r.workers)),
            client_workers_reason=r.workers_reason,
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
