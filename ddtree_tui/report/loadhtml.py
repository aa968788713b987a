"""The HTML report of a schema-2 run (`--run-bench --load … --html FILE`, `--soak … --html FILE`): the
load-level table with its verdicts and a throughput/latency-vs-level chart, or the soak's time series with
the drift windows shaded. Self-contained like report/html.py (same CSS and CSP, no script, inline SVG).

`ddtree-tui report` reads such a run's JSON, or a history file's load / soak / agentic runs, through
`shape_runs_in`, and prints the table headless mode printed (`shape_text`).

`LOAD_CHARTS` / `SOAK_CHARTS` take one function a chart, as html.CHARTS does for schema-1 runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from ddtree_tui import atomicio
from ddtree_tui.bench import history
from ddtree_tui.bench.results import AgenticRun, LoadRun, ShapeRun, SoakRun, SoakWindow
from ddtree_tui.bench.tables import agentic_table, client_line, reached_cell, shape_table
from ddtree_tui.report import charts as ch
from ddtree_tui.report.gpuaccept import load_sections
from ddtree_tui.report.html import CSP, CSS, _num, _table, charts_section, e
from ddtree_tui.report.serverhtml import sections
from ddtree_tui.report.workloadhtml import workload_section


def level_chart(run: LoadRun) -> ch.Chart | None:
    """Output throughput and TTFT p50/p99 against the level, one line a service; saturated levels marked."""
    if not run.levels:
        return None
    refs = list(dict.fromkeys(s.service for lv in run.levels for s in lv.services))

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        a1, a2 = fig.subplots(1, 2)
        xs = list(range(len(run.levels)))
        for i, ref in enumerate(refs):
            kw = {"color": ch.PALETTE[i % len(ch.PALETTE)], "marker": ch.MARKERS[i % len(ch.MARKERS)]}
            thr, p50, p99, sat = [], [], [], []
            for lv in run.levels:
                s = next((x for x in lv.services if x.service == ref), None)
                thr.append(s.output_throughput if s else None)
                p50.append(s.ttft_ms.p50 if s else None)
                p99.append(s.ttft_ms.p99 if s else None)
                sat.append(bool(s and s.saturated))
            a1.plot(xs, [t if t is not None else float("nan") for t in thr], label=ref, **kw)
            a1.scatter([x for x, f in zip(xs, sat, strict=True) if f],
                       [t for t, f in zip(thr, sat, strict=True) if f], s=90, facecolors="none",
                       edgecolors="#9b1c1c")  # fmt: skip
            a2.plot(xs, [v if v is not None else float("nan") for v in p50], label=f"{ref} p50", **kw)
            a2.plot(xs, [v if v is not None else float("nan") for v in p99], linestyle=":", color=kw["color"])
        for ax in (a1, a2):
            ax.set_xticks(xs, [lv.label for lv in run.levels], rotation=30, fontsize=7)
        a1.set_ylabel("output tok/s")
        a2.set_ylabel("TTFT ms (p50 solid, p99 dotted)")
        a2.set_yscale("log")
        ch._legend(a1, len(refs))

    return ch._render(
        "chart-load-levels",
        "Throughput and TTFT by load level",
        "Output tokens / the time each service was measured at the level; circled: saturated (throughput "
        "up < 10 % while latency up > 25 % against the level before).",
        draw,
    )


def _windows(run: SoakRun, ref: str) -> list[SoakWindow]:
    return sorted((w for w in run.windows if w.service == ref), key=lambda w: w.index)


def soak_chart(run: SoakRun) -> ch.Chart | None:
    """Throughput, TTFT p50 and GPU memory per window, a service a line; drift windows shaded from where
    each drift began."""
    if not run.windows:
        return None
    refs = list(dict.fromkeys(w.service for w in run.windows))

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        axes = fig.subplots(3, 1, sharex=True)
        fig.set_size_inches(7.2, 6.0)
        for i, ref in enumerate(refs):
            ws = _windows(run, ref)
            t = [(w.start_s + w.end_s) / 2 for w in ws]
            kw = {
                "color": ch.PALETTE[i % len(ch.PALETTE)],
                "marker": ch.MARKERS[i % len(ch.MARKERS)],
                "ms": 3,
            }
            nan = float("nan")
            axes[0].plot(t, [w.metrics.output_throughput or nan for w in ws], label=ref, **kw)
            axes[1].plot(t, [w.metrics.ttft_ms.p50 or nan for w in ws], **kw)
            mem = [sum(g.memory_used_mib or 0 for g in w.probe.gpus) if w.probe.gpus else nan for w in ws]
            axes[2].plot(t, mem, **kw)
        end = max(w.end_s for w in run.windows)
        for d in run.drift:
            row = {"tok_s_decay": 0, "ttft_growth": 1, "gpu_memory_creep": 2}.get(d.kind)
            targets = [axes[row]] if row is not None else list(axes)
            for ax in targets:
                ax.axvspan(d.at_s, end, color="#fde8e8", zorder=0)
                ax.axvline(d.at_s, color="#9b1c1c", linestyle="--", linewidth=1)
            targets[0].annotate(f"{d.kind} (window {d.window})", (d.at_s, 0.92), xycoords=("data", "axes fraction"),
                                fontsize=7, color="#9b1c1c")  # fmt: skip
        axes[0].set_ylabel("out tok/s")
        axes[1].set_ylabel("TTFT p50 ms")
        axes[2].set_ylabel("GPU MiB")
        axes[2].set_xlabel("seconds since the soak began")
        ch._legend(axes[0], len(refs))

    return ch._render(
        "chart-soak",
        "Soak: throughput, TTFT and GPU memory per window, drift shaded",
        f"{run.window_s:g} s windows at concurrency {run.concurrency}; a shaded span starts at the window "
        "where a drift began (rules in README, Soak).",
        draw,
    )


LOAD_CHARTS: list[tuple[str, Callable[[LoadRun], ch.Chart | None]]] = [("load levels", level_chart)]
SOAK_CHARTS: list[tuple[str, Callable[[SoakRun], ch.Chart | None]]] = [("soak time series", soak_chart)]


def _page(title: str, body: Sequence[str]) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">\n'
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _sim_banner(targets: Sequence[object]) -> str:
    sims = [getattr(t, "ref", "?") for t in targets if getattr(t, "simulated", False)]
    if not sims:
        return ""
    return f'<div class="banner">SIMULATED services (not real SGLang): {e(", ".join(sims))}</div>'


def render_load(run: LoadRun) -> str:
    head = [
        f"<h1>Load run {e(run.id)}</h1>",
        f'<p class="sub">{e(run.load_text)} · {e(run.status)} · {run.rounds} round(s) interleaved · warm-up '
        f"{run.warmup}/level" + (f" · SLO {e(run.slo.text)}" if run.slo else "") + "</p>",
        _sim_banner(run.targets),
    ]
    rows = []
    for lv in run.levels:
        for s in lv.services:
            rows.append(
                [e(lv.label), e(s.service), e(s.mode or "-"), e(reached_cell(s)), str(s.n), f"{s.error_rate * 100:.0f}",
                 _num(s.request_throughput, "{:.2f}"), _num(s.output_throughput), _num(s.tok_s_mean),
                 f"{_num(s.ttft_ms.p50, '{:.0f}')} / {_num(s.ttft_ms.p90, '{:.0f}')} / {_num(s.ttft_ms.p99, '{:.0f}')}",
                 _num(s.tpot_ms.p50), f"{_num(s.itl_ms.p50)} / {_num(s.itl_ms.p99)}",
                 f"{_num(s.e2e_ms.p50, '{:.0f}')} / {_num(s.e2e_ms.p99, '{:.0f}')}", _num(s.accept_length, "{:.2f}"),
                 _num(s.goodput_pct, "{:.0f}"), "SATURATED" if s.saturated else ""]
            )  # fmt: skip
    headers = ["level", "service", "mode", "reached (in flight mean/max of asked; rate sent)", "ok", "err %", "req/s", "out tok/s", "tok/s/req", "TTFT p50/p90/p99",
               "TPOT p50", "ITL p50/p99", "e2e p50/p99", "accept", "goodput %", ""]  # fmt: skip
    body = [*head, "<h2>Levels</h2>", _table(headers, rows, set(range(4, 15)))]
    verdicts = [f"<li>{e(lv.label)} · {e(d.service)} · {e(d.metric)}: {e(d.verdict)}</li>" for lv in run.levels for d in lv.deltas]  # fmt: skip
    if verdicts:
        body += [
            f"<h2>Against the baseline {e(run.baseline or '')}</h2>",
            '<ul class="verdicts">',
            *verdicts,
            "</ul>",
        ]
    missed = run.not_reached()
    if missed:
        body += [
            "<h2>Levels not reached</h2>",
            "<p>No saturation, knee or verdict is drawn from these levels.</p>",
            '<ul class="verdicts">',
            *(f"<li>{e(m)}</li>" for m in missed),
            "</ul>",
        ]
    knee = "; ".join(f"{e(k)}: {e(v)}" for k, v in run.knee_lines().items())
    body.append(f"<p>Knee: {knee}." + (f" Stopped: {e(run.stopped)}." if run.stopped else "") + "</p>")
    if (cl := client_line(run.client)) is not None:  # the client's own CPU, as in the table and the JSON
        body.append(f"<p>{e(cl)}</p>")
    body += load_sections(run)  # issue 26 (W-GPU): GPU energy per level, per-request acceptance
    body += workload_section(run)  # issue 26: trace, schedule planned vs done, cancellations
    charts = [c for _, fn in LOAD_CHARTS if (c := fn(run)) is not None]
    if charts:
        body.append(charts_section(charts))
    body += sections(run)  # issue 26: slices, server metrics, flushes, the over-saturation test
    return _page(f"ddtree-tui load run {run.id}", body)


def render_soak(run: SoakRun) -> str:
    body = [
        f"<h1>Soak {e(run.id)}</h1>",
        f'<p class="sub">{e(run.status)} · concurrency {run.concurrency} · {run.duration_s:g} s in '
        f"{run.window_s:g} s windows</p>",
        _sim_banner(run.targets),
        "<h2>Drift</h2>",
    ]
    if run.drift:
        body += ['<ul class="verdicts">']
        body += [f'<li class="worse">{e(d.service)}: {e(d.kind)} from window {d.window} ({d.at_s:.0f} s): '
                 f"{e(d.detail)}</li>" for d in run.drift]  # fmt: skip
        body += ["</ul>"]
    else:
        body.append("<p>No drift detected.</p>")
    charts = [c for _, fn in SOAK_CHARTS if (c := fn(run)) is not None]
    if charts:
        body.append(charts_section(charts))
    rows = []
    for w in run.windows:
        m = w.metrics
        mem = sum(g.memory_used_mib or 0 for g in w.probe.gpus) if w.probe.gpus else None
        rows.append(
            [str(w.index), f"{w.start_s:.0f}–{w.end_s:.0f}", e(w.service), str(m.n), str(m.failed),
             _num(m.output_throughput), _num(m.ttft_ms.p50, "{:.0f}"), _num(m.e2e_ms.p50, "{:.0f}"),
             _num(mem, "{:.0f}"), e(w.probe.gpu_source or "-"),
             "ok" if w.probe.healthy else ("DOWN" if w.probe.healthy is False else "-")]
        )  # fmt: skip
    headers = ["window", "s", "service", "ok", "failed", "out tok/s", "TTFT p50", "e2e p50", "GPU MiB", "GPU source",
               "health"]  # fmt: skip
    body += ["<h2>Windows</h2>", _table(headers, rows, {3, 4, 5, 6, 7, 8})]
    if run.server_metrics or run.cache_flushes:  # issue 26: the server's figures beside the windows
        body += sections(run)
    if (cl := client_line(run.client)) is not None:  # the client's own CPU, as in the table and the JSON
        body.append(f"<p>{e(cl)}</p>")
    return _page(f"ddtree-tui soak {run.id}", body)


# --- issue 26 (w-tail): agentic sessions get a page too: their per-turn table and the slices / server figures ---
def render_agentic(run: AgenticRun) -> str:
    """An agentic run's page: the per-turn table headless mode prints (tables.agentic_table, the same
    figures), then the time slices, the server's figures and the cache flushes (serverhtml.sections)."""
    svcs = sorted({t.service for t in run.turns_results})
    body = [
        f"<h1>Agentic sessions {e(run.id)}</h1>",
        f'<p class="sub">{e(run.source)} · {run.sessions} session(s) × up to {run.turns} turns · think '
        f"{run.think_time_s:g} s · {e(', '.join(svcs))}</p>",
        "<h2>Turns</h2>",
        f"<pre>{e(agentic_table(run))}</pre>",
        *sections(run),  # slices, server metrics, flushes
    ]  # (the table ends with the client's line: tables.client_line)
    return _page(f"ddtree-tui agentic {run.id}", body)


def write_load_html(run: LoadRun | SoakRun | AgenticRun, path: Path | str) -> int:
    """Write the page (atomically; a special file is written, never replaced); its size in bytes."""
    if isinstance(run, AgenticRun):
        text = render_agentic(run)
    else:
        text = render_soak(run) if isinstance(run, SoakRun) else render_load(run)
    p = Path(path)
    if not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    atomicio.write_file(p, text)
    return len(text.encode())


def shape_runs_in(path: str) -> list[ShapeRun] | None:
    """The load, soak and agentic runs of `path` when it is one such run's --json file or a bench history
    holding some (every kind, a soak that never finished rebuilt: bench/history.py); None otherwise, so the
    caller reads it as a plain run and says what is wrong with it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        runs = history.load_shapes(path)  # a history file: one object a line
        return runs or None
    if isinstance(obj, dict) and "schema" in obj and obj.get("kind") in ("load", "soak", "agentic"):
        return history.load_shapes_from([obj]) or None
    return None


def shape_text(run: ShapeRun) -> str:
    """The table headless mode printed for the run."""
    return shape_table(run)
