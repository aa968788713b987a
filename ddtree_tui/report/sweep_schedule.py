"""The sweep report's schedule part: the schedule per concurrency (table, bands, crossover, rejected cells),
the crossover chart (objective vs concurrency: the baseline, the best per level, each band's setting across
the levels), the trials over time (Optuna's trial states when the sweep has a study, else the sweep's own
points), the optimizer's parameter importances ("n/a" without a study), and the fair arms (cache flushes,
GPU waits, baseline drift).

Every number comes from `SweepResults.schedule` / `.drift` (sweep/schedule.py, sweep/fairness.py), the same
objects the text table and results.json print, so the figures agree. Optuna is optional here: it is imported
only when the sweep directory holds a study; a report without it says what it could not read.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddtree_tui.report import charts as ch
from ddtree_tui.report.html import _table, e
from ddtree_tui.report.sweep_input import LoadedSweep
from ddtree_tui.sweep.schedule import Schedule

STUDY_FILE = "study.db"  # where the sweep's Optuna study lives by default (sweep/study.py)
TRIAL_STATES = ("complete", "pruned", "failed")


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _sched(ls: LoadedSweep) -> Schedule | None:
    s = ls.results.schedule
    return s if s is not None and s.levels else None


# --- the schedule --------------------------------------------------------------------------------------


def schedule_section(ls: LoadedSweep) -> str:
    s = _sched(ls)
    if s is None:
        return ""
    sign = "+" if s.unit == "ms" else "−"
    out = [
        "<h2>Schedule per concurrency</h2>",
        f'<p class="sub">The best setting at each measured concurrency by a robust score: the median over '
        f"repeats of the {e(s.objective)} ({e(s.unit)}) {sign} {s.penalty:g} × MAD. Cells with fewer than "
        f"{s.min_repeats} repeats, a MAD above {100 * s.max_rel_mad:.0f} % of the median, or a level that never "
        f"reached its concurrency are rejected. Baseline: {e(s.baseline)}.</p>",
    ]
    rows = []
    for c in s.levels:
        delta = "-" if c.vs_baseline_pct is None else f"{c.vs_baseline_pct:+.1f} %"
        cls = "" if c.speculation_wins is None else ("better" if c.speculation_wins else "worse")
        rows.append(
            [
                str(c.concurrency),
                e(c.label or c.note or "-"),
                e(_f(c.score)),
                e(_f(c.median)),
                e(c.runner_up or "-"),
                e("-" if c.confidence is None else f"{c.confidence:.2f}"),
                e(_f(c.baseline_median)),
                f'<span class="{cls}">{e(delta)}</span>',
                e("-" if c.beats_baseline_p is None else f"{c.beats_baseline_p:.2f}"),
                f"{c.stable}/{c.stable + c.rejected}",
            ]
        )
    head = ["c", "chosen", "score", "median", "runner-up", "confidence", "baseline median", "Δ vs baseline",
            "P(beats baseline)", "stable cells"]  # fmt: skip
    out.append(_table(head, rows, {0, 2, 3, 5, 6, 7, 8, 9}))
    out.append(
        '<p class="sub">Confidence: the probability, from a seeded bootstrap over the requests (resampled '
        "within each prompt), that the chosen setting beats the runner-up; P(beats baseline) the same against "
        "the baseline's requests at that level.</p>"
    )
    brows = [
        [
            e(b.name),
            e(", ".join(str(x) for x in b.levels)),
            e(b.label),
            e("-" if b.confidence is None else f"{b.confidence:.2f}"),
            e(b.note or ("profile service " + b.name if b.overrides else "-")),
        ]
        for b in s.bands
    ]
    out.append("<h3>Bands</h3>")
    out.append(_table(["band", "levels", "setting", "lowest confidence", "note"], brows, {3}))
    out.append(f"<p><b>Crossover:</b> {e(s.crossover_text)}</p>")
    if any(b.overrides for b in s.bands):
        out.append(
            "<p>Write it as one profile service per band: <code>ddtree-tui sweep apply DIR --schedule</code> "
            "(<code>--dry-run</code> shows the diff).</p>"
        )
    bad = [c for c in s.cells if c.rejected]
    if bad:
        rrows = [[str(c.concurrency), e(c.label), e(c.rejected or "")] for c in bad]
        out.append("<h3>Rejected cells</h3>" + _table(["c", "setting", "why"], rrows, {0}))
    return "\n".join(out)


def crossover_chart(ls: LoadedSweep) -> ch.Chart | None:
    s = _sched(ls)
    if s is None or len(s.levels) < 2:
        return None
    levels = [c.concurrency for c in s.levels]
    base = [(c.concurrency, c.baseline_median) for c in s.levels if c.baseline_median is not None]
    best = [(c.concurrency, c.median) for c in s.levels if c.median is not None]
    if not best:
        return None
    cells = {(c.key, c.concurrency): c for c in s.cells}
    shown = []  # each band's setting across every level (stable cells only), so the crossing shows
    for b in s.bands:
        if b.overrides is None:
            continue
        key = next((c.chosen for c in s.levels if c.concurrency == b.levels[0]), None) or ""
        pts = [
            (n, cells[(key, n)].median) for n in levels if (key, n) in cells and not cells[(key, n)].rejected
        ]
        shown.append((b, [(x, y) for x, y in pts if y is not None]))

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        for i, (b, pts) in enumerate(shown):
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle=":", linewidth=1.2,
                        marker=ch.MARKERS[(i + 2) % len(ch.MARKERS)], markersize=5,
                        color=ch.PALETTE[(i + 2) % len(ch.PALETTE)], label=f"{b.name}: {b.label}"[:60])  # fmt: skip
        ax.plot([x for x, _ in best], [y for _, y in best], linestyle="-", linewidth=2.0, marker="D",
                color=ch.PALETTE[1], label="best setting per level")  # fmt: skip
        if base:
            ax.plot([x for x, _ in base], [y for _, y in base], linestyle="--", linewidth=1.6, marker="*",
                    markersize=10, color="#000000", label="baseline")  # fmt: skip
        if s.crossover is not None:
            ax.axvline(s.crossover, color=ch.PALETTE[3], linewidth=1.2, linestyle="-.",
                       label=f"crossover c={s.crossover}")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(n) for n in levels])
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel(f"{s.objective} median over repeats ({s.unit})")
        ax.legend(loc="best", fontsize=7)

    caption = (
        f"The median {s.objective} over repeats at each measured concurrency: the baseline ({s.baseline}), the "
        "best stable setting per level, and each band's setting across the levels. " + s.crossover_text + "."
    )
    return ch._render(
        "chart-sweep-crossover", "Crossover: speculation vs baseline by concurrency", caption, draw
    )


# --- trials and importances (Optuna when the sweep has a study) ---------------------------------------------


def _study(ls: LoadedSweep) -> tuple[Any, str]:
    """(the Optuna study or None, why not)."""
    info = getattr(ls.state, "study", None) if ls.state is not None else None
    url = getattr(info, "storage", None)
    name = getattr(info, "name", None)
    if url is None:
        db = Path(ls.path).parent / STUDY_FILE
        if not db.is_file():
            return None, "no Optuna study: the points came from the sweep's own plan"
        url = f"sqlite:///{db.absolute()}"
    if "***" in str(url):
        return None, "the study's database URL was saved without its password; it is not opened here"
    try:
        optuna = importlib.import_module("optuna")
    except ImportError:
        return None, "the sweep has a study, but Optuna is not installed here"
    try:
        if name is None:
            names = [x.study_name for x in optuna.study.get_all_study_summaries(storage=url)]
            if not names:
                return None, "the study database holds no study"
            name = names[0]
        return optuna.load_study(study_name=name, storage=url), ""
    except Exception as ex:  # a missing or locked database, another Optuna's schema
        return None, f"the study could not be opened: {type(ex).__name__}: {ex}"


def _trial_events(ls: LoadedSweep) -> tuple[list[tuple[float, str]], str]:
    """[(seconds since the first, complete|pruned|failed)] and where they come from."""
    study, _why = _study(ls)
    if study is not None:
        ev: list[tuple[float, str]] = []
        for t in study.get_trials(deepcopy=False):
            word = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}.get(t.state.name)
            if word and t.datetime_complete is not None:
                ev.append((t.datetime_complete.timestamp(), word))
        src = "Optuna's trial states"
    else:
        pts = ls.state.points if ls.state is not None else []
        ev = []
        for p in pts:
            if p.finished_at is None:
                continue
            word = {"done": "complete", "pruned": "pruned"}.get(p.status, "failed")
            ev.append((p.finished_at, word))
        src = "the sweep's own points (no Optuna study)"
    if not ev:
        return [], src
    t0 = min(t for t, _ in ev)
    return sorted((t - t0, w) for t, w in ev), src


def trials_chart(ls: LoadedSweep) -> ch.Chart | None:
    ev, src = _trial_events(ls)
    if not ev:
        return None

    def draw(fig) -> None:  # type: ignore[no-untyped-def]
        ax = fig.add_subplot()
        for i, word in enumerate(TRIAL_STATES):
            ts = [t for t, w in ev if w == word]
            if ts:
                ax.step([0.0, *ts], list(range(len(ts) + 1)), where="post", color=ch.PALETTE[i],
                        linewidth=1.6, label=f"{word} ({len(ts)})")  # fmt: skip
                ax.plot(ts, list(range(1, len(ts) + 1)), linestyle="none", marker=ch.MARKERS[i],
                        color=ch.PALETTE[i], markersize=4)  # fmt: skip
        ax.set_xlabel("seconds since the first finished trial")
        ax.set_ylabel("trials (cumulative)")
        ax.legend(loc="best", fontsize=8)

    caption = f"Trials finished over time, by state, from {src}. Pruned: stopped early by the optimizer."
    return ch._render("chart-sweep-trials", "Trials over time", caption, draw)


def importances_section(ls: LoadedSweep) -> str:
    study, why = _study(ls)
    out = ["<h2>Parameter importances</h2>"]
    if study is None:
        out.append(f"<p>n/a — {e(why)}.</p>")
        return "\n".join(out)
    try:
        optuna = importlib.import_module("optuna")
        imp = optuna.importance.get_param_importances(study)
    except Exception as ex:  # too few complete trials, a multi-objective study without a target
        out.append(f"<p>n/a — Optuna could not compute them: {e(type(ex).__name__)}: {e(str(ex)[:200])}.</p>")
        return "\n".join(out)
    rows = [[e(k), f"{v:.3f}"] for k, v in imp.items()]
    out.append(_table(["parameter", "importance"], rows, {1}))
    out.append(
        "<p class=\"sub\">Optuna's get_param_importances (fANOVA) over the study's complete trials.</p>"
    )
    return "\n".join(out)


# --- the fair arms --------------------------------------------------------------------------------------


def fairness_section(ls: LoadedSweep) -> str:
    res = ls.results
    d = res.drift
    flushed = [p for p in res.points if p.flushed is not None]
    flagged = [p for p in res.points if p.flags]
    if (d is None or not d.steps) and not flushed and not flagged:
        return ""
    out = ["<h2>Fair arms</h2>"]
    if flushed:
        n_ok = sum(1 for p in flushed if p.flushed)
        out.append(
            f"<p>Prefix cache flushed (POST /flush_cache) before {n_ok} of {len(flushed)} point measurement(s).</p>"
        )
    temps = [p.gpu_temp_c for p in res.points if p.gpu_temp_c is not None]
    if temps:
        out.append(f"<p>GPU temperature just before each point: {min(temps)}…{max(temps)} °C.</p>")
    if d is not None and d.steps:
        out.append(f"<p><b>Baseline drift:</b> {e(d.text)}.</p>")
        rows = [
            [
                str(s.concurrency),
                str(s.seq),
                e(_f(s.mean_tok_s)),
                e("-" if s.delta_pct is None else f"{s.delta_pct:+.1f} %"),
                e("-" if s.lo_pct is None else f"{s.lo_pct:+.1f} … {s.hi_pct or 0.0:+.1f}"),
                "beyond its noise" if s.beyond_noise else "-",
            ]
            for s in d.steps
        ]
        out.append(
            _table(["c", "measurement", "tok/s", "Δ vs first", "95 % CI", "drift"], rows, {0, 1, 2, 3})
        )
    if flagged:
        items = "".join(f"<li>#{p.index} {e(p.label)}: {e('; '.join(p.flags))}</li>" for p in flagged[:50])
        out.append(f"<p>Flagged points ({len(flagged)}):</p><ul>{items}</ul>")
    return "\n".join(out)


def sections(ls: LoadedSweep) -> list[str]:
    """The HTML sections this module adds to the sweep report, in order (empty ones left out)."""
    return [x for x in (schedule_section(ls), fairness_section(ls), importances_section(ls)) if x]


def charts(ls: LoadedSweep) -> Sequence[tuple[str, ch.Chart | None]]:
    return [("crossover", crossover_chart(ls)), ("trials over time", trials_chart(ls))]
