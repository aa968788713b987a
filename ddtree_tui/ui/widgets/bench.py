"""Benchmark pane: per-prompt tok/s growing live while tokens stream, a progress bar, then the comparison
table (tok/s, TTFT, accept length, delta vs baseline, each service's mode) and past runs from history.

Engine events are matched on their models (isinstance), and so are past runs (BenchRun, LoadRun, SoakRun,
AgenticRun: what Fleet.bench_history gives); the pane paints a BenchView (ui/views.py) and never calls the fleet
while painting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, ProgressBar, Sparkline, Static

from ddtree_tui.bench.models import (
    BenchRun,
    ServiceSummary,
    ShapeRequest,
)
from ddtree_tui.bench.progress import BenchProgress
from ddtree_tui.bench.results import (
    AgenticRun,
    LoadRun,
    SoakRun,
)
from ddtree_tui.bench.tables import HISTORY_RATES, history_rates
from ddtree_tui.config import display_mode
from ddtree_tui.ui import fmt
from ddtree_tui.ui.filtering import filter_label, matches
from ddtree_tui.ui.messages import ShapeIntent
from ddtree_tui.ui.views import BenchView, HistoryRun
from ddtree_tui.ui.widgets.base import CellText, KeyedTable, PaintedRow, Pane, set_static, sync_table


def _mode(s: ServiceSummary) -> str:
    """`ddtree tree`, `dflash linear`, `baseline`: config.display_mode's answer, the one every screen uses."""
    algo = s.algorithm
    mode = display_mode(algo, s.mode)
    return algo if mode == "-" else f"{algo} {mode}"


def summary_tok_s(s: ServiceSummary) -> float | None:
    """The one statistic the summary's tok/s column and its Δ both use: the mean over prompts of each
    prompt's mean (what the engine's Δ is computed on, and the headless table's tok/s (mean) column); a run
    saved before it was stored: the mean of the per-prompt medians."""
    if s.tok_s_mean is not None:
        return s.tok_s_mean
    return s.tok_s_mean_of_prompts if s.tok_s_mean_of_prompts is not None else s.tok_s_median


def run_when(run: HistoryRun) -> str:
    return run.started_at.astimezone().strftime("%m-%d %H:%M")


def results_title(run: BenchRun | None, running: bool, from_session: bool) -> tuple[str, str]:
    """(label over the results, badge): which run the tables show, so an old one is never read as new."""
    if run is None:
        return ("no results yet" if running else "no bench run yet: press b", "dim")
    status = run.status
    what = f"{run.prompt_set} · {run_when(run)}"
    mark = " · ⚠ INTERRUPTED: some prompts never ran" if status == "interrupted" else ""
    if running:
        return (f"previous run ({what}){mark}: the new run's results come when it ends", "warn")
    if from_session:
        return (f"results of this run ({what}){mark}", "bad" if mark else "ok")
    return (f"last run from history ({what}){mark}", "bad" if mark else "dim")


def load_title(run: LoadRun | None, running: bool, phase: str) -> str:
    """The line over the load charts: which load, soak or agentic run they are of (the plain run's title is
    over the plain run's tables, further down)."""
    if run is not None and not running:
        return f"load run {run.load_text} · {run_when(run)} · {run.status}"
    if running:
        return f"{phase or 'load'} · in progress"
    return f"last load run: {phase}" if phase else "last load run"


def delta_cell(
    delta: float | None, value: float | None, base: float | None, is_base: bool
) -> tuple[str, str]:
    if is_base:
        return "baseline", "dim"
    text = f"{delta:+.1f}%" if delta is not None else fmt.pct_delta(value, base)
    return text, (
        "ok" if text.startswith("+") else ("bad" if text.startswith("-") and text != "-" else "dim")
    )


RES_WIDE = ["Service", "Mode", "tok/s (mean)", "Δ vs base", "median", "Accept", "TTFT ms", "Errors"]
RES_NARROW = ["Service", "Mode", "tok/s", "Δ vs base", "Accept", "TTFT", "Err"]
PER_WIDE = ["Service", "Prompt", "n", "tok/s", "range", "TTFT ms", "Accept", "Δ tok/s"]
PER_NARROW = ["Service", "Prompt", "n", "tok/s", "TTFT", "Accept", "Δ"]


def short_mode(mode: str) -> str:
    return mode.replace("ddtree shadow-linear", "ddtree:shadow").replace("dflash linear", "dflash")


class BenchPane(Pane):
    pane_number = 5
    pane_title = "Bench"
    BINDINGS = [
        Binding("C", "load_ladder", "Load ladder", tooltip="concurrency ladder on the ready services"),
        Binding("O", "soak", "Soak", tooltip="a 60 s soak in 5 s windows on the ready services"),
        Binding("A", "agentic", "Agentic", tooltip="4 closed-loop agentic sessions on the ready services"),
        # Esc stops only while a run is in flight (check_action); otherwise it falls through to the app's Esc
        Binding("escape", "stop_run", "Stop", tooltip="stop the run in flight, keeping what it measured"),
    ]
    # what C runs (the grammar of bench/load.py); settable, e.g. "rate:2,4,8" or "poisson:4,7"
    load_text = "concurrency:1,2,4,8,16,32"
    soak_s, soak_window_s = 60.0, 5.0  # what O runs (settable: a test shortens it); the dialog sets any
    DEFAULT_CSS = """
    BenchPane #bench-load { height: 4; }
    BenchPane #bench-load .bench-chart { width: 1fr; height: 4; }
    BenchPane #bench-load .bench-chart:first-of-type { margin: 0 2 0 0; }
    BenchPane #bench-load .bench-chart-label { height: 1; color: $text-muted; }
    BenchPane #bench-load Sparkline { width: 1fr; height: 3; }
    BenchPane #bench-load-labels { height: 1; }
    BenchPane #bench-levels { height: auto; max-height: 8; }
    BenchPane #bench-verdicts { height: auto; max-height: 4; }
    BenchPane #bench-extras { height: auto; max-height: 6; text-wrap: nowrap; text-overflow: ellipsis; }
    BenchPane #bench-top { height: 1; }
    BenchPane #bench-status { width: 1fr; }
    BenchPane ProgressBar { width: 30; }
    BenchPane #bench-stop { height: 1; min-width: 12; width: auto; border: none; margin: 0 1 0 0; }
    BenchPane #bench-live { height: auto; max-height: 1fr; min-height: 4; }
    BenchPane #bench-results-title { height: 1; }
    BenchPane #bench-results { height: auto; max-height: 8; }
    BenchPane #bench-prompts { height: auto; max-height: 10; }
    BenchPane #bench-history { height: auto; max-height: 6; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.live = BenchProgress()

    def compose(self) -> ComposeResult:
        with Horizontal(id="bench-top"):
            stop = Button("■ Stop (x)", id="bench-stop", variant="error", compact=True)
            stop.display = False  # shown while a run is in flight
            yield stop
            yield Static(self.live.status, id="bench-status")
            yield ProgressBar(total=None, show_eta=False, id="bench-progress")
        # issue 26: the finished run's J/token, accept length, server vs client TTFT, cache flushes and
        # saturation test, one line each (shown once it has finished, above the live list it replaces in view)
        yield Static("", id="bench-extras")
        live: DataTable[Any] = KeyedTable(id="bench-live", cursor_type="row")
        live.add_columns("Service", "Prompt", "Tokens", "tok/s", "TTFT", "State")
        yield live
        # the load run's own title, then each sparkline under its own label (metric and service): the plain
        # run's title sat above them and the two charts ran together unlabelled (issue 28)
        yield Static("", id="bench-load-labels")
        with Horizontal(id="bench-load"):
            with Vertical(classes="bench-chart"):
                yield Static("", id="bench-spark-thr-label", classes="bench-chart-label")
                yield Sparkline([], id="bench-spark-thr")
            with Vertical(classes="bench-chart"):
                yield Static("", id="bench-spark-ttft-label", classes="bench-chart-label")
                yield Sparkline([], id="bench-spark-ttft")
        levels: DataTable[Any] = KeyedTable(id="bench-levels", cursor_type="row")
        levels.add_columns(
            "Level", "Service", "ok", "err", "out tok/s", "req/s", "TTFT p50/p99", "TPOT", "goodput", ""
        )
        yield levels
        yield Static("", id="bench-verdicts")
        yield Static("", id="bench-results-title")  # right above the plain run's tables it names
        res: DataTable[Any] = KeyedTable(id="bench-results", cursor_type="row")
        res.add_columns(*RES_WIDE)
        yield res
        per: DataTable[Any] = KeyedTable(id="bench-prompts", cursor_type="row")
        per.add_columns(*PER_WIDE)
        yield per
        hist: DataTable[Any] = KeyedTable(id="bench-history", cursor_type="row")
        # one meaning a column: per-request tok/s and aggregate output tok/s apart (tables.HISTORY_RATES)
        hist.add_columns("When", "Status", "Prompts", "Services", *HISTORY_RATES, "Baseline")
        yield hist

    def _sync(self, table: DataTable[Any], rows: list[PaintedRow], **kw: Any) -> None:
        """sync_table with the pane's `/` filter applied to the rows' text (ui/filtering.py)."""
        if self.filter:
            rows = [r for r in rows if matches(self.filter, *(str(getattr(c, "plain", c)) for c in r[1]))]
        sync_table(table, rows, **kw)

    def show_view(self, view: BenchView) -> None:
        live = self.live
        self.filter = view.filter
        title = f"{self.pane_number} {self.pane_title}" + (
            f" · filter {filter_label(view.filter)}" if view.filter else ""
        )
        if self.border_title != title:
            self.border_title = title
        set_static(self.query_one("#bench-status", Static), live.status, one_line=True)  # a height-1 row
        bar = self.query_one(ProgressBar)
        if live.total:
            bar.update(total=live.total, progress=live.done)
        bar.display = live.running  # only while it runs: after, the status line says the counts in full
        self.query_one("#bench-stop", Button).display = self._run_in_flight()
        rows: list[PaintedRow] = []
        for key, r in live.rows.items():
            rows.append(
                (
                    key,
                    [
                        self.t(r.get("ref", "?"), "accent"),
                        str(r.get("prompt", "?")),
                        str(r.get("tokens") or 0),
                        fmt.num(r.get("tok_s"), "{:.1f}"),
                        fmt.num(r.get("ttft"), "{:.0f}", "ms"),
                        self.t(
                            str(r.get("state", "")),
                            "bad" if str(r.get("state", "")).startswith("error") else "dim",
                        ),
                    ],
                )
            )
        table = self.query_one("#bench-live", DataTable)
        self._sync(table, rows)
        if live.running and live.current is not None:  # follow the request that is streaming now
            try:
                table.move_cursor(row=table.get_row_index(live.current), animate=False)
            except Exception:
                pass
        self._render_load()
        extras = self.query_one("#bench-extras", Static)
        # Text: a figure's words are never markup; one row a line (the whole of it is in the JSON and HTML)
        set_static(extras, Text("\n".join(live.extras)))
        if extras.display != bool(live.extras):
            extras.display = bool(live.extras)
        history = view.history
        run = live.run if not live.running else None
        from_session = run is not None
        if run is None:  # the last plain run (load, soak and agentic runs are in the history list only)
            run = next((r for r in reversed(history) if isinstance(r, BenchRun)), None)
        title, badge = results_title(run, live.running, from_session)
        set_static(self.query_one("#bench-results-title", Static), self.t(title, badge), one_line=True)
        self._render_results(run)
        self._render_prompts(run)
        self._render_history(history)

    def _render_load(self) -> None:
        live = self.live
        self.query_one("#bench-spark-thr", Sparkline).data = list(live.series_thr) or [0.0]
        self.query_one("#bench-spark-ttft", Sparkline).data = list(live.series_ttft) or [0.0]
        # no load run yet: no chart and no level table (an empty Sparkline draws full-height bars)
        self.query_one("#bench-load", Horizontal).display = bool(live.series_thr)
        self.query_one("#bench-levels", DataTable).display = bool(live.levels)
        if live.series_thr:
            agentic = live.phase.startswith("agentic")
            what = "cached tokens" if agentic else "out tok/s"
            of = f" · {live.levels[0]['ref']}" if live.levels and not agentic else ""  # the series' service
            set_static(
                self.query_one("#bench-spark-thr-label", Static),
                self.t(f"{what}{of} (last {live.series_thr[-1]:.0f})"),
                one_line=True,
            )
            set_static(
                self.query_one("#bench-spark-ttft-label", Static),
                self.t(f"TTFT p50 ms{of} (last {live.series_ttft[-1]:.0f})"),
                one_line=True,
            )
            labels = load_title(live.load_run, live.running, live.phase)
        else:
            labels = "C load ladder · O soak · A agentic sessions (on the ready services)"
        set_static(self.query_one("#bench-load-labels", Static), labels, one_line=True)
        rows: list[PaintedRow] = []
        for i, r in enumerate(live.levels[-40:]):
            rows.append(
                (
                    f"{r['label']}|{r['ref']}|{i}",
                    [
                        r["label"],
                        self.t(r["ref"], "accent"),
                        str(r["n"]),
                        self.t(str(r["failed"]), "bad" if r["failed"] else "dim"),
                        fmt.num(r["thr"], "{:.1f}"),
                        fmt.num(r["rps"], "{:.2f}"),
                        f"{fmt.num(r['ttft'], '{:.0f}')}/{fmt.num(r['ttft99'], '{:.0f}')}",
                        fmt.num(r["tpot"], "{:.1f}"),
                        fmt.num(r["goodput"], "{:.0f}", "%"),
                        self.t(f"NOT REACHED {r['reach'].removeprefix('NO ')}", "warn")
                        if r.get("missed")
                        else self.t("SATURATED", "warn")
                        if r["sat"]
                        else "",
                    ],
                )
            )
        self._sync(self.query_one("#bench-levels", DataTable), rows)
        set_static(self.query_one("#bench-verdicts", Static), "\n".join(live.verdicts[:4]))

    def _run_in_flight(self) -> bool:
        bench = getattr(self.app, "bench", None)
        return bool(getattr(bench, "running", False))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop_run":
            return self._run_in_flight()
        return super().check_action(action, parameters)

    async def action_stop_run(self) -> None:
        await self.app.run_action("stop_run")

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "bench-stop":
            event.stop()
            await self.app.run_action("stop_run")

    def action_load_ladder(self) -> None:
        self.post_message(ShapeIntent(ShapeRequest(load=self.load_text, max_new_tokens=64)))

    def action_soak(self) -> None:
        p = ShapeRequest(soak=True, duration_s=self.soak_s, window_s=self.soak_window_s, max_new_tokens=64)
        self.post_message(ShapeIntent(p))

    def action_agentic(self) -> None:
        self.post_message(
            ShapeIntent(ShapeRequest(prompts="agentic", sessions=4, turns=4, max_new_tokens=64))
        )

    def _shape_row(self, run: LoadRun | SoakRun | AgenticRun) -> list[CellText]:
        """A load, soak or agentic run in the history list: what it was, its services, its best per-request
        and aggregate tok/s (tables.history_rates)."""
        baseline = "-"
        if isinstance(run, LoadRun):
            what = f"load {run.load_text}"
            refs = [t.ref for t in run.targets]
            baseline = run.baseline or "-"
        elif isinstance(run, SoakRun):
            what = f"soak {run.duration_s:g} s"
            refs = [t.ref for t in run.targets]
        else:
            what = f"agentic {run.sessions}×{run.turns}"
            refs = sorted({t.service for t in run.turns_results})
        st = "complete" if isinstance(run, AgenticRun) else run.status
        status = self.t("⚠ interrupted", "bad") if st == "interrupted" else self.t(st, "dim")
        per, agg = history_rates(run)
        return [run_when(run), status, what, ", ".join(refs), fmt.num(per, "{:.1f}"), fmt.num(agg, "{:.1f}"),
                baseline]  # fmt: skip

    def _render_results(self, run: BenchRun | None) -> None:
        rows: list[PaintedRow] = []
        if run is not None:
            baseline = run.baseline
            sums = run.summary
            base_tps = next((summary_tok_s(s) for s in sums if s.service == baseline), None)
            for s in sums:
                ref = s.service
                tps = summary_tok_s(s)
                text, badge = delta_cell(s.delta_tok_s_pct, tps, base_tps, ref == baseline)
                cells: dict[str, CellText] = {
                    "Service": self.t(ref, "accent"),
                    "Mode": short_mode(_mode(s)) if self.is_narrow() else _mode(s),
                    "tok/s (mean)": fmt.num(tps, "{:.1f}"),
                    "tok/s": fmt.num(tps, "{:.1f}"),
                    "Δ vs base": self.t(text, badge),
                    "median": fmt.num(s.tok_s_median, "{:.1f}"),
                    "Accept": fmt.num(s.accept_length_mean, "{:.2f}"),
                    "TTFT ms": fmt.num(s.ttft_ms_median, "{:.0f}"),
                    "TTFT": fmt.num(s.ttft_ms_median, "{:.0f}", "ms"),
                    "Errors": str(s.failed),
                    "Err": str(s.failed),
                }
                rows.append((ref, self.pick(cells, RES_WIDE, RES_NARROW)[1]))
        cols = self.pick({}, RES_WIDE, RES_NARROW)[0]
        self._sync(self.query_one("#bench-results", DataTable), rows, columns=cols)

    def _render_prompts(self, run: BenchRun | None) -> None:
        """Per prompt × service, like the headless table: median tok/s [min-max], TTFT, accept, Δ."""
        rows: list[PaintedRow] = []
        if run is not None:
            baseline = run.baseline
            for r in run.rows:
                ref = r.service
                lo, hi = r.tok_s_min, r.tok_s_max
                rng = "-" if lo is None or hi is None else f"[{lo:.1f}-{hi:.1f}]"
                text, badge = delta_cell(r.delta_tok_s_pct, None, None, ref == baseline)
                n = f"{r.n}" + (f" ({r.failed} failed)" if r.failed else "")
                cells: dict[str, CellText] = {
                    "Service": self.t(ref, "accent"),
                    "Prompt": r.prompt_id,
                    "n": self.t(n, "bad") if r.failed else n,
                    "tok/s": fmt.num(r.tok_s_median, "{:.1f}"),
                    "range": rng,
                    "TTFT ms": fmt.num(r.ttft_ms_median, "{:.0f}"),
                    "TTFT": fmt.num(r.ttft_ms_median, "{:.0f}", "ms"),
                    "Accept": fmt.num(r.accept_length_median, "{:.2f}"),
                    "Δ tok/s": self.t(text, badge),
                    "Δ": self.t("base" if text == "baseline" else text, badge),
                }
                rows.append((f"{ref}|{r.prompt_id}", self.pick(cells, PER_WIDE, PER_NARROW)[1]))
        cols = self.pick({}, PER_WIDE, PER_NARROW)[0]
        self._sync(self.query_one("#bench-prompts", DataTable), rows, columns=cols)

    def _render_history(self, history: Sequence[HistoryRun]) -> None:
        rows: list[PaintedRow] = []
        for i, run in enumerate(reversed(history[-20:])):
            if not isinstance(run, BenchRun):
                rows.append((f"{run.id}#{i}", self._shape_row(run)))
                continue
            per, agg = history_rates(run)
            status = run.status
            rows.append(
                (
                    f"{run.id}#{i}",
                    [
                        run_when(run),
                        self.t("⚠ interrupted", "bad") if status == "interrupted" else self.t(status, "dim"),
                        run.prompt_set,
                        ", ".join(s.service for s in run.summary),
                        fmt.num(per, "{:.1f}"),
                        fmt.num(agg, "{:.1f}"),
                        run.baseline or "-",
                    ],
                )
            )
        self._sync(self.query_one("#bench-history", DataTable), rows)
