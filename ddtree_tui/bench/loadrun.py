"""Load shapes (`--load`): a ladder of levels, each measured on every service, services interleaved.

At each level every service runs `rounds` segments in turn (A B A B …: two rounds when there is more than
one service), so a drift in the machine hits them alike. A segment is either

- closed loop (sync, concurrency:N, sweep): N requests kept in flight, a finished one replaced at once; or
- open loop (rate:R, poisson:R): requests sent at R per second whatever is in flight (even spacing, or
  exponential gaps from a seeded generator), capped at MAX_IN_FLIGHT outstanding;

and lasts `--requests N` counted requests or `--duration S` seconds per service per level (split over the
rounds). Before each level each service gets `warmup` uncounted requests at that level's width.

Saturation (the stop of a ladder, and the knee): a service is saturated at a level when, against the
previous level, its output throughput grew by less than SAT_FLAT (10 %) while its median end-to-end latency
(closed loop) or median TTFT (open loop) grew by more than SAT_CLIMB (25 %); an open-loop level whose
achieved request rate is under RATE_MISS (90 %) of the offered rate while latency climbs is saturated too.
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
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.bench import stats
from ddtree_tui.bench.load import LoadSpec, Slo
from ddtree_tui.bench.metrics import percentile
from ddtree_tui.bench.models import BenchRequest, BenchTarget, RequestResult, TargetInfo
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.runner import BenchRunner, Gate, until_stopped
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.worker import Worker

LOAD_SCHEMA = 2
SAT_FLAT = 0.10
SAT_CLIMB = 0.25
RATE_MISS = 0.90
MAX_IN_FLIGHT = 512


class Pctl(BaseModel):
    """p50 / p90 / p99 of one metric (milliseconds)."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class LevelService(BaseModel):
    """One service at one level."""

    service: str
    algorithm: str
    mode: str | None
    n: int = 0  # successful counted requests
    failed: int = 0
    aborted: int = 0
    error_rate: float = 0.0  # failed / sent
    busy_s: float = 0.0  # Σ over its segments of first send → last end
    request_throughput: float | None = None  # successful requests / busy_s
    output_throughput: float | None = None  # output tokens of successful requests / busy_s
    tok_s_mean: float | None = None  # mean over prompts of the per-prompt mean per-request tok/s
    ttft_ms: Pctl = Field(default_factory=Pctl)
    tpot_ms: Pctl = Field(default_factory=Pctl)
    itl_ms: Pctl = Field(default_factory=Pctl)
    e2e_ms: Pctl = Field(default_factory=Pctl)
    accept_length: float | None = None  # Σ output tokens / Σ verify passes
    cached_tokens: int = 0
    goodput_rps: float | None = None  # requests meeting every SLO / busy_s
    goodput_pct: float | None = None  # requests meeting every SLO / sent, %
    offered_rate: float | None = None  # open loop: the requests/s asked for
    segment_throughput: list[float] = Field(default_factory=list)  # output tok/s of each round
    saturated: bool = False
    saturation: str | None = None  # why, in words


class LevelDelta(BaseModel):
    """A service against the baseline at one level, with the interval and the sentence."""

    service: str
    metric: str  # "tok/s per request" or "output throughput"
    pct: float | None
    lo_pct: float | None = None
    hi_pct: float | None = None
    n: int = 0
    method: str = "none"
    verdict: str


class LevelResult(BaseModel):
    level: float
    label: str
    started_at: datetime
    wall_s: float = 0.0
    services: list[LevelService] = Field(default_factory=list)
    deltas: list[LevelDelta] = Field(default_factory=list)
    saturated: bool = False  # every service saturated here


class LoadRun(BaseModel):
    """A `--load` run: schema 2 (a plain run stays schema 1). See README "Load shapes"."""

    model_config = ConfigDict(populate_by_name=True)

    schema_version: int = Field(default=LOAD_SCHEMA, alias="schema")
    kind: Literal["load"] = "load"
    id: str
    status: Literal["complete", "interrupted"] = "complete"
    started_at: datetime
    finished_at: datetime | None = None
    wall_s: float | None = None
    load: LoadSpec
    load_text: str
    duration_s: float | None = None  # per service per level
    requests: int | None = None  # per service per level
    rounds: int = 1
    warmup: int = 0
    slo: Slo | None = None
    prompt_set: str
    sampling: dict[str, Any] = Field(default_factory=dict)
    targets: list[TargetInfo] = Field(default_factory=list)
    baseline: str | None = None
    levels: list[LevelResult] = Field(default_factory=list)
    knee: dict[str, str | None] = Field(default_factory=dict)  # service → label of its knee level
    stopped: str | None = None  # why the ladder ended before its last level
    failed: int = 0
    results: list[RequestResult] = Field(default_factory=list)


class LevelStarted(BaseModel):
    kind: Literal["level_started"] = "level_started"
    run_id: str
    index: int
    count: int
    level: float
    label: str


class LevelFinished(BaseModel):
    kind: Literal["level_finished"] = "level_finished"
    run_id: str
    index: int
    result: LevelResult


class LoadFinished(BaseModel):
    kind: Literal["load_finished"] = "load_finished"
    run: LoadRun


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000.0


def _pctl(xs: Sequence[float | None]) -> Pctl:
    v = [float(x) for x in xs if x is not None]
    return Pctl(p50=percentile(v, 50), p90=percentile(v, 90), p99=percentile(v, 99))


def tpot_s(r: RequestResult) -> float | None:
    """Time per output token after the first: (e2e − TTFT) / (output tokens − 1)."""
    if r.e2e_s is None or r.ttft_s is None or not r.output_tokens or r.output_tokens < 2:
        return None
    return max(0.0, r.e2e_s - r.ttft_s) / (r.output_tokens - 1)


def meets_slo(r: RequestResult, slo: Slo | None) -> bool:
    """Succeeded and met every SLO that is set (a metric that cannot be measured fails its SLO)."""
    if not r.ok:
        return False
    if slo is None:
        return True
    checks = (
        (slo.ttft_ms, _ms(r.ttft_s)),
        (slo.tpot_ms, _ms(tpot_s(r))),
        (slo.itl_ms, r.itl_p99_ms),
        (slo.e2e_ms, _ms(r.e2e_s)),
    )
    return all(v is not None and v <= lim for lim, v in checks if lim is not None)


def _pooled_itl(ok: Sequence[RequestResult]) -> Pctl:
    """ITL over all tokens of the level: each request's 21 ITL quantiles weighted by its tokens / 21."""
    pts: list[tuple[float, float]] = []
    for r in ok:
        q = r.itl_quantiles_ms or []
        if q and r.output_tokens:
            w = r.output_tokens / len(q)
            pts += [(x, w) for x in q]
    xs, ys = stats.weighted_ecdf(pts)
    if not xs:
        return _pctl([r.itl_p50_ms for r in ok])

    def at(p: float) -> float:
        return next(x for x, y in zip(xs, ys, strict=True) if y >= p - 1e-12)

    return Pctl(p50=at(0.5), p90=at(0.9), p99=at(0.99))


def tok_s_strata(rs: Sequence[RequestResult]) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for r in rs:
        if r.ok and r.tok_s is not None:
            out.setdefault(r.prompt_id, []).append(r.tok_s)
    return out


def level_service(
    t: BenchTarget, rs: Sequence[RequestResult], busy: float, slo: Slo | None, offered: float | None
) -> LevelService:
    ok = [r for r in rs if r.ok]
    tokens = sum(r.output_tokens or 0 for r in ok)
    spec = [r for r in ok if r.spec_verify_ct and r.output_tokens]
    acc = (
        sum(r.output_tokens or 0 for r in spec) / sum(r.spec_verify_ct or 0 for r in spec)
        if spec
        else (statistics.median(a) if (a := [r.accept_length for r in ok if r.accept_length]) else None)
    )
    good = sum(1 for r in rs if meets_slo(r, slo))
    strata = tok_s_strata(ok)
    means = [statistics.fmean(v) for v in strata.values() if v]  # type: ignore[arg-type]
    return LevelService(
        service=t.ref,
        algorithm=t.algorithm,
        mode=t.mode,
        n=len(ok),
        failed=len(rs) - len(ok),
        aborted=sum(1 for r in rs if r.aborted),
        error_rate=(len(rs) - len(ok)) / len(rs) if rs else 0.0,
        busy_s=busy,
        request_throughput=len(ok) / busy if busy > 0 else None,
        output_throughput=tokens / busy if busy > 0 else None,
        tok_s_mean=statistics.fmean(means) if means else None,
        ttft_ms=_pctl([_ms(r.ttft_s) for r in ok]),
        tpot_ms=_pctl([_ms(tpot_s(r)) for r in ok]),
        itl_ms=_pooled_itl(ok),
        e2e_ms=_pctl([_ms(r.e2e_s) for r in ok]),
        accept_length=acc,
        cached_tokens=sum(r.cached_tokens or 0 for r in ok),
        goodput_rps=good / busy if busy > 0 else None,
        goodput_pct=good / len(rs) * 100.0 if rs else None,
        offered_rate=offered,
    )


def saturation(prev: LevelService | None, cur: LevelService, closed_loop: bool) -> str | None:
    """Why `cur` is saturated against the previous level, or None (definition in the module docstring)."""
    if prev is None or not prev.output_throughput or cur.output_throughput is None:
        return None
    gain = cur.output_throughput / prev.output_throughput - 1
    a, b = (prev.e2e_ms.p50, cur.e2e_ms.p50) if closed_loop else (prev.ttft_ms.p50, cur.ttft_ms.p50)
    if not a or b is None:
        return None
    climb = b / a - 1
    what = "median e2e" if closed_loop else "median TTFT"
    if climb > SAT_CLIMB and gain < SAT_FLAT:
        return (
            f"output throughput {stats.fmt_pct(gain * 100)} % while {what} {stats.fmt_pct(climb * 100)} % "
            "against the previous level"
        )
    if (
        not closed_loop
        and cur.offered_rate
        and cur.request_throughput is not None
        and cur.request_throughput < RATE_MISS * cur.offered_rate
        and climb > SAT_CLIMB
    ):
        return (
            f"served {cur.request_throughput:.2f} of {cur.offered_rate:g} req/s offered while {what} "
            f"{stats.fmt_pct(climb * 100)} %"
        )
    return None


def compare(base: Sequence[RequestResult], other: Sequence[RequestResult]) -> stats.Delta:
    """Per-request tok/s of `other` vs `base` on the prompts both ran: the statistic of `tok_s_mean` (mean
    over prompts of the per-prompt mean), with its interval (stats.delta_of_means)."""
    a, b = tok_s_strata(base), tok_s_strata(other)
    return stats.delta_of_means({k: (a[k], b[k]) for k in sorted(set(a) & set(b))})


def _delta(service: str, metric: str, d: stats.Delta, subject: str) -> LevelDelta:
    return LevelDelta(
        service=service,
        metric=metric,
        pct=d.pct,
        lo_pct=d.lo_pct,
        hi_pct=d.hi_pct,
        n=d.n,
        method=d.method,
        verdict=stats.verdict(d, subject=subject),
    )


class LoadRunner:
    """One ladder; keeps what was measured so Ctrl-C still reports every finished level."""

    def __init__(
        self,
        req: BenchRequest,
        targets: Sequence[BenchTarget],
        load: LoadSpec,
        *,
        duration_s: float | None = None,
        requests: int | None = None,
        slo: Slo | None = None,
        stop_on_saturation: bool = True,
        on_event: Callable[[Any], None] | None = None,
        gates: Mapping[str, Gate] | None = None,
        where: Mapping[str, str] | None = None,
    ) -> None:
        if duration_s is not None and requests is not None:
            raise ValueError("give --duration or --requests, not both")
        self.runner = BenchRunner(req, targets, on_event, gates=gates, where=where)
        self.req = req
        self.load = load
        self.duration_s = duration_s
        self.requests = requests
        self.slo = slo
        self.stop_on_saturation = stop_on_saturation
        self.on_event = on_event
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

    @property
    def prompts(self) -> list[Prompt]:
        return self.runner.prompts

    def _emit(self, ev: Any) -> None:
        self.runner._emit(ev)

    def _budget(self, level: float) -> int | None:
        """Counted requests per service per level (None: by duration)."""
        if self.duration_s is not None:
            return None
        if self.requests is not None:
            return self.requests
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
        await r._one(client, t, p, rnd, seq, False)
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
        for t in r.targets:
            await self._warmup(client, t, width)
        busy: dict[str, float] = {}
        seg_thr: dict[str, list[float]] = {}
        n_total = self._budget(level)
        for rnd in range(self.rounds):
            for t in r.targets:
                n = None if n_total is None else max(1, -(-n_total // self.rounds))
                if n_total is not None and rnd == self.rounds - 1:
                    n = max(1, n_total - (self.rounds - 1) * -(-n_total // self.rounds))
                deadline = (
                    time.monotonic() + self.duration_s / self.rounds if self.duration_s is not None else None
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
                t, rs, busy.get(t.ref, 0.0), self.slo, None if self.load.closed_loop else level
            )
            ls = ls.model_copy(update={"segment_throughput": seg_thr.get(t.ref, [])})
            prev = (
                next((s for s in self.levels[-1].services if s.service == t.ref), None)
                if self.levels
                else None
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
                deltas.append(_delta(t.ref, "tok/s per request", compare(base_rs, rs), t.ref))
                other = next((s.segment_throughput for s in services if s.service == t.ref), [])
                pairs = list(zip(base_seg, other, strict=False))
                deltas.append(_delta(t.ref, "output throughput", stats.paired_delta(pairs), t.ref))
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
            if self.req.workers > 1:
                r.workers = [Worker(i) for i in range(self.req.workers)]
                await asyncio.gather(*(w.start() for w in r.workers))
            async with StreamClient() as client:
                await r.prepare(client)
                for idx, level in enumerate(self.load.levels):
                    res = await self._level(client, idx, level)
                    if res.saturated and self.stop_on_saturation and idx < len(self.load.levels) - 1:
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
        for t in r.targets:
            last = None
            for lv in self.levels:
                s = next((x for x in lv.services if x.service == t.ref), None)
                if s is None:
                    continue
                if s.saturated:
                    break
                last = lv.label
            sat = any(x.saturated for lv in self.levels for x in lv.services if x.service == t.ref)
            knee[t.ref] = last if sat else None
        sp = self.req.sampling()
        return LoadRun(
            id=self.id,
            status=status,  # type: ignore[arg-type]
            started_at=self.started_at,
            finished_at=datetime.now(UTC),
            wall_s=time.monotonic() - self._t0,
            load=self.load,
            load_text=self.load.text,
            duration_s=self.duration_s,
            requests=self.requests,
            rounds=self.rounds,
            warmup=self.req.warmup,
            slo=self.slo,
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
            stopped=self.stopped,
            failed=sum(1 for x in r.results if not x.ok),
            results=sorted(r.results, key=lambda x: x.seq),
        )


async def run_load(
    req: BenchRequest,
    targets: Sequence[BenchTarget],
    load: LoadSpec,
    *,
    duration_s: float | None = None,
    requests: int | None = None,
    slo: Slo | None = None,
    stop_on_saturation: bool = True,
    on_event: Callable[[Any], None] | None = None,
    stop: asyncio.Event | None = None,
    gates: Mapping[str, Gate] | None = None,
    where: Mapping[str, str] | None = None,
) -> LoadRun:
    """Run the ladder; `stop` (or cancelling) ends it with status "interrupted" and every finished level."""
    lr = LoadRunner(
        req,
        targets,
        load,
        duration_s=duration_s,
        requests=requests,
        slo=slo,
        stop_on_saturation=stop_on_saturation,
        on_event=on_event,
        gates=gates,
        where=where,
    )

    def finished(run: LoadRun) -> None:
        lr._emit(LoadFinished(run=run))

    run = await until_stopped(lr.run(), stop, lambda: lr.build("interrupted"), finished)
    finished(run)
    return run


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(run: LoadRun) -> str:
    """Per level × service, then the deltas' verdicts, the knee and why the ladder stopped."""
    head = (
        f"load {run.id} · {run.status} · {run.load_text} · "
        + (f"{run.duration_s:g} s" if run.duration_s else f"{run.requests or 'auto'} requests")
        + f" per service per level · {run.rounds} round(s) interleaved · warm-up {run.warmup}/level"
        + (f" · SLO {run.slo.text}" if run.slo else "")
    )
    lines = [head]
    if any(t.simulated for t in run.targets):
        lines.append(
            "SIMULATED services (not real SGLang): " + ", ".join(t.ref for t in run.targets if t.simulated)
        )
    headers = ["level", "service", "mode", "ok", "err%", "req/s", "out tok/s", "tok/s/req", "TTFT p50/p90/p99",
               "TPOT p50", "ITL p50/p99", "e2e p50/p99", "accept", "goodput", "sat"]  # fmt: skip
    body = []
    for lv in run.levels:
        for s in lv.services:
            body.append(
                [
                    lv.label,
                    s.service,
                    s.mode or "-",
                    str(s.n),
                    f"{s.error_rate * 100:.0f}",
                    _f(s.request_throughput, "{:.2f}"),
                    _f(s.output_throughput),
                    _f(s.tok_s_mean),
                    f"{_f(s.ttft_ms.p50, '{:.0f}')}/{_f(s.ttft_ms.p90, '{:.0f}')}/{_f(s.ttft_ms.p99, '{:.0f}')}",
                    _f(s.tpot_ms.p50),
                    f"{_f(s.itl_ms.p50)}/{_f(s.itl_ms.p99)}",
                    f"{_f(s.e2e_ms.p50, '{:.0f}')}/{_f(s.e2e_ms.p99, '{:.0f}')}",
                    _f(s.accept_length, "{:.2f}"),
                    (f"{_f(s.goodput_rps, '{:.2f}')}/s {_f(s.goodput_pct, '{:.0f}')}%"),
                    "SAT" if s.saturated else "",
                ]
            )
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(headers)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    verdicts = [(lv.label, d) for lv in run.levels for d in lv.deltas]
    if verdicts:
        lines.append("")
        lines.append(f"vs baseline {run.baseline}:")
        for label, d in verdicts:
            lines.append(f"  {label} {d.service} {d.metric}: {d.verdict}")
    lines.append("")
    for ref, k in run.knee.items():
        lines.append(f"knee {ref}: {k if k else 'not reached (no saturation seen)'}")
    if run.stopped:
        lines.append(f"stopped: {run.stopped}")
    return "\n".join(lines) + "\n"
