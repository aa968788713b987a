"""Drift in a soak's windows (`detect_drift`), per service, against the baseline = the median of windows 1
and 2 (window 0 is the warm-up); the rules are in soak.py's docstring. Pure: a function of the windows, so
a reader of a saved or unfinished soak (bench/history.py) finds its drift without the engine.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence

from ddtree_tui.bench.results import Drift, DriftKind, SoakWindow

DECAY = 0.20
GROWTH = 0.50
GROWTH_MIN_MS = 20.0
CREEP_WINDOWS = 3
CREEP_MIB = 256.0


def _med(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return statistics.median(v) if v else None


def _two_running(ws: Sequence[SoakWindow], pred: Callable[[SoakWindow], bool]) -> SoakWindow | None:
    """The first of two windows running that both satisfy `pred`."""
    for a, b in itertools.pairwise(ws):
        if pred(a) and pred(b):
            return a
    return None


def _decayed(thr0: float) -> Callable[[SoakWindow], bool]:
    def pred(x: SoakWindow) -> bool:
        v = x.metrics.output_throughput
        return v is not None and v < (1 - DECAY) * thr0

    return pred


def _grown(ttft0: float) -> Callable[[SoakWindow], bool]:
    def pred(x: SoakWindow) -> bool:
        v = x.metrics.ttft_ms.p50
        return v is not None and v > (1 + GROWTH) * ttft0 and v - ttft0 >= GROWTH_MIN_MS

    return pred


def _creep(svc: str, ws: Sequence[SoakWindow]) -> Drift | None:
    run_start: SoakWindow | None = None
    total, count = 0.0, 0
    for a, w in itertools.pairwise(ws):
        pm, m = a.gpu_memory_mib(), w.gpu_memory_mib()
        if pm is not None and m is not None and m > pm:
            if run_start is None:
                run_start, total, count = w, 0.0, 0
            total += m - pm
            count += 1
            if count >= CREEP_WINDOWS and total >= CREEP_MIB:
                detail = f"GPU memory +{total:.0f} MiB over {count} windows and rising"
                return _began(svc, "gpu_memory_creep", run_start, detail)
        else:
            run_start = None
    return None


def _began(svc: str, kind: DriftKind, w: SoakWindow, detail: str) -> Drift:
    """A drift of `svc` that began at window `w`."""
    return Drift(service=svc, kind=kind, window=w.index, at_s=w.start_s, detail=detail)


def _drift_one(svc: str, ws: Sequence[SoakWindow]) -> list[Drift]:
    out: list[Drift] = []
    base, rest = ws[1:3], ws[3:]
    if not base:
        return out
    thr0 = _med([w.metrics.output_throughput for w in base])
    ttft0 = _med([w.metrics.ttft_ms.p50 for w in base])
    if thr0 and (w := _two_running(rest, _decayed(thr0))):
        detail = f"output {w.metrics.output_throughput:.1f} tok/s against {thr0:.1f} at the start"
        out.append(_began(svc, "tok_s_decay", w, detail))
    if ttft0 and (w := _two_running(rest, _grown(ttft0))):
        detail = f"TTFT p50 {w.metrics.ttft_ms.p50:.0f} ms against {ttft0:.0f} ms at the start"
        out.append(_began(svc, "ttft_growth", w, detail))
    if (c := _creep(svc, ws)) is not None:
        out.append(c)
    if all(w.metrics.failed == 0 for w in base) and (w := next((x for x in rest if x.metrics.failed), None)):
        detail = f"{w.metrics.failed} failed ({w.metrics.error_rate * 100:.0f} %)"
        out.append(_began(svc, "error_onset", w, detail))
    if w := next((x for x in ws if x.probe.restarted), None):
        out.append(_began(svc, "restart", w, w.probe.note or "restarted"))
    if w := next((x for x in ws if x.probe.healthy is False), None):
        out.append(_began(svc, "unhealthy", w, f"/health {w.probe.health_status or 'unreachable'}"))
    return out


def detect_drift(windows: Sequence[SoakWindow]) -> list[Drift]:
    """The drifts of each service, with the window where each began (rules in the module docstring)."""
    by: dict[str, list[SoakWindow]] = {}
    for w in windows:
        by.setdefault(w.service, []).append(w)
    out = [d for svc, ws in by.items() for d in _drift_one(svc, sorted(ws, key=lambda w: w.index))]
    return sorted(out, key=lambda d: (d.window, d.service, d.kind))
