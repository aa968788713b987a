"""GPU telemetry joined to a benchmark run, and the energy it took (issue 26).

Why a module of its own: a run's J/token must come from the same GPU samples the TUI shows (the fleet's
telemetry, never a second sampler), integrated one way, and attributed to requests one way, so the JSON, CSV,
HTML and table all carry one figure. The fleet records the samples of the targets' GPUs while the run goes
(fleet/bench_energy.py); everything here is pure arithmetic on them, so it is tested exactly.

- Energy of a GPU over the run = ∫ power dt over [run start, run end], by the trapezoid rule over the
  samples' own timestamps (`GpuSample.ts`, the time the telemetry stamped each sample): power is taken as
  linear between two samples, and at the run's edges it is interpolated between the samples either side.
  Only the span the samples cover is integrated; a run covered less than MIN_COVERAGE, with fewer than
  MIN_SAMPLES samples inside it, or with a gap in them (the telemetry stalled), gets no number, and its
  note says why.
- Per request: each sample interval's energy is shared among the requests in flight on that GPU in
  proportion to the output tokens each produced in the interval, a request's tokens taken as spread evenly
  over its life (send to last byte). Energy of an interval with no counted request in flight (idle, or only
  warm-ups) is kept apart (`idle_energy_j`). So Σ per-request energy + that = the GPU's energy.
- J/token of a service = the energy attributed to its requests / their output tokens; of the run = the GPUs'
  whole energy (idle included) / every output token.
- Per window: the run cut into equal windows; each has the samples in it, mean utilisation, memory, power, SM
  clock, the highest temperature, and its energy.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import BaseModel, Field

from ddtree_tui.model.snapshot import GpuSample

MIN_SAMPLES = 3  # samples inside the run below which no energy is given (two points are one trapezoid)
MIN_COVERAGE = 0.9  # share of the run the samples must span
MAX_GAP_INTERVALS = 5.0  # a gap between samples inside the run longer than this many intervals: no number
DEFAULT_WINDOWS = 10  # windows a run is cut into, unless that makes a window shorter than two samples
# where the numbers come from, as a reader knows them (TelemetryStatus.source -> words)
SOURCE_WORDS = {
    "nvml": "NVML",
    "nvidia-smi": "nvidia-smi",
    "nvidia-smi-oneshot": "nvidia-smi",
    "prometheus": "DCGM (through Prometheus)",
    "replay": "replay/simulated (a recording whose power follows the simulated load: modelled)",
    "sim": "simulated (the simulator's modelled GPU)",
}
URL_NOTE = "no GPU telemetry for URL targets (a --url server has no fleet host to sample)"
ATTRIBUTION = (
    "each sample interval's energy shared among the requests in flight on the GPU by the output tokens each "
    "produced in it (a request's tokens spread evenly over its life); intervals with no counted request in "
    "flight (idle, warm-ups) are unattributed"
)


class Point(NamedTuple):
    """One GPU sample as the integration needs it (times are unix seconds)."""

    ts: float
    power_w: float | None
    util_pct: float | None = None
    mem_mib: float | None = None
    sm_mhz: float | None = None
    temp_c: float | None = None


class Span(NamedTuple):
    """One counted request as attribution needs it."""

    key: int  # its index in the run's results
    start: float  # unix time sent
    end: float  # unix time of its last byte
    tokens: float  # output tokens


def point_of(g: GpuSample) -> Point:
    return Point(g.ts, g.power_w, g.util_gpu, g.mem_used_mb, g.sm_clock_mhz, g.temp_c)


def _power(pts: Sequence[Point]) -> list[tuple[float, float]]:
    """(ts, W) of the samples that have a power reading, in time order, one per timestamp."""
    out: dict[float, float] = {}
    for p in pts:
        if p.power_w is not None:
            out[p.ts] = float(p.power_w)
    return sorted(out.items())


def _at(pw: Sequence[tuple[float, float]], t: float) -> float:
    """Power at `t` inside the samples' span, linear between the two samples around it."""
    i = bisect.bisect_right([x for x, _ in pw], t)
    if i <= 0:
        return pw[0][1]
    if i >= len(pw):
        return pw[-1][1]
    (t0, p0), (t1, p1) = pw[i - 1], pw[i]
    return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)


def energy_j(pts: Sequence[Point], t0: float, t1: float) -> float:
    """∫ power dt over [t0, t1] ∩ the samples' span, trapezoid over the samples (exact for power linear
    between samples); 0 when fewer than two samples have power."""
    return sum(e for _, _, e in intervals(pts, t0, t1))


def intervals(pts: Sequence[Point], t0: float, t1: float) -> list[tuple[float, float, float]]:
    """(start, end, joules) of each piece between consecutive samples, clipped to [t0, t1]."""
    pw = _power(pts)
    out: list[tuple[float, float, float]] = []
    for (a, pa), (b, pb) in itertools.pairwise(pw):
        lo, hi = max(a, t0), min(b, t1)
        if hi <= lo:
            continue
        plo = pa + (pb - pa) * (lo - a) / (b - a)
        phi = pa + (pb - pa) * (hi - a) / (b - a)
        out.append((lo, hi, (plo + phi) / 2 * (hi - lo)))
    return out


def coverage(pts: Sequence[Point], t0: float, t1: float) -> float:
    """Share of [t0, t1] the power samples span (0…1)."""
    pw = _power(pts)
    if len(pw) < 2 or t1 <= t0:
        return 0.0
    return max(0.0, min(t1, pw[-1][0]) - max(t0, pw[0][0])) / (t1 - t0)


def attribute(
    pts: Sequence[Point], spans: Sequence[Span], t0: float, t1: float
) -> tuple[dict[int, float], float]:
    """({request key: joules}, idle joules): each interval's energy shared by the tokens produced in it."""
    per: dict[int, float] = {}
    idle = 0.0
    for lo, hi, e in intervals(pts, t0, t1):
        share: dict[int, float] = {}
        for s in spans:
            life = s.end - s.start
            if life <= 0 or s.tokens <= 0:
                continue
            overlap = min(hi, s.end) - max(lo, s.start)
            if overlap > 0:
                share[s.key] = s.tokens * overlap / life
        whole = sum(share.values())
        if whole <= 0:
            idle += e
            continue
        for k, n in share.items():
            per[k] = per.get(k, 0.0) + e * n / whole
    return per, idle


# --- what a run records -----------------------------------------------------------------------------------------
class GpuWindowStats(BaseModel):
    """One GPU over one window of the run: means of its samples there (None where it has none)."""

    window: int
    start_s: float  # seconds from the run's start
    end_s: float
    samples: int = 0
    util_pct: float | None = None
    mem_used_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temp_c_max: float | None = None
    energy_j: float | None = None  # ∫ power over the window (None: the samples do not cover it)


class GpuEnergy(BaseModel):
    """One GPU a target runs on, sampled through the run."""

    host: str
    gpu: int
    name: str | None = None
    uuid: str | None = None
    services: list[str] = Field(default_factory=list)  # the run's targets on this GPU
    join: str = "pid"  # how it was tied to them: pid (its processes), profile (the service's gpus), host
    source: str | None = None  # TelemetryStatus.source of its host: nvml, nvidia-smi, prometheus, replay
    samples: int = 0  # samples inside the run
    interval_s: float | None = None  # median time between samples
    coverage: float = 0.0  # share of the run the samples span
    energy_j: float | None = None  # None: too few samples (see note)
    idle_energy_j: float | None = None  # of it, intervals with no counted request in flight (idle, warm-ups)
    mean_power_w: float | None = None
    note: str | None = None
    windows: list[GpuWindowStats] = Field(default_factory=list)


class ServiceEnergy(BaseModel):
    """A target's share: the energy attributed to its requests."""

    service: str
    gpus: list[str] = Field(default_factory=list)  # HOST:GPU
    requests: int = 0  # counted successful requests with an attributed energy
    output_tokens: int = 0
    energy_j: float | None = None
    j_per_token: float | None = None
    j_per_request_median: float | None = None
    note: str | None = None


class RunEnergy(BaseModel):
    """The run's GPU telemetry and energy (bench/energy.py says how each number is made)."""

    source: str | None = None  # in words: NVML, nvidia-smi, DCGM, replay/simulated, or None (no telemetry)
    measured_by: str = "the fleet's telemetry (GpuSample.ts timestamps)"
    window_s: float | None = None
    samples: int = 0  # over every GPU, inside the run
    min_samples: int = MIN_SAMPLES
    energy_j: float | None = None  # every sampled GPU, idle included
    output_tokens: int = 0
    j_per_token: float | None = None  # energy_j / every counted output token
    attribution: str = ATTRIBUTION
    gpus: list[GpuEnergy] = Field(default_factory=list)
    services: list[ServiceEnergy] = Field(default_factory=list)
    note: str | None = None  # why a number is missing (URL targets, too few samples, telemetry off)


class GpuTrack(NamedTuple):
    """What the fleet recorded of one GPU: its samples and whom they belong to."""

    host: str
    gpu: int
    name: str | None
    uuid: str | None
    services: list[str]
    join: str
    source: str | None
    points: list[Point]


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def window_length(t0: float, t1: float, interval: float | None) -> float:
    """DEFAULT_WINDOWS equal windows, none shorter than two sample intervals (one window at least)."""
    whole = max(t1 - t0, 1e-9)
    shortest = 2 * interval if interval else whole / DEFAULT_WINDOWS
    return min(whole, max(whole / DEFAULT_WINDOWS, shortest))


def _windows(pts: Sequence[Point], t0: float, t1: float, w: float) -> list[GpuWindowStats]:
    out: list[GpuWindowStats] = []
    n = max(1, round((t1 - t0) / w))
    step = (t1 - t0) / n
    for i in range(n):
        a, b = t0 + i * step, t0 + (i + 1) * step
        inside = [p for p in pts if a <= p.ts < b or (i == n - 1 and p.ts == b)]
        cov = coverage(pts, a, b)
        temps = [p.temp_c for p in inside if p.temp_c is not None]
        out.append(
            GpuWindowStats(
                window=i, start_s=round(a - t0, 6), end_s=round(b - t0, 6), samples=len(inside),
                util_pct=_mean([p.util_pct for p in inside]), mem_used_mib=_mean([p.mem_mib for p in inside]),
                power_w=_mean([p.power_w for p in inside]), sm_clock_mhz=_mean([p.sm_mhz for p in inside]),
                temp_c_max=max(temps) if temps else None,
                energy_j=energy_j(pts, a, b) if cov >= MIN_COVERAGE else None,
            )
        )  # fmt: skip
    return out


def gpu_energy(
    track: GpuTrack, spans: Sequence[Span], t0: float, t1: float
) -> tuple[GpuEnergy, dict[int, float]]:
    """One GPU's record of the run and the energy of each request on it (empty when it has no number)."""
    pts = sorted(track.points, key=lambda p: p.ts)
    inside = [p for p in pts if t0 <= p.ts <= t1]
    gaps = [b.ts - a.ts for a, b in itertools.pairwise(pts) if b.ts > a.ts]
    interval = statistics.median(gaps) if gaps else None
    cov = coverage(pts, t0, t1)
    g = GpuEnergy(
        host=track.host, gpu=track.gpu, name=track.name, uuid=track.uuid, services=track.services,
        join=track.join, source=track.source, samples=len(inside), interval_s=interval, coverage=round(cov, 4),
        mean_power_w=_mean([p.power_w for p in inside]),
        windows=_windows(pts, t0, t1, window_length(t0, t1, interval)),
    )  # fmt: skip
    if len([p for p in inside if p.power_w is not None]) < MIN_SAMPLES:
        g.note = (
            f"too few GPU samples with power inside the run ({len(inside)}; at least {MIN_SAMPLES} needed): "
            "run longer or sample faster ([telemetry] interval_ms)"
        )
        return g, {}
    if cov < MIN_COVERAGE:
        g.note = f"the samples span {cov:.0%} of the run (at least {MIN_COVERAGE:.0%} needed)"
        return g, {}
    pw = [t for t, _ in _power(pts)]
    gap = max((b - a for a, b in itertools.pairwise(pw) if b > t0 and a < t1), default=0.0)
    if interval and gap > MAX_GAP_INTERVALS * interval:
        g.note = f"no GPU sample for {gap:.1f} s inside the run (the telemetry stalled): no number"
        return g, {}
    per, idle = attribute(pts, spans, t0, t1)
    g.energy_j = energy_j(pts, t0, t1)
    g.idle_energy_j = idle
    return g, per


def run_energy(
    tracks: Sequence[GpuTrack],
    spans_of: dict[str, list[Span]],
    t0: float,
    t1: float,
    services: Sequence[str],
) -> tuple[RunEnergy, dict[int, float]]:
    """The run's RunEnergy and each request's joules (by Span.key), from the recorded GPUs and the counted
    requests of each service (`spans_of`)."""
    all_tokens = int(sum(s.tokens for ss in spans_of.values() for s in ss))
    sources = sorted({t.source for t in tracks if t.source})
    run = RunEnergy(
        source="; ".join(SOURCE_WORDS.get(s, s) for s in sources) or None,
        output_tokens=all_tokens,
    )
    if not tracks:
        run.note = "no GPU samples of the targets' GPUs arrived during the run (is the host's telemetry on?)"
        return run, {}
    per: dict[int, float] = {}
    totals: list[float] = []
    for tr in tracks:
        spans = [s for svc in tr.services for s in spans_of.get(svc, [])]
        g, got = gpu_energy(tr, spans, t0, t1)
        run.gpus.append(g)
        run.samples += g.samples
        run.window_s = run.window_s or (g.windows[0].end_s - g.windows[0].start_s if g.windows else None)
        if g.energy_j is None:
            continue
        totals.append(g.energy_j)
        for k, e in got.items():
            per[k] = per.get(k, 0.0) + e
    missing = [g for g in run.gpus if g.energy_j is None]
    if missing:
        run.note = "; ".join(f"{g.host} GPU {g.gpu}: {g.note}" for g in missing)
    else:
        run.energy_j = sum(totals)
        run.j_per_token = run.energy_j / all_tokens if all_tokens else None
    for svc in services:
        gpus = [g for g in run.gpus if svc in g.services]
        spans = spans_of.get(svc, [])
        se = ServiceEnergy(
            service=svc,
            gpus=[f"{g.host}:{g.gpu}" for g in gpus],
            output_tokens=int(sum(s.tokens for s in spans)),
        )
        if not gpus:
            se.note = "none of its GPUs was sampled"
        elif any(g.energy_j is None for g in gpus):
            se.note = "; ".join(g.note or "" for g in gpus if g.energy_j is None)
        else:
            mine = [per[s.key] for s in spans if s.key in per]
            se.requests = len(mine)
            se.energy_j = sum(mine)
            se.j_per_token = se.energy_j / se.output_tokens if se.output_tokens else None
            se.j_per_request_median = statistics.median(mine) if mine else None
        run.services.append(se)
    return run, per


class LevelEnergy(BaseModel):
    """A load level's energy (a `--load --energy` run): the same arithmetic over the level's requests and
    time span, so J/token can be read against the load."""

    level: float
    label: str
    energy: RunEnergy
