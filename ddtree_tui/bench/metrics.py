"""Pure measurement: one request's chunk timeline → its metrics, and many requests → per-prompt rows and
per-service summaries with deltas against a baseline.

Kept free of I/O so the definitions (what TTFT is, how ITL is spread over the tokens of a chunk) can be
tested on numbers alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal

from ddtree_tui.bench import stats
from ddtree_tui.bench.models import BenchTarget, PromptRow, RequestResult, ServiceCounts, ServiceSummary

# a request's timeline and its metrics live in bench/timeline.py (what a worker process imports); re-exported
from ddtree_tui.bench.timeline import ITL_QUANTILES as ITL_QUANTILES
from ddtree_tui.bench.timeline import Chunk as Chunk
from ddtree_tui.bench.timeline import Timeline as Timeline
from ddtree_tui.bench.timeline import TimelineMetrics as TimelineMetrics
from ddtree_tui.bench.timeline import percentile as percentile
from ddtree_tui.bench.timeline import timeline_metrics as timeline_metrics


def _med(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return statistics.median(v) if v else None


def _min(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return min(v) if v else None


def _max(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return max(v) if v else None


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000.0


def delta_pct(value: float | None, base: float | None) -> float | None:
    """(value − base) / base in %, None when either is missing or base is 0."""
    if value is None or base is None or base == 0:
        return None
    return (value - base) / base * 100.0


def pooled_accept(ok: Sequence[RequestResult]) -> float | None:
    """Accept length over the requests that report verify passes: Σ output tokens / Σ verify passes (None
    when none does; each caller has its own fallback)."""
    spec = [r for r in ok if r.spec_verify_ct and r.output_tokens]
    if not spec:
        return None
    return sum(r.output_tokens or 0 for r in spec) / sum(r.spec_verify_ct or 0 for r in spec)


def summarize(
    results: Sequence[RequestResult],
    targets: Sequence[BenchTarget],
    prompt_ids: Sequence[str],
    baseline: str | None,
    busy_s: dict[str, float] | None = None,
) -> tuple[list[PromptRow], list[ServiceSummary]]:
    """Per prompt × service rows (repeats aggregated) and per-service summaries; warm-ups excluded."""
    counted = [r for r in results if not r.warmup]
    rows: list[PromptRow] = []
    for pid in prompt_ids:
        for t in targets:
            rs = [r for r in counted if r.service == t.ref and r.prompt_id == pid]
            if not rs:
                continue
            ok = [r for r in rs if r.ok]
            rows.append(
                PromptRow(
                    prompt_id=pid,
                    service=t.ref,
                    algorithm=t.algorithm,
                    mode=t.mode,
                    n=len(ok),
                    failed=len(rs) - len(ok),
                    tok_s_median=_med([r.tok_s for r in ok]),
                    tok_s_min=_min([r.tok_s for r in ok]),
                    tok_s_max=_max([r.tok_s for r in ok]),
                    decode_tok_s_median=_med([r.decode_tok_s for r in ok]),
                    ttft_ms_median=_ms(_med([r.ttft_s for r in ok])),
                    ttft_ms_min=_ms(_min([r.ttft_s for r in ok])),
                    ttft_ms_max=_ms(_max([r.ttft_s for r in ok])),
                    e2e_s_median=_med([r.e2e_s for r in ok]),
                    output_tokens_median=_med([r.output_tokens for r in ok]),
                    accept_length_median=_med([r.accept_length for r in ok]),
                    itl_ms_median=_med([r.itl_p50_ms for r in ok]),
                    tokens_per_chunk_median=_med([r.tokens_per_chunk for r in ok]),
                )
            )
    if baseline:
        base_rows = {r.prompt_id: r for r in rows if r.service == baseline}
        for i, row in enumerate(rows):
            b = base_rows.get(row.prompt_id)
            if b is None or row.service == baseline:
                continue
            rows[i] = row.model_copy(
                update={
                    "delta_tok_s_pct": delta_pct(row.tok_s_median, b.tok_s_median),
                    "delta_ttft_pct": delta_pct(row.ttft_ms_median, b.ttft_ms_median),
                }
            )
    summary: list[ServiceSummary] = []
    for t in targets:
        rs = [r for r in counted if r.service == t.ref]
        ok = [r for r in rs if r.ok]
        prompt_meds = [r.tok_s_median for r in rows if r.service == t.ref and r.tok_s_median is not None]
        tokens = sum(r.output_tokens or 0 for r in ok)
        acc = pooled_accept(ok)
        acc = _med([r.accept_length for r in ok]) if acc is None else acc
        busy = (busy_s or {}).get(t.ref)
        by_prompt: dict[str, list[float]] = {}
        for r in ok:
            if r.tok_s is not None:
                by_prompt.setdefault(r.prompt_id, []).append(r.tok_s)
        pmeans = [statistics.fmean(v) for v in by_prompt.values()]
        summary.append(
            ServiceSummary(
                **ServiceCounts.of(t, rs).model_dump(),
                tok_s_median=_med([r.tok_s for r in ok]),
                tok_s_mean_of_prompts=sum(prompt_meds) / len(prompt_meds) if prompt_meds else None,
                decode_tok_s_median=_med([r.decode_tok_s for r in ok]),
                ttft_ms_median=_ms(_med([r.ttft_s for r in ok])),
                accept_length_mean=acc,
                output_tokens=tokens,
                output_throughput=tokens / busy if busy else None,
                request_throughput=len(ok) / busy if busy else None,
                reads=sum(r.reads for r in ok),
                coalesced_reads=sum(r.coalesced_reads for r in ok),
                tok_s_mean=statistics.fmean(pmeans) if pmeans else None,
            )
        )
    if baseline:
        base = next((s for s in summary if s.service == baseline), None)
        if base is not None:
            summary = [s if s.service == baseline else _with_delta(s, counted, baseline) for s in summary]
    return rows, summary


def _by_prompt(
    rs: Sequence[RequestResult], service: str, metric: Literal["tok/s", "TTFT"]
) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for r in rs:
        v = r.tok_s if metric == "tok/s" else (None if r.ttft_s is None else r.ttft_s * 1000.0)
        if r.service == service and r.ok and v is not None:
            out.setdefault(r.prompt_id, []).append(v)
    return out


def baseline_delta(
    counted: Sequence[RequestResult], baseline: str, service: str, metric: Literal["tok/s", "TTFT"] = "tok/s"
) -> stats.Delta:
    """THE Δ of `service` against the run's baseline on the prompts both ran (stats.delta_of_means, its one
    seed): computed once when the run is summarized and stored; text, HTML, TUI and JSON print the stored
    figure (a run saved before TTFT was stored gets this same function)."""
    a, b = _by_prompt(counted, baseline, metric), _by_prompt(counted, service, metric)
    return stats.delta_of_means({k: (a[k], b[k]) for k in sorted(set(a) & set(b))})


def _with_delta(s: ServiceSummary, counted: Sequence[RequestResult], baseline: str) -> ServiceSummary:
    """Δ tok/s against the baseline on the prompts both ran, with its interval and verdict: the statistic
    of the tok/s column (tok_s_mean), so the column and Δ agree; and Δ TTFT the same way."""
    d = baseline_delta(counted, baseline, s.service)
    dt = baseline_delta(counted, baseline, s.service, "TTFT")
    return s.model_copy(
        update={
            "delta_tok_s_pct": d.pct,
            "delta_tok_s_lo_pct": d.lo_pct,
            "delta_tok_s_hi_pct": d.hi_pct,
            "delta_n": d.n,
            "delta_method": d.method,
            "delta_verdict": stats.verdict(d, subject=s.service),
            "delta_ttft_mean_pct": dt.pct,
            "delta_ttft_lo_pct": dt.lo_pct,
            "delta_ttft_hi_pct": dt.hi_pct,
            "delta_ttft_n": dt.n,
            "delta_ttft_method": dt.method,
            "delta_ttft_verdict": stats.verdict(dt, s.service, False, ("lower TTFT", "higher TTFT")),
        }
    )
