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

import shlex
from datetime import UTC, datetime
from pathlib import Path

from ddtree_tui import __version__
from ddtree_tui.atomicio import write_file
from ddtree_tui.bench.stats import fmt_pct
from ddtree_tui.report import charts as ch
from ddtree_tui.report import sweep_schedule
from ddtree_tui.report.html import _table, charts_section, document, e
from ddtree_tui.report.sweep_charts import CHARTS
from ddtree_tui.report.sweep_input import LoadedSweep, objective_unit, varying
from ddtree_tui.sweep.results import RankedPoint, SweepResults
from ddtree_tui.sweep.state import SweepState

# --- helpers ---------------------------------------------------------------------------------------------


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


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


def sweep_dir(ls: LoadedSweep) -> str:
    """The sweep's --out directory (its results.json's), shell-quoted for the `apply` line; a placeholder when
    the results came from elsewhere (the hint printed a literal `DIR`, issue 28)."""
    path = Path(ls.path)
    if path.name != "results.json":
        return "<the sweep's --out directory>"
    return shlex.quote(str(path.parent))


def best(ls: LoadedSweep) -> str:
    res = ls.results
    out = ["<h2>Best point</h2>"]
    if res.best is None:
        out.append("<p>None: no point was measured and met the constraints.</p>")
        return "\n".join(out)
    b = next(p for p in res.points if p.index == res.best)
    out.append(
        f"<p><b>#{b.index} {e(b.label)}</b>: {e(_f(b.objective))} {e(objective_unit(res))} — {e(b.verdict)}</p>"
    )
    if res.best_command:
        out.append(f'<p>Command line (as the host profile builds it):</p><div class="argv"><code>'
                   f"{e(res.best_command)}</code></div>")  # fmt: skip
    out.append(f"<p>Apply it: <code>ddtree-tui sweep apply {e(sweep_dir(ls))} --point {b.index}</code></p>")
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
    head = ["rank", "group", "point", "settings", f"{res.objective} {objective_unit(res)}", "Δ vs baseline (95 % CI)",
            "verdict", "tok/s", "TTFT p90 ms", "accept", "step ms", "Pareto front", "status"]  # fmt: skip
    how = (
        "Rank: by the objective among the points that were measured and meet the constraints. Group: points in "
        "one group cannot be told apart from the group's first point (the 95 % interval of their difference "
        "holds 0, or there is too little data for an interval). Δ: the objective against the baseline, with its 95 % interval (paired when the baseline ran "
        "interleaved, otherwise a bootstrap stratified by prompt)."
    )
    return (
        "<h2>Ranked points</h2>"
        + _table(head, rows, {0, 1, 4, 5, 7, 8, 9, 10})
        + f'<p class="sub">{e(how)}</p>'
    )


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
    for name, c in sweep_schedule.charts(ls):  # the schedule's charts (report/sweep_schedule.py)
        if c is None:
            missing.append(name)
        else:
            charts.append(c)
    body = [header(ls), manifest(ls), best(ls), ranked_table(ls), *sweep_schedule.sections(ls)]
    if charts:
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
    return document(f"ddtree-tui sweep report: {ls.results.sweep_id}", body, len(charts))


def write_html(ls: LoadedSweep, path: Path | str) -> int:
    """Render and write the sweep report (atomically, never replacing a special file); its size in bytes."""
    text = render(ls)
    write_file(path, text)
    return len(text.encode("utf-8"))


def html_for_state(state: SweepState, res: SweepResults, out_dir: Path, path: Path | str) -> int:
    """The report of a sweep just run or shown (`sweep ... --html FILE`); its size in bytes."""
    ls = LoadedSweep(path=str(out_dir / "results.json"), results=res, state=state)
    return write_html(ls, path)
