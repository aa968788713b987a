"""The sweep report's charts: the two Pareto fronts and the heat maps (a bar chart when one dimension varies).

Split from report/sweep.py (the page) along the charts/tables seam; the chart rules are in its docstring.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ddtree_tui.report import charts as ch
from ddtree_tui.report.sweep_input import LoadedSweep, objective_unit, varying
from ddtree_tui.sweep.results import RankedPoint

MAX_FACETS = 6
FAILED_GREY = "#bdbdbd"


def _baseline(ls: LoadedSweep) -> dict[str, float | None]:
    """The baseline's tok/s, TTFT p90, accept length and step ms, averaged over its measurements."""
    if ls.state is None:
        vals = [v for v in ls.results.baseline_tok_s.values() if v is not None]
        return {"tok_s": sum(vals) / len(vals) if vals else None}
    ms = [b.measurement.metrics for b in ls.state.baselines if b.ok and b.measurement.metrics]

    def avg(name: str) -> float | None:
        xs = [getattr(m, name) for m in ms if getattr(m, name) is not None]
        return sum(xs) / len(xs) if xs else None

    return {name: avg(name) for name in ("tok_s", "ttft_p90", "accept_length", "step_ms")}


def _not_drawn_note(ax: Any, pts: Sequence[RankedPoint]) -> None:
    bad = [p for p in pts if p.status != "done"]
    if bad:
        text = "not measured: " + "; ".join(f"#{p.index} {p.status}" for p in bad[:6])
        text += f" (+{len(bad) - 6})" if len(bad) > 6 else ""
        ax.text(0.01, 0.01, text, transform=ax.transAxes, fontsize=7, color="#9b1c1c", va="bottom")


class _Front(NamedTuple):
    """One Pareto chart: the point fields on its axes, the flag that marks the front, and its words."""

    chart_id: str
    title: str
    caption: str
    x: str
    y: str
    flag: str
    xlabel: str
    ylabel: str


_LATENCY_FRONT = _Front(
    chart_id="chart-sweep-pareto",
    title="Pareto front: throughput vs latency",
    caption="Each measured point: mean per-request tok/s against TTFT p90. The front (diamonds, joined) holds "
    "the points no other point beats on both; the star is the baseline, the ring the best point under the "
    "objective. Up and to the left is better.",
    x="ttft_p90",
    y="tok_s",
    flag="pareto_latency",
    xlabel="TTFT p90 (ms, lower is better)",
    ylabel="tok/s (higher is better)",
)
_ACCEPT_FRONT = _Front(
    chart_id="chart-sweep-accept",
    title="Accept length vs step time",
    caption="Each measured point: the accept length the server reports (tokens per verify pass) against the "
    "time of one verify pass (≈ ITL × tokens per chunk). A bigger tree accepts more but each step costs more; "
    "the front shows where that trade pays.",
    x="step_ms",
    y="accept_length",
    flag="pareto_accept",
    xlabel="step time (ms, lower is better)",
    ylabel="accept length (higher is better)",
)


def _front_chart(ls: LoadedSweep, spec: _Front) -> ch.Chart | None:
    x, y, flag = spec.x, spec.y, spec.flag
    base = _baseline(ls)
    res = ls.results
    pts = [p for p in res.points if getattr(p, x) is not None and getattr(p, y) is not None]
    if not pts:
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        off = [p for p in pts if not getattr(p, flag)]
        on = sorted((p for p in pts if getattr(p, flag)), key=lambda p: getattr(p, x))
        ok_off = [p for p in off if p.meets_constraints]
        bad_off = [p for p in off if not p.meets_constraints]
        if ok_off:
            ax.plot([getattr(p, x) for p in ok_off], [getattr(p, y) for p in ok_off], linestyle="none",
                    marker="o", markerfacecolor="white", markeredgecolor=ch.PALETTE[0], markersize=6,
                    label="off the front")  # fmt: skip
        if bad_off:
            ax.plot([getattr(p, x) for p in bad_off], [getattr(p, y) for p in bad_off], linestyle="none",
                    marker="x", color=ch.PALETTE[3], markersize=6, label="outside the constraints")  # fmt: skip
        if on:
            ax.plot([getattr(p, x) for p in on], [getattr(p, y) for p in on], linestyle="-", linewidth=1.6,
                    marker="D", color=ch.PALETTE[1], markersize=6, label="Pareto front")  # fmt: skip
        for p in pts:
            ax.annotate(f"#{p.index}", (getattr(p, x), getattr(p, y)), textcoords="offset points",
                        xytext=(4, 3), fontsize=7, color="#333333")  # fmt: skip
        bx, by = base.get(x), base.get(y)
        if bx is not None and by is not None:
            ax.plot(
                [bx], [by], linestyle="none", marker="*", color="#000000", markersize=11, label="baseline"
            )
        elif by is not None:
            ax.axhline(by, color="#000000", linestyle="--", linewidth=1.0, label="baseline")
        if res.best is not None:
            b = next((p for p in pts if p.index == res.best), None)
            if b is not None:
                ax.plot([getattr(b, x)], [getattr(b, y)], linestyle="none", marker="o", markersize=14,
                        markerfacecolor="none", markeredgecolor=ch.PALETTE[2], markeredgewidth=2.0,
                        label=f"best (#{b.index})")  # fmt: skip
        _not_drawn_note(ax, res.points)
        ax.set_xlabel(spec.xlabel)
        ax.set_ylabel(spec.ylabel)
        ax.legend(loc="best", fontsize=8)

    return ch._render(spec.chart_id, spec.title, spec.caption, draw)


def pareto_latency(ls: LoadedSweep) -> ch.Chart | None:
    return _front_chart(ls, _LATENCY_FRONT)


def pareto_accept(ls: LoadedSweep) -> ch.Chart | None:
    return _front_chart(ls, _ACCEPT_FRONT)


def _cell_status(p: RankedPoint | None) -> str:
    if p is None:
        return "—"
    if p.status != "done" or p.objective is None:
        return p.status if p.status != "done" else "no data"
    return ""


def _facets(ls: LoadedSweep, rest: Sequence[tuple[str, list[str]]]) -> list[dict[str, str]]:
    loads = sorted({p.concurrency for p in ls.results.points})
    combos = [
        dict(zip([k for k, _ in rest], c, strict=True)) for c in itertools.product(*[v for _, v in rest])
    ]
    out = []
    for c in combos or [{}]:
        for n in loads:
            f = dict(c)
            if len(loads) > 1:
                f["concurrency"] = str(n)
            out.append(f)
    return out


def _match(p: RankedPoint, fixed: dict[str, str]) -> bool:
    return all(
        (str(p.concurrency) == v) if k == "concurrency" else (p.overrides.get(k) == v)
        for k, v in fixed.items()
    )


def heat_maps(ls: LoadedSweep) -> ch.Chart | None:
    res = ls.results
    dims = varying(ls)
    if not dims or not any(p.objective is not None for p in res.points):
        return None
    unit = objective_unit(res)
    if len(dims) == 1:
        return _one_dim(ls, dims[0])
    ranked = sorted(range(len(dims)), key=lambda i: (-len(dims[i][1]), i))
    (ka, va), (kb, vb) = dims[ranked[0]], dims[ranked[1]]
    rest = [dims[i] for i in sorted(ranked[2:])]
    facets = _facets(ls, rest)
    shown = facets[:MAX_FACETS]
    vals = [p.objective for p in res.points if p.objective is not None]
    lo, hi = min(vals), max(vals)

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        import numpy as np
        from matplotlib.patches import Rectangle

        cols = min(2, len(shown))
        rows = -(-len(shown) // cols)
        fig.set_size_inches(7.2, max(2.6, rows * (0.45 * len(va) + 1.3)))
        axes = fig.subplots(rows, cols, squeeze=False)
        from matplotlib import colormaps

        # 32 steps: the colorbar is 32 vector patches, not 256, and nobody reads finer than that
        cmap = colormaps["cividis_r" if res.objective == "ttft" else "cividis"].resampled(32)
        im = None
        for n, fixed in enumerate(shown):
            ax = axes[n // cols][n % cols]
            grid: list[list[float]] = []
            for a in va:
                line = []
                for b in vb:
                    p = next((q for q in res.points if q.overrides.get(ka) == a and q.overrides.get(kb) == b
                              and _match(q, fixed)), None)  # fmt: skip
                    line.append(p.objective if p is not None and p.objective is not None else float("nan"))
                    st = _cell_status(p)
                    i, j = va.index(a), vb.index(b)
                    if st:
                        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=FAILED_GREY, hatch="//",
                                               edgecolor="#666666", linewidth=0.5, zorder=2))  # fmt: skip
                        ax.text(j, i, st, ha="center", va="center", fontsize=8, color="#000000", zorder=3)
                    elif p is not None and p.objective is not None:
                        frac = (p.objective - lo) / ((hi - lo) or 1.0)
                        if res.objective == "ttft":
                            frac = 1 - frac
                        mark = " ★" if p.index == res.best else (" ✗" if not p.meets_constraints else "")
                        ax.text(j, i, f"{p.objective:.0f}{mark}", ha="center", va="center", fontsize=8,
                                color="#000000" if frac > 0.55 else "#ffffff", zorder=3)  # fmt: skip
                grid.append(line)
            # vector cells (pcolormesh), not imshow: an image would be a data: URL inside the page
            im = ax.pcolormesh(
                [j - 0.5 for j in range(len(vb) + 1)],
                [i - 0.5 for i in range(len(va) + 1)],
                np.ma.masked_invalid(np.array(grid, dtype=float)),
                cmap=cmap, vmin=lo, vmax=hi, edgecolors="#ffffff", linewidth=0.5,
            )  # fmt: skip
            ax.set_xticks(range(len(vb)), vb)
            ax.set_yticks(range(len(va)), va)
            ax.set_xlabel(kb)
            ax.set_ylabel(ka)
            ax.grid(False)
            if fixed:
                ax.set_title(", ".join(f"{k}={v}" for k, v in fixed.items()), fontsize=8)
        for n in range(len(shown), rows * cols):
            axes[n // cols][n % cols].set_visible(False)
        if im is not None:
            cb = fig.colorbar(im, ax=axes, label=f"{res.objective} ({unit})", shrink=0.9)
            cb.solids.set_rasterized(False)  # vector, like the rest of the page

    chose = f"Axes: {ka} and {kb}"
    if rest:
        chose += (
            f", the two dimensions with the most values; one map per value of {', '.join(k for k, _ in rest)}"
        )
    if len(facets) > len(shown):
        chose += f" (the first {len(shown)} of {len(facets)} shown)"
    return ch._render(
        "chart-sweep-heat",
        f"Heat map of {res.objective}: {ka} × {kb}",
        f"{chose}. Colour (cividis) and the number in each cell: the point's {res.objective} in {unit}; ★ the "
        "best point, ✗ outside the constraints; grey hatched cells were not measured (failed, rejected or "
        "skipped, as written in them).",
        draw,
    )


def _one_dim(ls: LoadedSweep, dim: tuple[str, list[str]]) -> ch.Chart | None:
    res = ls.results
    key, vals = dim
    unit = objective_unit(res)

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        loads = sorted({p.concurrency for p in res.points})
        width = 0.8 / len(loads)
        top = max(p.objective or 0.0 for p in res.points) or 1.0
        for li, n in enumerate(loads):
            for j, v in enumerate(vals):
                p = next((q for q in res.points if q.overrides.get(key) == v and q.concurrency == n), None)
                xj = j - 0.4 + width * (li + 0.5)
                st = _cell_status(p)
                if st or p is None or p.objective is None:
                    ax.bar(
                        [xj], [top * 0.15], width * 0.92, color=FAILED_GREY, hatch="//", edgecolor="#666666"
                    )
                    ax.text(xj, top * 0.16, st, ha="center", va="bottom", fontsize=8, color="#9b1c1c")
                    continue
                ax.bar([xj], [p.objective], width * 0.92, color=ch.PALETTE[li % len(ch.PALETTE)],
                       hatch=ch.HATCHES[li % len(ch.HATCHES)], edgecolor="#222222", linewidth=0.6,
                       label=f"concurrency {n}" if j == 0 and len(loads) > 1 else None)  # fmt: skip
                ax.text(xj, p.objective, f"{p.objective:.0f}" + (" ★" if p.index == res.best else ""),
                        ha="center", va="bottom", fontsize=8)  # fmt: skip
        ax.set_xticks(range(len(vals)), vals)
        ax.set_xlabel(key)
        ax.set_ylabel(f"{res.objective} ({unit})")
        ax.grid(axis="x", visible=False)
        if len(loads) > 1:
            ax.legend(fontsize=8)

    return ch._render(
        "chart-sweep-heat",
        f"{res.objective} over {key}",
        "One dimension varies, so a bar per value instead of a heat map; ★ the best point; grey hatched "
        "bars were not measured (failed, rejected or skipped, as written above them).",
        draw,
    )


SweepChart = Callable[[LoadedSweep], ch.Chart | None]
CHARTS: list[tuple[str, SweepChart]] = [
    ("Pareto front (throughput vs latency)", pareto_latency),
    ("accept length vs step time", pareto_accept),
    ("heat map", heat_maps),
]
