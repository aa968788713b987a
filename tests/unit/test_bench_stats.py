"""The statistics behind report verdicts: intervals, deltas, sentences — on numbers alone."""

from __future__ import annotations

import math
import statistics

import pytest

from ddtree_tui.bench.stats import (
    Delta,
    bootstrap_ci,
    bootstrap_delta,
    ecdf,
    fmt_pct,
    mean_ci,
    paired_delta,
    t_critical,
    verdict,
    weighted_ecdf,
)


def test_t_critical_table_and_expansion() -> None:
    assert t_critical(1) == pytest.approx(12.706)
    assert t_critical(8) == pytest.approx(2.306)
    assert t_critical(30) == pytest.approx(2.042)
    assert t_critical(60) == pytest.approx(2.0003, abs=1e-3)  # exact 2.000298
    assert t_critical(10_000) == pytest.approx(1.96, abs=1e-3)
    with pytest.raises(ValueError):
        t_critical(0)


def test_mean_ci_matches_textbook() -> None:
    xs = [10.0, 12.0, 11.0, 13.0, 9.0]
    e = mean_ci(xs)
    half = 2.776 * statistics.stdev(xs) / math.sqrt(5)
    assert e.value == pytest.approx(11.0)
    assert (e.lo, e.hi) == (pytest.approx(11.0 - half), pytest.approx(11.0 + half))
    assert e.n == 5 and e.method == "t"
    one = mean_ci([5.0, None])
    assert one.value == 5.0 and one.lo is None and one.n == 1
    assert mean_ci([]).value is None


def test_bootstrap_ci_is_seeded_and_brackets_the_median() -> None:
    xs = [float(x) for x in range(1, 41)]
    a, b = bootstrap_ci(xs, seed=3), bootstrap_ci(xs, seed=3)
    assert a == b
    assert a.lo is not None and a.hi is not None
    assert a.lo < a.value < a.hi  # type: ignore[operator]
    assert a.value == statistics.median(xs)
    assert bootstrap_ci([7.0]).lo is None


def test_paired_delta_sees_a_constant_slowdown_and_a_noise_only_difference() -> None:
    base = [100.0, 140.0, 80.0, 120.0, 90.0, 110.0, 130.0, 95.0, 105.0]
    slower = [(a, a * 0.969) for a in base]  # exactly 3.1 % slower, whatever the prompt
    d = paired_delta(slower)
    assert d.pct == pytest.approx(-3.1, abs=1e-9)
    assert d.lo_pct == pytest.approx(-3.1, abs=1e-6) and d.hi_pct == pytest.approx(-3.1, abs=1e-6)
    assert d.measurable and d.n == 9 and d.method == "t-paired"
    jitter = [1.01, 0.99, 1.005, 0.995, 1.0, 1.02, 0.98, 1.0, 1.0]
    noise = paired_delta([(a, a * j) for a, j in zip(base, jitter, strict=True)])
    assert noise.has_ci and not noise.measurable
    assert noise.lo_pct < 0 < noise.hi_pct  # type: ignore[operator]
    assert paired_delta([(None, 3.0), (0.0, 2.0)]).pct is None
    assert paired_delta([(2.0, 3.0)]).has_ci is False


def test_bootstrap_delta_strata_do_not_mix_prompts() -> None:
    # two prompts at very different speeds; B is 10 % faster on both
    fast_a = [200.0, 202.0, 198.0, 201.0]
    slow_a = [50.0, 51.0, 49.0, 50.5]
    d = bootstrap_delta(
        {"fast": (fast_a, [x * 1.1 for x in fast_a]), "slow": (slow_a, [x * 1.1 for x in slow_a])}, seed=1
    )
    assert d.pct == pytest.approx(10.0)
    assert d.measurable and d.lo_pct > 5 and d.hi_pct < 15  # type: ignore[operator]
    assert d.n == 8 and d.method == "bootstrap"
    same = bootstrap_delta((fast_a, list(reversed(fast_a))), seed=1)
    assert same.pct == pytest.approx(0.0) and not same.measurable
    assert bootstrap_delta(([1.0], [2.0])).has_ci is False
    assert bootstrap_delta({"x": ([], [1.0])}).pct is None


def test_verdict_sentences() -> None:
    flat = Delta(pct=-0.7, lo_pct=-1.9, hi_pct=0.5, n=9, method="t-paired")
    assert verdict(flat) == "no measurable difference (Δ \u22120.7 %, 95 % CI \u22121.9 … +0.5 %, n=9)"
    slow = Delta(pct=-3.1, lo_pct=-4.1, hi_pct=-2.1, n=9, method="t-paired")
    assert verdict(slow, "B") == "B slower by 3.1 % ± 1.0 % (95 % CI \u22124.1 … \u22122.1 %, n=9)"
    fast = Delta(pct=12.0, lo_pct=10.0, hi_pct=14.0, n=6)
    assert verdict(fast, "ddtree").startswith("ddtree faster by 12.0 % ± 2.0 %")
    # for a latency, higher is worse
    assert verdict(fast, "B", higher_is_better=False, words=("lower", "higher")).startswith(
        "B higher by 12.0 %"
    )
    assert verdict(Delta(pct=2.0, n=1)) == "not enough data for an interval (Δ +2.0 %, n=1)"
    assert verdict(Delta(pct=None, n=0)).startswith("no data")
    assert fmt_pct(None) == "-" and fmt_pct(0.0) == "0.0" and fmt_pct(-0.04) == "0.0"


def test_ecdfs() -> None:
    xs, ys = ecdf([3.0, 1.0, None, 2.0, 4.0])
    assert xs == [1.0, 2.0, 3.0, 4.0] and ys == [0.25, 0.5, 0.75, 1.0]
    xs, ys = weighted_ecdf([(5.0, 1.0), (1.0, 3.0), (9.0, 0.0)])
    assert xs == [1.0, 5.0] and ys == [0.75, 1.0]
    assert weighted_ecdf([]) == ([], [])
