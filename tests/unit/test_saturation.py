"""The statistical over-saturation test (bench/saturation.py) on synthetic series: the Mann-Kendall statistic
against values worked by hand, series that must trip (both the in-flight count and the TTFT climb) and
series that must not (a flat server with noise, a TTFT burst while in flight holds, a closed loop), and the
in-flight count at each send from request intervals."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from ddtree_tui.bench.saturation import in_flight_at_send, level_test, over_saturation, trend_test


def test_mann_kendall_matches_the_hand_worked_values() -> None:
    t = trend_test([1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 1.0, 2.0, 3.0, 4.0])
    # S = 10 pairs all increasing; Var = 5·4·15/18 = 16.67; Z = (10 − 1)/√16.67 = 2.205
    assert t.s == 10 and t.tau == 1.0
    assert t.z == pytest.approx(9 / math.sqrt(5 * 4 * 15 / 18))
    assert t.p_value == pytest.approx(0.5 * math.erfc(t.z / math.sqrt(2)))
    assert t.slope_per_s == pytest.approx(1.0)
    down = trend_test([5.0, 4.0, 3.0, 2.0, 1.0])
    assert down.s == -10 and down.p_value > 0.95
    # ties: the variance shrinks by Σ t(t−1)(2t+5)/18 over tied groups (here one group of 3)
    tied = trend_test([1.0, 1.0, 1.0, 2.0])
    assert tied.s == 3
    assert tied.z == pytest.approx((3 - 1) / math.sqrt((4 * 3 * 13 - 3 * 2 * 11) / 18))
    flat = trend_test([2.0] * 12)
    assert flat.s == 0 and flat.z == 0.0 and flat.p_value == 0.5
    with pytest.raises(ValueError, match="at least 3"):
        trend_test([1.0, 2.0])


def _series(n: int, flight: list[float], ttft: list[float]) -> tuple[list[float], list[float], list[float]]:
    return [i * 0.1 for i in range(n)], flight, ttft


def test_trips_when_requests_pile_up_and_ttft_climbs() -> None:
    rng = random.Random(7)
    n = 40
    times, flight, ttft = _series(
        n,
        [1 + i * 0.5 + rng.uniform(-1, 1) for i in range(n)],
        [50 + 20 * i + rng.gauss(0, 30) for i in range(n)],
    )
    test = over_saturation(times, flight, ttft, service="h/a", level="rate:40", alpha=0.05, window=40)
    assert test is not None and test.tripped
    assert test.in_flight.p_value < 0.05 and test.ttft.p_value < 0.05
    assert test.window == 40 and test.window_start_s == 0.0 and test.window_end_s == pytest.approx(3.9)
    assert test.verdict.startswith("over-saturated")


def test_does_not_trip_on_a_steady_server_a_burst_or_a_closed_loop() -> None:
    rng = random.Random(11)
    n = 60
    # steady: both series noise around a level
    steady = over_saturation(
        *_series(n, [4 + rng.uniform(-1, 1) for _ in range(n)], [80 + rng.gauss(0, 20) for _ in range(n)]),
        service="h/a", level="rate:4", alpha=0.05, window=60,
    )  # fmt: skip
    assert steady is not None and not steady.tripped
    # TTFT climbs but the requests in flight hold (a closed loop: its width is fixed)
    closed = over_saturation(
        *_series(n, [8.0] * n, [50 + 10 * i for i in range(n)]),
        service="h/a",
        level="c=8",
        alpha=0.05,
        window=60,
    )
    assert closed is not None and not closed.tripped and closed.ttft.p_value < 1e-6
    assert closed.in_flight.p_value == 0.5
    # in flight climbs while TTFT falls (a ramp the server keeps up with)
    ramp = over_saturation(
        *_series(n, [1 + i for i in range(n)], [100 - i + rng.gauss(0, 3) for i in range(n)]),
        service="h/a", level="ramp", alpha=0.05, window=60,
    )  # fmt: skip
    assert ramp is not None and not ramp.tripped
    # a past burst outside the sliding window: the last 20 are steady
    burst = [50 + 40 * i for i in range(20)] + [80 + rng.gauss(0, 5) for _ in range(20)]
    fl = [1 + i for i in range(20)] + [6 + rng.uniform(-1, 1) for _ in range(20)]
    late = over_saturation(*_series(40, fl, burst), service="h/a", level="x", alpha=0.05, window=20)
    assert late is not None and not late.tripped and late.window == 20
    # too few requests: no test; a bad alpha or window: an error
    assert over_saturation(*_series(5, [1.0] * 5, [1.0] * 5), service="h/a", level="x") is None
    with pytest.raises(ValueError, match="alpha"):
        over_saturation(*_series(20, [1.0] * 20, [1.0] * 20), service="h/a", level="x", alpha=1.5)
    with pytest.raises(ValueError, match="window"):
        over_saturation(*_series(20, [1.0] * 20, [1.0] * 20), service="h/a", level="x", window=3)
    with pytest.raises(ValueError, match="10 to 500"):  # O(n²) pairs: the window is bounded
        over_saturation(*_series(20, [1.0] * 20, [1.0] * 20), service="h/a", level="x", window=501)


@dataclass
class _R:
    started_at: float
    ttft_s: float | None
    e2e_s: float | None
    ok: bool = True


def test_in_flight_at_send_counts_overlapping_requests() -> None:
    rs = [
        _R(0.0, 0.1, 1.0),
        _R(0.5, 0.1, 1.0),
        _R(1.2, 0.2, 0.5),
        _R(1.3, None, None, ok=False),
        _R(1.4, 0.1, 0.1),
    ]
    pts = in_flight_at_send(rs)
    # at 0.5: the first (0–1.0) and itself; at 1.2: the second (0.5–1.5) and itself; at 1.3: a failure without an
    # end counts only itself beside the two live; at 1.4: the two live and itself (the failure is over)
    assert [p[1] for p in pts] == [1, 2, 2, 3, 3]
    assert pts[3][2] is None and pts[0][2] == pytest.approx(100.0)


def test_level_test_over_open_loop_requests() -> None:
    """Requests sent at a fixed rate to a server that serves slower: each waits longer than the last."""
    gap, service_s = 0.1, 0.15
    rs = []
    free = 0.0
    for i in range(50):
        sent = i * gap
        start = max(sent, free)
        free = start + service_s
        rs.append(_R(sent, start - sent + 0.01, free - sent))
    test = level_test(rs, service="h/a", level="rate:10", alpha=0.01, window=40, origin=0.0)
    assert test is not None and test.tripped and test.window == 40
    fast = [_R(i * gap, 0.01, 0.05) for i in range(50)]
    quiet = level_test(fast, service="h/a", level="rate:10")
    assert quiet is not None and not quiet.tripped
