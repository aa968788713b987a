"""Fair arms: every measurement of a sweep (a point's, a baseline's) starts from the same footing, and what
could not be made equal is recorded, so a hot GPU or a warm prefix cache does not decide the ranking.

Before each measurement (`before_measurement`, the runner's one hook):
- the server's prefix cache is flushed (`POST /flush_cache`, SGLang's endpoint; it answers 400 while requests
  run, so it is retried a few times) and the answer recorded: a point that ran on a warm cache of the point
  before it is not comparable (bench/cacheflush.py, the same reset `--flush-cache` does);
- the GPUs of the service are read from the fleet's telemetry (temperature, SM clock, clock-event reasons) and,
  while one is above `max_temp_c` or slowed by a thermal or power reason, waited for up to `settle_s`; a GPU
  still hot then is not waited for longer: the measurement is flagged with the reading (the source is kept,
  `replay` being a recording and not this service's GPU).

After the sweep (`baseline_drift`, pure): the baseline, re-measured between points (interleaved), is compared
with its first measurement at the same level; a change whose 95 % interval excludes 0 is drift beyond its
noise, and the points measured next to it are scaled by first / local baseline (`factors`) and flagged.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence

from pydantic import BaseModel, Field

from ddtree_tui.bench import cacheflush
from ddtree_tui.bench.models import BenchTarget
from ddtree_tui.bench.stats import bootstrap_delta
from ddtree_tui.fleet.protocol import SweepFleet
from ddtree_tui.sweep.state import FairnessRecord, GpuCheck, Measurement, PointRecord, SweepState

# clock-event reasons that mean the GPU is slowed by heat or power (telemetry/nvsmi.THROTTLE_BITS names)
SLOWING = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)


class FairnessSettings(BaseModel):
    flush: bool = True  # POST /flush_cache before every measurement
    max_temp_c: float | None = 83.0  # wait while a GPU is hotter (None: no temperature check)
    settle_s: float = Field(default=30.0, ge=0.0, le=3600.0)  # the longest wait for a GPU to cool or settle
    poll_s: float = Field(default=1.0, gt=0.0, le=60.0)


# --- the cache -------------------------------------------------------------------------------------------


async def flush_cache(target: BenchTarget) -> tuple[bool, str | None]:
    """The bench's cache reset for one measured server (bench/cacheflush.py: SGLang's /flush_cache, else
    vLLM's /reset_prefix_cache, a 400 while requests run retried): (ok, why not)."""
    rec = await cacheflush.flush_cache(target.ref, target.base_url, "sweep measurement", target.headers)
    if rec.ok:
        return True, None
    return False, f"HTTP {rec.status}: {rec.message}" if rec.status is not None else rec.message


# --- the GPU ---------------------------------------------------------------------------------------------


def gpu_readings(fleet: SweepFleet, ref: str, gpus: Sequence[int]) -> list[GpuCheck]:
    """The service's GPUs (all of the host's when it names none) as the fleet's telemetry has them now."""
    view = fleet.snapshot().host(ref.split("/", 1)[0])
    if view is None:
        return []
    src = view.telemetry.source if view.telemetry is not None else None
    return [
        GpuCheck(
            index=g.index,
            temp_c=g.temp_c,
            sm_clock_mhz=g.sm_clock_mhz,
            throttle_reasons=list(g.throttle_reasons or []),
            source=src,
            sampled_at=g.ts or None,
        )
        for g in view.gpus
        if not gpus or g.index in gpus
    ]


def why_unsettled(checks: Sequence[GpuCheck], settings: FairnessSettings) -> list[str]:
    """Why the GPUs are not ready for a fair measurement (empty: they are)."""
    out: list[str] = []
    for g in checks:
        if settings.max_temp_c is not None and g.temp_c is not None and g.temp_c > settings.max_temp_c:
            out.append(f"GPU {g.index} at {g.temp_c} °C (bound {settings.max_temp_c:g} °C)")
        slow = [r for r in g.throttle_reasons if r in SLOWING]
        if slow:
            clock = f" at {g.sm_clock_mhz} MHz" if g.sm_clock_mhz is not None else ""
            out.append(f"GPU {g.index} slowed{clock}: {', '.join(slow)}")
    return out


async def before_measurement(
    fleet: SweepFleet,
    ref: str,
    gpus: Sequence[int],
    settings: FairnessSettings,
    stop: asyncio.Event | None = None,
    also_flush: Sequence[str] = (),
) -> FairnessRecord:
    """The checks before one measurement of `ref`: flush its cache (and `also_flush`'s: a --baseline service
    measured in the same run), wait for its GPUs; what was done."""
    rec = FairnessRecord(at=time.time())
    if settings.flush:
        refs = [ref, *also_flush]
        try:
            targets = await fleet.bench_targets(refs)
        except Exception as e:  # no target: nothing to flush, said so
            rec.flushed, rec.flush_error = False, f"no target to flush: {type(e).__name__}: {e}"
        else:
            errors: list[str] = []
            for t in targets:
                ok, why = await flush_cache(t)
                if not ok:
                    errors.append(f"{t.ref}: {why}")
            rec.flushed = not errors and len(targets) == len(refs)
            rec.flush_error = "; ".join(errors) or (None if rec.flushed else "a service had no target")
        if rec.flushed is False:
            rec.flags.append(f"prefix cache not flushed: {rec.flush_error}")
    t0 = time.monotonic()
    rec.gpus = gpu_readings(fleet, ref, gpus)
    hot = why_unsettled(rec.gpus, settings)
    while hot and time.monotonic() - t0 < settings.settle_s and not (stop is not None and stop.is_set()):
        await asyncio.sleep(min(settings.poll_s, max(0.0, settings.settle_s - (time.monotonic() - t0))))
        rec.gpus = gpu_readings(fleet, ref, gpus)
        hot = why_unsettled(rec.gpus, settings)
    rec.waited_s = round(time.monotonic() - t0, 3) if rec.gpus else 0.0
    if hot:
        src = {g.source for g in rec.gpus if g.source}
        note = " (telemetry source replay: a recording, not this service's GPU)" if "replay" in src else ""
        rec.flags.append(f"GPU not settled after {rec.waited_s:.0f} s: {'; '.join(hot)}{note}")
    return rec


# --- baseline drift --------------------------------------------------------------------------------------


class DriftStep(BaseModel):
    """One baseline measurement against the first at its level."""

    concurrency: int
    seq: int  # the baseline record's seq, or the point index for a --baseline service measured with it
    at: float
    mean_tok_s: float | None = None  # mean per-request tok/s of the measurement
    delta_pct: float | None = None  # against the first at this level
    lo_pct: float | None = None
    hi_pct: float | None = None
    beyond_noise: bool = False  # the 95 % interval of the delta excludes 0


class Drift(BaseModel):
    steps: list[DriftStep] = Field(default_factory=list)
    factors: dict[int, float] = Field(default_factory=dict)  # point index -> factor (drift beyond noise only)
    flagged: dict[int, str] = Field(default_factory=dict)  # point index -> why
    text: str = ""


def _tok_strata(m: Measurement) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for s in m.samples:
        if s.ok and s.tok_s is not None:
            out.setdefault(s.prompt_id, []).append(s.tok_s)
    return out


def _mean(m: Measurement) -> float | None:
    v = [s.tok_s for s in m.samples if s.ok and s.tok_s is not None]
    return statistics.fmean(v) if v else None


def _series(state: SweepState) -> dict[int, list[tuple[int, float, Measurement]]]:
    """level -> [(seq, at, measurement)] in time order."""
    out: dict[int, list[tuple[int, float, Measurement]]] = {}
    if state.baseline_ref is not None:
        for r in state.points:
            if r.status == "done" and r.baseline_measurement is not None:
                out.setdefault(r.concurrency, []).append(
                    (r.index, r.finished_at or 0.0, r.baseline_measurement)
                )
    else:
        for b in state.baselines:
            if b.ok and b.measurement.samples:
                out.setdefault(b.measurement.concurrency, []).append((b.seq, b.at, b.measurement))
    for v in out.values():
        v.sort(key=lambda x: (x[1], x[0]))
    return out


def _linked(state: SweepState, rec: PointRecord) -> list[int]:
    """The same-service baseline seqs a point is compared to (before and after it)."""
    if rec.baseline_seqs:
        return list(rec.baseline_seqs)
    same = [b for b in state.baselines if b.ok and b.measurement.concurrency == rec.concurrency]
    before = [b for b in same if b.after_point < rec.index]
    after = [b for b in same if b.after_point >= rec.index]
    return [b.seq for b in ([before[-1]] if before else []) + ([after[0]] if after else [])]


def baseline_drift(state: SweepState, correct: bool = True) -> Drift:
    """Baseline drift per level, and the points it touches (module docstring)."""
    d = Drift()
    series = _series(state)
    by_seq: dict[tuple[int, int], DriftStep] = {}
    for level, ms in sorted(series.items()):
        first = ms[0][2]
        for seq, at, m in ms:
            step = DriftStep(concurrency=level, seq=seq, at=at, mean_tok_s=_mean(m))
            if m is not first:
                a, b = _tok_strata(first), _tok_strata(m)
                delta = bootstrap_delta({k: (a[k], b[k]) for k in a.keys() & b.keys()})
                step.delta_pct, step.lo_pct, step.hi_pct = delta.pct, delta.lo_pct, delta.hi_pct
                step.beyond_noise = delta.measurable
            d.steps.append(step)
            by_seq[(level, seq)] = step
    for rec in state.points:
        if rec.status != "done":
            continue
        if state.baseline_ref is not None:
            near = [by_seq[(rec.concurrency, rec.index)]] if (rec.concurrency, rec.index) in by_seq else []
        else:
            near = [
                by_seq[(rec.concurrency, s)] for s in _linked(state, rec) if (rec.concurrency, s) in by_seq
            ]
        drifted = [s for s in near if s.beyond_noise]
        ref = series[rec.concurrency][0][2] if rec.concurrency in series else None
        ref_mean = _mean(ref) if ref is not None else None
        local = [s.mean_tok_s for s in near if s.mean_tok_s is not None]
        if not drifted or not local or not ref_mean:
            continue
        f = ref_mean / statistics.fmean(local)
        worst = max(drifted, key=lambda s: abs(s.delta_pct or 0.0))
        d.flagged[rec.index] = (
            f"the baseline at c={rec.concurrency} drifted {worst.delta_pct or 0.0:+.1f} % "
            f"({worst.lo_pct or 0.0:+.1f}…{worst.hi_pct or 0.0:+.1f}) from its first measurement, beyond its noise"
            + (f"; scaled by {f:.3f}" if correct else "; not corrected")
        )
        if correct:
            d.factors[rec.index] = f
    moved = [s for s in d.steps if s.beyond_noise]
    if not d.steps:
        d.text = "no baseline re-measured: drift not known"
    elif not moved:
        n = len(d.steps)
        d.text = f"baseline stable: {n} measurement(s), no change beyond its noise (95 % interval holds 0)"
    else:
        w = max(moved, key=lambda s: abs(s.delta_pct or 0.0))
        d.text = (
            f"baseline drifted beyond its noise in {len(moved)} of {len(d.steps)} measurement(s) (largest "
            f"{w.delta_pct or 0.0:+.1f} % at c={w.concurrency}); {len(d.flagged)} point(s) "
            + ("scaled and flagged" if correct else "flagged")
        )
    return d
