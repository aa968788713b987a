"""The server's own metrics, scraped during a run and joined per window to what the client saw (issue 26,
`--server-metrics`).

Every `every_s` seconds each target's Prometheus `/metrics` is read (SGLang serves it with `--enable-metrics`)
through the same address the benchmark uses (a fleet service's port forwarded over its host's transport) and
parsed with prometheus_client's parser. The names are SGLang 0.5.23's (observability/metrics_collector.py):
gauges `sglang:num_running_reqs`, `num_queue_reqs`, `token_usage`, `gen_throughput`, `cache_hit_rate`,
`spec_accept_length`, `spec_accept_rate`; counters `sglang:num_requests_total`, `prompt_tokens_total`,
`generation_tokens_total`, `spec_verify_calls_total`, `cached_tokens_total` (0.5.23 counts a request's
tokens and verify calls when it finishes), `num_aborted_requests_total` (counted when the tokenizer manager
aborts a request: a client that went away, as `--cancel`'s requests do; such a request is also counted as
finished, with the tokens it got out); histograms `sglang:time_to_first_token_seconds`,
`inter_token_latency_seconds`, `e2e_request_latency_seconds`. Series of several label sets (ranks, 0.5.23's
`is_streaming`) are summed (counts, running/queued requests, throughput) or averaged (ratios).

Per window (the run's time slices, slices.py): gauges as mean and max over the scrapes inside it; counters
and histograms as the change across it, histogram quantiles interpolated inside the buckets as Prometheus'
`histogram_quantile` does; the accept length as Δgeneration tokens / Δverify calls where both counters
exist (the requests that finished in the window, as the client's slices count them), else the gauge.

When /metrics is off (404) or holds no `sglang:` series, the figures come from the scheduler's `Decode batch`
log lines (services/logs.py parses them; a fleet service's log is followed during the run, the time of a
line is when it was read): running and queued requests, token usage, gen throughput, accept length and rate,
no latency histograms. A `--url` server has no log we can follow: its source is then `none`, with the reason.
Every ServerMetrics says its source, and every ServerWindow too.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ddtree_tui.bench.windows import ServerMetrics, ServerSource, ServerWindow
from ddtree_tui.lib import http
from ddtree_tui.services.logs import LogMetrics, parse_line

if TYPE_CHECKING:  # aiohttp and prometheus_client are imported where a run first scrapes (issue 28: the
    import aiohttp  # TUI imports this module through bench.history; neither is needed for its first frame)

DEFAULT_EVERY_S = 2.0
MAX_BODY = 8 * 1024 * 1024  # a /metrics body (the services' probe cap)
MAX_SAMPLES = 20_000  # per service; past it every other sample is dropped (the interval doubles)
MAX_LOG_LINES = 50_000

GAUGES_SUM = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput")
GAUGES_MEAN = (
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
)
COUNTERS = (
    "sglang:num_requests_total",
    "sglang:prompt_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:spec_verify_calls_total",
    "sglang:cached_tokens_total",
    "sglang:num_aborted_requests_total",
)
HISTOGRAMS = {
    "ttft": "sglang:time_to_first_token_seconds",
    "itl": "sglang:inter_token_latency_seconds",
    "e2e": "sglang:e2e_request_latency_seconds",
}
NAMES = (*GAUGES_SUM, *GAUGES_MEAN, *COUNTERS, *HISTOGRAMS.values())
_KEEP = (*NAMES, *(f"# TYPE {n}" for n in (*GAUGES_SUM, *GAUGES_MEAN, *HISTOGRAMS.values())),
         *(f"# TYPE {n.removesuffix('_total')}" for n in COUNTERS), *(f"# TYPE {n}" for n in COUNTERS))  # fmt: skip


def keep_lines(body: str) -> str:
    """The lines of a /metrics body that parse_metrics reads (our series and their TYPE lines): what a
    scrape keeps until the run is over (a real server's body is mostly other series)."""
    return "\n".join(line for line in body.splitlines() if line.startswith(_KEEP)) + "\n"


@dataclass
class Hist:
    """One histogram summed over its label sets: cumulative count per upper bound (+Inf included)."""

    buckets: dict[float, float] = field(default_factory=dict)
    count: float = 0.0
    sum: float = 0.0


@dataclass
class Sample:
    """One /metrics answer: when it came (unix time), its values by series name, its histograms."""

    t: float
    values: dict[str, float]
    hists: dict[str, Hist]


def parse_metrics(text: str, t: float) -> Sample | None:
    """The SGLang series of one /metrics body, or None when it has none (not SGLang, or metrics off).
    ValueError for text that is not the Prometheus exposition format."""
    sums: dict[str, list[float]] = {}
    hists: dict[str, Hist] = {}
    wanted_h = set(HISTOGRAMS.values())
    seen = False
    from prometheus_client.parser import text_string_to_metric_families

    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("sglang:"):
            continue
        seen = True
        for s in fam.samples:
            v = float(s.value)
            if math.isnan(v):
                continue
            if fam.name in wanted_h:
                h = hists.setdefault(fam.name, Hist())
                if s.name.endswith("_bucket"):
                    le = float(s.labels.get("le", "inf"))
                    h.buckets[le] = h.buckets.get(le, 0.0) + v
                elif s.name.endswith("_count"):
                    h.count += v
                elif s.name.endswith("_sum"):
                    h.sum += v
            elif s.name in GAUGES_SUM or s.name in GAUGES_MEAN or s.name in COUNTERS:
                sums.setdefault(s.name, []).append(v)
    if not seen:
        return None
    values = {k: (statistics.fmean(v) if k in GAUGES_MEAN else sum(v)) for k, v in sums.items() if v}
    return Sample(t=t, values=values, hists=hists)


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets (upper bound → count): linear inside the
    bucket that holds the q-th observation (from 0 for the first bucket); in the +Inf bucket, the highest
    finite bound. None when empty."""
    bs = sorted(buckets.items())
    if not bs or bs[-1][1] <= 0:
        return None
    total = bs[-1][1]
    rank = q * total
    lo_b, lo_c = 0.0, 0.0
    for b, c in bs:
        if c >= rank and c > lo_c:
            if math.isinf(b):
                return lo_b
            return lo_b + (b - lo_b) * (rank - lo_c) / (c - lo_c)
        lo_b, lo_c = (b if not math.isinf(b) else lo_b), c
    return lo_b


def _delta_hist(a: Hist | None, b: Hist | None) -> Hist | None:
    """b − a (a counter reset, b below a, counts b alone)."""
    if b is None:
        return None
    if a is None or b.count < a.count:
        return b
    return Hist(
        buckets={le: c - a.buckets.get(le, 0.0) for le, c in b.buckets.items()},
        count=b.count - a.count,
        sum=b.sum - a.sum,
    )


def _delta(a: Sample | None, b: Sample, name: str) -> float | None:
    """b − a of one counter: a series absent from `a` started at 0 (a labelled counter appears at its first
    increment); one lower in `b` was reset (the server restarted) and counts `b` alone."""
    if a is None or name not in b.values:
        return None
    hi = b.values[name]
    lo = a.values.get(name)
    return hi if lo is None or hi < lo else hi - lo


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000.0


def _stat(xs: Sequence[float], how: Callable[[Sequence[float]], float]) -> float | None:
    return how(xs) if xs else None


def prometheus_window(
    service: str,
    samples: Sequence[Sample],
    index: int,
    start_s: float,
    end_s: float,
    origin: float,
    last: bool,
) -> ServerWindow:
    """One window from the scrapes (times since `origin`); `last`: the window takes every later scrape
    too (the final scrape comes just after the run's end)."""
    inside = [s for s in samples if start_s <= s.t - origin < end_s or (last and s.t - origin >= end_s)]
    before = [s for s in samples if s.t - origin <= start_s]
    upto = samples[-1:] if last else [s for s in samples if s.t - origin <= end_s]
    # the last scrape at or before the start; none (the origin came before the first scrape): the first one
    base = before[-1] if before else (samples[0] if samples else None)
    top = upto[-1] if upto else None

    def g(name: str) -> list[float]:
        return [s.values[name] for s in inside if name in s.values]

    w = ServerWindow(index=index, start_s=start_s, end_s=end_s, service=service, source="prometheus")
    w.samples = len(inside)
    for key, name in (
        ("running_reqs", "sglang:num_running_reqs"),
        ("queue_reqs", "sglang:num_queue_reqs"),
        ("token_usage", "sglang:token_usage"),
    ):
        v = g(name)
        setattr(w, f"{key}_mean", _stat(v, statistics.fmean))
        setattr(w, f"{key}_max", _stat(v, max))
    w.gen_throughput_mean = _stat(g("sglang:gen_throughput"), statistics.fmean)
    w.cache_hit_rate = _stat(g("sglang:cache_hit_rate"), statistics.fmean)
    acc = [x for x in g("sglang:spec_accept_length") if x > 0]  # 0 until something was decoded
    if acc:
        w.accept_length, w.accept_length_from = statistics.fmean(acc), "gauge"
        w.accept_rate = _stat(g("sglang:spec_accept_rate"), statistics.fmean)
    if top is None or top is base:
        return w
    w.requests = _delta(base, top, "sglang:num_requests_total")
    w.aborted = _delta(base, top, "sglang:num_aborted_requests_total")
    w.prompt_tokens = _delta(base, top, "sglang:prompt_tokens_total")
    w.generation_tokens = _delta(base, top, "sglang:generation_tokens_total")
    span = end_s - start_s
    if w.generation_tokens is not None and span > 0:
        w.output_throughput = w.generation_tokens / span
    verify = _delta(base, top, "sglang:spec_verify_calls_total")
    if verify and w.generation_tokens is not None:
        w.accept_length = w.generation_tokens / verify
        w.accept_length_from = "Δgeneration_tokens/Δspec_verify_calls"
    for key, name in HISTOGRAMS.items():
        h = _delta_hist(base.hists.get(name) if base else None, top.hists.get(name))
        if h is None or h.count <= 0:
            continue
        p = {q: _ms(histogram_quantile(q / 100, h.buckets)) for q in (50, 90, 99)}
        if key == "ttft":
            w.ttft_ms_p50, w.ttft_ms_p90, w.ttft_ms_p99, w.ttft_count = p[50], p[90], p[99], h.count
        elif key == "itl":
            w.itl_ms_p50, w.itl_ms_p99 = p[50], p[99]
        else:
            w.e2e_ms_p50, w.e2e_ms_p90, w.e2e_ms_p99, w.e2e_count = p[50], p[90], p[99], h.count
    return w


def log_window(
    service: str, lines: Sequence[tuple[float, LogMetrics]], index: int, start_s: float, end_s: float,
    origin: float, last: bool,
) -> ServerWindow:  # fmt: skip
    """One window from the Decode batch lines read in it (their read time since `origin`)."""
    inside = [m for t, m in lines if start_s <= t - origin < end_s or (last and t - origin >= end_s)]

    def g(get: Callable[[LogMetrics], float | int | None]) -> list[float]:
        return [float(v) for m in inside if (v := get(m)) is not None]

    w = ServerWindow(index=index, start_s=start_s, end_s=end_s, service=service, source="decode-log")
    w.samples = len(inside)
    for key, get in (
        ("running_reqs", lambda m: m.running_req),
        ("queue_reqs", lambda m: m.queue_req),
        ("token_usage", lambda m: m.usage),
    ):
        v = g(get)
        setattr(w, f"{key}_mean", _stat(v, statistics.fmean))
        setattr(w, f"{key}_max", _stat(v, max))
    w.gen_throughput_mean = _stat(g(lambda m: m.gen_throughput), statistics.fmean)
    acc = g(lambda m: m.accept_len)
    if acc:
        w.accept_length, w.accept_length_from = statistics.fmean(acc), "log"
        w.accept_rate = _stat(g(lambda m: m.accept_rate), statistics.fmean)
    return w


def window_edges(span_s: float, width_s: float) -> list[tuple[int, float, float]]:
    """(index, start_s, end_s) of the windows that cover [0, span_s), the last one cut short."""
    if width_s <= 0:
        raise ValueError(f"a window must be longer than 0 s, got {width_s}")
    n = max(1, math.ceil(span_s / width_s - 1e-9))
    return [(k, k * width_s, min((k + 1) * width_s, max(span_s, 1e-9))) for k in range(n)]


# --- the scraper ------------------------------------------------------------------------------------------------
LogLines = Callable[[], AsyncIterator[str]]


@dataclass
class ScrapeTarget:
    """A service to scrape: its name, the address the bench uses, its headers (an API key), and where its
    log can be followed (a fleet service; None for a `--url` server)."""

    ref: str
    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    logs: LogLines | None = None


@dataclass
class _State:
    target: ScrapeTarget
    source: ServerSource = "none"
    samples: list[Sample] = field(default_factory=list)
    lines: list[tuple[float, LogMetrics]] = field(default_factory=list)
    log_lines: int = 0
    failures: int = 0
    note: str | None = None
    names: set[str] = field(default_factory=set)
    stride: int = 1  # keep every stride-th sample once MAX_SAMPLES is reached
    raw: list[tuple[float, str]] = field(default_factory=list)  # bodies read during the run, parsed after it
    tick: int = 0


def _scrape_errors() -> tuple[type[BaseException], ...]:
    """What a failed scrape raises (aiohttp's errors are named on first use: lib/http.py REQUEST_ERRORS)."""
    return (*http.REQUEST_ERRORS, OSError)


class ServerScrape:
    """Scrapes every target's /metrics every `every_s` seconds while the run goes (`async with`), falling
    back to its Decode batch log lines; `result(origin, edges)` is what each server said, per window."""

    def __init__(
        self, targets: Sequence[ScrapeTarget], every_s: float = DEFAULT_EVERY_S, timeout_s: float = 5.0
    ):
        if every_s <= 0:
            raise ValueError(f"--server-metrics-every must be positive, got {every_s}")
        self.every_s = every_s
        self.timeout_s = min(timeout_s, max(0.5, every_s))
        self.states = [_State(t) for t in targets]
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ServerScrape:
        self._session = http.session(timeout=self.timeout_s)
        await asyncio.gather(*(self._first(st) for st in self.states))
        if any(st.source == "prometheus" for st in self.states):
            self._tasks.append(asyncio.create_task(self._loop()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        try:  # the final scrape: what the last window ends on
            await asyncio.gather(*(self._scrape(st) for st in self.states if st.source == "prometheus"))
        finally:
            if self._session is not None:
                await self._session.close()

    async def _get(self, st: _State) -> tuple[int, str]:
        assert self._session is not None
        import aiohttp

        url = st.target.base_url.rstrip("/") + "/metrics"
        async with self._session.get(
            url, headers=dict(st.target.headers), allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
        ) as r:  # fmt: skip
            return r.status, (await http.read_body(r, MAX_BODY)).decode("utf-8", "replace")

    async def _first(self, st: _State) -> None:
        """The first scrape decides the source: /metrics with sglang: series, else the log, else none."""
        why: str
        try:
            code, body = await self._get(st)
        except _scrape_errors() as e:
            why = f"/metrics could not be read ({http.describe(e)})"
        else:
            if code == 200:
                try:
                    sample = parse_metrics(body, time.time())
                except Exception as e:  # the parser's words for a bad body; a scrape never stops a run
                    sample, why = None, f"/metrics is not the Prometheus format ({type(e).__name__}: {e})"
                else:
                    why = "/metrics has no sglang: series"
                if sample is not None:
                    st.source = "prometheus"
                    self._keep(st, sample)
                    return
            else:
                why = f"/metrics answered {code}" + (
                    " (the server runs without --enable-metrics)" if code == 404 else ""
                )
        if st.target.logs is None:
            st.source, st.note = "none", f"{why}; no log to follow (a --url server): no server figures"
            return
        st.source, st.note = "decode-log", f"{why}: figures from the Decode batch log lines"
        self._tasks.append(asyncio.create_task(self._follow(st, st.target.logs)))

    def _keep(self, st: _State, s: Sample) -> None:
        st.names.update(s.values)
        st.names.update(s.hists)
        st.tick += 1
        if st.tick % st.stride:
            return
        st.samples.append(s)
        if len(st.samples) >= MAX_SAMPLES:  # a very long run: half the samples, twice the interval
            st.samples = st.samples[::2]
            st.stride *= 2

    async def _scrape(self, st: _State) -> None:
        """One scrape while the run goes: the body kept (only our series' lines), parsed after the run. The
        parser is pure Python (about 5 ms a body on a busy core): parsing here would stall the measuring
        client's event loop every few seconds, so the loop only reads and keeps."""
        try:
            code, body = await self._get(st)
        except _scrape_errors():
            st.failures += 1
            return
        if code != 200:
            st.failures += 1
            return
        st.tick += 1
        if st.tick % st.stride:
            return
        st.raw.append((time.time(), keep_lines(body)))
        if (
            len(st.raw) + len(st.samples) >= MAX_SAMPLES
        ):  # a very long run: half the samples, twice the interval
            st.raw = st.raw[::2]
            st.samples = st.samples[::2]
            st.stride *= 2

    def _parse_kept(self, st: _State) -> None:
        """The bodies kept during the run, parsed now (one that does not parse is a failed scrape)."""
        for t, text in st.raw:
            try:
                sample = parse_metrics(text, t)
            except Exception:  # a body that does not parse is a failed scrape, never a failed run
                sample = None
            if sample is None:
                st.failures += 1
            else:
                st.names.update(sample.values)
                st.names.update(sample.hists)
                st.samples.append(sample)
        st.raw = []
        st.samples.sort(key=lambda x: x.t)

    async def _loop(self) -> None:
        nxt = time.monotonic()
        while True:
            nxt += self.every_s
            await asyncio.sleep(max(0.0, nxt - time.monotonic()))
            await asyncio.gather(*(self._scrape(st) for st in self.states if st.source == "prometheus"))

    async def _follow(self, st: _State, logs: LogLines) -> None:
        try:
            async for line in logs():
                m = parse_line(line)
                if m is None or m.kind != "decode":
                    continue
                st.log_lines += 1
                if len(st.lines) < MAX_LOG_LINES:
                    st.lines.append((time.time(), m))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a log that cannot be followed loses the fallback, never the run
            st.note = f"{st.note}; the log stopped: {type(e).__name__}: {e}"

    def result(
        self,
        origin: float,
        edges: Sequence[tuple[int, float, float]],
        per_service: Mapping[str, Sequence[tuple[int, float, float]]] | None = None,
    ) -> list[ServerMetrics]:
        """What each server said, per window (`edges` from window_edges, times since `origin`; a soak's
        services have windows of their own, their turns: `per_service`)."""
        out: list[ServerMetrics] = []
        for st in self.states:
            self._parse_kept(st)
            windows: list[ServerWindow] = []
            mine = per_service.get(st.target.ref, edges) if per_service is not None else edges
            n = len(mine)
            for k, (i, a, b) in enumerate(mine):
                if st.source == "prometheus":
                    windows.append(prometheus_window(st.target.ref, st.samples, i, a, b, origin, k == n - 1))
                elif st.source == "decode-log":
                    windows.append(log_window(st.target.ref, st.lines, i, a, b, origin, k == n - 1))
            times = [s.t for s in st.samples] or [t for t, _ in st.lines]
            note = st.note
            if st.stride > 1:
                note = (note + "; " if note else "") + f"a long run: every {st.stride}th scrape kept"
            out.append(
                ServerMetrics(
                    service=st.target.ref, source=st.source,
                    url=st.target.base_url.rstrip("/") + "/metrics", every_s=self.every_s,
                    scrapes=st.tick, failures=st.failures, log_lines=st.log_lines,
                    first_at=datetime.fromtimestamp(times[0], UTC) if times else None,
                    last_at=datetime.fromtimestamp(times[-1], UTC) if times else None,
                    names=sorted(x for x in st.names if x.startswith("sglang:")), note=note, windows=windows,
                )
            )  # fmt: skip
        return out
