"""Pure statistics for comparing benchmark numbers: confidence intervals, deltas with their intervals, and
the one-line verdicts the reports print.

Two ways to get a 95 % interval for "how much faster is B than A":

- paired (`paired_delta`): when A and B ran the same prompt one right after the other (the runner
  interleaves services request by request), each pair's log ratio log(B/A) removes what the prompt and the
  moment had in common; a Student-t interval over the pairs' log ratios, turned back into a percentage.
- unpaired (`bootstrap_delta`): two separate runs, nothing pairs a request of one with a request of the
  other; a percentile bootstrap of the ratio of means, resampling requests within each stratum (prompt)
  so prompts with different speeds do not mix, the statistic the mean over strata of the per-stratum
  ratio. Seeded, so a report is reproducible.

No I/O, no numpy: numbers in, numbers and sentences out. Also used by the load-shape reports.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

CONFIDENCE = 0.95
N_BOOT = 2000
SEED = 0  # the one seed policy: every bootstrap starts from this seed, so one Δ has one interval

# two-sided 95 % Student-t critical values, df 1..30
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.959964

Method = Literal["t", "t-paired", "bootstrap", "none"]


def t_critical(df: int) -> float:
    """The two-sided 95 % Student-t critical value for `df` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("df must be at least 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975  # Cornish-Fisher expansion: within 1e-4 of the exact value beyond df 30
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


class Estimate(BaseModel):
    """A point estimate with its 95 % interval (lo/hi None when n is too small for one)."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    method: Method = "none"

    @property
    def half_width(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        return (self.hi - self.lo) / 2


class Delta(BaseModel):
    """B relative to A in percent, (B − A) / A · 100, with its 95 % interval."""

    model_config = ConfigDict(frozen=True)

    pct: float | None
    lo_pct: float | None = None
    hi_pct: float | None = None
    n: int = 0
    method: Method = "none"

    @property
    def has_ci(self) -> bool:
        return self.lo_pct is not None and self.hi_pct is not None

    @property
    def measurable(self) -> bool:
        """The interval excludes zero: a difference the data can see."""
        return self.has_ci and (self.lo_pct > 0 or self.hi_pct < 0)  # type: ignore[operator]

    @property
    def half_width(self) -> float | None:
        if not self.has_ci:
            return None
        return (self.hi_pct - self.lo_pct) / 2  # type: ignore[operator]


def _clean(xs: Sequence[float | None]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(x)]


def mean_ci(xs: Sequence[float | None]) -> Estimate:
    """Mean with a Student-t 95 % interval; None values are dropped; n < 2 gives no interval."""
    v = _clean(xs)
    if not v:
        return Estimate(value=None, n=0)
    m = statistics.fmean(v)
    if len(v) < 2:
        return Estimate(value=m, n=1)
    half = t_critical(len(v) - 1) * statistics.stdev(v) / math.sqrt(len(v))
    return Estimate(value=m, lo=m - half, hi=m + half, n=len(v), method="t")


def _percentile(sorted_xs: Sequence[float], q: float) -> float:
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def bootstrap_ci(
    xs: Sequence[float | None],
    stat: Callable[[Sequence[float]], float] = statistics.median,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> Estimate:
    """`stat` (median by default) over the requests with a percentile-bootstrap 95 % interval."""
    v = _clean(xs)
    if not v:
        return Estimate(value=None, n=0)
    point = float(stat(v))
    if len(v) < 2:
        return Estimate(value=point, n=1)
    rng = random.Random(seed)
    boots = sorted(float(stat(rng.choices(v, k=len(v)))) for _ in range(n_boot))
    a = (1 - CONFIDENCE) / 2
    return Estimate(
        value=point, lo=_percentile(boots, a), hi=_percentile(boots, 1 - a), n=len(v), method="bootstrap"
    )


def _pct(ratio: float) -> float:
    return (ratio - 1.0) * 100.0


def paired_delta(pairs: Sequence[tuple[float | None, float | None]]) -> Delta:
    """B vs A from (a, b) pairs measured back to back: t interval over log(b / a).

    Pairs with a missing or non-positive value are dropped. The point estimate is the geometric mean ratio.
    """
    logs = [
        math.log(b / a)
        for a, b in pairs
        if a is not None and b is not None and a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)
    ]
    if not logs:
        return Delta(pct=None, n=0)
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return Delta(pct=_pct(math.exp(m)), n=1)
    half = t_critical(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Delta(
        pct=_pct(math.exp(m)),
        lo_pct=_pct(math.exp(m - half)),
        hi_pct=_pct(math.exp(m + half)),
        n=len(logs),
        method="t-paired",
    )


def _ratio_over_strata(strata: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float | None:
    ratios = []
    for a, b in strata:
        ma, mb = statistics.fmean(a), statistics.fmean(b)
        if ma > 0:
            ratios.append(mb / ma)
    return statistics.fmean(ratios) if ratios else None


def bootstrap_delta(
    strata: Mapping[str, tuple[Sequence[float | None], Sequence[float | None]]]
    | tuple[Sequence[float | None], Sequence[float | None]],
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> Delta:
    """B vs A from unpaired samples: the mean over strata of mean(B) / mean(A), percentile bootstrap.

    `strata` is {name: (a_values, b_values)} (e.g. one stratum a prompt) or one (a_values, b_values) pair.
    A stratum missing either side is left out. n is the number of B values used. Without at least two
    values on each side of some stratum there is no interval.
    """
    items = [strata] if isinstance(strata, tuple) else [strata[k] for k in sorted(strata)]
    kept = [(_clean(a), _clean(b)) for a, b in items]
    kept = [(a, b) for a, b in kept if a and b]
    if not kept:
        return Delta(pct=None, n=0)
    point = _ratio_over_strata(kept)
    n = sum(len(b) for _, b in kept)
    if point is None:
        return Delta(pct=None, n=n)
    if not any(len(a) >= 2 and len(b) >= 2 for a, b in kept):
        return Delta(pct=_pct(point), n=n)
    rng = random.Random(seed)
    boots: list[float] = []
    for _ in range(n_boot):
        r = _ratio_over_strata([(rng.choices(a, k=len(a)), rng.choices(b, k=len(b))) for a, b in kept])
        if r is not None:
            boots.append(r)
    boots.sort()
    al = (1 - CONFIDENCE) / 2
    return Delta(
        pct=_pct(point),
        lo_pct=_pct(_percentile(boots, al)),
        hi_pct=_pct(_percentile(boots, 1 - al)),
        n=n,
        method="bootstrap",
    )


def _mean_of_means(strata: Sequence[Sequence[float]]) -> float:
    return statistics.fmean([statistics.fmean(x) for x in strata])


def delta_of_means(
    strata: Mapping[str, tuple[Sequence[float | None], Sequence[float | None]]],
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> Delta:
    """B vs A where each side's number is the mean over strata (prompts) of the stratum's mean, the
    statistic a table's tok/s column shows: Δ = (col_B − col_A) / col_A, so Δ and the column always agree.

    The interval: with at least two values on each side of some stratum, a percentile bootstrap of that
    same statistic resampling within each stratum; with one value a stratum (one request a prompt), a
    paired Student-t over the strata of the differences b − a, divided by col_A. Strata missing a side
    are left out. n is the number of B values used.
    """
    kept = [(_clean(strata[k][0]), _clean(strata[k][1])) for k in sorted(strata)]
    kept = [(a, b) for a, b in kept if a and b]
    if not kept:
        return Delta(pct=None, n=0)
    n = sum(len(b) for _, b in kept)
    col_a = _mean_of_means([a for a, _ in kept])
    col_b = _mean_of_means([b for _, b in kept])
    if col_a <= 0:
        return Delta(pct=None, n=n)
    point = _pct(col_b / col_a)
    al = (1 - CONFIDENCE) / 2
    if any(len(a) >= 2 and len(b) >= 2 for a, b in kept):
        rng = random.Random(seed)
        boots = []
        for _ in range(n_boot):
            ra = _mean_of_means([rng.choices(a, k=len(a)) for a, _ in kept])
            rb = _mean_of_means([rng.choices(b, k=len(b)) for _, b in kept])
            if ra > 0:
                boots.append(rb / ra)
        boots.sort()
        return Delta(
            pct=point,
            lo_pct=_pct(_percentile(boots, al)),
            hi_pct=_pct(_percentile(boots, 1 - al)),
            n=n,
            method="bootstrap",
        )
    if len(kept) < 2:
        return Delta(pct=point, n=n)
    diffs = [statistics.fmean(b) - statistics.fmean(a) for a, b in kept]
    half = t_critical(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    m = statistics.fmean(diffs)
    return Delta(
        pct=point,
        lo_pct=(m - half) / col_a * 100.0,
        hi_pct=(m + half) / col_a * 100.0,
        n=n,
        method="t-paired",
    )


def fmt_pct(x: float | None, signed: bool = True) -> str:
    """+3.1 / −0.7 with a real minus sign, 0.0 unsigned; '-' for None."""
    if x is None:
        return "-"
    s = f"{abs(x):.1f}"
    if not signed:
        return s
    if s.strip("0.") == "":
        return s  # rounds to zero: no sign
    return ("+" if x > 0 else "\u2212") + s


def stored_delta(
    pct: float | None, lo_pct: float | None, hi_pct: float | None, n: int | None, method: str | None
) -> Delta:
    """A Delta from the figures a run stored (its summary's delta_* fields), so faces print what was
    computed once instead of computing their own."""
    m: Method = method if method in ("t", "t-paired", "bootstrap") else "none"  # type: ignore[assignment]
    return Delta(pct=pct, lo_pct=lo_pct, hi_pct=hi_pct, n=n or 0, method=m)


def ci_text(d: Delta) -> str:
    """'95 % CI −1.9 … +0.5 %' or '' without an interval."""
    if not d.has_ci:
        return ""
    return f"95 % CI {fmt_pct(d.lo_pct)} … {fmt_pct(d.hi_pct)} %"


def verdict(
    d: Delta,
    subject: str = "B",
    higher_is_better: bool = True,
    words: tuple[str, str] = ("faster", "slower"),
) -> str:
    """One sentence about `d` (subject vs the reference):

    - 'no measurable difference (Δ −0.7 %, 95 % CI −1.9 … +0.5 %, n=9)' when the interval holds zero;
    - 'B slower by 3.1 % ± 1.0 % (95 % CI −4.1 … −2.1 %, n=9)' when it does not (words[0] for better,
      words[1] for worse; what "better" means is `higher_is_better`);
    - 'not enough data for an interval (Δ +2.0 %, n=1)' with fewer than two values; 'no data' with none.
    """
    if d.pct is None:
        return f"no data to compare (n={d.n})"
    if not d.has_ci:
        return f"not enough data for an interval (Δ {fmt_pct(d.pct)} %, n={d.n})"
    if not d.measurable:
        return f"no measurable difference (Δ {fmt_pct(d.pct)} %, {ci_text(d)}, n={d.n})"
    better = (d.pct > 0) == higher_is_better
    word = words[0] if better else words[1]
    return (
        f"{subject} {word} by {fmt_pct(d.pct, signed=False)} % ± {fmt_pct(d.half_width, signed=False)} % "
        f"({ci_text(d)}, n={d.n})"
    )


def ecdf(xs: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """The empirical CDF: sorted values and the fraction of values at or below each."""
    v = sorted(_clean(xs))
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def weighted_ecdf(points: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The CDF of (value, weight) points, e.g. per-request ITL quantiles weighted by token count."""
    pts = sorted((v, w) for v, w in points if w > 0 and math.isfinite(v))
    total = sum(w for _, w in pts)
    if not pts or total <= 0:
        return [], []
    xs, ys, acc = [], [], 0.0
    for v, w in pts:
        acc += w
        xs.append(v)
        ys.append(acc / total)
    return xs, ys
