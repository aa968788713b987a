"""Over-saturation as a statistical test (issue 26, GuideLLM's over-saturation detection): a server is
over-saturated when, while the load is held, the requests in flight keep piling up *and* the time to first
token keeps climbing. Not a fixed threshold: each series gets the Mann-Kendall trend test (non-parametric:
TTFT's heavy tail and ties in the in-flight counts do not break it) over a sliding window of the last
`window` requests in send order, and the test trips when both trends are increasing at significance `alpha`
(one-sided p-values below it). The statistic, the p-values and the window that tripped are recorded.

Why both: TTFT alone climbs for a burst that clears; in-flight alone climbs under a ramp the server keeps up
with. An open-loop level (rate:R, poisson:R) above what the server can serve shows both. A closed-loop level
holds its in-flight count by construction, so this test stays quiet there; the fixed rule of levels.py (flat
throughput while latency climbs, level against level) is the one for a concurrency ladder.

`trend_test` and `over_saturation` are plain functions over numbers, for the load ladder (loadrun.py, with
`--saturation-test trend|either`) and for the tuning sweep alike.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Sequence
from typing import Protocol

from ddtree_tui.bench.windows import SaturationTest, TrendTest

DEFAULT_ALPHA = 0.05
DEFAULT_WINDOW = 40  # requests
MIN_SAMPLES = 10  # fewer: no test (Mann-Kendall's smallest p-values need about this many)
MAX_WINDOW = 500  # the test and Sen's slope are O(n²) pairs: 500 requests is ~125k pairs, well under a second


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def trend_test(ys: Sequence[float], ts: Sequence[float] | None = None, series: str = "ttft_ms") -> TrendTest:
    """Mann-Kendall's test for an increasing trend of `ys` (in time order; `ts` their times, for Sen's
    slope). ValueError for fewer than 3 values or lengths that differ."""
    n = len(ys)
    if n < 3:
        raise ValueError(f"a trend test needs at least 3 values, got {n}")
    if ts is not None and len(ts) != n:
        raise ValueError("values and times differ in length")
    s = sum(_sign(ys[j] - ys[i]) for i in range(n - 1) for j in range(i + 1, n))
    ties = [c for c in _counts(ys) if c > 1]
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18.0
    if var <= 0:
        z = 0.0
    elif s > 0:
        z = (s - 1) / math.sqrt(var)
    elif s < 0:
        z = (s + 1) / math.sqrt(var)
    else:
        z = 0.0
    p = 0.5 * math.erfc(z / math.sqrt(2.0))  # P(Z >= z): one-sided, increasing
    slope: float | None = None
    if ts is not None:
        slopes = [
            (ys[j] - ys[i]) / (ts[j] - ts[i]) for i in range(n - 1) for j in range(i + 1, n) if ts[j] != ts[i]
        ]
        slope = statistics.median(slopes) if slopes else None
    return TrendTest(
        series="in_flight" if series == "in_flight" else "ttft_ms",
        n=n, s=s, z=z, p_value=p, tau=s / (n * (n - 1) / 2), slope_per_s=slope,
    )  # fmt: skip


def _counts(ys: Sequence[float]) -> list[int]:
    seen: dict[float, int] = {}
    for y in ys:
        seen[y] = seen.get(y, 0) + 1
    return list(seen.values())


def over_saturation(
    times: Sequence[float],
    in_flight: Sequence[float],
    ttft_ms: Sequence[float],
    *,
    service: str,
    level: str,
    alpha: float = DEFAULT_ALPHA,
    window: int = DEFAULT_WINDOW,
    origin: float = 0.0,
) -> SaturationTest | None:
    """The test over the last `window` samples (send time, requests in flight then, TTFT), or None when
    there are fewer than MIN_SAMPLES. `origin` is subtracted from the times the record shows."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not MIN_SAMPLES <= window <= MAX_WINDOW:
        raise ValueError(f"the window must hold {MIN_SAMPLES} to {MAX_WINDOW} requests, got {window}")
    if not len(times) == len(in_flight) == len(ttft_ms):
        raise ValueError("times, in_flight and ttft_ms differ in length")
    if len(times) < MIN_SAMPLES:
        return None
    ts, fl, tt = list(times[-window:]), list(in_flight[-window:]), list(ttft_ms[-window:])
    a = trend_test(fl, ts, "in_flight")
    b = trend_test(tt, ts, "ttft_ms")
    tripped = a.p_value < alpha and b.p_value < alpha
    how = (
        f"in flight τ={a.tau:+.2f} p={a.p_value:.3g}, TTFT τ={b.tau:+.2f} p={b.p_value:.3g} over the last "
        f"{len(ts)} requests (α={alpha:g})"
    )
    verdict = ("over-saturated: both climb; " if tripped else "not over-saturated: ") + how
    return SaturationTest(
        service=service, level=level, alpha=alpha, window=len(ts), window_start_s=ts[0] - origin,
        window_end_s=ts[-1] - origin, in_flight=a, ttft=b, tripped=tripped, verdict=verdict,
    )  # fmt: skip


class _Req(Protocol):
    """What the test reads of a request (models.RequestResult has it)."""

    @property
    def started_at(self) -> float: ...
    @property
    def ttft_s(self) -> float | None: ...
    @property
    def e2e_s(self) -> float | None: ...
    @property
    def ok(self) -> bool: ...


def in_flight_at_send(rs: Sequence[_Req]) -> list[tuple[float, int, float | None]]:
    """(send time, the client's requests in flight at that moment including this one, TTFT ms) for each
    request in send order. A request without an end (failed early) counts as in flight until its TTFT or
    not at all."""
    order = sorted(rs, key=lambda r: r.started_at)
    live: list[float] = []  # a heap of the ends of the requests sent so far and not yet over
    out: list[tuple[float, int, float | None]] = []
    for r in order:
        t = r.started_at
        while live and live[0] <= t:
            heapq.heappop(live)
        heapq.heappush(live, t + (r.e2e_s if r.e2e_s is not None else (r.ttft_s or 0.0)))
        # this request is counted even when it ended at once (its end == its send)
        out.append((t, len(live), r.ttft_s * 1000.0 if r.ok and r.ttft_s is not None else None))
    return out


def level_test(
    rs: Sequence[_Req],
    *,
    service: str,
    level: str,
    alpha: float = DEFAULT_ALPHA,
    window: int = DEFAULT_WINDOW,
    origin: float = 0.0,
) -> SaturationTest | None:
    """The test over one service's requests at one level (successful ones with a TTFT; the in-flight
    count at each send counts every request), or None when too few."""
    pts = [(t, n, ttft) for t, n, ttft in in_flight_at_send(rs) if ttft is not None]
    return over_saturation(
        [p[0] for p in pts], [float(p[1]) for p in pts], [p[2] for p in pts if p[2] is not None],
        service=service, level=level, alpha=alpha, window=window, origin=origin,
    )  # fmt: skip
