"""Pure measurement: one request's chunk timeline → its metrics, and many requests → per-prompt rows and
per-service summaries with deltas against a baseline.

Kept free of I/O so the definitions (what TTFT is, how ITL is spread over the tokens of a chunk) can be
tested on numbers alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from ddtree_tui.bench import stats
from ddtree_tui.bench.models import BenchTarget, PromptRow, RequestResult, ServiceCounts, ServiceSummary


@dataclass
class Chunk:
    t: float  # monotonic arrival time
    new_tokens: float | None  # tokens this chunk added (None: not known yet, e.g. OpenAI without usage)
    has_text: bool
    chars: int = 0  # characters of new text (answer and reasoning): the weight when tokens are estimated


@dataclass
class Timeline:
    """Chunk arrivals of one streamed request."""

    t_send: float
    chunks: list[Chunk] = field(default_factory=list)
    t_end: float | None = None

    def add(self, t: float, new_tokens: float | None, has_text: bool) -> None:
        self.chunks.append(Chunk(t, new_tokens, has_text))


def percentile(xs: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not xs:
        return None
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class TimelineMetrics(TypedDict):
    """What `timeline_metrics` measured of one request: RequestResult's fields of the same names."""

    ttft_s: float | None
    e2e_s: float | None
    tok_s: float | None
    decode_tok_s: float | None
    itl_mean_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    tokens_per_chunk: float | None
    chunks: int
    reads: int
    coalesced_reads: int
    itl_quantiles_ms: NotRequired[list[float]]
    chunk_tokens_hist: NotRequired[dict[int, int]]


def timeline_metrics(tl: Timeline, total_tokens: int | None) -> TimelineMetrics:
    """TTFT, e2e, tok/s, decode tok/s, ITL spread and tokens per chunk of one request.

    - TTFT: send → first chunk with non-empty text; reasoning (thinking) text counts, it is generated output.
    - tok/s: output tokens / end-to-end time (send → end of stream).
    - decode tok/s: tokens after the first text chunk / time from it to the last token-bearing chunk.
    - ITL: each gap between token-bearing chunks divided by the tokens of the later chunk, counted once per
      token (SGLang's definition), so a 4-token chunk after 40 ms is four 10 ms samples; its quantiles at
      0, 5, …, 100 % are kept (`itl_quantiles_ms`) for the report's CDF. The unit of time is the socket
      read, not the chunk: chunks that one read brought share its timestamp (a busy client reads several
      at once), so the gap since the previous read is spread over all the tokens of that read. Without
      that, every chunk but the first of a read is a 0 ms sample and a loaded client reads a median ITL of
      0; spread, the samples still add up to the measured time (the mean and TPOT are unchanged) and only
      spacing finer than one read, which was never measured, is smoothed. The tokens of the first read are
      not ITL samples (its gap is the TTFT). `reads` / `coalesced_reads`: token-bearing reads, and those
      that held several chunks.
    - chunk_tokens_hist: how many chunks carried 1, 2, … tokens (chunks whose count the server gave).
    Chunks whose token count is unknown share the known total evenly.
    """
    chunks = [c for c in tl.chunks if c.has_text or (c.new_tokens or 0) > 0]
    out: TimelineMetrics = {
        "ttft_s": None,
        "e2e_s": None,
        "tok_s": None,
        "decode_tok_s": None,
        "itl_mean_ms": None,
        "itl_p50_ms": None,
        "itl_p90_ms": None,
        "itl_p99_ms": None,
        "tokens_per_chunk": None,
        "chunks": len(chunks),
        "reads": 0,
        "coalesced_reads": 0,
    }
    reads = _reads(chunks)
    out["reads"] = len(reads)
    out["coalesced_reads"] = sum(1 for lo, hi in reads if hi - lo > 1)
    t_end = tl.t_end if tl.t_end is not None else (chunks[-1].t if chunks else None)
    if t_end is not None:
        out["e2e_s"] = max(0.0, t_end - tl.t_send)
    first = next((i for i, c in enumerate(chunks) if c.has_text), None)
    if first is not None:
        out["ttft_s"] = chunks[first].t - tl.t_send
    if not chunks or not total_tokens:
        return out
    hist = _chunk_tokens_hist(tl)
    if hist:
        out["chunk_tokens_hist"] = hist
    known = [c.new_tokens for c in chunks if c.new_tokens is not None]
    unknown = sum(1 for c in chunks if c.new_tokens is None)
    rest = max(0.0, total_tokens - sum(known))
    fill = rest / unknown if unknown else 0.0
    ks = [c.new_tokens if c.new_tokens is not None else fill for c in chunks]
    e2e = out["e2e_s"]
    if isinstance(e2e, float) and e2e > 0:
        out["tok_s"] = total_tokens / e2e
    out["tokens_per_chunk"] = sum(ks) / len(ks)
    if first is not None:
        before = sum(ks[: first + 1])
        span = chunks[-1].t - chunks[first].t
        if span > 0 and total_tokens - before > 0:
            out["decode_tok_s"] = (total_tokens - before) / span
    itl: list[float] = []
    for j in range(1, len(reads)):
        lo, hi = reads[j]
        k = sum(ks[lo:hi])
        if k <= 0:
            continue
        gap = (chunks[lo].t - chunks[reads[j - 1][0]].t) / k * 1000.0
        itl.extend([gap] * max(1, round(k)))
    if itl:
        itl.sort()  # once: percentile() of a sorted list sorts in linear time (24 quantiles a request)
        q = [percentile(itl, p) for p in ITL_QUANTILES]
        out["itl_quantiles_ms"] = [round(x, 4) for x in q if x is not None]
        out["itl_mean_ms"] = sum(itl) / len(itl)
        out["itl_p50_ms"] = percentile(itl, 50)
        out["itl_p90_ms"] = percentile(itl, 90)
        out["itl_p99_ms"] = percentile(itl, 99)
    return out


ITL_QUANTILES = tuple(range(0, 101, 5))


def _reads(chunks: Sequence[Chunk]) -> list[tuple[int, int]]:
    """The socket reads of a timeline as [lo, hi) index ranges: consecutive chunks with the same timestamp
    came in one read (bench/stream.py stamps each line with its read's time.monotonic())."""
    out: list[tuple[int, int]] = []
    lo = 0
    for i in range(1, len(chunks) + 1):
        if i == len(chunks) or chunks[i].t != chunks[lo].t:
            out.append((lo, i))
            lo = i
    return out


def _chunk_tokens_hist(tl: Timeline) -> dict[int, int]:
    """What the HTML report draws as the tokens-per-chunk distribution (chunks with a known token count
    only); empty when none is known."""
    chunks = [c for c in tl.chunks if c.has_text or (c.new_tokens or 0) > 0]
    hist: dict[int, int] = {}
    for c in chunks:
        if c.new_tokens is not None and c.new_tokens > 0:
            k = round(c.new_tokens)
            hist[k] = hist.get(k, 0) + 1
    return dict(sorted(hist.items()))


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
