"""One self-contained HTML report for one run or a comparison of runs.

Self-contained: no script at all, no external stylesheet, font or image; charts are inline SVG with their
text kept as text. A strict Content-Security-Policy meta tag (`default-src 'none'`) makes any request the
page might try to make fail in the browser instead of leaving the machine, so the file can be mailed or
attached to an issue and opened anywhere.

Sections are functions of the runs returning HTML or None (nothing to show): `SECTIONS` and `CHARTS` are the
lists to extend when runs carry new data (a soak's time series, a sweep's points).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ddtree_tui import __version__
from ddtree_tui.bench.models import BenchRun
from ddtree_tui.bench.stats import Delta, Estimate, ci_text, verdict
from ddtree_tui.bench.tables import client_line
from ddtree_tui.report import charts as ch
from ddtree_tui.report.compare import (
    METRICS,
    aligned,
    comparability,
    cross_run_delta,
    delta_text,
    est_text,
    estimate,
    paired_vs_baseline,
    prompt_ids,
    run_delta,
    services,
    ttft_ms,
    within_run_verdicts,
)
from ddtree_tui.report.gpuaccept import accept_vs_tok_s, acceptance_section, energy_section
from ddtree_tui.report.runs import LoadedRun

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src 'none'; script-src 'none'; "
    "connect-src 'none'; base-uri 'none'; form-action 'none'"
)

CSS = """
:root { --fg: #1a1a1a; --muted: #555; --line: #ccc; --bg: #fff; --warn: #8a4b00; --warnbg: #fff4e0;
        --bad: #9b1c1c; --badbg: #fde8e8; --ok: #05603a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--fg); background: var(--bg); margin: 0 auto; padding: 1.2rem 1.6rem 3rem; max-width: 1180px; }
h1 { font-size: 1.45rem; margin: 0 0 .3rem; } h2 { font-size: 1.15rem; margin: 1.8rem 0 .5rem;
     border-bottom: 1px solid var(--line); padding-bottom: .2rem; } h3 { font-size: 1rem; margin: 1.1rem 0 .4rem; }
.sub { color: var(--muted); margin: 0 0 .8rem; }
.banner { border: 2px solid var(--warn); background: var(--warnbg); color: var(--warn); font-weight: 600;
          padding: .45rem .7rem; margin: .5rem 0; border-radius: 4px; }
.banner.bad { border-color: var(--bad); background: var(--badbg); color: var(--bad); }
.tag { display: inline-block; font-size: .75rem; font-weight: 700; letter-spacing: .04em; padding: 0 .35rem;
       border: 1.5px solid currentColor; border-radius: 3px; color: var(--warn); }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .3rem 0 .8rem; font-size: 12.5px; }
th, td { border-bottom: 1px solid var(--line); padding: .2rem .45rem; text-align: left; vertical-align: top; }
td:nth-child(-n+3) { white-space: nowrap; }
.wrap { white-space: normal; min-width: 14rem; }
th { background: #f3f3f3; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, .argv { font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.argv { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 62rem; }
ul.verdicts li { margin: .15rem 0; }
.better { color: var(--ok); font-weight: 600; } .worse { color: var(--bad); font-weight: 600; }
figure.chart { margin: 1rem 0 1.4rem; page-break-inside: avoid; break-inside: avoid; }
figure.chart svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12.5px; max-width: 56rem; }
figcaption b { color: var(--fg); }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .3rem 0 .8rem; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
footer { margin-top: 2.5rem; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); padding-top: .5rem; }
@media print { body { max-width: none; padding: 0; font-size: 11pt; } h2 { break-after: avoid; }
  .banner { border-width: 1.5pt; } th { background: #eee !important; -webkit-print-color-adjust: exact;
  print-color-adjust: exact; } }
"""

Section = Callable[[Sequence[LoadedRun]], str | None]


def e(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], num: set[int], cls: str = "") -> str:
    """Cells are already HTML."""
    th = "".join(f"<th{' class=num' if i in num else ''}>{e(h)}</th>" for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=num' if i in num else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _verdict_html(text: str, d: Delta | None, higher_is_better: bool = True) -> str:
    if d is None or not d.measurable or d.pct is None:
        return e(text)
    good = (d.pct > 0) == higher_is_better
    return f'<span class="{"better" if good else "worse"}">{e(text)}</span>'


def short_verdict(d: Delta, higher_is_better: bool = True) -> str:
    """One or two words for a table cell; the sentence is in the Verdicts section."""
    if d.pct is None:
        return "no data"
    if not d.has_ci:
        return f"n={d.n}: no interval"
    if not d.measurable:
        return "no measurable difference"
    return "faster" if (d.pct > 0) == higher_is_better else "slower"


def _est(x: Estimate | None, fmt: str = "{:.1f}") -> str:
    return e(est_text(x, fmt))


# --- sections ------------------------------------------------------------------------------------------


def header(runs: Sequence[LoadedRun]) -> str:
    if len(runs) == 1:
        r = runs[0].run
        title = f"Benchmark {r.id} — {r.prompt_set}, {len(services(r))} service(s)"
    else:
        title = "Benchmark comparison: " + " vs ".join(f"{lr.label} ({lr.run.id})" for lr in runs)
    out = [f"<h1>{e(title)}</h1>"]
    out.append(
        '<p class="sub">'
        + " · ".join(
            e(
                f"{lr.label + ': ' if len(runs) > 1 else ''}{lr.name}, {lr.run.started_at:%Y-%m-%d %H:%M} UTC, "
                f"{lr.run.status}"
            )
            for lr in runs
        )
        + "</p>"
    )
    sim = [
        f"{lr.label}: {t.ref}" if len(runs) > 1 else t.ref
        for lr in runs
        for t in lr.run.targets
        if t.simulated
    ]
    if sim:
        out.append(
            '<div class="banner">SIMULATED — these services are the built-in SGLang simulator, not real '
            f"models on real GPUs: {e(', '.join(sim))}. The numbers show the tool working, not a model's speed.</div>"
        )
    rep = sorted({lr.label for lr in runs if lr.replay})
    if rep:
        out.append(
            '<div class="banner">REPLAY — GPU telemetry on the host(s) of '
            + e(", ".join(rep) if len(runs) > 1 else "this run")
            + " was replayed from a recording, not read from a GPU.</div>"
        )
    bad = [lr for lr in runs if lr.run.status != "complete" or lr.run.failed]
    for lr in bad:
        what: list[str] = [lr.run.status] if lr.run.status != "complete" else []
        if lr.run.failed:
            what.append(f"{lr.run.failed} failed request(s)")
        out.append(f'<div class="banner bad">{e(lr.label)} ({e(lr.name)}): {e(", ".join(what))}.</div>')
    return "\n".join(out)


def comparable(runs: Sequence[LoadedRun]) -> str | None:
    if len(runs) < 2:
        return None
    out = ["<h2>Can these runs be compared?</h2>"]
    ref = runs[0]
    for lr in runs[1:]:
        why = comparability(ref, lr)
        if why:
            out.append(
                f'<div class="banner bad">NOT COMPARABLE: {e(lr.label)} vs {e(ref.label)} — {e("; ".join(why))}. '
                "The deltas below are shown but do not measure the services alone.</div>"
            )
        else:
            out.append(
                f"<p>{e(lr.label)} vs {e(ref.label)}: comparable — same sampling, models, prompt set and load.</p>"
            )
    return "\n".join(out)


def verdicts(runs: Sequence[LoadedRun]) -> str | None:
    items: list[str] = []
    for lr in runs:
        pre = f"{lr.label}: " if len(runs) > 1 else ""
        for v in within_run_verdicts(lr):
            items.append(f"<li>{e(pre + v)}</li>")
    ref = runs[0]
    for lr in runs[1:]:
        for s in services(ref.run):
            if s not in services(lr.run):
                continue
            for name, (getter, higher, words) in METRICS.items():
                d = cross_run_delta(ref.run, lr.run, s, None, getter)
                text = f"{s}, {name}, {lr.label} vs {ref.label}: {verdict(d, lr.label, higher, words)}"
                items.append(f"<li>{_verdict_html(text, d, higher)}</li>")
    if not items:
        return None
    how = (
        "Within a run, each service against the baseline is the figure the run stored when it was measured "
        "(Δ of the mean over prompts of each prompt's mean, one interval: the text report, the TUI and the JSON "
        "carry the same). Per prompt, each request is paired with the baseline's on the same repeat. Between runs "
        "nothing is paired: a bootstrap of the ratio of means, resampling requests within each prompt."
    )
    return f'<h2>Verdicts</h2><ul class="verdicts">{"".join(items)}</ul><p class="sub">{e(how)}</p>'


def manifest(runs: Sequence[LoadedRun]) -> str:
    out = ["<h2>Manifest</h2>"]
    for lr in runs:
        r = lr.run
        sp = r.sampling
        if len(runs) > 1:
            out.append(f"<h3>{e(lr.label)}: {e(lr.path)}</h3>")
        kv = [
            ("run", f"{r.id} ({r.status})"),
            (
                "started",
                f"{r.started_at:%Y-%m-%d %H:%M:%S} UTC" + (f", {r.wall_s:.1f} s" if r.wall_s else ""),
            ),
            (
                "prompts",
                f"{r.prompt_set}: " + ", ".join(f"{p.id} (~{p.approx_tokens} tok)" for p in r.prompts),
            ),
            (
                "sampling",
                f"api {sp.api}, max_new_tokens {sp.max_new_tokens}, temperature {sp.temperature:g}, "
                f"ignore_eos {str(sp.ignore_eos).lower()}",
            ),
            (
                "load shape",
                f"closed loop, concurrency {r.concurrency}, {r.repeats} repeat(s) after {r.warmup} warm-up(s), "
                "services interleaved request by request"
                + (f", timeout {r.timeout:g} s" if r.timeout else ""),
            ),
            ("baseline", r.baseline or "none (no deltas)"),
        ]
        out.append('<dl class="kv">' + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in kv) + "</dl>")
        rows = []
        for t in r.targets:
            tags = []
            if t.simulated:
                tags.append('<span class="tag">SIMULATED</span>')
            if t.telemetry == "replay":
                tags.append('<span class="tag">REPLAY</span>')
            gpu = ",".join(str(g) for g in t.gpus) if t.gpus else "-"
            if t.telemetry:
                gpu += f" · {t.telemetry}"
            args = t.server_args or {}
            spec = ", ".join(
                f"{k.removeprefix('speculative_')}={v}"
                for k, v in args.items()
                if k.startswith("speculative_") and v is not None
            )
            rows.append(
                [
                    e(t.ref) + (" " + " ".join(tags) if tags else ""),
                    e(t.algorithm),
                    e(t.mode or "-"),
                    e(t.speculative_algorithm or "-")
                    + (f'<div class="wrap"><code>{e(spec)}</code></div>' if spec else ""),
                    e(t.model_path or "-"),
                    e(t.server_version or "-"),
                    e(gpu),
                ]
            )
        out.append(
            _table(
                ["service", "algorithm", "DDTree mode", "speculative", "model", "version", "GPUs"],
                rows,
                set(),
            )
        )
        argvs = [[e(t.ref), f'<div class="argv">{e(" ".join(t.argv))}</div>'] for t in r.targets if t.argv]
        if argvs:
            out.append(_table(["service", "effective argv (as the host profile builds it)"], argvs, set()))
    return "\n".join(out)


def _per_run(runs: Sequence[LoadedRun], heading: str, table_of: Callable[[BenchRun], str]) -> str:
    """A section with one table per run, each under the run's label when there are several."""
    out = [f"<h2>{heading}</h2>"]
    for lr in runs:
        if len(runs) > 1:
            out.append(f"<h3>{e(lr.label)}: {e(lr.name)}</h3>")
        out.append(table_of(lr.run))
    return "\n".join(out)


def service_tables(runs: Sequence[LoadedRun]) -> str:
    return _per_run(runs, "Per service", _service_table)


def _service_table(r: BenchRun) -> str:
    rows = []
    for s in r.summary:
        d = run_delta(r, s.service)  # the run's stored figures: the text report and JSON print the same
        dt = run_delta(r, s.service, "TTFT")
        rows.append(
            [
                e(s.service),
                e(s.mode or "-"),
                str(s.n),
                str(s.failed),
                _est(estimate(r, s.service)),
                e(_num(s.tok_s_median)),
                e(_num(s.output_throughput)),
                _est(estimate(r, s.service, None, ttft_ms)),
                e(_num(s.accept_length_mean, "{:.2f}")),
                str(s.output_tokens),
                "base" if r.baseline == s.service else e(delta_text(d)),
                e(ci_text(d).removeprefix("95 % CI ")) if d else "",
                "base" if r.baseline == s.service else e(delta_text(dt)),
            ]
        )
    return _table(
        [
            "service",
            "mode",
            "ok",
            "failed",
            "tok/s mean ± CI",
            "median",
            "throughput",
            "TTFT ms ± CI",
            "accept",
            "tokens",
            "Δ tok/s",
            "95 % CI",
            "Δ TTFT",
        ],
        rows,
        set(range(2, 13)),
    )


def prompt_tables(runs: Sequence[LoadedRun]) -> str:
    return _per_run(runs, "Per prompt", _prompt_table)


def _prompt_table(r: BenchRun) -> str:
    rows = []
    for row in r.rows:
        d = paired_vs_baseline(r, row.service, row.prompt_id)
        base = r.baseline == row.service
        rows.append(
            [
                e(row.prompt_id),
                e(row.service),
                e(row.mode or "-"),
                f"{row.n}" + (f" ({row.failed} failed)" if row.failed else ""),
                _est(estimate(r, row.service, row.prompt_id)),
                e(_num(row.tok_s_median)),
                e(_num(row.decode_tok_s_median)),
                e(_num(row.ttft_ms_median)),
                e(_num(row.itl_ms_median, "{:.2f}")),
                e(_num(row.accept_length_median, "{:.2f}")),
                e(_num(row.tokens_per_chunk_median, "{:.2f}")),
                "base" if base else e(delta_text(d)),
                "" if base or d is None else e(ci_text(d).removeprefix("95 % CI ")),
                "" if base or d is None else _verdict_html(short_verdict(d), d),
            ]
        )
    return _table(
        [
            "prompt",
            "service",
            "mode",
            "n",
            "tok/s mean ± CI",
            "median",
            "decode",
            "TTFT ms",
            "ITL ms",
            "accept",
            "tok/chunk",
            "Δ tok/s",
            "95 % CI",
            "paired",
        ],
        rows,
        set(range(3, 13)),
    )


def aligned_table(runs: Sequence[LoadedRun]) -> str | None:
    if len(runs) < 2:
        return None
    ref = runs[0]
    headers = ["service", "prompt"] + [f"{lr.label} tok/s" for lr in runs]
    for lr in runs[1:]:
        headers += [f"Δ {lr.label} vs {ref.label}", "95 % CI", "verdict"]
    rows = []
    for row in aligned(runs):
        cells = [e(row.service), e(row.prompt or "(all prompts)")] + [_est(x) for x in row.estimates]
        for d, v in zip(row.deltas[1:], row.verdicts[1:], strict=True):
            cells += [
                e(delta_text(d)),
                e(ci_text(d).removeprefix("95 % CI ") if d else "-"),
                f'<div class="wrap">{_verdict_html(v, d)}</div>',
            ]
        rows.append(cells)
    n = len(runs)
    num = set(range(2, 2 + n)) | {2 + n + 3 * i for i in range(n - 1)} | {3 + n + 3 * i for i in range(n - 1)}
    return "<h2>Aligned on service and prompt</h2>" + _table(headers, rows, num)


def failures(runs: Sequence[LoadedRun]) -> str | None:
    items = []
    for lr in runs:
        for r in lr.run.results:
            if not r.ok:
                pre = f"{lr.label}: " if len(runs) > 1 else ""
                items.append(
                    f"<li>{e(pre)}{e(r.service)} {e(r.prompt_id)} #{r.repeat + 1}: <code>{e(r.error)}</code></li>"
                )
    if not items:
        return None
    more = f"<p>… and {len(items) - 50} more</p>" if len(items) > 50 else ""
    return f"<h2>Failed requests</h2><ul>{''.join(items[:50])}</ul>{more}"


# --- charts ----------------------------------------------------------------------------------------------

ChartFn = Callable[[Sequence[LoadedRun], Sequence[ch.Series]], ch.Chart | None]


def _deltas(runs: Sequence[LoadedRun], _series: Sequence[ch.Series]) -> ch.Chart | None:
    rows: list[tuple[str, Delta]] = []
    if len(runs) == 1:
        r = runs[0].run
        for s in services(r):
            for p in [None, *prompt_ids(r)]:
                d = run_delta(r, s) if p is None else paired_vs_baseline(r, s, p)
                if d is not None:
                    rows.append((f"{s} · {p or 'all prompts'}", d))
        caption = (
            f"Each service vs the baseline {r.baseline}: all prompts as the run stored it; each prompt paired "
            "on repeat."
        )
    else:
        for row in aligned(runs):
            for lr, d in zip(runs[1:], row.deltas[1:], strict=True):
                if d is not None:
                    rows.append((f"{lr.label} vs {runs[0].label} · {row.service} · {row.prompt or 'all'}", d))
        caption = f"Each run vs {runs[0].label}, same service and prompt; bootstrap over the requests."
    return ch.delta_forest(rows[:40], "chart-deltas", "Δ tok/s with 95 % confidence intervals", caption)


CHARTS: list[tuple[str, ChartFn]] = [
    ("tok/s per prompt and service", lambda runs, s: ch.tok_s_bars(s)),
    ("Δ tok/s with intervals", _deltas),
    ("TTFT CDF", lambda runs, s: ch.ttft_cdf(s)),
    ("ITL CDF", lambda runs, s: ch.itl_cdf(s)),
    ("accept length", lambda runs, s: ch.accept_length(s)),
    ("tokens per chunk", lambda runs, s: ch.tokens_per_chunk(s)),
    ("throughput vs concurrency", lambda runs, s: ch.load_curve(runs)),
    # --- issue 26 (W-GPU): per-request acceptance ---
    ("tok/s vs accept length", accept_vs_tok_s),
]

# charts whose data comes from later work; listed at the foot of a report so a reader knows they exist
WAITING = {
    "throughput vs concurrency": "runs at two or more concurrency levels (pass them together)",
    "soak time series with drift windows": "a soak run: --soak --html FILE draws it (report/loadhtml.py)",
    "sweep Pareto front and heat map": "a sweep: `report DIR/results.json --html FILE` or `sweep ... --html FILE` (report/sweep.py)",
}


def render_charts(runs: Sequence[LoadedRun]) -> tuple[list[ch.Chart], list[str]]:
    """The charts with data, and the names of those left out for lack of it."""
    series = ch.make_series(runs)
    shown, missing = [], []
    for name, fn in CHARTS:
        c = fn(runs, series)
        if c is None:
            missing.append(name)
        else:
            shown.append(c)
    return shown, missing


def charts_section(charts: Sequence[ch.Chart]) -> str:
    out = ["<h2>Charts</h2>"]
    for c in charts:
        out.append(
            f'<figure class="chart" id="{e(c.id)}" data-chart="{e(c.id)}">{c.svg}'
            f'<figcaption><b id="{e(c.id)}-title">{e(c.title)}.</b> {e(c.caption)}</figcaption></figure>'
        )
    return "\n".join(out)


def footer(runs: Sequence[LoadedRun], missing: Sequence[str]) -> str:
    waiting = [f"{k} (needs {v})" for k, v in WAITING.items() if k in missing or k not in dict(CHARTS)]
    other = [m for m in missing if m not in WAITING]
    parts = []
    if other:
        parts.append("Charts left out, the runs carry no data for them: " + ", ".join(other) + ".")
    if waiting:
        parts.append("Not shown: " + "; ".join(waiting) + ".")
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(
        f"Made by ddtree-tui {__version__} on {made} from " + ", ".join(lr.name for lr in runs) + ". "
        "A self-contained file: no scripts, no network; charts drawn with matplotlib as inline SVG."
    )
    return "<footer>" + "<br>".join(e(p) for p in parts) + "</footer>"


SECTIONS: list[Section] = [comparable, verdicts, manifest, service_tables, prompt_tables, aligned_table]
# --- issue 26 (W-GPU): GPU telemetry / energy and per-request acceptance (report/gpuaccept.py) ---
SECTIONS += [energy_section, acceptance_section]


def client_section(runs: Sequence[LoadedRun]) -> str | None:
    """The client's own CPU and loop lag per run (bench/tables.py client_line: the text report's sentence)."""
    lines = [(lr, cl) for lr in runs if (cl := client_line(lr.run.client)) is not None]
    if not lines:
        return None
    return "<h2>Client</h2>" + "".join(f"<p>{e(lr.name)}: {e(cl)}</p>" for lr, cl in lines)


SECTIONS += [client_section]  # issue 26: the client's CPU per token, as in the text report and the JSON


def render(runs: Sequence[LoadedRun], extra: Sequence[str] = ()) -> str:
    """The whole report as one HTML document; `extra`: sections of other modules (issue 26's time slices and
    server metrics, report/serverhtml.py), before the failures."""
    if not runs:
        raise ValueError("no runs to report")
    charts, missing = render_charts(runs)
    body = [header(runs)]
    for sec in SECTIONS:
        part = sec(runs)
        if part:
            body.append(part)
    if charts:
        body.append(charts_section(charts))
    body += extra
    fail = failures(runs)
    if fail:
        body.append(fail)
    body.append(footer(runs, missing))
    return document("ddtree-tui report: " + " vs ".join(lr.run.id for lr in runs), body, len(charts))


def document(title: str, body: Sequence[str], n_charts: int) -> str:
    """The page around the sections, the same for a run report and a sweep report: the CSP, the CSS, and
    the chart count the page check reads (`data-charts`)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="ddtree-tui">\n'
        f"<title>{e(title)}</title>\n<style>{CSS}</style></head>\n"
        f'<body data-charts="{n_charts}">\n' + "\n".join(body) + "\n</body></html>\n"
    )
