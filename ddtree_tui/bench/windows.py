"""The shapes of what a run records per time window and around its levels (issue 26): time slices of the
client's figures, the server's own metrics scraped during the run, cache flushes, and the statistical
over-saturation test.

Kept in a module of their own that imports nothing of the bench, so every run record (models.py BenchRun,
results.py LoadRun / SoakRun / AgenticRun) can carry them without an import cycle; the code that computes
them is slices.py, servermetrics.py, cacheflush.py and saturation.py.

Times: `start_s` / `end_s` are seconds since the run's origin (its `started_at`); a window is half-open
[start_s, end_s). Latencies are milliseconds (`_ms`), rates per second.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

ServerSource = Literal["prometheus", "decode-log", "none"]


class SliceRow(BaseModel):
    """One service in one time window of a run, as the client saw it: the level statistics of levels.py
    (`level_service`, the soak's windows' too) over the counted requests that *finished* in the window
    (a request that failed without an end counts where it was sent)."""

    index: int
    start_s: float
    end_s: float
    service: str
    n: int = 0  # successful requests
    failed: int = 0
    aborted: int = 0
    error_rate: float = 0.0
    request_throughput: float | None = None  # successful requests / window length
    output_throughput: float | None = None  # output tokens of those requests / window length
    tok_s_mean: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p90: float | None = None
    e2e_ms_p99: float | None = None
    accept_length: float | None = None
    cached_tokens: int = 0
    goodput_pct: float | None = None
    mean_in_flight: float | None = None  # the client's requests in flight, time-weighted over the window
    max_in_flight: int | None = None


class SliceSet(BaseModel):
    """A run's time slices: every metric per window of `width_s` (`--slice`). `basis` says how a request is
    placed: by the time it finished. A soak's slices are its windows (its `windows`, not stored twice)."""

    width_s: float
    basis: Literal["finished"] = "finished"
    rows: list[SliceRow] = Field(default_factory=list)


class ServerWindow(BaseModel):
    """What one server said about one window (the same windows as the slices). From Prometheus: gauges as the
    mean (and max) over the scrapes inside the window, counters and histograms as the change between the last
    scrape at or before the window's start and the last at or before its end (quantiles interpolated inside
    the histogram's buckets, as Prometheus' histogram_quantile). From the Decode batch log lines: the gauges
    only (no latency histograms)."""

    index: int
    start_s: float
    end_s: float
    service: str
    source: Literal["prometheus", "decode-log"]
    samples: int = 0  # scrapes (or Decode batch lines) inside the window
    running_reqs_mean: float | None = None
    running_reqs_max: float | None = None
    queue_reqs_mean: float | None = None
    queue_reqs_max: float | None = None
    token_usage_mean: float | None = None
    token_usage_max: float | None = None
    gen_throughput_mean: float | None = None  # the server's gauge (token/s), mean over the samples
    cache_hit_rate: float | None = None  # the gauge, mean over the samples
    accept_length: float | None = None
    accept_length_from: str | None = None  # "Δgeneration_tokens/Δspec_verify_calls", "gauge", "log"
    accept_rate: float | None = None
    requests: float | None = None  # Δ sglang:num_requests_total (finished, aborted ones included)
    aborted: float | None = None  # Δ sglang:num_aborted_requests_total (the client went away: --cancel)
    prompt_tokens: float | None = None  # Δ sglang:prompt_tokens_total
    generation_tokens: float | None = None  # Δ sglang:generation_tokens_total
    output_throughput: float | None = None  # Δ generation tokens / window length
    ttft_ms_p50: float | None = None
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    ttft_count: float | None = None  # observations in the window
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p90: float | None = None
    e2e_ms_p99: float | None = None
    e2e_count: float | None = None


class ServerMetrics(BaseModel):
    """What one service's server reported during a run, and where every figure came from: `prometheus`
    (its /metrics, SGLang names), `decode-log` (the scheduler's Decode batch lines: /metrics was off) or
    `none` (neither could be read; `note` says why)."""

    service: str
    source: ServerSource
    url: str | None = None  # the /metrics address scraped (a forwarded port for a fleet service)
    every_s: float
    scrapes: int = 0  # /metrics answers parsed
    failures: int = 0  # scrapes that failed (after the first answered)
    log_lines: int = 0  # Decode batch lines read (the fallback)
    first_at: datetime | None = None  # the first and last sample
    last_at: datetime | None = None
    names: list[str] = Field(default_factory=list)  # sglang: series seen
    note: str | None = None
    windows: list[ServerWindow] = Field(default_factory=list)


class CacheFlush(BaseModel):
    """One cache reset before a run, a level or a sweep point (`--flush-cache`): SGLang's POST /flush_cache,
    or vLLM's POST /reset_prefix_cache where /flush_cache is not found. SGLang refuses (400) while requests
    run or wait: the flush is retried a few times, then recorded as failed."""

    service: str
    before: str  # "run", "level c=4", "point 3"
    at: datetime
    endpoint: str | None = None  # the path that answered
    status: int | None = None  # the HTTP status of the last attempt (None: no answer)
    ok: bool = False
    attempts: int = 1
    message: str = ""  # the server's words (its first 200 characters) or why no answer


class TrendTest(BaseModel):
    """The Mann-Kendall trend test of one series in time order: S, its normal approximation Z (tie and
    continuity corrected), the one-sided p-value of an increasing trend, Kendall's tau and Sen's slope."""

    series: Literal["in_flight", "ttft_ms"]
    n: int
    s: int
    z: float
    p_value: float  # one-sided: the chance of a trend at least this increasing when there is none
    tau: float
    slope_per_s: float | None = None  # Sen's slope: median of pairwise (y_j - y_i) / (t_j - t_i)


class SaturationTest(BaseModel):
    """The statistical over-saturation test (GuideLLM's idea: the requests in flight and the TTFT both keep
    climbing while the load is held), over the last `window` requests of one service at one level. Trips
    when both series have an increasing trend at significance `alpha`."""

    service: str
    level: str  # the level's label
    method: Literal["mann-kendall"] = "mann-kendall"
    alpha: float
    window: int  # requests in the sliding window
    window_start_s: float  # the first and last request's send time, since the run's origin
    window_end_s: float
    in_flight: TrendTest
    ttft: TrendTest
    tripped: bool
    verdict: str
