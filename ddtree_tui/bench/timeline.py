"""One request's chunk timeline and its metrics (TTFT, ITL, e2e, tok/s): the part of the measurement a bench
worker process needs (bench/client.py scores each request where its socket was read), kept apart from
bench/metrics.py's summaries so a worker imports no request or result model (issue 26: its start is CPU
every run pays per process). bench/metrics.py re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict


@dataclass(slots=True)  # one per streamed chunk: made, and read back, on the hot path
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
    return sorted_percentile(sorted(xs), q)


def sorted_percentile(s: Sequence[float], q: float) -> float | None:
    """`percentile` of values already in ascending order (no copy: a request's ITL quantiles read one
    sorted list 24 times)."""
    if not s:
        return None
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
    # one pass, cheap per read: a worker scores a request on the loop that reads the others' sockets
    itl: list[float] = []
    t_prev = chunks[reads[0][0]].t if reads else 0.0
    for lo, hi in reads[1:]:
        k = ks[lo] if hi - lo == 1 else sum(ks[lo:hi])
        t = chunks[lo].t
        if k > 0:
            gap = (t - t_prev) / k * 1000.0
            n = round(k)
            if n <= 1:
                itl.append(gap)
            else:
                itl.extend([gap] * n)
        t_prev = t
    if itl:
        itl.sort()  # once, and read 24 times as it is (sorted_percentile: no copy)
        q = [sorted_percentile(itl, p) for p in ITL_QUANTILES]
        out["itl_quantiles_ms"] = [round(x, 4) for x in q if x is not None]
        out["itl_mean_ms"] = sum(itl) / len(itl)
        out["itl_p50_ms"] = sorted_percentile(itl, 50)
        out["itl_p90_ms"] = sorted_percentile(itl, 90)
        out["itl_p99_ms"] = sorted_percentile(itl, 99)
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
    hist: dict[int, int] = {}
    for c in tl.chunks:
        nt = c.new_tokens
        if nt is not None and nt > 0:  # (such a chunk is a token-bearing one whatever its text)
            k = round(nt)
            hist[k] = hist.get(k, 0) + 1
    return dict(sorted(hist.items()))
