"""Level statistics of a load shape and saturation detection: what one service did at one level (throughput,
TTFT/TPOT/ITL/e2e percentiles, goodput against an SLO), the deltas against the baseline, and whether the level
saturated the service. The ladder that measures the levels is loadrun.py; the soak uses the same statistics
for its windows.

Saturation: a service is saturated at a level when, against the previous level, its output throughput grew by
less than SAT_FLAT (10 %) while its median end-to-end latency (closed loop) or median TTFT (open loop) grew by
more than SAT_CLIMB (25 %); an open-loop level whose achieved request rate is under RATE_MISS (90 %) of the
offered rate while latency climbs is saturated too.

Planned vs achieved: a level is only as good as what it reached. Each service's entry records the
concurrency it reached (mean and max requests in flight, time-weighted over its segments) and, open loop, the
rate it sent, beside what was asked. A closed-loop level is reached when its max in flight got to the width
asked and its mean to at least REACH_MEAN (50 %) of it; an open-loop level when it sent at least RATE_MISS of
the offered rate (two sends at least). Saturation, the knee and the verdicts use reached levels only: a
ladder of `--requests 4` cannot say anything about c=8.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from ddtree_tui.bench import stats
from ddtree_tui.bench.load import Slo
from ddtree_tui.bench.metrics import percentile, pooled_accept
from ddtree_tui.bench.models import BenchTarget, RequestResult, ServiceCounts

SAT_FLAT = 0.10
SAT_CLIMB = 0.25
RATE_MISS = 0.90
REACH_MEAN = 0.50


class Pctl(BaseModel):
    """p50 / p90 / p99 of one metric (milliseconds)."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class LevelService(ServiceCounts):
    """One service at one level (n: its successful counted requests)."""

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
    # planned vs achieved (what was asked is `target_concurrency` closed loop, `offered_rate` open loop)
    target_concurrency: int | None = None  # closed loop: requests asked to be kept in flight
    mean_in_flight: float | None = None  # time-weighted over the service's segments
    max_in_flight: int | None = None
    sent_rate: float | None = None  # open loop: requests/s actually sent
    reached: bool = True  # False: the level never reached its target; no conclusion drawn from it
    shortfall: str | None = None  # why not, in words


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
    acc = pooled_accept(ok)
    if acc is None:
        acc = statistics.median(a) if (a := [r.accept_length for r in ok if r.accept_length]) else None
    good = sum(1 for r in rs if meets_slo(r, slo))
    strata = tok_s_strata(ok)
    means = [statistics.fmean(v) for v in strata.values() if v]  # type: ignore[arg-type]
    return LevelService(
        **ServiceCounts.of(t, rs).model_dump(),
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


def shortfall(cur: LevelService) -> str | None:
    """Why `cur` did not reach the level asked (definition in the module docstring), or None."""
    if cur.target_concurrency is not None:
        want = cur.target_concurrency
        top, mean = cur.max_in_flight or 0, cur.mean_in_flight or 0.0
        if top < want or mean < REACH_MEAN * want:
            return f"{mean:.1f} in flight on average, at most {top}, of {want} asked"
        return None
    if cur.offered_rate:
        if cur.sent_rate is None:
            return f"too few requests to send at {cur.offered_rate:g} req/s"
        if cur.sent_rate < RATE_MISS * cur.offered_rate:
            return f"sent {cur.sent_rate:.2f} of {cur.offered_rate:g} req/s asked"
    return None


def with_reach(ls: LevelService) -> LevelService:
    """`ls` with `reached` and `shortfall` set from its planned and achieved figures."""
    why = shortfall(ls)
    return ls.model_copy(update={"reached": why is None, "shortfall": why})


def saturation(prev: LevelService | None, cur: LevelService, closed_loop: bool) -> str | None:
    """Why `cur` is saturated against the previous level, or None (definition in the module docstring).
    A level that did not reach its target, or a previous one that did not, says nothing."""
    if prev is None or not prev.output_throughput or cur.output_throughput is None:
        return None
    if not cur.reached or not prev.reached:
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


def level_delta(service: str, metric: str, d: stats.Delta, subject: str) -> LevelDelta:
    """A service against the baseline as a LevelDelta, with the verdict's sentence."""
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


def knee_verdict(levels: Sequence[LevelResult], service: str) -> tuple[str | None, str]:
    """A service's knee (the label of the last reached level before its first saturated one, None when not
    found) and the sentence the tables print; levels that did not reach their target are not evidence."""
    mine = [(lv.label, s) for lv in levels for s in lv.services if s.service == service]
    reached = [(label, s) for label, s in mine if s.reached]
    missed = [label for label, s in mine if not s.reached]
    last: str | None = None
    for label, s in reached:
        if s.saturated:
            return last, f"{last or '-'} (saturated at {label}: {s.saturation})"
        last = label
    if not mine:
        return None, "not determined: no level measured"
    if not reached:
        return None, f"not determined: no level reached its target ({_span(missed)} did not)"
    if missed:
        return None, (
            f"not determined: no saturation up to {last}, the last level that reached its target; "
            f"{_span(missed)} did not reach theirs"
        )
    return None, "not reached (no saturation seen)"


def _span(labels: Sequence[str]) -> str:
    return labels[0] if len(labels) == 1 else f"{labels[0]} … {labels[-1]}"
