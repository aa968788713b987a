"""The HTML report's sections for issue 26's GPU energy and per-request acceptance: what the run recorded
(BenchRun.energy, BenchRun.acceptance, each request's energy_j and accept_length) as tables, and accept
length against tok/s as a chart. Split from html.py so each stays small; the numbers are the run's own (the
JSON's), only formatted here; a run stored before these existed gets its acceptance summarised on the spot,
by the same function (bench/acceptance.py)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from ddtree_tui.bench.acceptance import JOINED, AcceptanceSummary, summarize
from ddtree_tui.bench.energy import RunEnergy
from ddtree_tui.bench.models import BenchRun
from ddtree_tui.bench.results import LoadRun
from ddtree_tui.report import charts as ch
from ddtree_tui.report.runs import LoadedRun


def _e(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _n(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], num: set[int]) -> str:
    """Cells are already HTML (html.py's table, repeated to keep the import one way)."""
    th = "".join(f"<th{' class=num' if i in num else ''}>{_e(h)}</th>" for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=num' if i in num else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _heading(runs: Sequence[LoadedRun], lr: LoadedRun) -> str:
    return f"<h3>{_e(lr.label)}: {_e(lr.run.id)}</h3>" if len(runs) > 1 else ""


# --- GPU telemetry and energy --------------------------------------------------------------------------------
def _energy_html(en: RunEnergy) -> str:
    out = [
        '<dl class="kv">'
        f"<dt>GPU numbers from</dt><dd>{_e(en.source or 'no telemetry')}, {_e(en.measured_by)}</dd>"
        f"<dt>samples inside the run</dt><dd>{en.samples} (at least {en.min_samples} a GPU for a number)</dd>"
        f"<dt>energy, every sampled GPU</dt><dd>{_n(en.energy_j)} J over {en.output_tokens} output tokens: "
        f"<b>{_n(en.j_per_token, '{:.3f}')} J/token</b></dd>"
        f"<dt>per request</dt><dd>{_e(en.attribution)}</dd></dl>"
    ]
    if en.note:
        out.append(f'<p class="banner">{_e(en.note)}</p>')
    if en.services:
        rows = [
            [
                _e(s.service), _e(", ".join(s.gpus) or "-"), str(s.requests), str(s.output_tokens), _n(s.energy_j),
                _n(s.j_per_token, "{:.3f}"), _n(s.j_per_request_median), _e(s.note or ""),
            ]
            for s in en.services
        ]  # fmt: skip
        out.append(
            _table(
                [
                    "service",
                    "GPUs",
                    "requests",
                    "output tokens",
                    "energy J",
                    "J/token",
                    "J/request (median)",
                    "note",
                ],
                rows,
                {2, 3, 4, 5, 6},
            )
        )
    if en.gpus:
        rows = [
            [
                f"{_e(g.host)}:{g.gpu}", _e(g.name or "-"), _e(", ".join(g.services)), _e(g.join), _e(g.source or "-"),
                str(g.samples), _n(g.interval_s, "{:.2f}"), f"{g.coverage:.0%}", _n(g.energy_j), _n(g.idle_energy_j),
                _n(g.mean_power_w), _e(g.note or ""),
            ]
            for g in en.gpus
        ]  # fmt: skip
        out.append(
            _table(
                [
                    "GPU",
                    "name",
                    "services",
                    "joined by",
                    "source",
                    "samples",
                    "interval s",
                    "coverage",
                    "energy J",
                    "idle J",
                    "mean W",
                    "note",
                ],
                rows,
                {5, 6, 7, 8, 9, 10},
            )
        )
        for g in en.gpus:
            if not g.windows:
                continue
            out.append(f"<h3>{_e(g.host)}:{g.gpu} per window</h3>")
            rows = [
                [
                    str(w.window), f"{w.start_s:.1f}–{w.end_s:.1f}", str(w.samples), _n(w.util_pct),
                    _n(w.mem_used_mib, "{:.0f}"), _n(w.power_w), _n(w.sm_clock_mhz, "{:.0f}"),
                    _n(w.temp_c_max, "{:.0f}"), _n(w.energy_j),
                ]
                for w in g.windows
            ]  # fmt: skip
            out.append(
                _table(
                    [
                        "window",
                        "s from start",
                        "samples",
                        "util %",
                        "memory MiB",
                        "power W",
                        "SM MHz",
                        "temp max °C",
                        "energy J",
                    ],
                    rows,
                    {0, 2, 3, 4, 5, 6, 7, 8},
                )
            )
    return "".join(out)


def energy_section(runs: Sequence[LoadedRun]) -> str | None:
    """GPU telemetry per window and energy (runs made with --energy)."""
    shown = [lr for lr in runs if lr.run.energy is not None]
    if not shown:
        return None
    out = ["<h2>GPU telemetry and energy</h2>"]
    for lr in shown:
        assert lr.run.energy is not None
        out.append(_heading(runs, lr) + _energy_html(lr.run.energy))
    return "\n".join(out)


# --- per-request acceptance --------------------------------------------------------------------------------
def acceptance_of(run: BenchRun) -> list[AcceptanceSummary]:
    """The run's stored summary, else the same one made now (a run stored before it existed)."""
    return run.acceptance or summarize(run.results, [t.ref for t in run.targets])


def _hist_html(s: AcceptanceSummary) -> str:
    top = max((b.n for b in s.histogram), default=0) or 1
    rows = [
        [
            f"{b.lo:.2f}–{b.hi:.2f}",
            str(b.n),
            f'<span style="display:inline-block;height:.7em;background:#4477aa;width:{12 * b.n / top:.2f}rem"></span>',
        ]
        for b in s.histogram
    ]
    return _table(["accept length", "requests", ""], rows, {1})


def _accept_html(acc: Sequence[AcceptanceSummary]) -> str:
    rows = [
        [
            _e(s.service), str(s.n), str(s.without), _n(s.mean, "{:.2f}"), _n(s.median, "{:.2f}"),
            _n(s.p10, "{:.2f}"), _n(s.p90, "{:.2f}"), _n(s.min, "{:.2f}"), _n(s.max, "{:.2f}"),
        ]
        for s in acc
    ]  # fmt: skip
    out = [
        _table(
            [
                "service",
                "requests",
                "without spec numbers",
                "mean (Σtok/Σverify)",
                "median",
                "p10",
                "p90",
                "min",
                "max",
            ],
            rows,
            {1, 2, 3, 4, 5, 6, 7, 8},
        )
    ]
    names = {f: (n, u) for f, n, u in JOINED}
    for s in acc:
        out.append(f"<h3>{_e(s.service)}: histogram and correlation</h3>")
        out.append(_hist_html(s))
        rows = [
            [
                _e(f"{names[j.metric][0]} ({names[j.metric][1]})"), str(j.n), _n(j.pearson, "{:+.3f}"),
                _n(j.spearman, "{:+.3f}"), _n(j.slope, "{:+.4g}"),
            ]
            for j in s.joins
        ]  # fmt: skip
        out.append(
            _table(
                ["accept length vs", "pairs", "Pearson r", "Spearman ρ", "slope per +1 accept"],
                rows,
                {1, 2, 3, 4},
            )
        )
    return "".join(out)


def acceptance_section(runs: Sequence[LoadedRun]) -> str | None:
    """Per-request accept length: its spread per service and how it goes with each request's speed."""
    shown = [(lr, acc) for lr in runs if (acc := acceptance_of(lr.run))]
    if not shown:
        return None
    out = [
        "<h2>Per-request acceptance</h2>",
        '<p class="sub">Each request\'s accept length as its server reported it (completion_tokens / '
        "spec_verify_ct: /generate's meta_info, or the OpenAI APIs' sglext.spec_tokens_details), set against "
        "what the client measured of the same request. Pearson r: linear; Spearman ρ: by rank; slope: least "
        "squares.</p>",
    ]
    for lr, acc in shown:
        out.append(_heading(runs, lr) + _accept_html(acc))
    return "\n".join(out)


def accept_vs_tok_s(runs: Sequence[LoadedRun], series: Sequence[ch.Series]) -> ch.Chart | None:
    """Each request's tok/s against its accept length, one marker style a service."""
    pts = {
        s.label: [
            (r.accept_length, r.tok_s) for r in s.ok() if r.accept_length is not None and r.tok_s is not None
        ]
        for s in series
    }
    shown = [s for s in series if pts[s.label]]
    if not shown:
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        for s in shown:
            xs = [a for a, _ in pts[s.label]]
            ys = [t for _, t in pts[s.label]]
            ax.plot(xs, ys, linestyle="none", marker=s.marker, color=s.color, markersize=4, label=s.label)
        ax.set_xlabel("accept length (tokens per verify pass, this request's)")
        ax.set_ylabel("tok/s (this request's)")
        ch._legend(ax, len(shown))

    return ch._render(
        "chart-accept-tok-s",
        "tok/s against accept length, per request",
        "Each dot a request: its accept length as the server reported it and its tok/s as the client measured "
        "it. The correlation is in the Per-request acceptance section.",
        draw,
    )


# --- a load ladder (report/loadhtml.py) ----------------------------------------------------------------------
def load_sections(run: LoadRun) -> list[str]:
    """A `--load` run's energy (whole run, then per level: J/token against the load) and acceptance."""
    out: list[str] = []
    if run.energy is not None:
        out += ["<h2>GPU telemetry and energy</h2>", _energy_html(run.energy)]
    rows = [
        [
            _e(lv.label), _e(s.service), str(s.requests), str(s.output_tokens), _n(s.energy_j),
            _n(s.j_per_token, "{:.3f}"), _n(s.j_per_request_median),
            _n(max((g.mean_power_w or 0.0 for g in lv.energy.gpus), default=None)), _e(s.note or lv.energy.note or ""),
        ]
        for lv in run.level_energy
        for s in lv.energy.services
    ]  # fmt: skip
    if rows:
        out += [
            "<h3>Per level</h3>",
            _table(
                [
                    "level",
                    "service",
                    "requests",
                    "output tokens",
                    "energy J",
                    "J/token",
                    "J/request (median)",
                    "mean W (busiest GPU)",
                    "note",
                ],
                rows,
                {2, 3, 4, 5, 6, 7},
            ),
        ]
    if run.acceptance:
        out += ["<h2>Per-request acceptance</h2>", _accept_html(run.acceptance)]
    return out
