"""GPU energy of a run (bench/energy.py) on synthetic samples: the trapezoid integral exact, clipped at the
run's edges, attribution to requests by the tokens in flight adding up to the whole, and a run with too few
samples saying so instead of a number; the modelled power of the sim/replayed GPU (telemetry/powermodel.py)."""

from __future__ import annotations

import itertools

import pytest

from ddtree_tui.bench.energy import (
    MIN_SAMPLES,
    GpuTrack,
    Point,
    Span,
    attribute,
    coverage,
    energy_j,
    run_energy,
)
from ddtree_tui.telemetry import powermodel


def pts(*pairs: tuple[float, float]) -> list[Point]:
    return [Point(t, w) for t, w in pairs]


def test_constant_power_is_power_times_time() -> None:
    p = pts((0, 100), (1, 100), (2, 100), (3, 100))
    assert energy_j(p, 0, 3) == 300.0
    assert energy_j(p, 0.5, 2.5) == 200.0


def test_trapezoid_over_uneven_samples_is_exact() -> None:
    # a ramp 100 -> 400 W over 3 s sampled unevenly, then flat: ∫ = (100 + 400) / 2 * 3 + 400 * 2
    p = pts((0, 100), (0.5, 150), (3, 400), (5, 400))
    assert energy_j(p, 0, 5) == pytest.approx(750 + 800, abs=1e-9)
    # the exact trapezoid of the samples as given (no smoothing): two pieces
    q = pts((0, 100), (1, 300), (4, 0))
    assert energy_j(q, 0, 4) == 200 + 450


def test_the_run_edges_are_interpolated_between_the_samples_either_side() -> None:
    p = pts((0, 0), (10, 1000))  # power rises 100 W/s
    # [2, 6]: from 200 W to 600 W linearly: mean 400 W over 4 s
    assert energy_j(p, 2, 6) == pytest.approx(1600.0)
    assert coverage(p, 2, 6) == 1.0
    assert coverage(p, -5, 5) == 0.5  # the samples start halfway through


def test_samples_without_power_and_repeated_timestamps_are_skipped() -> None:
    p = [Point(0, 100), Point(1, None), Point(1, 100), Point(1, 100), Point(2, 100)]
    assert energy_j(p, 0, 2) == 200.0


def test_attribution_adds_up_and_follows_the_tokens_in_flight() -> None:
    p = pts((0, 200), (1, 200), (2, 200), (3, 200), (4, 200))  # 800 J over [0, 4]
    spans = [Span(0, 0, 2, 100), Span(1, 1, 3, 300)]  # 50 tok/s over [0,2]; 150 tok/s over [1,3]
    per, idle = attribute(p, spans, 0, 4)
    # [0,1]: all to 0 (200 J); [1,2]: 50 vs 150 tokens -> 50 / 150 J; [2,3]: all to 1; [3,4]: idle
    assert per[0] == pytest.approx(200 + 50)
    assert per[1] == pytest.approx(150 + 200)
    assert idle == pytest.approx(200)
    assert sum(per.values()) + idle == pytest.approx(energy_j(p, 0, 4))


def _track(points: list[Point], services: list[str]) -> GpuTrack:
    return GpuTrack("h", 0, "NVIDIA H200", "GPU-x", services, "profile", "nvml", points)


def test_run_energy_per_service_and_j_per_token() -> None:
    p = pts(*((t, 300.0) for t in range(0, 11)))  # 300 W for 10 s: 3000 J
    spans = {"h/a": [Span(0, 0, 5, 500)], "h/b": [Span(1, 5, 10, 1000)]}
    en, per = run_energy([_track(p, ["h/a", "h/b"])], spans, 0, 10, ["h/a", "h/b"])
    assert en.energy_j == pytest.approx(3000) and en.output_tokens == 1500
    assert en.j_per_token == pytest.approx(2.0)
    a, b = en.services
    assert a.energy_j == pytest.approx(1500) and a.j_per_token == pytest.approx(3.0)
    assert b.energy_j == pytest.approx(1500) and b.j_per_token == pytest.approx(1.5)
    assert per == {0: pytest.approx(1500), 1: pytest.approx(1500)}
    assert en.source == "NVML" and en.samples == 11 and en.note is None
    g = en.gpus[0]
    assert g.coverage == 1.0 and g.idle_energy_j == pytest.approx(0) and g.mean_power_w == 300
    # the windows cover the run and their energies add up to it
    assert sum(w.energy_j or 0 for w in g.windows) == pytest.approx(3000)
    assert g.windows[0].start_s == 0 and g.windows[-1].end_s == pytest.approx(10)


def test_too_few_samples_give_no_number_and_say_so() -> None:
    p = pts((0, 300), (10, 300))  # two samples: one trapezoid, under MIN_SAMPLES
    en, per = run_energy([_track(p, ["h/a"])], {"h/a": [Span(0, 0, 10, 100)]}, 0, 10, ["h/a"])
    assert en.energy_j is None and en.j_per_token is None and per == {}
    assert en.note is not None and "too few GPU samples" in en.note and str(MIN_SAMPLES) in en.note
    assert en.services[0].energy_j is None and "too few" in (en.services[0].note or "")


def test_samples_that_cover_too_little_of_the_run_give_no_number() -> None:
    p = pts((4, 300), (5, 300), (6, 300))
    en, _ = run_energy([_track(p, ["h/a"])], {"h/a": [Span(0, 0, 10, 100)]}, 0, 10, ["h/a"])
    assert en.energy_j is None and "span 20%" in (en.note or "")


def test_no_tracks_says_why() -> None:
    en, per = run_energy([], {"h/a": [Span(0, 0, 1, 10)]}, 0, 1, ["h/a"])
    assert en.energy_j is None and en.note and per == {}


def test_modelled_power_idles_at_75_w_and_rises_with_the_batch_toward_tdp() -> None:
    assert powermodel.power_w(0) == 75.0
    ws = [powermodel.power_w(n) for n in (1, 2, 4, 16, 64, 256)]
    assert all(a < b for a, b in itertools.pairwise(ws))
    assert ws[0] > 75 and ws[-1] <= powermodel.POWER_TDP_W
    assert powermodel.modelled(0)["util_gpu"] == 0 and powermodel.modelled(3)["util_gpu"] > 0


def test_follow_load_changes_only_the_gpus_named() -> None:
    frame = {"v": 1, "gpus": [{"index": 0, "power_w": 500.0, "name": "H200"}, {"index": 1, "power_w": 90.0}]}
    out = powermodel.follow_load(frame, {0: 0})
    assert out["gpus"][0]["power_w"] == 75.0 and out["gpus"][0]["name"] == "H200"
    assert out["gpus"][1] == {"index": 1, "power_w": 90.0}
    assert frame["gpus"][0]["power_w"] == 500.0  # the recording itself is left as it was


def test_a_stall_in_the_samples_gives_no_number() -> None:
    p = pts((0, 300), (1, 300), (2, 300), (12, 300), (13, 300), (14, 300))  # 10 s without a sample
    en, _ = run_energy([_track(p, ["h/a"])], {"h/a": [Span(0, 0, 14, 100)]}, 0, 14, ["h/a"])
    assert en.energy_j is None and "no GPU sample for 10.0 s" in (en.note or "")
