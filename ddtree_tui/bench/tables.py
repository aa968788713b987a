"""The text tables headless mode prints for a load, soak or agentic run (and `report` prints again from the
saved JSON): functions of the result types only, so a reader of a saved run needs no engine."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from ddtree_tui.bench.acceptance import AcceptanceSummary
from ddtree_tui.bench.energy import RunEnergy
from ddtree_tui.bench.models import ClientStats, RequestResult
from ddtree_tui.bench.results import AgenticRun, BenchRun, LevelService, LoadRun, ShapeRun, SoakRun
from ddtree_tui.bench.slices import joined
from ddtree_tui.bench.windows import CacheFlush
from ddtree_tui.bench.workloads.record import describe


def _f0(x: Any, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def reads_note(counts: Iterable[tuple[str, int, int]]) -> list[str]:
    """The footnote every ITL figure carries: per service (name, coalesced reads, reads), how many socket
    reads held several chunks (bench/metrics.py spreads such a read's gap over its tokens)."""
    parts = [f"{name} {c}/{n} ({c / n * 100:.0f} %)" for name, c, n in counts if n]
    if not parts:
        return []
    return [
        "reads with several chunks: " + ", ".join(parts) + "; ITL spreads a read's gap over all the "
        "tokens it brought (chunks of one read share its time)"
    ]


def results_reads(results: Sequence[RequestResult]) -> list[tuple[str, int, int]]:
    """(service, coalesced reads, reads) over the successful counted requests, services in order."""
    out: dict[str, list[int]] = {}
    for r in results:
        if r.ok and not r.warmup:
            acc = out.setdefault(r.service, [0, 0])
            acc[0] += r.coalesced_reads
            acc[1] += r.reads
    return [(name, c, n) for name, (c, n) in out.items()]


def reached_cell(s: LevelService) -> str:
    """What a level reached beside what was asked: closed loop `mean/max in flight of N`, open loop the
    rate sent; `NO` in front when the level did not reach its target."""
    if s.target_concurrency is not None:
        mean = "-" if s.mean_in_flight is None else f"{s.mean_in_flight:.1f}"
        txt = f"{mean}/{_f0(s.max_in_flight)} of {s.target_concurrency}"
    elif s.offered_rate is not None:
        txt = f"{_f(s.sent_rate, '{:.2f}')} of {s.offered_rate:g}/s"
    else:
        return "-"  # a run saved before planned vs achieved was recorded
    return txt if s.reached else f"NO {txt}"


def load_table(run: LoadRun) -> str:
    """Per level × service, then the deltas' verdicts, the knee and why the ladder stopped."""
    head = (
        f"load {run.id} · {run.status} · {run.load_text} · "
        + (f"{run.duration_s:g} s" if run.duration_s else f"{run.requests or 'auto'} requests")
        + f" per service per level · {run.rounds} round(s) interleaved · warm-up {run.warmup}/level"
        + (f" · SLO {run.slo.text}" if run.slo else "")
    )
    lines = [head]
    if any(t.simulated for t in run.targets):
        lines.append(
            "SIMULATED services (not real SGLang): " + ", ".join(t.ref for t in run.targets if t.simulated)
        )
    headers = ["level", "service", "mode", "reached", "ok", "err%", "req/s", "out tok/s", "tok/s/req",
               "TTFT p50/p90/p99", "TPOT p50", "ITL p50/p99", "e2e p50/p99", "accept", "goodput", "sat"]  # fmt: skip
    body = []
    for lv in run.levels:
        for s in lv.services:
            body.append(
                [
                    lv.label,
                    s.service,
                    s.mode or "-",
                    reached_cell(s),
                    str(s.n),
                    f"{s.error_rate * 100:.0f}",
                    _f(s.request_throughput, "{:.2f}"),
                    _f(s.output_throughput),
                    _f(s.tok_s_mean),
                    f"{_f(s.ttft_ms.p50, '{:.0f}')}/{_f(s.ttft_ms.p90, '{:.0f}')}/{_f(s.ttft_ms.p99, '{:.0f}')}",
                    _f(s.tpot_ms.p50),
                    f"{_f(s.itl_ms.p50)}/{_f(s.itl_ms.p99)}",
                    f"{_f(s.e2e_ms.p50, '{:.0f}')}/{_f(s.e2e_ms.p99, '{:.0f}')}",
                    _f(s.accept_length, "{:.2f}"),
                    (f"{_f(s.goodput_rps, '{:.2f}')}/s {_f(s.goodput_pct, '{:.0f}')}%"),
                    "SAT" if s.saturated else "",
                ]
            )
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(headers)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    verdicts = [(lv.label, d) for lv in run.levels for d in lv.deltas]
    if verdicts:
        lines.append("")
        lines.append(f"vs baseline {run.baseline}:")
        for label, d in verdicts:
            lines.append(f"  {label} {d.service} {d.metric}: {d.verdict}")
    lines += reads_note(results_reads(run.results))
    lines.append("")
    missed = run.not_reached()
    if missed:
        lines.append("NOT REACHED (no saturation, knee or verdict drawn from these):")
        lines += [f"  {m}" for m in missed]
    for ref, k in run.knee_lines().items():
        lines.append(f"knee {ref}: {k}")
    if run.stopped:
        lines.append(f"stopped: {run.stopped}")
    if (cl := client_line(run.client)) is not None:
        lines.append(cl)
    lines += energy_text(run.energy)  # issue 26 (W-GPU)
    for le in run.level_energy:
        lines += [
            f"  {le.label} {se.service}: {_f(se.j_per_token, '{:.3f}')} J/token"
            + (f" ({se.note})" if se.note else "")
            for se in le.energy.services
        ]
    if run.workload is not None:  # issue 26: the sentences the HTML report's Workload section shows
        lines += ["", *describe(run.workload)]
    return "\n".join(lines) + "\n"


def soak_table(run: SoakRun) -> str:
    lines = [
        f"soak {run.id} · {run.status} · concurrency {run.concurrency} · {run.duration_s:g} s in "
        f"{run.window_s:g} s windows · {len({w.index for w in run.windows})} window(s)"
    ]
    lines.append(
        "window  t(s)     service              ok  err  out tok/s  TTFT p50  e2e p50  GPU MiB   health"
    )
    for w in run.windows:
        m = w.metrics
        mem = w.gpu_memory_mib()
        lines.append(
            f"{w.index:<6}  {w.start_s:>5.0f}-{w.end_s:<3.0f} {w.service:<20} {m.n:>3} {m.failed:>4} "
            f"{(m.output_throughput or 0):>10.1f} {(m.ttft_ms.p50 or 0):>9.0f} {(m.e2e_ms.p50 or 0):>8.0f} "
            f"{('-' if mem is None else f'{mem:.0f}'):>8}   "
            f"{'ok' if w.probe.healthy else 'DOWN' if w.probe.healthy is False else '-'}"
            + (" RESTARTED" if w.probe.restarted else "")
        )
    lines.append("")
    if run.drift:
        for d in run.drift:
            lines.append(f"DRIFT {d.service}: {d.kind} from window {d.window} ({d.at_s:.0f} s): {d.detail}")
    else:
        lines.append("no drift detected")
    if (cl := client_line(run.client)) is not None:
        lines.append(cl)
    return "\n".join(lines) + "\n"


def agentic_table(run: AgenticRun) -> str:
    lines = [
        f"agentic {run.id} · {run.source} · {run.sessions} session(s) × up to {run.turns} turns · think "
        f"{run.think_time_s:g} s"
    ]
    lines.append("service              turn  n  TTFT p50 ms  prompt tok  cached tok  out tok  accept")
    svcs = list(dict.fromkeys(t.service for t in run.turns_results))
    for s in svcs:
        for k in range(1, run.turns + 1):
            ts = [t for t in run.turns_results if t.service == s and t.turn == k and t.ok]
            if not ts:
                continue

            def med(xs: list[Any]) -> float | None:
                v = [x for x in xs if x is not None]
                return statistics.median(v) if v else None

            lines.append(
                f"{s:<20} {k:>4} {len(ts):>2} {_f0(med([t.ttft_ms for t in ts])):>12} "
                f"{_f0(med([t.prompt_tokens for t in ts])):>11} {_f0(med([t.cached_tokens for t in ts])):>11} "
                f"{_f0(med([t.output_tokens for t in ts])):>8} {_f0(med([t.accept_length for t in ts]), '{:.2f}'):>7}"
            )
    lines.append("")
    for s in svcs:
        done = [x.completion_s for x in run.session_results if x.service == s and x.completion_s is not None]
        failed = sum(1 for x in run.session_results if x.service == s and x.failed)
        median_s = f"{statistics.median(done):.1f} s" if done else "-"
        lines.append(f"{s}: {len(done)} session(s) complete, {failed} failed, median completion {median_s}")
    if (cl := client_line(run.client)) is not None:
        lines.append(cl)
    return "\n".join(lines) + "\n"


HISTORY_RATES = ("best tok/s/req", "best out tok/s")
"""The history list's two rate columns, one meaning each (bench history mixed them in one `Best tok/s`):
per-request decode speed (a request's tokens / its own time) and aggregate output throughput (all the tokens
a service returned / the time it was being measured)."""


def history_rates(run: BenchRun | ShapeRun) -> tuple[float | None, float | None]:
    """A run's best per-request tok/s and best aggregate output tok/s over its services (and levels or
    windows), for the history list's two columns (HISTORY_RATES); None where the run has no such figure."""
    if isinstance(run, BenchRun):
        per = [s.tok_s_mean if s.tok_s_mean is not None else s.tok_s_mean_of_prompts for s in run.summary]
        agg = [s.output_throughput for s in run.summary]
    elif isinstance(run, LoadRun):
        svcs = [s for lv in run.levels for s in lv.services]
        per, agg = [s.tok_s_mean for s in svcs], [s.output_throughput for s in svcs]
    elif isinstance(run, SoakRun):
        per = [w.metrics.tok_s_mean for w in run.windows]
        agg = [w.metrics.output_throughput for w in run.windows]
    else:
        return None, None
    return max((x for x in per if x), default=None), max((x for x in agg if x), default=None)


def client_line(c: ClientStats | None) -> str | None:
    """The client's own figures over a run's measured part (ClientStats: its processes, their CPU, per output
    token, the busiest one, the loop lag): one sentence for a plain run's report and a load run's table, and
    their HTML; None for a run that has none."""
    if c is None:
        return None
    lat = "-" if c.loop_lag_ms_p99 is None else f"{c.loop_lag_ms_p99:.1f} ms"
    per = "-" if c.cpu_us_per_token is None else f"{c.cpu_us_per_token:.1f} µs/token"
    return (
        f"client: {c.workers} process(es), CPU {c.cpu_s:.2f} s ({per}), busiest at "
        f"{c.cpu_core_max * 100:.0f} % of a core, loop lag p99 {lat}"
        + (f"; reads: {c.reads}" if c.reads else "")
        + (" — CLIENT-BOUND" if c.client_bound else "")
    )


def shape_table(run: ShapeRun) -> str:
    """The table of any load, soak or agentic run."""
    if isinstance(run, LoadRun):
        return load_table(run)
    if isinstance(run, SoakRun):
        return soak_table(run)
    return agentic_table(run)


# --- issue 26 (W-GPU): a run's energy as text, the figures of its JSON and HTML ----------------------------------
def energy_text(en: RunEnergy | None) -> list[str]:
    """`--energy`'s lines under a table; nothing for a run without."""
    if en is None:
        return []
    if en.energy_j is None and not en.services:
        return [f"energy: {en.note}"]
    head = (
        f"energy: {_f(en.energy_j)} J over {en.output_tokens} output tokens, {_f(en.j_per_token, '{:.3f}')} J/token "
        f"({en.samples} GPU samples from {en.source or 'no telemetry'})"
    )
    out = [head] + [
        f"  {s.service}: {_f(s.energy_j)} J, {_f(s.j_per_token, '{:.3f}')} J/token, median "
        f"{_f(s.j_per_request_median)} J/request" + (f" ({s.note})" if s.note else "")
        for s in en.services
    ]
    if en.note:
        out.append(f"  note: {en.note}")
    return out


# --- issue 26 (w-tail): one compact line each for what a run carries besides its table (the TUI's bench pane) ---
def _by_service(pairs: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{svc} {v}" for svc, v in pairs)


def energy_line(en: RunEnergy | None) -> str | None:
    """J/token per service and where the power came from: the figures of energy_text (and the JSON)."""
    if en is None:
        return None
    if not any(s.j_per_token is not None for s in en.services):  # no figure: why (the note), first
        return f"energy: no J/token ({en.samples} GPU samples from {en.source or 'no telemetry'}): " + (
            en.note or "; ".join(s.note for s in en.services if s.note) or "no figure"
        )
    per = _by_service((s.service, _f(s.j_per_token, "{:.3f}")) for s in en.services)
    src = f"{en.samples} GPU samples from {en.source or 'no telemetry'}"
    return f"J/token: {per} ({src})" + (f"; {en.note}" if en.note else "")


def accept_line(acceptance: Sequence[AcceptanceSummary]) -> str | None:
    """The per-request accept length's median per service (AcceptanceSummary.median, --spec-details or
    /generate's meta_info); None when no service returned one."""
    got = [a for a in acceptance if a.n]
    if not got:
        return None
    return "accept length median: " + _by_service((a.service, _f(a.median, "{:.2f}")) for a in got)


def server_ttft_line(run: BenchRun | LoadRun | SoakRun | AgenticRun, most: int = 3) -> str | None:
    """Server vs client TTFT p50 (ms) per service and window (the slices' rows beside the server's windows,
    slices.joined, the same pairs as the slices table), with the server figures' source; at most `most`
    windows a service, the last ones."""
    if not run.server_metrics:
        return None
    cells: dict[str, list[str]] = {}
    for r, s in joined(run):
        cells.setdefault(r.service, []).append(
            f"w{r.index} {_f(s.ttft_ms_p50 if s else None, '{:.0f}')}/{_f(r.ttft_ms_p50, '{:.0f}')}"
        )
    parts = []
    for sm in run.server_metrics:
        got = cells.get(sm.service, [])
        more = f" (+{len(got) - most} earlier)" if len(got) > most else ""
        parts.append(f"{sm.service} {' '.join(got[-most:]) or '-'}{more} ({sm.source})")
    return "TTFT p50 ms server/client: " + "; ".join(parts)


def flushes_line(flushes: Sequence[CacheFlush]) -> str | None:
    """The cache resets done (--flush-cache): how many answered ok, before what."""
    if not flushes:
        return None
    ok = sum(1 for f in flushes if f.ok)
    where = ", ".join(dict.fromkeys(f.before for f in flushes))
    failed = [f"{f.service} before {f.before}: {f.message or f.status}" for f in flushes if not f.ok]
    return f"cache flushes: {ok}/{len(flushes)} ok (before {where})" + (
        f"; FAILED {failed[0]}" + (f" (+{len(failed) - 1})" if len(failed) > 1 else "") if failed else ""
    )


def saturation_line(run: LoadRun) -> str | None:
    """The statistical over-saturation test's verdict on a ladder: the first level × service it tripped on,
    else how many it cleared (each verdict is SaturationTest.verdict, as in the JSON and the HTML)."""
    tests = run.saturation_tests
    if not tests:
        return None
    tripped = [t for t in tests if t.tripped]
    if tripped:
        t = tripped[0]
        return f"saturation test: {t.level} {t.service}: {t.verdict}"
    last = tests[-1]
    return f"saturation test: not over-saturated in {len(tests)} test(s); last {last.level} {last.service}: {last.verdict}"


def extras_lines(run: BenchRun | LoadRun) -> list[str]:
    """What issue 26 attaches to a plain run or a load ladder, one compact line each (energy, acceptance,
    server vs client TTFT, cache flushes, the saturation test): what the TUI's bench pane shows under its
    tables, the same figures as the JSON."""
    lines = [
        energy_line(run.energy),
        accept_line(run.acceptance),
        server_ttft_line(run),
        flushes_line(run.cache_flushes),
        saturation_line(run) if isinstance(run, LoadRun) else None,
    ]
    return [ln for ln in lines if ln]
