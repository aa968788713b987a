"""Time slices (issue 26, AIPerf's `--slice-duration`; ours `--slice 5s`): every client metric also per
window of the run, for any run kind, and the server's figures of the same window beside them.

One statistic, not a second one: a window's figures are levels.level_service over the counted requests that
finished in it (the function the load levels and the soak's windows use), the window's length as the time
the service was measured. A soak is already measured in windows: its slices *are* its windows (`--slice` on
a soak sets `--window`), read from `SoakRun.windows`, never computed or stored twice. An agentic run's turns
are sliced alike (each turn records when it was sent).

The windows start at the run's origin (its `started_at`; a soak's, when its measuring began) and are
`width_s` long, the last cut short. Each row also carries the client's requests in flight (time-weighted mean
and max over the window), what the over-saturation test and the server's `num_running_reqs` are compared to.
`joined` pairs every row with the server's window (servermetrics.py) for the tables, the CSV and the HTML.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import Protocol

from ddtree_tui.bench.levels import LevelService, level_service
from ddtree_tui.bench.load import Slo
from ddtree_tui.bench.models import BenchRun, BenchTarget, RequestResult
from ddtree_tui.bench.results import AgenticRun, LoadRun, SoakRun, TurnResult
from ddtree_tui.bench.servermetrics import window_edges
from ddtree_tui.bench.windows import ServerMetrics, ServerWindow, SliceRow, SliceSet

AnyRunLike = BenchRun | LoadRun | SoakRun | AgenticRun


def row_of(ls: LevelService, index: int, start_s: float, end_s: float) -> SliceRow:
    """A window's row from the level statistics (the projection the CSV and the tables show)."""
    return SliceRow(
        index=index, start_s=start_s, end_s=end_s, service=ls.service, n=ls.n, failed=ls.failed,
        aborted=ls.aborted, error_rate=ls.error_rate, request_throughput=ls.request_throughput,
        output_throughput=ls.output_throughput, tok_s_mean=ls.tok_s_mean, ttft_ms_p50=ls.ttft_ms.p50,
        ttft_ms_p90=ls.ttft_ms.p90, ttft_ms_p99=ls.ttft_ms.p99, tpot_ms_p50=ls.tpot_ms.p50,
        tpot_ms_p99=ls.tpot_ms.p99, itl_ms_p50=ls.itl_ms.p50, itl_ms_p99=ls.itl_ms.p99,
        e2e_ms_p50=ls.e2e_ms.p50, e2e_ms_p90=ls.e2e_ms.p90, e2e_ms_p99=ls.e2e_ms.p99,
        accept_length=ls.accept_length, cached_tokens=ls.cached_tokens, goodput_pct=ls.goodput_pct,
        mean_in_flight=ls.mean_in_flight, max_in_flight=ls.max_in_flight,
    )  # fmt: skip


def _end(r: RequestResult) -> float:
    """When a request finished (a failure without an end: when it was sent)."""
    return r.started_at + (r.e2e_s if r.e2e_s is not None else 0.0)


def _in_flight(rs: Sequence[RequestResult], lo: float, hi: float) -> tuple[float | None, int | None]:
    """Requests in flight over [lo, hi) (unix times): time-weighted mean and max."""
    spans = [(max(lo, r.started_at), min(hi, _end(r))) for r in rs if r.started_at < hi and _end(r) > lo]
    if hi <= lo:
        return None, None
    mean = sum(b - a for a, b in spans) / (hi - lo)
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    top = cur = 0
    for _, d in events:
        cur += d
        top = max(top, cur)
    return mean, top


def compute(
    results: Sequence[RequestResult], origin: float, span_s: float, width_s: float, slo: Slo | None = None
) -> SliceSet:
    """The slices of counted requests (warm-ups left out): one row per window × service that had a
    request in flight or finishing in it, services in the order they first appear."""
    counted = [r for r in results if not r.warmup]
    services = list(dict.fromkeys(r.service for r in counted))
    rows: list[SliceRow] = []
    for idx, a, b in window_edges(span_s, width_s):
        lo, hi = origin + a, origin + b
        last = b >= span_s - 1e-9
        for ref in services:
            mine = [r for r in counted if r.service == ref]
            done = [r for r in mine if lo <= _end(r) < hi or (last and _end(r) >= hi)]
            mean, top = _in_flight(mine, lo, hi)
            if not done and not top:
                continue
            head = done[0] if done else mine[0]
            t = BenchTarget(ref=ref, base_url="", algorithm=head.algorithm, mode=head.mode)
            ls = level_service(t, done, b - a, slo, None)
            ls = ls.model_copy(update={"mean_in_flight": mean, "max_in_flight": top})
            rows.append(row_of(ls, idx, a, b))
    return SliceSet(width_s=width_s, rows=rows)


def _turn_request(tr: TurnResult) -> RequestResult | None:
    """An agentic turn as the request it was (for slicing); None for a turn saved before turns recorded
    when they were sent."""
    if tr.started_at is None:
        return None
    return RequestResult(
        service=tr.service, algorithm="-", mode=None, prompt_id=f"{tr.session}.t{tr.turn}", repeat=0,
        seq=tr.turn, started_at=tr.started_at, ok=tr.ok, error=tr.error,
        ttft_s=None if tr.ttft_ms is None else tr.ttft_ms / 1000.0,
        e2e_s=None if tr.e2e_ms is None else tr.e2e_ms / 1000.0, output_tokens=tr.output_tokens,
        prompt_tokens=tr.prompt_tokens, cached_tokens=tr.cached_tokens, accept_length=tr.accept_length,
    )  # fmt: skip


def requests_of(run: AnyRunLike) -> list[RequestResult]:
    """The run's counted requests (an agentic run's turns as requests; a soak keeps none: its windows)."""
    if isinstance(run, AgenticRun):
        return [r for tr in run.turns_results if (r := _turn_request(tr)) is not None]
    if isinstance(run, SoakRun):
        return []
    return [r for r in run.results if not r.warmup]


def span_of(run: AnyRunLike, origin: float) -> float:
    """Seconds from the origin to the run's last request end (at least its wall time)."""
    ends = [_end(r) - origin for r in requests_of(run)]
    return max([run.wall_s or 0.0, *ends, 1e-3])


def slice_run(run: AnyRunLike, width_s: float, slo: Slo | None = None) -> SliceSet:
    """The slices of a finished plain, load or agentic run (a soak: its windows, `soak_rows`)."""
    origin = run.started_at.timestamp()
    if isinstance(run, SoakRun):
        return SliceSet(width_s=run.window_s, rows=soak_rows(run))
    return compute(requests_of(run), origin, span_of(run, origin), width_s, slo)


def soak_rows(run: SoakRun) -> list[SliceRow]:
    """A soak's windows as slice rows (each service's window is its own turn inside the window)."""
    return [row_of(w.metrics, w.index, w.start_s, w.end_s) for w in run.windows]


def soak_edges(run: SoakRun) -> dict[str, list[tuple[int, float, float]]]:
    """Each service's windows (index, start, end) in a soak: what its server figures are cut by."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    for w in run.windows:
        out.setdefault(w.service, []).append((w.index, w.start_s, w.end_s))
    return out


class _Sliced(Protocol):
    @property
    def slices(self) -> SliceSet | None: ...
    @property
    def server_metrics(self) -> list[ServerMetrics]: ...


def rows_of(run: AnyRunLike) -> list[SliceRow]:
    """The rows every face shows: a soak's windows, another run's stored slices (none when not sliced)."""
    if isinstance(run, SoakRun):
        return soak_rows(run)
    return list(run.slices.rows) if run.slices is not None else []


def joined(run: AnyRunLike) -> list[tuple[SliceRow, ServerWindow | None]]:
    """Each slice row with the server's figures of the same window and service (None: not scraped)."""
    server = {(w.service, w.index): w for sm in run.server_metrics for w in sm.windows}
    return [(r, server.get((r.service, r.index))) for r in rows_of(run)]


CLIENT_COLUMNS = [f for f in SliceRow.model_fields]
SERVER_COLUMNS = [f for f in ServerWindow.model_fields if f not in ("index", "start_s", "end_s", "service")]


def iter_csv(run: AnyRunLike) -> Iterator[bytes]:
    """`--slices-csv FILE`: one line per window × service, the client's columns then the server's
    (`server_` prefix, empty where not scraped), the run id first."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run_id", *CLIENT_COLUMNS, *(f"server_{c}" for c in SERVER_COLUMNS)])
    for row, sw in joined(run):
        c = row.model_dump()
        s = sw.model_dump() if sw is not None else {}
        w.writerow(
            [run.id, *(_cell(c[k]) for k in CLIENT_COLUMNS), *(_cell(s.get(k)) for k in SERVER_COLUMNS)]
        )
        yield buf.getvalue().encode()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():
        yield buf.getvalue().encode()


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(run: AnyRunLike) -> str:
    """The slices as a text table (stdout after the run's own table); the server's columns where scraped,
    with their source."""
    if isinstance(run, SoakRun) and not run.server_metrics:
        return ""  # the soak's own table shows its windows; here only with the server's figures beside them
    pairs = joined(run)
    if not pairs:
        return ""
    head = ["window", "s", "service", "ok", "fail", "in flight", "out tok/s", "TTFT p50", "e2e p50",
            "srv running", "srv queue", "srv out tok/s", "srv TTFT p50", "srv accept", "source"]  # fmt: skip
    lines = [head]
    for r, s in pairs:
        lines.append(
            [str(r.index), f"{r.start_s:.0f}-{r.end_s:.0f}", r.service, str(r.n), str(r.failed),
             _f(r.mean_in_flight), _f(r.output_throughput), _f(r.ttft_ms_p50, "{:.0f}"),
             _f(r.e2e_ms_p50, "{:.0f}"), _f(s.running_reqs_mean if s else None),
             _f(s.queue_reqs_mean if s else None),
             _f((s.output_throughput if s.output_throughput is not None else s.gen_throughput_mean) if s else None),
             _f(s.ttft_ms_p50 if s else None, "{:.0f}"), _f(s.accept_length if s else None, "{:.2f}"),
             s.source if s else "-"]
        )  # fmt: skip
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    out = [f"time slices ({'soak windows' if isinstance(run, SoakRun) else 'by finish time'}):"]
    for ln in lines:
        out.append(
            "  ".join(c.rjust(widths[i]) if i not in (1, 2) else c.ljust(widths[i]) for i, c in enumerate(ln))
        )
    for sm in run.server_metrics:
        out.append(f"server metrics {sm.service}: {sm.source}" + (f" ({sm.note})" if sm.note else ""))
    return "\n".join(out) + "\n"
