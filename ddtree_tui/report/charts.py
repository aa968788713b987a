"""The report's charts: matplotlib figures written as inline SVG.

Why matplotlib: it is the plotting library of this field (SGLang's and vLLM's benchmark scripts plot with
it), it renders fully offline with no browser-side script, and its SVG backend keeps text as text
(`svg.fonttype = "none"`), so labels stay selectable and searchable and print sharply. Only the object API
(`matplotlib.figure.Figure`) is used: no pyplot, no global backend, nothing shown on a screen.

Colours: the Okabe-Ito palette (distinguishable with every common colour-vision deficiency), and every series
also differs by marker, line style or hatch, so a greyscale print still tells them apart.

Each chart is a function `(series) -> Chart | None`: None when the runs carry no data for it, so adding a
chart for new data (a load sweep, a soak) is one function and one line in `html.CHARTS`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ddtree_tui.bench.models import BenchRun, RequestResult
from ddtree_tui.bench.stats import Delta, ecdf, mean_ci, weighted_ecdf
from ddtree_tui.report.runs import LoadedRun

if TYPE_CHECKING:  # matplotlib itself loads on the first chart (it is slow to import)
    from matplotlib.typing import RcKeyType

# Okabe & Ito (2008), ordered so the first ones stay apart in greyscale too; the yellow is left out
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1)))
HATCHES = ("", "//", "\\\\", "xx", "--", "||", "++")  # lines only: a dot hatch is a large SVG pattern

RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text: selectable, searchable, crisp in print
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial", "sans-serif"],
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#d0d0d0",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "figure.dpi": 72,
    # labels are names (prompt ids, services, sweep values), never math: a "$" in one is drawn as it is
    # instead of going to the mathtext parser (where "$_$" raised and ended the whole report)
    "text.parse_math": False,
}


class Series(BaseModel):
    """One line of a chart: a service in a run."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    label: str
    run: BenchRun
    run_label: str
    service: str
    index: int

    @property
    def color(self) -> str:
        return PALETTE[self.index % len(PALETTE)]

    @property
    def _style(self) -> int:
        # past the palette's length the styles shift, so colour + style stays unique for 49 series
        return self.index + self.index // len(PALETTE)

    @property
    def marker(self) -> str:
        return MARKERS[self._style % len(MARKERS)]

    @property
    def linestyle(self) -> str | tuple[int, tuple[int, ...]]:
        return LINESTYLES[self._style % len(LINESTYLES)]

    @property
    def hatch(self) -> str:
        return HATCHES[self._style % len(HATCHES)]

    def ok(self, prompt: str | None = None) -> list[RequestResult]:
        return [
            r
            for r in self.run.results
            if r.ok
            and not r.warmup
            and r.service == self.service
            and (prompt is None or r.prompt_id == prompt)
        ]


class Chart(BaseModel):
    """A rendered chart: its id (for the page and the browser check), title, caption and SVG markup."""

    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    caption: str
    svg: str


def make_series(runs: Sequence[LoadedRun]) -> list[Series]:
    many = len(runs) > 1
    out: list[Series] = []
    for lr in runs:
        refs = [t.ref for t in lr.run.targets]
        refs += [r.service for r in lr.run.results if r.service not in refs]
        for ref in dict.fromkeys(refs):
            label = f"{lr.label}: {ref}" if many else ref
            out.append(Series(label=label, run=lr.run, run_label=lr.label, service=ref, index=len(out)))
    return out


def _figure(width: float = 7.2, height: float = 3.4):  # type: ignore[no-untyped-def]
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


_PROLOG = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_PATH_D = re.compile(r' d="[^"]*"')
_COORD = re.compile(r' (?:x|y|x1|x2|y1|y2|width|height|transform)="[^"]*"')
_DECIMALS = re.compile(r"(\d+\.\d{2})\d+")


def to_svg(fig, chart_id: str) -> str:  # type: ignore[no-untyped-def]
    """The figure as an <svg> element to inline: no XML prolog, no date, ids unique to this chart."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": chart_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = _PROLOG.sub("", buf.getvalue(), count=1)
    svg = _METADATA.sub("", svg, count=1)
    # coordinates to 2 decimals (a hundredth of a point): a third smaller, no visible change
    svg = _PATH_D.sub(lambda m: _DECIMALS.sub(r"\1", m.group(0)), svg)
    svg = _COORD.sub(lambda m: _DECIMALS.sub(r"\1", m.group(0)), svg)
    return svg.replace("<svg ", f'<svg role="img" aria-labelledby="{chart_id}-title" ', 1)


def _render(chart_id: str, title: str, caption: str, draw) -> Chart:  # type: ignore[no-untyped-def]
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure()
        draw(fig)
        svg = to_svg(fig, chart_id)
    return Chart(id=chart_id, title=title, caption=caption, svg=svg)


FEW = 4  # up to this many series the legend sits inside the axes; more go below them, the figure grows


def _legend(ax, n: int, loc: str = "best") -> None:  # type: ignore[no-untyped-def]
    if not n:
        return
    if n <= FEW:
        ax.legend(loc=loc, ncol=1 if loc == "best" else min(3, n), fontsize=8)
        return
    fig = ax.figure
    ncol = 3
    w, h = fig.get_size_inches()
    fig.set_size_inches(w, h + 0.17 * -(-n // ncol))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=7)


def tok_s_bars(series: Sequence[Series]) -> Chart | None:
    """Mean tok/s per prompt and service, error bars the 95 % t interval over the repeats."""
    prompts = list(dict.fromkeys(r.prompt_id for s in series for r in s.ok()))
    if not prompts or not any(r.tok_s is not None for s in series for r in s.ok()):
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(series))
        for i, s in enumerate(series):
            xs, ys, lo, hi = [], [], [], []
            for j, p in enumerate(prompts):
                e = mean_ci([r.tok_s for r in s.ok(p)])
                if e.value is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(e.value)
                lo.append(e.value - (e.lo if e.lo is not None else e.value))
                hi.append((e.hi if e.hi is not None else e.value) - e.value)
            ax.bar(
                xs,
                ys,
                width * 0.92,
                yerr=[lo, hi],
                capsize=3,
                color=s.color,
                edgecolor="#222222",
                linewidth=0.6,
                hatch=s.hatch,
                label=s.label,
                error_kw={"elinewidth": 1.0, "ecolor": "#000000"},
            )
        ax.set_xticks(range(len(prompts)), prompts)
        ax.set_ylabel("tok/s (mean, 95 % CI)")
        ax.grid(axis="x", visible=False)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)  # room for the legend above the bars
        _legend(ax, len(series), "upper left")

    return _render(
        "chart-tok-s",
        "Output tok/s per prompt and service",
        "Bars: mean over the repeats of each request's output tokens / end-to-end time. Error bars: 95 % "
        "Student-t interval of the mean (none with a single repeat).",
        draw,
    )


def _cdf_chart(
    series: Sequence[Series],
    chart_id: str,
    title: str,
    caption: str,
    xlabel: str,
    data: dict[str, tuple[list[float], list[float]]],
) -> Chart | None:
    if not any(xs for xs, _ in data.values()):
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        for s in series:
            xs, ys = data.get(s.label, ([], []))
            if not xs:
                continue
            ax.step(
                [xs[0], *xs],
                [0.0, *ys],
                where="post",
                color=s.color,
                linestyle=s.linestyle,
                linewidth=1.6,
                label=s.label,
            )
            every = max(1, len(xs) // 8)
            ax.plot(xs[::every], ys[::every], linestyle="none", marker=s.marker, color=s.color, markersize=4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.02)
        _legend(ax, len(series))

    return _render(chart_id, title, caption, draw)


def ttft_cdf(series: Sequence[Series]) -> Chart | None:
    data = {s.label: ecdf([None if r.ttft_s is None else r.ttft_s * 1000 for r in s.ok()]) for s in series}
    return _cdf_chart(
        series,
        "chart-ttft-cdf",
        "Time to first token (CDF)",
        "Each step is one request: send to the first chunk with text.",
        "TTFT (ms)",
        data,
    )


def itl_cdf(series: Sequence[Series]) -> Chart | None:
    """Per-token inter-token latency, pooled over requests from each request's 21 recorded quantiles."""
    data: dict[str, tuple[list[float], list[float]]] = {}
    for s in series:
        pts: list[tuple[float, float]] = []
        for r in s.ok():
            q = r.itl_quantiles_ms
            if not q:
                continue
            w = (r.output_tokens or len(q)) / len(q)
            pts += [(x, w) for x in q]
        data[s.label] = weighted_ecdf(pts)
    return _cdf_chart(
        series,
        "chart-itl-cdf",
        "Inter-token latency (CDF, per token)",
        "Each chunk's gap divided over its tokens (SGLang's definition), pooled over the requests from "
        "their recorded quantiles (0, 5, …, 100 %), each request weighted by its output tokens.",
        "ITL (ms)",
        data,
    )


def accept_length(series: Sequence[Series]) -> Chart | None:
    """Per-request accept length by service: a box over the requests with each request as a dot."""
    vals = {s.label: [r.accept_length for r in s.ok() if r.accept_length is not None] for s in series}
    shown = [s for s in series if vals[s.label]]
    if not shown:
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        data = [vals[s.label] for s in shown]
        bp = ax.boxplot(data, orientation="horizontal", widths=0.5, patch_artist=True, showfliers=False)
        for patch, s in zip(bp["boxes"], shown, strict=True):
            patch.set(facecolor="white", edgecolor=s.color, linewidth=1.4, hatch=s.hatch)
        for med in bp["medians"]:
            med.set(color="#000000", linewidth=1.4)
        for i, (s, v) in enumerate(zip(shown, data, strict=True)):
            jit = [((k * 37) % 11 - 5) / 40 for k in range(len(v))]  # deterministic jitter
            ax.plot(
                v,
                [i + 1 + j for j in jit],
                linestyle="none",
                marker=s.marker,
                color=s.color,
                markersize=4,
                alpha=0.8,
            )
        ax.set_yticks(range(1, len(shown) + 1), [s.label for s in shown])
        ax.set_xlabel("accept length (tokens per verify pass, from each request's meta_info)")
        ax.grid(axis="y", visible=False)

    return _render(
        "chart-accept",
        "Accept length per request",
        "Box: quartiles and median over the requests; dots: the requests. Higher means more drafted tokens "
        "accepted per target-model pass.",
        draw,
    )


def tokens_per_chunk(series: Sequence[Series]) -> Chart | None:
    """How many tokens each streamed chunk carried (per verify pass when the server streams every pass)."""
    hists: dict[str, dict[int, int]] = {}
    for s in series:
        h: dict[int, int] = {}
        for r in s.ok():
            for k, c in (r.chunk_tokens_hist or {}).items():
                h[int(k)] = h.get(int(k), 0) + c
        if h:
            hists[s.label] = h
    shown = [s for s in series if s.label in hists]
    if not shown:
        return None
    sizes = sorted({k for h in hists.values() for k in h})

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        width = 0.8 / len(shown)
        for i, s in enumerate(shown):
            h = hists[s.label]
            total = sum(h.values())
            xs = [k - 0.4 + width * (i + 0.5) for k in sizes]
            ys = [h.get(k, 0) / total for k in sizes]
            ax.bar(
                xs,
                ys,
                width * 0.92,
                color=s.color,
                edgecolor="#222222",
                linewidth=0.6,
                hatch=s.hatch,
                label=s.label,
            )
        ax.set_xticks(sizes)
        ax.set_xlabel("tokens in a chunk")
        ax.set_ylabel("fraction of chunks")
        ax.grid(axis="x", visible=False)
        _legend(ax, len(shown))

    return _render(
        "chart-chunks",
        "Tokens per streamed chunk",
        "Fraction of chunks that carried 1, 2, … tokens, over all successful requests. With one chunk per "
        "verify pass this is the per-step acceptance distribution.",
        draw,
    )


def delta_forest(rows: Sequence[tuple[str, Delta]], chart_id: str, title: str, caption: str) -> Chart | None:
    """Deltas with their 95 % intervals, one line each (a forest plot); zero marked."""
    rows = [(name, d) for name, d in rows if d.pct is not None]
    if not rows:
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        fig.set_size_inches(7.2, max(1.6, 0.32 * len(rows) + 0.9))
        ax = fig.add_subplot()
        for i, (_name, d) in enumerate(rows):
            y = len(rows) - i
            color = PALETTE[0] if (d.pct or 0) >= 0 else PALETTE[1]
            if d.has_ci:
                ax.plot([d.lo_pct, d.hi_pct], [y, y], color=color, linewidth=2.0)
            ax.plot([d.pct], [y], marker="D" if (d.pct or 0) >= 0 else "s", color=color, markersize=5)
        ax.axvline(0.0, color="#000000", linewidth=0.8)
        ax.set_yticks([len(rows) - i for i in range(len(rows))], [n for n, _ in rows])
        ax.set_xlabel("Δ tok/s (%), 95 % CI")
        ax.grid(axis="y", visible=False)

    return _render(chart_id, title, caption, draw)


def load_curve(runs: Sequence[LoadedRun]) -> Chart | None:
    """Throughput vs concurrency (the knee) and TTFT vs throughput, from runs at different concurrency:
    one point a service a run. None unless the runs span at least two concurrency levels."""
    levels = {lr.run.concurrency for lr in runs}
    if len(levels) < 2:
        return None
    pts: dict[str, list[tuple[int, float, float | None]]] = {}
    for lr in runs:
        for s in lr.run.summary:
            if s.output_throughput is None:
                continue
            pts.setdefault(s.service, []).append((lr.run.concurrency, s.output_throughput, s.ttft_ms_median))
    if not pts:
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        a1, a2 = fig.subplots(1, 2)
        for i, (svc, p) in enumerate(pts.items()):
            p.sort()
            kw = {
                "color": PALETTE[i % len(PALETTE)],
                "marker": MARKERS[i % len(MARKERS)],
                "linestyle": LINESTYLES[i % len(LINESTYLES)],
                "label": svc,
            }
            a1.plot([c for c, _, _ in p], [t for _, t, _ in p], **kw)
            lat = [(t, ttft) for _, t, ttft in p if ttft is not None]
            a2.plot([t for t, _ in lat], [x for _, x in lat], **kw)
        a1.set_xscale("log", base=2)
        ticks = sorted(levels)
        a1.set_xticks(ticks, [str(c) for c in ticks])
        a1.minorticks_off()
        a1.set_xlabel("concurrency")
        a1.set_ylabel("output tok/s (all requests)")
        a2.set_xlabel("output tok/s (all requests)")
        a2.set_ylabel("TTFT median (ms)")
        _legend(a1, len(pts))

    return _render(
        "chart-load",
        "Throughput vs concurrency, and latency vs throughput",
        "One point per service per run: output tokens / time the service was measured, against the run's "
        "concurrency; right, the median TTFT at that throughput.",
        draw,
    )
