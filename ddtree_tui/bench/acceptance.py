"""Per-request speculative acceptance, joined to what each request measured (issue 26).

Why a module of its own: SGLang says per request how many tokens each verify pass accepted
(`meta_info.spec_verify_ct` / `spec_accept_length` on /generate's final chunk; on the OpenAI APIs, asked with
`return_spec_tokens_details`, `sglext.spec_tokens_details`; parsed in bench/client.py from the final chunk
only). A server-wide gauge averages that away; here each service's requests are histogrammed by their accept
length and the accept length is set against each request's tok/s, decode tok/s, TTFT and ITL, so a reader
sees whether the requests that accepted more also ran faster (they should, unless the verify cost grew).

Accept length of a request = completion_tokens / spec_verify_ct (SGLang's own definition, bonus token
included), read as the server sent it, else derived from the two counts. Pure: the numbers come from
RequestResult fields the run already holds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

MAX_BINS = 40
# (field of the request, name shown, unit): what an accept length is set against
JOINED = (
    ("tok_s", "tok/s", "tok/s"),
    ("decode_tok_s", "decode tok/s", "tok/s"),
    ("ttft_s", "TTFT", "s"),
    ("itl_mean_ms", "ITL mean", "ms"),
)


class Measured(Protocol):
    """What this module reads of a RequestResult (bench/models.py), named so nothing imports it back."""

    @property
    def service(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def warmup(self) -> bool: ...
    @property
    def accept_length(self) -> float | None: ...
    @property
    def spec_verify_ct(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def tok_s(self) -> float | None: ...
    @property
    def decode_tok_s(self) -> float | None: ...
    @property
    def ttft_s(self) -> float | None: ...
    @property
    def itl_mean_ms(self) -> float | None: ...


class AcceptBin(BaseModel):
    lo: float  # accept lengths in [lo, hi)
    hi: float
    n: int


class AcceptJoin(BaseModel):
    """Accept length against one measured quantity over a service's requests."""

    metric: str  # tok_s, decode_tok_s, ttft_s, itl_mean_ms
    n: int
    pearson: float | None = None  # None: fewer than 3 pairs, or one side constant
    spearman: float | None = None
    slope: float | None = None  # least squares: the metric's change per +1 accept length


class AcceptanceSummary(BaseModel):
    """One service's per-request acceptance."""

    service: str
    n: int = 0  # successful counted requests with an accept length
    without: int = 0  # successful counted requests the server gave no spec numbers for
    mean: float | None = None  # Σ output tokens / Σ verify passes (the token-weighted mean)
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    min: float | None = None
    max: float | None = None
    histogram: list[AcceptBin] = Field(default_factory=list)
    joins: list[AcceptJoin] = Field(default_factory=list)


def _ranks(xs: Sequence[float]) -> list[float]:
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


def join(xs: Sequence[float], ys: Sequence[float], metric: str) -> AcceptJoin:
    """Accept lengths `xs` against `ys` (pairs in order)."""
    j = AcceptJoin(metric=metric, n=len(xs))
    r = _pearson(xs, ys)
    if r is None:
        return j
    j.pearson = r
    j.spearman = _pearson(_ranks(xs), _ranks(ys))
    j.slope = statistics.linear_regression(xs, ys).slope
    return j


def histogram(values: Sequence[float]) -> list[AcceptBin]:
    """Bins of 0.25, 0.5 or 1 token (whichever keeps them at most MAX_BINS) from the floor of the least."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    width = next(
        (w for w in (0.25, 0.5, 1.0, 2.0) if (hi - lo) / w < MAX_BINS), max(1.0, (hi - lo) / MAX_BINS)
    )
    start = math.floor(lo / width) * width
    n = int((hi - start) // width) + 1
    counts = [0] * n
    for v in values:
        counts[min(n - 1, int((v - start) // width))] += 1
    return [AcceptBin(lo=start + i * width, hi=start + (i + 1) * width, n=c) for i, c in enumerate(counts)]


def _q(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values."""
    pos = (len(sorted_vals) - 1) * q
    i = int(pos)
    j = min(i + 1, len(sorted_vals) - 1)
    return sorted_vals[i] + (sorted_vals[j] - sorted_vals[i]) * (pos - i)


def summarize(results: Sequence[Measured], services: Sequence[str]) -> list[AcceptanceSummary]:
    """One summary per service that has a request with an accept length (none: an empty list)."""
    out: list[AcceptanceSummary] = []
    for svc in services:
        rs = [r for r in results if r.service == svc and r.ok and not r.warmup]
        with_al = [r for r in rs if r.accept_length is not None]
        if not with_al:
            continue
        vals = sorted(float(r.accept_length or 0.0) for r in with_al)
        verify = [r for r in with_al if r.spec_verify_ct and r.output_tokens is not None]
        mean = (
            sum(r.output_tokens or 0 for r in verify) / sum(r.spec_verify_ct or 0 for r in verify)
            if verify
            else statistics.fmean(vals)
        )
        s = AcceptanceSummary(
            service=svc, n=len(with_al), without=len(rs) - len(with_al), mean=mean, median=statistics.median(vals),
            p10=_q(vals, 0.1), p90=_q(vals, 0.9), min=vals[0], max=vals[-1], histogram=histogram(vals),
        )  # fmt: skip
        for field, _name, _unit in JOINED:
            pairs = [
                (float(r.accept_length or 0.0), float(v))
                for r in with_al
                if (v := getattr(r, field)) is not None
            ]
            s.joins.append(join([a for a, _ in pairs], [b for _, b in pairs], field))
        out.append(s)
    return out
