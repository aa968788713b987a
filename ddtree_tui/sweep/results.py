"""What a sweep found: points ranked by the objective under the constraints, each with a 95 % interval against
the baseline and its "indistinguishable" group, the Pareto fronts, the best point with its command line;
as a text table, JSON (`results.json`) and CSV (`results.csv`). Pure: a SweepState in, numbers out.

Statistics are bench/stats.py's: a same-service baseline was measured at other times, so its deltas are
unpaired (`bootstrap_delta`, stratified by prompt); a `--baseline HOST/SVC` ran interleaved in the same bench
run, so its deltas are paired request by request (`paired_delta`).
"""

from __future__ import annotations

import csv
import io
import shlex
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from ddtree_tui.bench.stats import Delta, bootstrap_delta, fmt_pct, paired_delta, verdict
from ddtree_tui.sweep import schedule as sch
from ddtree_tui.sweep.fairness import Drift, baseline_drift
from ddtree_tui.sweep.spec import Constraint, parse_constraint
from ddtree_tui.sweep.state import Measurement, PointRecord, Sample, SweepState

RESULTS_SCHEMA = 1
NOT_CHOSEN = "not chosen by the optimizer"  # sweep/workers.py: a point the study never asked for
LOWER_IS_BETTER = {"ttft"}


class RankedPoint(BaseModel):
    index: int
    label: str
    overrides: dict[str, str]
    concurrency: int
    status: str
    rank: int | None = None  # 1 = best among the points meeting the constraints
    group: int | None = None  # points in one group are indistinguishable from the group's first point
    objective: float | None = None
    meets_constraints: bool = True
    violated: list[str] = Field(default_factory=list)
    delta_pct: float | None = None  # objective sample (tok/s or TTFT) vs the baseline
    delta_lo_pct: float | None = None
    delta_hi_pct: float | None = None
    verdict: str = ""
    tok_s: float | None = None
    goodput: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    itl_p50: float | None = None
    accept_length: float | None = None
    verify_passes: int | None = None
    tokens_per_chunk: float | None = None
    step_ms: float | None = None
    gpu_mem_mb: int | None = None
    pareto_latency: bool = False  # on the front of tok/s (higher) vs TTFT p90 (lower)
    pareto_accept: bool = False  # on the front of accept length (higher) vs step time (lower)
    error: str | None = None
    argv: str | None = None
    # the schedule's view of this point (its launch config at its level: sweep/schedule.py)
    score: float | None = None  # median ∓ penalty × MAD over repeats
    mad: float | None = None
    mean_in_flight: float | None = None  # the concurrency it reached, while busy
    rejected: str | None = None  # why the schedule does not trust it
    chosen: bool = False  # the schedule's choice at its level
    # fair arms (sweep/fairness.py)
    flushed: bool | None = None
    gpu_temp_c: int | None = None  # the hottest of its GPUs just before it was measured
    drift_factor: float | None = None  # its values were scaled by this for the schedule (baseline drift)
    flags: list[str] = Field(default_factory=list)


class SweepResults(BaseModel):
    schema_version: int = Field(default=RESULTS_SCHEMA, alias="schema")
    sweep_id: str
    ref: str
    baseline: str
    objective: str
    constraints: list[str]
    points: list[RankedPoint]
    best: int | None = None
    best_command: str | None = None
    best_overrides: dict[str, str] | None = None
    baseline_tok_s: dict[int, float | None] = Field(default_factory=dict)  # concurrency -> tok/s
    wall_s: float = 0.0
    restored: bool | None = None
    caveats: list[str] = Field(default_factory=list)
    schedule: sch.Schedule | None = None  # the best setting per concurrency level, its bands and crossover
    drift: Drift | None = None  # the interleaved baseline over time


def _short_label(rec: PointRecord, keys: Sequence[str], loads: bool) -> str:
    """The point in the words that differ between points (a key every point shares is left out)."""
    words = [f"{k}={rec.overrides[k]}" for k in keys if k in rec.overrides] or ["(profile)"]
    return " ".join(words) + (f" c={rec.concurrency}" if loads else "")


def _value(s: Sample, objective: str) -> float | None:
    return s.ttft_ms if objective == "ttft" else s.tok_s


def _strata(samples: Sequence[Sample], objective: str) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for s in samples:
        if s.ok:
            out.setdefault(s.prompt_id, []).append(_value(s, objective))
    return out


def _unpaired(a: Sequence[Sample], b: Sequence[Sample], objective: str) -> Delta:
    sa, sb = _strata(a, objective), _strata(b, objective)
    return bootstrap_delta({k: (sa[k], sb[k]) for k in sa.keys() & sb.keys()})


def _paired(a: Sequence[Sample], b: Sequence[Sample], objective: str) -> Delta:
    idx = {(s.prompt_id, s.repeat): s for s in a if s.ok}
    pairs = [
        (_value(idx[(s.prompt_id, s.repeat)], objective), _value(s, objective))
        for s in b
        if s.ok and (s.prompt_id, s.repeat) in idx
    ]
    return paired_delta(pairs)


def baseline_samples(state: SweepState, rec: PointRecord) -> tuple[list[Sample], bool]:
    """(the baseline samples a point is compared to, paired?)."""
    if rec.baseline_measurement is not None:
        return list(rec.baseline_measurement.samples), True
    seqs = set(rec.baseline_seqs)
    base = [b for b in state.baselines if b.ok and b.measurement.concurrency == rec.concurrency]
    chosen = [b for b in base if b.seq in seqs] or base
    return [s for b in chosen for s in b.measurement.samples], False


def _metric(rec: PointRecord, name: str) -> float | None:
    m = rec.measurement.metrics if rec.measurement else None
    if m is None:
        return None
    if name == "failed":
        return float(m.failed)
    return getattr(m, name, None)


def goodput(rec: PointRecord, cons: Sequence[Constraint]) -> float | None:
    """Output throughput counting only the tokens of requests that meet the per-request constraints
    (ttft_*, itl_*), computed from the samples so `sweep show --constraint` re-ranks correctly."""
    m = rec.measurement.metrics if rec.measurement else None
    if m is None or m.output_throughput is None or rec.measurement is None:
        return None
    per_req = [c for c in cons if c.metric.startswith(("ttft", "itl"))]
    ok = [s for s in rec.measurement.samples if s.ok]
    total = sum(s.output_tokens or 0 for s in ok)
    if not total:
        return None
    good = sum(
        s.output_tokens or 0
        for s in ok
        if all(c.ok(s.ttft_ms if c.metric.startswith("ttft") else s.itl_p50_ms) for c in per_req)
    )
    return m.output_throughput * good / total


def _objective(rec: PointRecord, objective: str, cons: Sequence[Constraint] = ()) -> float | None:
    if objective == "goodput":
        return goodput(rec, cons)
    return _metric(rec, {"tok_s": "tok_s", "ttft": "ttft_p50"}[objective])


def _front(points: Sequence[RankedPoint], x: str, y: str) -> set[int]:
    """Indices not dominated: x higher is better, y lower is better."""
    have = [p for p in points if getattr(p, x) is not None and getattr(p, y) is not None]
    out = set()
    for p in have:
        px, py = getattr(p, x), getattr(p, y)
        dominated = any(
            getattr(q, x) >= px and getattr(q, y) <= py and (getattr(q, x) > px or getattr(q, y) < py)
            for q in have
        )
        if not dominated:
            out.add(p.index)
    return out


def analyse(
    state: SweepState,
    constraints: Sequence[str] | None = None,
    objective: str | None = None,
    correct_drift: bool = True,
) -> SweepResults:
    objective = objective or state.objective
    cons: list[Constraint] = [
        parse_constraint(c) for c in (state.constraints if constraints is None else constraints)
    ]
    lower = objective in LOWER_IS_BETTER
    ranked: list[RankedPoint] = []
    keys = sorted({k for r in state.points for k in r.overrides})
    vary = [k for k in keys if len({r.overrides.get(k) for r in state.points}) > 1] or keys
    for rec in state.points:
        m = rec.measurement.metrics if rec.measurement else None
        rp = RankedPoint(
            index=rec.index,
            label=_short_label(rec, vary, len(state.loads) > 1),
            overrides=rec.overrides,
            concurrency=rec.concurrency,
            status=rec.status,
            error=rec.error,
            argv=rec.argv,
        )
        if rec.status == "done" and m is not None:
            rp.objective = _objective(rec, objective, cons)
            for k in ("tok_s", "ttft_p50", "ttft_p90", "itl_p50", "accept_length", "verify_passes",
                      "tokens_per_chunk", "step_ms", "gpu_mem_mb"):  # fmt: skip
                setattr(rp, k, getattr(m, k))
            rp.goodput = goodput(rec, cons)
            rp.violated = [
                c.text
                for c in cons
                if not c.ok(rp.goodput if c.metric == "goodput" else _metric(rec, c.metric))
            ]
            rp.meets_constraints = not rp.violated
            base, paired = baseline_samples(state, rec)
            d = (_paired if paired else _unpaired)(
                base, rec.measurement.samples if rec.measurement else [], objective
            )
            rp.delta_pct, rp.delta_lo_pct, rp.delta_hi_pct = d.pct, d.lo_pct, d.hi_pct
            words = ("lower", "higher") if lower else ("faster", "slower")
            rp.verdict = verdict(d, subject="point", higher_is_better=not lower, words=words)
        ranked.append(rp)
    ok = [p for p in ranked if p.status == "done" and p.objective is not None and p.meets_constraints]
    ok.sort(key=lambda p: (p.objective or 0.0) if lower else -(p.objective or 0.0))
    recs = {r.index: r for r in state.points}
    group = 0
    head: RankedPoint | None = None
    for i, p in enumerate(ok, start=1):
        p.rank = i
        if head is not None:
            a = recs[head.index].measurement
            b = recs[p.index].measurement
            d = _unpaired(a.samples if a else [], b.samples if b else [], objective)
            # an interval holding 0, or too little data for one: nothing tells this point from the head
            if not d.has_ci or not d.measurable:
                p.group = group
                continue
        group += 1
        head = p
        p.group = group
    done = [p for p in ranked if p.status == "done"]
    lat = _front(done, "tok_s", "ttft_p90")
    acc = _front(done, "accept_length", "step_ms")
    for p in ranked:
        p.pareto_latency = p.index in lat
        p.pareto_accept = p.index in acc
    best = ok[0] if ok else None
    drift = baseline_drift(state, correct=correct_drift)
    schedule = sch.build(state, objective, drift_factors=drift.factors)
    _mark_schedule(ranked, state, schedule, drift)
    base_tok: dict[int, float | None] = {}
    for n in state.loads:
        ms: list[Measurement] = [
            b.measurement for b in state.baselines if b.ok and b.measurement.concurrency == n
        ]
        vals = [m.metrics.tok_s for m in ms if m.metrics and m.metrics.tok_s is not None]
        base_tok[n] = sum(vals) / len(vals) if vals else None
    return SweepResults(
        sweep_id=state.id,
        ref=state.ref,
        baseline=state.baseline_ref or f"{state.ref} as the profile has it",
        objective=objective,
        constraints=[c.text for c in cons],
        points=ranked,
        best=best.index if best else None,
        best_command=best.argv if best else None,
        best_overrides=best.overrides if best else None,
        baseline_tok_s=base_tok,
        wall_s=state.wall_s,
        restored=state.restored,
        caveats=_caveats(state),
        schedule=schedule,
        drift=drift,
    )


def _mark_schedule(ranked: Sequence[RankedPoint], state: SweepState, s: sch.Schedule, drift: Drift) -> None:
    """Each point gets its cell's score, the reason it was rejected, whether it was chosen, its fairness."""
    cells = {(c.key, c.concurrency): c for c in s.cells}
    chosen = {(c.chosen, c.concurrency) for c in s.levels if c.chosen is not None}
    recs = {r.index: r for r in state.points}
    for p in ranked:
        key = (sch.cell_key(p.overrides), p.concurrency)
        cell = cells.get(key)
        if cell is not None and p.status == "done":
            p.score, p.mad, p.mean_in_flight, p.rejected = (
                cell.score,
                cell.mad,
                cell.mean_in_flight,
                cell.rejected,
            )
            p.chosen = key in chosen
        rec = recs.get(p.index)
        if rec is not None and rec.fairness is not None:
            p.flushed = rec.fairness.flushed
            temps = [g.temp_c for g in rec.fairness.gpus if g.temp_c is not None]
            p.gpu_temp_c = max(temps) if temps else None
            p.flags = list(rec.fairness.flags)
        if p.index in drift.flagged:
            p.flags.append(drift.flagged[p.index])
            p.drift_factor = drift.factors.get(p.index)


WARMUP_CAVEAT = "Each point is measured after "


def warmup_caveat(warmup: int) -> str:
    """The warm-up caveat as the sweep ran (it said "one warm-up request" for --warmup 0)."""
    how = (
        "no warm-up request: its first requests carry the cold start"
        if warmup <= 0
        else f"{warmup} warm-up request{'s' if warmup > 1 else ''}"
    )
    return (
        f"{WARMUP_CAVEAT}{how}; CUDA-graph and allocator warm-up beyond that, JIT kernels compiled on first use "
        "of a batch size, and thermal state are not controlled: a real host can drift, which is why the baseline "
        "is re-measured between points and every delta has an interval."
    )


def _caveats(state: SweepState) -> list[str]:
    # the warm-up caveat says what this sweep did (a state saved with the fixed sentence is corrected too)
    out = [warmup_caveat(state.warmup) if c.startswith(WARMUP_CAVEAT) else c for c in state.caveats]
    if any(r.versions.get("simulated") for r in state.points):
        out.insert(
            0,
            "SIMULATED: these points ran on ddtree-tui's simulator; the numbers are its model's, not a GPU's.",
        )
    return out


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


OBJECTIVE_HEADS = {"tok_s": "tok/s", "ttft": "TTFT p50 ms", "goodput": "goodput"}  # a column's words


def table(res: SweepResults, out: str | None = None) -> str:
    """The ranked table, failed points after, then the best point and its command line; `out`: the sweep's
    directory, named in the `apply it` line (a placeholder when not known)."""
    obj = OBJECTIVE_HEADS.get(res.objective, res.objective)
    head = f"{'rank':>4} {'grp':>3}  {'point':<44} {obj:>13} {'Δ vs base (95 % CI)':>26} {'TTFT p90':>9} {'accept':>6} {'step ms':>7} {'P':>2}"
    lines = [
        f"sweep of {res.ref}: objective {res.objective}"
        + (f", constraints {', '.join(res.constraints)}" if res.constraints else ""),
        f"baseline: {res.baseline}",
        head,
    ]
    order = sorted(res.points, key=lambda p: (p.rank is None, p.rank or 0, p.index))
    for p in order:
        if p.status != "done":
            continue
        ci = ""
        if p.delta_pct is not None:
            ci = f"{fmt_pct(p.delta_pct)} %"
            if p.delta_lo_pct is not None:
                ci += f" ({fmt_pct(p.delta_lo_pct)}…{fmt_pct(p.delta_hi_pct)})"
        front = ("L" if p.pareto_latency else "") + ("A" if p.pareto_accept else "")
        rank = str(p.rank) if p.rank else ("✗" if not p.meets_constraints else "-")
        grp = str(p.group) if p.group else "-"
        label = p.label
        lines.append(
            f"{rank:>4} {grp:>3}  {label[:44]:<44} {_f(p.objective):>13} {ci:>26} {_f(p.ttft_p90, 0):>9} {_f(p.accept_length, 2):>6} {_f(p.step_ms, 1):>7} {front:>2}"
        )
    broke = [p for p in res.points if p.status == "done" and not p.meets_constraints]
    if broke:
        lines.append("✗ outside the constraints:")
        lines += [f"  #{p.index} {p.label}: ✗ {', '.join(p.violated)}" for p in broke]
    unchosen = [p for p in res.points if p.status == "skipped" and (p.error or "").startswith(NOT_CHOSEN)]
    bad = [p for p in res.points if p.status != "done" and p not in unchosen]
    if bad:
        lines.append("not measured:")
        for p in bad:
            lines.append(f"  #{p.index} {p.label}: {p.status}" + (f": {p.error}" if p.error else ""))
    if unchosen:
        lines.append(f"{len(unchosen)} point(s) {unchosen[0].error}: never relaunched")
    lines.append(
        "grp: points in one group cannot be told apart (95 % CI of the difference holds 0, or too little data for an interval); P: Pareto front, L = tok/s vs TTFT p90, A = accept length vs step time"
    )
    if res.best is not None:
        b = next(p for p in res.points if p.index == res.best)
        lines.append(f"best: #{b.index} {b.label} — {b.verdict}")
        if res.best_command:
            lines.append(f"  command: {res.best_command}")
        where = shlex.quote(out) if out else "<the sweep's --out directory>"
        lines.append(f"  apply it: ddtree-tui sweep apply {where} --point {b.index}")
    else:
        lines.append("best: none (no point was measured and met the constraints)")
    lines += _schedule_lines(res, out)
    if res.caveats:
        lines.append("what this sweep cannot know:")
        lines += [f"  - {c}" for c in res.caveats]
    if res.restored is not None:
        lines.append(
            "service put back as the profile has it"
            if res.restored
            else "WARNING: the service could NOT be put back as the profile has it"
        )
    return "\n".join(lines)


def _schedule_lines(res: SweepResults, out: str | None) -> list[str]:
    """The schedule (more than one level measured), the baseline's drift and the fairness flags."""
    lines: list[str] = []
    s = res.schedule
    if s is not None and len(s.levels) > 1:
        lines.append(sch.table(s))
        if any(b.overrides for b in s.bands):
            where = shlex.quote(out) if out else "<the sweep's --out directory>"
            lines.append(f"  apply it: ddtree-tui sweep apply {where} --schedule (one service per band)")
    if res.drift is not None and res.drift.steps:
        lines.append(f"baseline drift: {res.drift.text}")
    flagged = [p for p in res.points if p.flags]
    if flagged:
        lines.append(f"flagged (fair arms): {len(flagged)} point(s)")
        lines += [f"  #{p.index} {p.label}: {'; '.join(p.flags)}" for p in flagged[:20]]
        if len(flagged) > 20:
            lines.append(f"  … and {len(flagged) - 20} more (results.json)")
    flushed = [p for p in res.points if p.flushed is not None]
    if flushed:
        n_ok = sum(1 for p in flushed if p.flushed)
        lines.append(f"prefix cache flushed before {n_ok} of {len(flushed)} point measurement(s)")
    return lines


def pareto_chart(res: SweepResults, width: int = 50, height: int = 12) -> str:
    """A text scatter of tok/s (x) vs TTFT p90 (y): * on the front, o off it, the best point B."""
    pts = [p for p in res.points if p.tok_s is not None and p.ttft_p90 is not None]
    if not pts:
        return "(no measured points)"
    xs = [p.tok_s or 0.0 for p in pts]
    ys = [p.ttft_p90 or 0.0 for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    grid = [[" "] * width for _ in range(height)]
    for p in pts:
        cx = int((p.tok_s - x0) / ((x1 - x0) or 1) * (width - 1))  # type: ignore[operator]
        cy = int((p.ttft_p90 - y0) / ((y1 - y0) or 1) * (height - 1))  # type: ignore[operator]
        ch = "B" if p.index == res.best else ("*" if p.pareto_latency else "o")
        grid[height - 1 - cy][cx] = ch
    rows = [f"TTFT p90 {y1:7.0f} ms ┤" + "".join(grid[0])]
    rows += ["                    │" + "".join(r) for r in grid[1:-1]]
    rows.append(f"         {y0:7.0f} ms ┤" + "".join(grid[-1]))
    rows.append("                    └" + "─" * width)
    rows.append(f"                     {x0:.1f} tok/s{' ' * max(1, width - 24)}{x1:.1f} tok/s")
    return "\n".join(rows)


CSV_FIELDS = ["index", "rank", "group", "status", "concurrency", "label", "objective", "delta_pct", "delta_lo_pct",
              "delta_hi_pct", "meets_constraints", "tok_s", "goodput", "ttft_p50", "ttft_p90", "itl_p50", "accept_length",
              "verify_passes", "tokens_per_chunk", "step_ms", "gpu_mem_mb", "pareto_latency", "pareto_accept", "error",
              "score", "mad", "mean_in_flight", "rejected", "chosen", "flushed", "gpu_temp_c", "drift_factor",
              "flags"]  # fmt: skip


def to_csv(res: SweepResults) -> str:
    keys = sorted({k for p in res.points for k in p.overrides})
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_FIELDS[:6] + keys + CSV_FIELDS[6:])
    for p in res.points:
        d: dict[str, Any] = p.model_dump()
        d["flags"] = "; ".join(p.flags)
        w.writerow(
            [d[k] for k in CSV_FIELDS[:6]]
            + [p.overrides.get(k, "") for k in keys]
            + [("" if d[k] is None else d[k]) for k in CSV_FIELDS[6:]]
        )
    return buf.getvalue()
