"""The HTML sections of issue 26's server side, for every run kind's page (report/html.py for a plain run,
report/loadhtml.py for a load ladder and a soak): the time slices with the server's figures of the same
window beside the client's (and where each came from), the server-metrics sources, the cache flushes, and
the statistical over-saturation tests of a ladder. The numbers are the stored ones (slices.joined), the same
the tables on stdout, the JSON and the CSV show.
"""

from __future__ import annotations

from ddtree_tui.bench import slices
from ddtree_tui.bench.models import BenchRun
from ddtree_tui.bench.results import AgenticRun, LoadRun, SoakRun
from ddtree_tui.report.html import _num, _table, e

Run = BenchRun | LoadRun | SoakRun | AgenticRun


def slices_section(run: Run) -> str | None:
    pairs = slices.joined(run)
    if not pairs:
        return None
    rows = []
    for r, s in pairs:
        srv_thr = (
            None
            if s is None
            else (s.output_throughput if s.output_throughput is not None else s.gen_throughput_mean)
        )
        rows.append(
            [str(r.index), f"{r.start_s:.1f}–{r.end_s:.1f}", e(r.service), str(r.n), str(r.failed),
             _num(r.mean_in_flight), _num(r.output_throughput), _num(r.ttft_ms_p50, "{:.0f}"),
             _num(r.ttft_ms_p99, "{:.0f}"), _num(r.e2e_ms_p50, "{:.0f}"), _num(r.accept_length, "{:.2f}"),
             _num(s.running_reqs_mean if s else None), _num(s.queue_reqs_mean if s else None),
             _num(s.token_usage_mean if s else None, "{:.2f}"), _num(srv_thr),
             _num(s.ttft_ms_p50 if s else None, "{:.0f}"), _num(s.e2e_ms_p50 if s else None, "{:.0f}"),
             _num(s.accept_length if s else None, "{:.2f}"), _num(s.aborted if s else None, "{:.0f}"),
             e(s.source if s else "-")]
        )  # fmt: skip
    headers = ["window", "s", "service", "ok", "failed", "in flight", "out tok/s", "TTFT p50", "TTFT p99",
               "e2e p50", "accept", "server running", "server queue", "server KV usage", "server out tok/s",
               "server TTFT p50", "server e2e p50", "server accept", "server aborted", "server source"]  # fmt: skip
    how = (
        "the soak's windows (each service's turn)"
        if isinstance(run, SoakRun)
        else f"{run.slices.width_s:g} s windows; a request counts in the window it finished in"
        if run.slices is not None
        else ""
    )
    return (
        f'<h2>Time slices</h2><p class="sub">{e(how)}. Server columns: the server\'s own figures for the same '
        "window (gauges averaged over the scrapes in it, counters and histograms as their change across it).</p>"
        + _table(headers, rows, set(range(3, 19)))
    )


def server_section(run: Run) -> str | None:
    if not run.server_metrics:
        return None
    rows = [
        [e(sm.service), e(sm.source), e(sm.url or "-"), f"{sm.every_s:g}", str(sm.scrapes), str(sm.failures),
         str(sm.log_lines), e(", ".join(n.removeprefix("sglang:") for n in sm.names) or "-"), e(sm.note or "")]
        for sm in run.server_metrics
    ]  # fmt: skip
    headers = ["service", "source", "scraped", "every s", "scrapes", "failed", "log lines", "series", "note"]
    return "<h2>Server metrics</h2>" + _table(headers, rows, {3, 4, 5, 6})


def flushes_section(run: Run) -> str | None:
    if not run.cache_flushes:
        return None
    rows = [
        [e(f.at.isoformat(timespec="seconds")), e(f.service), e(f.before), e(f.endpoint or "-"),
         e(f.status if f.status is not None else "-"), "ok" if f.ok else "FAILED", str(f.attempts), e(f.message)]
        for f in run.cache_flushes
    ]  # fmt: skip
    headers = ["at", "service", "before", "endpoint", "status", "", "attempts", "server said"]
    return "<h2>Cache flushes</h2>" + _table(headers, rows, {4, 6})


def saturation_section(run: Run) -> str | None:
    if not isinstance(run, LoadRun) or not run.saturation_tests:
        return None
    rows = [
        [e(t.level), e(t.service), str(t.window), f"{t.window_start_s:.1f}–{t.window_end_s:.1f}",
         f"{t.in_flight.tau:+.2f}", f"{t.in_flight.p_value:.3g}", f"{t.ttft.tau:+.2f}", f"{t.ttft.p_value:.3g}",
         _num(t.ttft.slope_per_s, "{:.1f}"), f"{t.alpha:g}", "TRIPPED" if t.tripped else ""]
        for t in run.saturation_tests
    ]  # fmt: skip
    headers = ["level", "service", "requests", "window s", "in-flight τ", "in-flight p", "TTFT τ", "TTFT p",
               "TTFT slope ms/s", "α", ""]  # fmt: skip
    return (
        '<h2>Over-saturation test</h2><p class="sub">Mann-Kendall trend tests (one-sided, increasing) of the '
        "requests in flight and the TTFT over each level's last requests; it trips when both are significant.</p>"
        + _table(headers, rows, {2, 4, 5, 6, 7, 8, 9})
    )


def sections(run: Run) -> list[str]:
    """Every issue-26 section this run has, in page order."""
    out = [slices_section(run), server_section(run), flushes_section(run), saturation_section(run)]
    return [x for x in out if x]
