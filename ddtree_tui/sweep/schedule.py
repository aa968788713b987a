"""The schedule a sweep measured at several concurrency levels: per level the best setting by a robust
objective, the cells that cannot be trusted rejected with the reason, the confidence of each choice, the bands
of levels that share a choice, and the crossover, the first level at which no setting beats the baseline.

Why per level: speculation that wins at c=1 can lose at c=32 (verify cost grows with the batch), so one "best
point" hides what an operator needs: which setting to run at which load, and where to stop speculating.

A cell is one launch config at one level. Its robust score is over its repeats: the mean objective of each
repeat (its counted requests of that repeat), then median − `penalty` × MAD over those repeat means (for TTFT,
lower is better: median + penalty × MAD). A cell is rejected (never chosen) when it has fewer than
`min_repeats` repeats, when its MAD is above `max_rel_mad` of its median (the repeats disagree), or when the
level never reached its concurrency (issue 29: at most as many in flight as asked, and on average at least
bench/levels.REACH_MEAN of it while the service was busy). Values are scaled by the baseline-drift factor of
sweep/fairness.py when the baseline drifted beyond its noise around the point (said per cell).

Confidence: the probability that the chosen setting beats the runner-up (the best other stable cell), from a
seeded bootstrap that resamples each cell's requests within each prompt (the statistic the mean over prompts,
as bench/stats does); the same for "beats the baseline". Pure: a SweepState in, a Schedule out.

The objective per request is tok/s (a `goodput` sweep is scheduled on tok/s too: goodput is a whole-run figure,
not one a repeat or a request has) or TTFT for `--objective ttft`.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence

from pydantic import BaseModel, Field

from ddtree_tui.bench.levels import REACH_MEAN
from ddtree_tui.bench.stats import SEED
from ddtree_tui.sweep.state import PointRecord, Sample, SweepState

PENALTY = 1.0  # how many MADs the score takes off the median
MIN_REPEATS = 2
MAX_REL_MAD = 0.25  # a MAD above 25 % of the median: the repeats disagree, the cell is not trusted
LOWER_IS_BETTER = {"ttft"}
N_BOOT = 1000  # resamples of a probability: ±1.5 points at p = 0.5, enough to say how sure a choice is


class Cell(BaseModel):
    """One launch config at one concurrency level, scored."""

    key: str  # the launch config (its overrides as sorted JSON)
    overrides: dict[str, str]
    label: str
    concurrency: int
    points: list[int] = Field(default_factory=list)  # the sweep's point indices measured here
    n: int = 0  # successful counted requests
    repeats: int = 0
    median: float | None = None  # median over the repeat means
    mad: float | None = None  # median absolute deviation of the repeat means
    score: float | None = None  # median ∓ penalty × MAD
    drift_factor: float = 1.0  # the values were multiplied by it (baseline drift, sweep/fairness.py)
    mean_in_flight: float | None = None  # time-weighted while the service had requests in flight
    max_in_flight: int | None = None
    reached: bool | None = None  # None: no send times recorded (a state saved before they were)
    flags: list[str] = Field(default_factory=list)  # fairness flags of its points (cache, GPU, drift)
    rejected: str | None = None  # why it is not a candidate; None: stable


class LevelChoice(BaseModel):
    """The choice at one concurrency level."""

    concurrency: int
    chosen: str | None = None  # a Cell key; None: no stable cell
    label: str | None = None
    overrides: dict[str, str] | None = None
    score: float | None = None
    median: float | None = None
    runner_up: str | None = None  # its label
    runner_up_score: float | None = None
    confidence: float | None = None  # P(chosen beats the runner-up), bootstrap; None: no runner-up
    baseline_median: float | None = None
    baseline_n: int = 0
    vs_baseline_pct: float | None = None  # the chosen median against the baseline median, %
    beats_baseline_p: float | None = None  # P(chosen beats the baseline), bootstrap
    speculation_wins: bool | None = None  # None: no baseline at this level, or nothing stable
    stable: int = 0
    rejected: int = 0
    note: str = ""


class Band(BaseModel):
    """Consecutive measured levels that share one choice (`overrides` None: run the baseline there)."""

    name: str  # c1-4, c16, ...
    levels: list[int]
    lo: int
    hi: int
    overrides: dict[str, str] | None = None
    label: str
    use_baseline: bool = False  # speculation does not beat the baseline in this band
    confidence: float | None = None  # the lowest confidence of its levels' choices
    note: str = ""


class Schedule(BaseModel):
    objective: str  # tok_s (higher is better) or ttft (lower is better)
    unit: str
    penalty: float = PENALTY
    min_repeats: int = MIN_REPEATS
    max_rel_mad: float = MAX_REL_MAD
    baseline: str  # what each level's choice is compared with
    levels: list[LevelChoice] = Field(default_factory=list)
    bands: list[Band] = Field(default_factory=list)
    cells: list[Cell] = Field(default_factory=list)
    crossover: int | None = None  # the lowest level from which on no setting beats the baseline
    crossover_text: str = ""


# --- small statistics ------------------------------------------------------------------------------------


def _value(s: Sample, objective: str) -> float | None:
    return s.ttft_ms if objective in LOWER_IS_BETTER else s.tok_s


def _values(samples: Iterable[Sample], objective: str) -> Iterator[tuple[Sample, float]]:
    """(sample, its objective) for each successful sample that has one (one loop, no call per sample: a
    schedule of many levels reads hundreds of thousands of samples)."""
    if objective in LOWER_IS_BETTER:
        return ((s, s.ttft_ms) for s in samples if s.ok and s.ttft_ms is not None)
    return ((s, s.tok_s) for s in samples if s.ok and s.tok_s is not None)


def repeat_means(samples: Iterable[Sample], objective: str, factor: float = 1.0) -> list[float]:
    """The mean objective of each repeat (its successful requests), in repeat order."""
    by: dict[int, list[float]] = {}
    for s, v in _values(samples, objective):
        by.setdefault(s.repeat, []).append(v * factor)
    return [_mean(by[k]) for k in sorted(by)]


def _mean(xs: Sequence[float]) -> float:
    """statistics.fmean of a non-empty list, to the bit (fsum / len), without its per-call overhead."""
    return math.fsum(xs) / len(xs)


def mad(xs: Sequence[float]) -> float:
    med = statistics.median(xs)
    return float(statistics.median(abs(x - med) for x in xs))


def robust_score(xs: Sequence[float], lower: bool, penalty: float = PENALTY) -> tuple[float, float, float]:
    """(median, MAD, score) of repeat means; the score takes `penalty` MADs off in the worse direction."""
    med = float(statistics.median(xs))
    d = mad(xs)
    return med, d, med + penalty * d if lower else med - penalty * d


def reach(samples: Sequence[Sample]) -> tuple[float | None, int | None]:
    """(mean in flight while busy, max in flight) from the requests' send times and durations."""
    spans = sorted(
        (s.started_at, s.started_at + s.e2e_s)
        for s in samples
        if s.started_at is not None and s.e2e_s is not None and s.e2e_s >= 0
    )
    if not spans:
        return None, None
    # ends before starts at the same instant: (t, -1) sorts before (t, 1), as tuples do
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    top = max(itertools.accumulate((d for _t, d in events), initial=0))
    busy = 0.0  # the union of the intervals
    lo, hi = spans[0]
    for a, b in spans[1:]:
        if a > hi:
            busy += hi - lo
            lo, hi = a, b
        else:
            hi = max(hi, b)
    busy += hi - lo
    area = sum(b - a for a, b in spans)
    return (area / busy if busy > 0 else float(top)), top


def _strata(samples: Iterable[Sample], objective: str, factor: float) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for s, v in _values(samples, objective):
        out.setdefault(s.prompt_id, []).append(v * factor)
    return out


def p_beats(
    a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], lower: bool, n_boot: int = N_BOOT
) -> float | None:
    """P(a beats b): a seeded bootstrap resampling each side's values within each prompt both ran; the
    statistic is the mean over those prompts of the per-prompt mean. Ties count half."""
    keys = sorted(k for k in a.keys() & b.keys() if a[k] and b[k])
    if not keys:
        return None
    rng = random.Random(SEED)
    wins = 0.0
    for _ in range(n_boot):
        ma = _mean([_mean(rng.choices(a[k], k=len(a[k]))) for k in keys])
        mb = _mean([_mean(rng.choices(b[k], k=len(b[k]))) for k in keys])
        if ma == mb:
            wins += 0.5
        elif (ma < mb) if lower else (ma > mb):
            wins += 1
    return wins / n_boot


# --- the schedule ----------------------------------------------------------------------------------------


def cell_key(overrides: Mapping[str, str]) -> str:
    """The key of a launch config (its overrides as sorted JSON)."""
    return json.dumps(dict(overrides), sort_keys=True)


def _label(overrides: Mapping[str, str], vary: Sequence[str]) -> str:
    return " ".join(f"{k}={overrides[k]}" for k in vary if k in overrides) or "(profile)"


def _baseline_samples(state: SweepState, level: int) -> list[Sample]:
    """Every baseline request measured at `level`: the interleaved --baseline service's, else the
    same-service baseline measurements (the profile as written)."""
    paired = [
        s
        for r in state.points
        if r.concurrency == level and r.status == "done" and r.baseline_measurement is not None
        for s in r.baseline_measurement.samples
    ]
    if paired:
        return paired
    return [
        s
        for b in state.baselines
        if b.ok and b.measurement.concurrency == level
        for s in b.measurement.samples
    ]


def band_name(levels: Sequence[int]) -> str:
    lo, hi = min(levels), max(levels)
    return f"c{lo}" if lo == hi else f"c{lo}-{hi}"


def build(
    state: SweepState,
    objective: str | None = None,
    *,
    penalty: float = PENALTY,
    min_repeats: int = MIN_REPEATS,
    max_rel_mad: float = MAX_REL_MAD,
    drift_factors: Mapping[int, float] | None = None,
    n_boot: int = N_BOOT,
) -> Schedule:
    """The schedule of `state`. `drift_factors`: point index -> the factor its values are scaled by."""
    obj = "ttft" if (objective or state.objective) in LOWER_IS_BETTER else "tok_s"
    lower = obj in LOWER_IS_BETTER
    factors = dict(drift_factors or {})
    keys = sorted({k for r in state.points for k in r.overrides})
    vary = [k for k in keys if len({r.overrides.get(k) for r in state.points}) > 1] or keys
    by_cell: dict[tuple[str, int], list[PointRecord]] = {}
    for r in state.points:
        by_cell.setdefault((cell_key(r.overrides), r.concurrency), []).append(r)
    cells: list[Cell] = []
    strata: dict[tuple[str, int], dict[str, list[float]]] = {}
    for (key, level), recs in by_cell.items():
        done = [r for r in recs if r.status == "done" and r.measurement is not None]
        c = Cell(
            key=key, overrides=recs[0].overrides, label=_label(recs[0].overrides, vary), concurrency=level,
            points=[r.index for r in recs],
        )  # fmt: skip
        cells.append(c)
        if not done:
            c.rejected = f"not measured ({', '.join(sorted({r.status for r in recs}))})"
            continue
        samples = [s for r in done for s in (r.measurement.samples if r.measurement else [])]
        fac = [factors.get(r.index, 1.0) for r in done]
        c.drift_factor = statistics.fmean(fac)
        for r in done:
            if r.fairness is not None:
                c.flags += r.fairness.flags
            if factors.get(r.index, 1.0) != 1.0:
                c.flags.append(
                    f"baseline drifted around point #{r.index}: values scaled by {factors[r.index]:.3f}"
                )
        means = repeat_means(samples, obj, c.drift_factor)
        strata[(key, level)] = _strata(samples, obj, c.drift_factor)
        c.n = sum(len(v) for v in strata[(key, level)].values())
        c.repeats = len(means)
        c.mean_in_flight, c.max_in_flight = reach(samples)
        if c.max_in_flight is not None and c.mean_in_flight is not None:
            c.reached = c.max_in_flight >= level and c.mean_in_flight >= REACH_MEAN * level
        if means:
            c.median, c.mad, c.score = robust_score(means, lower, penalty)
        if c.repeats < min_repeats:
            c.rejected = (
                f"too few samples: {c.repeats} repeat(s) with a successful request, {min_repeats} needed"
            )
        elif c.median and c.mad is not None and c.mad > max_rel_mad * abs(c.median):
            c.rejected = (
                f"unstable: MAD {c.mad:.3g} is {100 * c.mad / abs(c.median):.0f} % of the median "
                f"(bound {100 * max_rel_mad:.0f} %)"
            )
        elif c.reached is False:
            c.rejected = (
                f"never reached c={level}: at most {c.max_in_flight} in flight, "
                f"{c.mean_in_flight or 0:.1f} on average while busy"
            )
    cells.sort(key=lambda c: (c.concurrency, c.key))
    choices: list[LevelChoice] = []
    for level in sorted({c.concurrency for c in cells}):
        here = [c for c in cells if c.concurrency == level]
        ok = [c for c in here if c.rejected is None and c.score is not None]
        ok.sort(key=lambda c: c.score if lower else -(c.score or 0.0))  # type: ignore[arg-type,return-value]
        ch = LevelChoice(concurrency=level, stable=len(ok), rejected=len(here) - len(ok))
        base = _baseline_samples(state, level)
        base_means = repeat_means(base, obj)
        if base_means:
            ch.baseline_median = float(statistics.median(base_means))
        ch.baseline_n = sum(1 for s in base if s.ok and _value(s, obj) is not None)
        if not ok:
            ch.note = "no stable setting at this level"
            choices.append(ch)
            continue
        best = ok[0]
        ch.chosen, ch.label, ch.overrides = best.key, best.label, best.overrides
        ch.score, ch.median = best.score, best.median
        if len(ok) > 1:
            ru = ok[1]
            ch.runner_up, ch.runner_up_score = ru.label, ru.score
            ch.confidence = p_beats(strata[(best.key, level)], strata[(ru.key, level)], lower, n_boot)
        if ch.baseline_median is not None and best.median is not None and ch.baseline_median:
            ch.vs_baseline_pct = (best.median / ch.baseline_median - 1) * 100
            ch.beats_baseline_p = p_beats(strata[(best.key, level)], _strata(base, obj, 1.0), lower, n_boot)
            ch.speculation_wins = (
                best.median < ch.baseline_median if lower else best.median > ch.baseline_median
            )
        choices.append(ch)
    sched = Schedule(
        objective=obj,
        unit="ms" if lower else "tok/s",
        penalty=penalty,
        min_repeats=min_repeats,
        max_rel_mad=max_rel_mad,
        baseline=state.baseline_ref or f"{state.ref} as the profile has it",
        levels=choices,
        cells=cells,
    )
    sched.bands = _bands(choices)
    sched.crossover, sched.crossover_text = _crossover(choices, sched.baseline)
    return sched


def _bands(choices: Sequence[LevelChoice]) -> list[Band]:
    def what(ch: LevelChoice) -> str:
        if ch.chosen is None:
            return "-"
        return "baseline" if ch.speculation_wins is False else ch.chosen

    groups: list[list[LevelChoice]] = []
    for ch in choices:
        if groups and what(groups[-1][-1]) == what(ch):
            groups[-1].append(ch)
        else:
            groups.append([ch])
    out: list[Band] = []
    for g in groups:
        levels = [c.concurrency for c in g]
        head = g[0]
        w = what(head)
        confs = [c.confidence for c in g if c.confidence is not None]
        b = Band(
            name=band_name(levels), levels=levels, lo=min(levels), hi=max(levels),
            confidence=min(confs) if confs else None, label=head.label or "-",
        )  # fmt: skip
        if w == "-":
            b.label, b.note = "(none)", "no stable setting: measure again with more --repeats"
        elif w == "baseline":
            b.use_baseline, b.label = True, "baseline (no setting beats it)"
            b.note = "speculation does not beat the baseline here"
            ps = [1 - c.beats_baseline_p for c in g if c.beats_baseline_p is not None]
            b.confidence = min(ps) if ps else None  # here: P(the baseline beats the best setting)
        else:
            b.overrides = head.overrides
        out.append(b)
    return out


def _crossover(choices: Sequence[LevelChoice], baseline: str) -> tuple[int | None, str]:
    """The lowest measured level from which on (every higher level too) the best setting does not beat the
    baseline; None when it beats it at the highest level measured."""
    judged = [c for c in choices if c.speculation_wins is not None]
    if not judged:
        return None, f"not known: no level has both a stable setting and a baseline ({baseline})"
    cross: int | None = None
    for c in reversed(judged):
        if c.speculation_wins:
            break
        cross = c.concurrency
    if cross is None:
        top = judged[-1].concurrency
        return None, f"speculation beats the baseline at every measured level (up to c={top})"
    below = [c.concurrency for c in judged if c.concurrency < cross]
    where = f"between c={below[-1]} and c={cross}" if below else f"at or below c={cross}, the lowest level"
    return cross, (
        f"speculation stops beating the baseline ({baseline}) {where}: from c={cross} on run the baseline"
    )


# --- text --------------------------------------------------------------------------------------------------


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def table(s: Schedule) -> str:
    """The schedule as text: one row per level, the bands, the crossover, the rejected cells."""
    lines = [
        f"schedule per concurrency ({s.objective}, score = median {'+' if s.unit == 'ms' else '−'} "
        f"{s.penalty:g}×MAD over repeats; baseline: {s.baseline})",
        f"{'c':>5}  {'chosen':<40} {'score':>9} {'runner-up':<28} {'conf':>5} {'base':>9} {'Δ base':>8} {'stable':>6}",
    ]
    for c in s.levels:
        delta = "-" if c.vs_baseline_pct is None else f"{c.vs_baseline_pct:+.1f} %"
        conf = "-" if c.confidence is None else f"{c.confidence:.2f}"
        lines.append(
            f"{c.concurrency:>5}  {(c.label or c.note)[:40]:<40} {_f(c.score):>9} {(c.runner_up or '-')[:28]:<28} "
            f"{conf:>5} {_f(c.baseline_median):>9} {delta:>8} {c.stable:>3}/{c.stable + c.rejected:<2}"
        )
    lines.append("bands:")
    for b in s.bands:
        conf = "" if b.confidence is None else f" (confidence ≥ {b.confidence:.2f})"
        lines.append(f"  {b.name:<10} {b.label}{conf}" + (f" — {b.note}" if b.note else ""))
    lines.append(f"crossover: {s.crossover_text}")
    bad = [c for c in s.cells if c.rejected]
    if bad:
        lines.append("rejected cells:")
        lines += [f"  c={c.concurrency} {c.label}: {c.rejected}" for c in bad]
    lines.append(
        "conf: the probability (bootstrap over requests, within prompts) that the chosen setting beats the "
        "runner-up; Δ base: its median against the baseline's at that level"
    )
    return "\n".join(lines)
