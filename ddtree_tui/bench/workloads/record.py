"""What a load run records of its workload (LoadRun.workload): the schedule it planned against what it did
(per service and level: sends on time and late, the lag, the planned and the achieved rate, the
concurrency reached and its cap), the trace it replayed, and the requests it cancelled, counted apart.

Lag: a request's start on the client's loop (the moment its task runs, just before it is written to the
socket) minus its planned send time, both on the one monotonic clock of the client process; a send is on
time when its lag is at most ON_TIME_S (10 ms). A send held back by --max-concurrency, or by a client too
busy to keep up, is late by that much. Cached tokens are what the server reported per request
(meta_info.cached_tokens / usage.prompt_tokens_details.cached_tokens), summed over the successful ones.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ddtree_tui.bench.metrics import percentile
from ddtree_tui.bench.workloads.arrivals import planned_rate

ON_TIME_S = 0.010


class ScheduleStats(BaseModel):
    """One service at one level of an open loop: planned vs achieved."""

    service: str
    level: str  # the level's label
    planned: int = 0  # sends the schedule asked for (within the budget)
    sent: int = 0
    on_time: int = 0
    late: int = 0
    lag_ms_p50: float | None = None
    lag_ms_p99: float | None = None
    lag_ms_max: float | None = None
    offered_rate: float | None = None  # req/s the shape names (rate:R, gamma:R,B; a ramp's or trace's mean)
    planned_rate: float | None = None  # req/s of this schedule's planned sends (after the first / span)
    achieved_rate: float | None = None  # req/s sent (LevelService.sent_rate, the same definition)
    max_concurrency: int | None = None  # the cap asked for (--max-concurrency), None: none
    mean_in_flight: float | None = None  # reached (LevelService, time-weighted)
    max_in_flight: int | None = None


class TraceInfo(BaseModel):
    """The trace a run replayed and what the server's prefix cache made of it."""

    path: str
    sha256: str
    requests: int
    speed: float
    planned_duration_s: float  # last timestamp − first, / speed
    prompt_tokens: int  # Σ input_length
    ideal_hit_tokens: int  # Σ leading blocks seen before (an unbounded cache): trace.Trace.ideal_hit_tokens
    # per service: Σ cached_tokens the server reported over the successful requests, and its share of the
    # prompt tokens those requests sent
    cached_tokens: dict[str, int] = Field(default_factory=dict)
    cached_share: dict[str, float | None] = Field(default_factory=dict)


class CancelledRequest(BaseModel):
    service: str
    prompt_id: str
    seq: int
    level: float
    started_at: float  # unix time it was sent
    delay_s: float


class CancelStats(BaseModel):
    """One service at one level: requests picked for cancellation, how many were cancelled, how many ended
    before their delay (measured as usual)."""

    service: str
    level: str
    picked: int = 0
    cancelled: int = 0
    finished_first: int = 0


class WorkloadRecord(BaseModel):
    """LoadRun.workload: present when the run used a workload option (issue 26)."""

    seed: int | None = None
    prompts: str  # the prompt source as given (gsp:…, sharegpt:…, trace:…, a set, a file)
    arrival: str  # the load text
    max_concurrency: int | None = None
    trace: TraceInfo | None = None
    schedules: list[ScheduleStats] = Field(default_factory=list)
    cancel: str | None = None  # FRACTION,DELAY
    cancels: list[CancelStats] = Field(default_factory=list)
    cancelled: list[CancelledRequest] = Field(default_factory=list)

    @property
    def cancelled_total(self) -> int:
        return sum(c.cancelled for c in self.cancels)


class ScheduleLog:
    """Collects one service's sends at one level: planned offsets and lags (seconds)."""

    def __init__(self) -> None:
        self.planned: list[float] = []
        self.lags: list[float] = []

    def plan(self, offset: float) -> None:
        self.planned.append(offset)

    def sent(self, lag_s: float) -> None:
        self.lags.append(lag_s)

    def stats(self, service: str, level: str, offered_rate: float | None) -> ScheduleStats:
        ms = [max(0.0, x) * 1000.0 for x in self.lags]
        on = sum(1 for x in self.lags if x <= ON_TIME_S)
        return ScheduleStats(
            service=service,
            level=level,
            planned=len(self.planned),
            sent=len(self.lags),
            on_time=on,
            late=len(self.lags) - on,
            lag_ms_p50=percentile(ms, 50),
            lag_ms_p99=percentile(ms, 99),
            lag_ms_max=max(ms) if ms else None,
            offered_rate=offered_rate,
            planned_rate=planned_rate(self.planned),
        )


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return fmt.format(x) if x is not None else "-"


def describe(w: WorkloadRecord) -> list[str]:
    """The record in sentences: the one text the run's table (bench/tables.py) and the HTML report show."""
    out = [f"workload {w.prompts}, arrivals {w.arrival}, seed {w.seed}"]
    if w.trace is not None:
        t = w.trace
        out.append(
            f"trace {t.path} (sha256 {t.sha256[:12]}), {t.requests} requests at ×{t.speed:g} over "
            f"{t.planned_duration_s:.1f} s planned; {t.prompt_tokens} prompt tokens, {t.ideal_hit_tokens} in "
            "blocks seen before"
        )
        for ref, n in t.cached_tokens.items():
            share = t.cached_share.get(ref)
            pct = f" ({share * 100:.1f} % of the prompt tokens sent)" if share is not None else ""
            out.append(f"{ref}: {n} prefix-cache hit tokens reported by the server{pct}")
    for s in w.schedules:
        cap = f", cap {s.max_concurrency}" if s.max_concurrency else ""
        out.append(
            f"{s.level} {s.service}: {s.sent}/{s.planned} sent, {s.on_time} on time, {s.late} late (lag p50 "
            f"{_f(s.lag_ms_p50, '{:.1f}')} / p99 {_f(s.lag_ms_p99, '{:.1f}')} / max {_f(s.lag_ms_max, '{:.1f}')} "
            f"ms); rate offered {_f(s.offered_rate)}, planned {_f(s.planned_rate)}, sent {_f(s.achieved_rate)} "
            "req/s; in flight mean "
            f"{_f(s.mean_in_flight, '{:.1f}')} max {s.max_in_flight if s.max_in_flight is not None else '-'}{cap}"
        )
    for c in w.cancels:
        out.append(
            f"{c.level} {c.service}: {c.cancelled} cancelled by the client ({c.picked} picked, "
            f"{c.finished_first} ended before the delay {w.cancel or ''}): not failures, not in the latencies"
        )
    return out
