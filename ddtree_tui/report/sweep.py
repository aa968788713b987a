"""The HTML report of a tuning-lab sweep: `ddtree-tui report DIR/results.json --html FILE`,
`ddtree-tui sweep ... --html FILE` and `sweep show DIR --html FILE`.

Input: the sweep's `results.json` (a `SweepResults`) and, when it sits next to it, `sweep.json` (the
`SweepState`: dimensions, load, prompts, versions, GPUs, the baseline measurements). Without the state the
report still has the ranked points; the manifest then says what it could not read.

The same page rules as the run report (`report/html.py`): no script, a strict CSP, charts as inline SVG
(matplotlib, Okabe-Ito colours plus markers; heat maps in cividis, a sequential colormap readable with every
common colour-vision deficiency and in greyscale, with each cell's value written in it as text).

Heat map choice: the dimensions that take more than one value. One: a bar chart of the objective over its
values. Two: one heat map. More: the two with the most values are the axes (ties: the order given), and
there is one heat map per combination of the other dimensions' values (and per load level), at most
`MAX_FACETS`. Failed, rejected and skipped points are drawn as hatched grey cells/bars with their status.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ddtree_tui import __version__
from ddtree_tui.bench.stats import fmt_pct
from ddtree_tui.report import charts as ch
from ddtree_tui.report.html import CSP, CSS, _table, e
from ddtree_tui.report.runs import ReportInputError
from ddtree_tui.sweep.results import RESULTS_SCHEMA, RankedPoint, SweepResults
from ddtree_tui.sweep.state import SweepState

MAX_FACETS = 6
FAILED_GREY = "#bdbdbd"


class LoadedSweep(BaseModel):
    """A sweep to report: its results, its state when found next to them, and where they came from."""

    model_config = ConfigDict(frozen=True)

    path: str
    results: SweepResults
    state: SweepState | None = None

    @property
    def simulated(self) -> bool:
        if self.state is not None:
            return any(p.versions.get("simulated") for p in self.state.points)
        return any(c.startswith("SIMULATED") for c in self.results.caveats)


def is_sweep_results(obj: object) -> bool:
    """Whether a parsed JSON object is (meant to be) a sweep's results.json."""
    return isinstance(obj, dict) and "sweep_id" in obj and "points" in obj


def parse_sweep(obj: dict[str, Any], path: str) -> LoadedSweep:
    """The sweep in `obj` (read from `path`); ReportInputError names the file and what is wrong."""
    if obj.get("schema") != RESULTS_SCHEMA:
        raise ReportInputError(
            f"{path}: sweep results schema {obj.get('schema')!r}; this ddtree-tui reads schema {RESULTS_SCHEMA}"
        )
    try:
        res = SweepResults.model_validate(obj)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ReportInputError(f"{path}: not valid sweep results: {where}: {first['msg']}") from None
    state = None
    sp = Path(path).parent / "sweep.json"
    if sp.is_file():
        try:
            cand = SweepState.model_validate_json(sp.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cand = None  # the manifest says it could not be read
        if cand is not None and cand.id == res.sweep_id:
            state = cand
    return LoadedSweep(path=path, results=res, state=state)


def load_sweep(path: str) -> LoadedSweep:
    """Read `path` (a results.json) as a sweep; ReportInputError names the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        obj = json.loads(text)
    except FileNotFoundError:
        raise ReportInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportInputError(f"{path}: is a directory, not a results.json file") from None
    except UnicodeDecodeError:
        raise ReportInputError(f"{path}: not a text file (not UTF-8)") from None
    except json.JSONDecodeError as err:
        raise ReportInputError(
            f"{path}: not JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None
    except OSError as err:
        raise ReportInputError(f"{path}: cannot read: {err.strerror or err}") from None
    if not is_sweep_results(obj):
        raise ReportInputError(f'{path}: not sweep results (expected "sweep_id" and "points")')
    return parse_sweep(obj, path)


# --- helpers ---------------------------------------------------------------------------------------------


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _sort_values(vals: Sequence[str]) -> list[str]:
    try:
        return sorted(vals, key=float)
    except ValueError:
        return list(vals)


def varying(ls: LoadedSweep) -> list[tuple[str, list[str]]]:
    """The dimensions that take more than one value, with their values (the state's order when known)."""
    pts = ls.results.points
    order: list[str] = []
    if ls.state is not None:
        order = [d.key for d in ls.state.dims]
    order += [k for p in pts for k in p.overrides if k not in order]
    out = []
    for k in order:
        vals = list(dict.fromkeys(p.overrides[k] for p in pts if k in p.overrides))
        if len(vals) > 1:
            out.append((k, _sort_values(vals)))
    return out


def _unit(res: SweepResults) -> str:
    return "ms" if res.objective == "ttft" else "tok/s"


def _delta(p: RankedPoint) -> str:
    if p.delta_pct is None:
        return "-"
    s = f"{fmt_pct(p.delta_pct)} %"
    if p.delta_lo_pct is not None and p.delta_hi_pct is not None:
        s += f" ({fmt_pct(p.delta_lo_pct)} … {fmt_pct(p.delta_hi_pct)})"
    return s


def _status_word(p: RankedPoint) -> str:
    if p.status != "done":
        return p.status
    return "outside constraints" if not p.meets_constraints else "done"


# --- sections --------------------------------------------------------------------------------------------


def header(ls: LoadedSweep) -> str:
    res = ls.results
    dims = varying(ls)
    title = f"Sweep {res.sweep_id} of {res.ref}" + (
        " — " + " × ".join(f"{k} ({len(v)})" for k, v in dims) if dims else ""
    )
    n_done = sum(p.status == "done" for p in res.points)
    out = [
        f"<h1>{e(title)}</h1>",
        f'<p class="sub">{e(Path(ls.path).name)} · {n_done} of {len(res.points)} point(s) measured · objective '
        f"{e(res.objective)} · wall {res.wall_s:.0f} s</p>",
    ]
    if ls.simulated:
        out.append(
            '<div class="banner">SIMULATED — these points ran on ddtree-tui\'s built-in SGLang simulator, not '
            "a real model on a real GPU. The numbers show the tool working, not a model's speed.</div>"
        )
    pending = [p for p in res.points if p.status in ("pending", "starting", "measuring")]
    if (ls.state is not None and not ls.state.finished) or pending:
        out.append(
            f'<div class="banner bad">PARTIAL — the sweep did not finish: {len(pending)} point(s) never '
            "measured. Continue it with <code>ddtree-tui sweep … --out DIR --resume</code>.</div>"
        )
    bad = [p for p in res.points if p.status in ("failed", "rejected", "skipped")]
    if bad:
        words = ", ".join(f"{sum(p.status == s for p in bad)} {s}" for s in ("failed", "rejected", "skipped"))
        out.append(f'<div class="banner bad">Not measured: {e(words)} (see the table below).</div>')
    if res.restored is False:
        out.append('<div class="banner bad">The service could NOT be put back as the profile has it.</div>')
    return "\n".join(out)


def _algorithms(ls: LoadedSweep) -> tuple[str, str]:
    """(speculative algorithm(s), DDTree mode(s)) as the points' servers reported them."""
    algos: list[str] = []
    modes: list[str] = []
    for rec in ls.state.points if ls.state else []:
        si = rec.server_info or {}
        a = si.get("speculative_algorithm")
        if a:
            algos.append(str(a))
        m = rec.overrides.get("mode")
        if m is None and str(a).upper() == "DDTREE":
            m = "shadow-linear" if si.get("speculative_ddtree_shadow_linear") else "tree"
        if m:
            modes.append(m)
    return ", ".join(dict.fromkeys(algos)) or "-", ", ".join(dict.fromkeys(modes)) or "-"


def manifest(ls: LoadedSweep) -> str:
    res, stt = ls.results, ls.state
    out = ["<h2>Manifest</h2>"]
    kv: list[tuple[str, str]] = [("service", res.ref), ("baseline", res.baseline)]
    if stt is None:
        kv.append(("sweep.json", "not found next to the results (or another sweep's): no dimensions, load, "
                                 "versions or GPUs to show"))  # fmt: skip
    else:
        algo, mode = _algorithms(ls)
        started = datetime.fromtimestamp(stt.started_at, UTC)
        kv += [
            ("algorithm", algo),
            ("DDTree mode", mode),
            (
                "started",
                f"{started:%Y-%m-%d %H:%M:%S} UTC, wall {stt.wall_s:.1f} s"
                + ("" if stt.finished else " — not finished"),
            ),
            ("dimensions", "; ".join(f"{d.key} = {', '.join(d.values)}" for d in stt.dims)),
            ("strategy", f"{stt.strategy}, {len(stt.points)} point(s)"),
            ("load", "closed loop, concurrency " + ", ".join(str(n) for n in stt.loads)),
            ("prompts", stt.prompts),
            (
                "repeats",
                f"{stt.repeats} measured after {stt.warmup} warm-up(s), max_new_tokens {stt.max_new_tokens}",
            ),
            ("baseline measurements", f"{len(stt.baselines)} ({sum(b.ok for b in stt.baselines)} ok)"),
        ]
        versions = {
            f"{k}={v}"
            for p in stt.points
            for k, v in p.versions.items()
            if k != "simulated" and v is not None
        }
        kv.append(("versions", ", ".join(sorted(versions)) or "-"))
        gpus = {
            f"GPU {g.index}: {g.name or '?'}"
            + (f", {g.mem_total_mb} MiB" if g.mem_total_mb else "")
            + (f" ({g.source})" if g.source else "")
            for p in stt.points
            for g in p.gpus
        }
        kv.append(("GPU", "; ".join(sorted(gpus)) or "not recorded"))
    kv.append(
        ("objective", res.objective + (f" under {', '.join(res.constraints)}" if res.constraints else ""))
    )
    if ls.simulated:
        kv.append(("SIMULATED", "yes: the built-in simulator, not a GPU"))
    out.append('<dl class="kv">' + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in kv) + "</dl>")
    if res.caveats:
        out.append(
            "<h3>What this sweep cannot know</h3><ul>"
            + "".join(f"<li>{e(c)}</li>" for c in res.caveats)
            + "</ul>"
        )
    return "\n".join(out)


def best(ls: LoadedSweep) -> str:
    res = ls.results
    out = ["<h2>Best point</h2>"]
    if res.best is None:
        out.append("<p>None: no point was measured and met the constraints.</p>")
        return "\n".join(out)
    b = next(p for p in res.points if p.index == res.best)
    out.append(
        f"<p><b>#{b.index} {e(b.label)}</b>: {e(_f(b.objective))} {e(_unit(res))} — {e(b.verdict)}</p>"
    )
    if res.best_command:
        out.append(f'<p>Command line (as the host profile builds it):</p><div class="argv"><code>'
                   f"{e(res.best_command)}</code></div>")  # fmt: skip
    out.append(f"<p>Apply it: <code>ddtree-tui sweep apply DIR --point {b.index}</code></p>")
    return "\n".join(out)


def ranked_table(ls: LoadedSweep) -> str:
    res = ls.results
    order = sorted(res.points, key=lambda p: (p.status != "done", p.rank is None, p.rank or 0, p.index))
    rows = []
    for p in order:
        front = " ".join(w for w, on in (("latency", p.pareto_latency), ("accept", p.pareto_accept)) if on)
        status = _status_word(p)
        cls = "worse" if status != "done" else ""
        rows.append(
            [
                str(p.rank) if p.rank else ("✗" if p.status == "done" else "-"),
                str(p.group) if p.group else "-",
                f"#{p.index}",
                e(p.label),
                e(_f(p.objective)),
                e(_delta(p)),
                f'<div class="wrap">{e(p.verdict)}</div>' if p.verdict else "-",
                e(_f(p.tok_s)),
                e(_f(p.ttft_p90, 0)),
                e(_f(p.accept_length, 2)),
                e(_f(p.step_ms)),
                e(front or "-"),
                f'<span class="{cls}">{e(status)}</span>'
                + (f'<div class="wrap"><code>{e((p.error or "")[:300])}</code></div>' if p.error else "")
                + (f'<div class="wrap">✗ {e(", ".join(p.violated))}</div>' if p.violated else ""),
            ]
        )
    head = ["rank", "group", "point", "settings", f"{res.objective} {_unit(res)}", "Δ vs baseline (95 % CI)",
            "verdict", "tok/s", "TTFT p90 ms", "accept", "step ms", "Pareto front", "status"]  # fmt: skip
    how = (
        "Rank: by the objective among the points that were measured and meet the constraints. Group: points in "
        "one group are indistinguishable from the group's first point (the 95 % interval of their difference "
        "holds 0). Δ: the objective against the baseline, with its 95 % interval (paired when the baseline ran "
        "interleaved, otherwise a bootstrap stratified by prompt)."
    )
    return (
        "<h2>Ranked points</h2>"
        + _table(head, rows, {0, 1, 4, 5, 7, 8, 9, 10})
        + f'<p class="sub">{e(how)}</p>'
    )


# --- charts ----------------------------------------------------------------------------------------------


def _baseline_point(ls: LoadedSweep) -> tuple[float | None, float | None, float | None, float | None]:
    """(tok/s, TTFT p90, accept length, step ms) of the baseline, averaged over its measurements."""
    if ls.state is None:
        vals = [v for v in ls.results.baseline_tok_s.values() if v is not None]
        return (sum(vals) / len(vals) if vals else None), None, None, None
    ms = [b.measurement.metrics for b in ls.state.baselines if b.ok and b.measurement.metrics]

    def avg(name: str) -> float | None:
        xs = [getattr(m, name) for m in ms if getattr(m, name) is not None]
        return sum(xs) / len(xs) if xs else None

    return avg("tok_s"), avg("ttft_p90"), avg("accept_length"), avg("step_ms")


def _not_drawn_note(ax: Any, pts: Sequence[RankedPoint]) -> None:
    bad = [p for p in pts if p.status != "done"]
    if bad:
        text = "not measured: " + "; ".join(f"#{p.index} {p.status}" for p in bad[:6])
        text += f" (+{len(bad) - 6})" if len(bad) > 6 else ""
        ax.text(0.01, 0.01, text, transform=ax.transAxes, fontsize=7, color="#9b1c1c", va="bottom")


def _front_chart(
    ls: LoadedSweep, chart_id: str, title: str, caption: str, x: str, y: str, flag: str,
    xlabel: str, ylabel: str, base_xy: tuple[float | None, float | None],
) -> ch.Chart | None:  # fmt: skip
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
        bx, by = base_xy
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
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(loc="best", fontsize=8)

    return ch._render(chart_id, title, caption, draw)


def pareto_latency(ls: LoadedSweep) -> ch.Chart | None:
    b = _baseline_point(ls)
    return _front_chart(
        ls, "chart-sweep-pareto", "Pareto front: throughput vs latency",
        "Each measured point: mean per-request tok/s against TTFT p90. The front (diamonds, joined) holds the "
        "points no other point beats on both; the star is the baseline, the ring the best point under the "
        "objective. Up and to the left is better.",
        "ttft_p90", "tok_s", "pareto_latency", "TTFT p90 (ms, lower is better)", "tok/s (higher is better)",
        (b[1], b[0]),
    )  # fmt: skip


def pareto_accept(ls: LoadedSweep) -> ch.Chart | None:
    b = _baseline_point(ls)
    return _front_chart(
        ls, "chart-sweep-accept", "Accept length vs step time",
        "Each measured point: the accept length the server reports (tokens per verify pass) against the time "
        "of one verify pass (≈ ITL × tokens per chunk). A bigger tree accepts more but each step costs more; "
        "the front shows where that trade pays.",
        "step_ms", "accept_length", "pareto_accept", "step time (ms, lower is better)",
        "accept length (higher is better)", (b[3], b[2]),
    )  # fmt: skip


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
    unit = _unit(res)
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
    unit = _unit(res)

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


def render(ls: LoadedSweep) -> str:
    """The whole sweep report as one HTML document."""
    charts: list[ch.Chart] = []
    missing: list[str] = []
    for name, fn in CHARTS:
        c = fn(ls)
        if c is None:
            missing.append(name)
        else:
            charts.append(c)
    body = [header(ls), manifest(ls), best(ls), ranked_table(ls)]
    if charts:
        from ddtree_tui.report.html import charts_section

        body.append(charts_section(charts))
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    foot = []
    if missing:
        foot.append("Charts left out, no measured point carries data for them: " + ", ".join(missing) + ".")
    foot.append(
        f"Made by ddtree-tui {__version__} on {made} from {Path(ls.path).name}"
        + (" and sweep.json" if ls.state else "")
        + ". A self-contained file: no scripts, no network; charts drawn with matplotlib as inline SVG."
    )
    body.append("<footer>" + "<br>".join(e(x) for x in foot) + "</footer>")
    title = f"ddtree-tui sweep report: {ls.results.sweep_id}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="ddtree-tui">\n'
        f"<title>{e(title)}</title>\n<style>{CSS}</style></head>\n"
        f'<body data-charts="{len(charts)}">\n' + "\n".join(body) + "\n</body></html>\n"
    )


def write_html(ls: LoadedSweep, path: Path | str) -> int:
    """Render and write the sweep report (atomically, never replacing a special file); its size in bytes."""
    from ddtree_tui.atomicio import write_file

    text = render(ls)
    write_file(path, text)
    return len(text.encode("utf-8"))


def html_for_state(state: SweepState, res: SweepResults, out_dir: Path, path: Path | str) -> int:
    """The report of a sweep just run or shown (`sweep ... --html FILE`); its size in bytes."""
    ls = LoadedSweep(path=str(out_dir / "results.json"), results=res, state=state)
    return write_html(ls, path)
