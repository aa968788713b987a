"""The schedule per concurrency (sweep/schedule.py) on synthetic measurements with a known answer: the true
speed of each setting at each level is the simulator's own DDTree model (sim/config.py: accept length over
step time, the step growing with the batch), the baseline's the same model without speculation; requests
are drawn around it with noise. The schedule must pick the true best per level in at least 90 % of the levels
over ten seeds, find the crossover where the baseline wins, and reject the cells it cannot trust."""

from __future__ import annotations

import json
import random

import pytest

from ddtree_tui.sim.config import BATCH_GROWTH_BASELINE, BATCH_GROWTH_SPEC, ddtree_expected_speed
from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep import schedule as sch
from ddtree_tui.sweep.spec import Dimension
from ddtree_tui.sweep.state import BaselineRecord, Measurement, PointRecord, Sample, SweepState

GRID = [(b, k) for b in (4, 8, 16, 32) for k in (1, 2, 4)]
LEVELS = [1, 2, 4, 8, 16, 32, 64]
PROMPTS = ("a", "b", "c")
PROMPT_SPEED = {"a": 1.0, "b": 0.8, "c": 1.2}  # prompts differ; each setting sees the same prompts


def true_speed(b: int, k: int, c: int) -> float:
    return 40.0 * ddtree_expected_speed(3.4, b, k, c) / (1 + BATCH_GROWTH_SPEC * (c - 1))


def base_speed(c: int) -> float:
    return 40.0 / (1 + BATCH_GROWTH_BASELINE * (c - 1))


def samples(rng: random.Random, mean: float, c: int, repeats: int, noise: float, t0: float) -> list[Sample]:
    """`repeats` rounds of max(c, 3) requests all in flight at once (the level reached)."""
    out: list[Sample] = []
    width = max(c, len(PROMPTS))
    for r in range(repeats):
        for i in range(width):
            p = PROMPTS[i % len(PROMPTS)]
            v = mean * PROMPT_SPEED[p] * rng.lognormvariate(0.0, noise)
            out.append(Sample(prompt_id=p, repeat=r, ok=True, tok_s=v, started_at=t0 + 10 * r, e2e_s=5.0))
    return out


def state_of(
    seed: int,
    repeats: int = 4,
    noise: float = 0.02,
    levels: list[int] = LEVELS,
    grid: list[tuple[int, int]] = GRID,
) -> SweepState:
    rng = random.Random(seed)
    points: list[PointRecord] = []
    for b, k in grid:
        for c in levels:
            i = len(points)
            m = Measurement(
                concurrency=c, samples=samples(rng, true_speed(b, k, c), c, repeats, noise, 100.0 * i)
            )
            points.append(
                PointRecord(index=i, overrides={"budget": str(b), "env.SGLANG_DDTREE_MAX_TOPK": str(k)},
                            concurrency=c, status="done", measurement=m, finished_at=100.0 * i)
            )  # fmt: skip
    baselines = [
        BaselineRecord(seq=j, at=0.0, after_point=-1,
                       measurement=Measurement(concurrency=c, samples=samples(rng, base_speed(c), c, repeats, noise, 0.0)))
        for j, c in enumerate(levels)
    ]  # fmt: skip
    return SweepState(
        id="t", ref="local/ddtree", baseline_ref=None,
        dims=[Dimension(key="budget", values=["4", "8", "16", "32"]),
              Dimension(key="env.SGLANG_DDTREE_MAX_TOPK", values=["1", "2", "4"])],
        loads=levels, strategy="grid", prompts="seed3", repeats=repeats, warmup=1, max_new_tokens=64,
        objective="tok_s", points=points, baselines=baselines, started_at=0.0, updated_at=0.0,
    )  # fmt: skip


def true_best(c: int) -> dict[str, str]:
    b, k = max(GRID, key=lambda bk: true_speed(*bk, c))
    return {"budget": str(b), "env.SGLANG_DDTREE_MAX_TOPK": str(k)}


def true_crossover() -> int | None:
    wins = [max(true_speed(b, k, c) for b, k in GRID) > base_speed(c) for c in LEVELS]
    out = None
    for c, w in reversed(list(zip(LEVELS, wins, strict=True))):
        if w:
            break
        out = c
    return out


@pytest.mark.slow
def test_schedule_picks_the_true_best_per_level_and_finds_the_crossover() -> None:
    assert true_crossover() == 64  # the landscape has one: speculation loses at c=64 only
    hits = total = 0
    for seed in range(10):
        s = sch.build(state_of(seed), n_boot=200)
        assert [c.concurrency for c in s.levels] == LEVELS
        for c in s.levels:
            total += 1
            hits += c.overrides == true_best(c.concurrency)
        assert s.crossover == 64, s.crossover_text
        assert "between c=32 and c=64" in s.crossover_text
        assert s.bands[-1].use_baseline and s.bands[-1].levels == [64]
    assert hits / total >= 0.9, f"{hits} of {total}"


def test_bands_merge_levels_with_one_choice_and_carry_confidence() -> None:
    s = sch.build(state_of(0, noise=0.005), n_boot=300)
    # with little noise the choices are the true ones: (16,2) up to c=8, (8,2) at 16 and 32, baseline at 64
    assert [b.name for b in s.bands] == ["c1-8", "c16-32", "c64"], [b.name for b in s.bands]
    assert s.bands[0].overrides == true_best(1) and s.bands[1].overrides == true_best(16)
    c1 = s.levels[0]
    assert c1.confidence is not None and c1.confidence > 0.95  # (16,2) is 8 % ahead of the runner-up at c=1
    assert c1.vs_baseline_pct is not None and c1.vs_baseline_pct > 200 and c1.beats_baseline_p == 1.0
    assert s.levels[-1].speculation_wins is False and s.levels[-1].beats_baseline_p is not None
    assert s.levels[-1].beats_baseline_p < 0.05
    text = sch.table(s)
    assert "c1-8" in text and "crossover: speculation stops beating" in text


def test_unstable_cells_are_rejected_with_the_reason() -> None:
    st = state_of(1)
    by = {(json.dumps(p.overrides, sort_keys=True), p.concurrency): p for p in st.points}
    best16 = by[(json.dumps(true_best(16), sort_keys=True), 16)]
    assert best16.measurement is not None
    # the true best at c=16 never had more than 4 requests in flight: its level was not reached
    for j, smp in enumerate(best16.measurement.samples):
        smp.started_at = 1000.0 + 10 * j  # one after the other
        smp.e2e_s = 1.0
    one = by[(json.dumps(true_best(1), sort_keys=True), 1)]
    assert one.measurement is not None
    one.measurement.samples = [x for x in one.measurement.samples if x.repeat == 0]  # one repeat only
    wild = by[(json.dumps(true_best(4), sort_keys=True), 4)]
    assert wild.measurement is not None
    for x in wild.measurement.samples:
        x.tok_s = (x.tok_s or 0.0) * (3.0 if x.repeat % 2 else 0.3)  # the repeats disagree
    s = sch.build(st, n_boot=100)
    cells = {(c.key, c.concurrency): c for c in s.cells}
    r16 = cells[(sch.cell_key(true_best(16)), 16)]
    assert r16.rejected is not None and r16.rejected.startswith("never reached c=16"), r16
    assert r16.max_in_flight == 1
    r1 = cells[(sch.cell_key(true_best(1)), 1)]
    assert r1.rejected is not None and r1.rejected.startswith("too few samples"), r1
    r4 = cells[(sch.cell_key(true_best(4)), 4)]
    assert r4.rejected is not None and r4.rejected.startswith("unstable"), r4
    for c in (1, 4, 16):
        lv = next(x for x in s.levels if x.concurrency == c)
        assert lv.overrides != true_best(c) and lv.rejected >= 1  # a rejected cell is never chosen
    # the results carry the same: per point (JSON and CSV), and the text table
    res = rs.analyse(st)
    pt = next(p for p in res.points if p.index == best16.index)
    assert pt.rejected == r16.rejected and not pt.chosen and pt.score == r16.score
    csv = rs.to_csv(res)
    assert "never reached c=16" in csv and "score" in csv.splitlines()[0]
    assert res.schedule is not None and res.schedule.crossover == 64
    assert "schedule per concurrency" in rs.table(res) and "never reached c=16" in rs.table(res)
    back = rs.SweepResults.model_validate_json(res.model_dump_json(by_alias=True))
    assert back.schedule == res.schedule


def test_a_level_with_no_baseline_leaves_the_crossover_unknown() -> None:
    st = state_of(2)
    st.baselines = []
    s = sch.build(st, n_boot=50)
    assert s.crossover is None and s.crossover_text.startswith("not known")
    assert all(c.speculation_wins is None for c in s.levels)
