"""Benchmark pane: per-prompt tok/s growing live while tokens stream, a progress bar, then the comparison
table (tok/s, TTFT, accept length, delta vs baseline, each service's mode) and past runs from history.

Bench engine events are read by shape (class name and field names), so the pane keeps working while the
engine's models grow fields."""

from __future__ import annotations

import datetime as dt
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, ProgressBar, Sparkline, Static

from ddtree_tui.ui import fmt
from ddtree_tui.ui.widgets.base import Pane, View, sync_table


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        v = getattr(obj, n, None)
        if v is not None:
            return v
    return default


class BenchLive:
    """What the live part of the pane shows; fed by bench events, read at repaint time."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.total = 0
        self.done = 0
        self.status = "no run yet: press b to benchmark the selected services"
        self.run: Any = None
        self.running = False
        # load shapes / soak / agentic (bench/loadrun.py, soak.py, agentic.py)
        self.phase = ""  # "level 3/6 c=4" or "soak window 7"
        self.series_thr: list[float] = []  # output tok/s over time: per finished level or soak window
        self.series_ttft: list[float] = []  # TTFT p50 ms, same points
        self.levels: list[dict[str, Any]] = []  # one row a level × service (or soak window × service)
        self.verdicts: list[str] = []
        self.load_run: Any = None

    def reset(self, total: int, status: str) -> None:
        self.rows.clear()
        self.total, self.done, self.status, self.run, self.running = total, 0, status, None, True

    def reset_load(self, status: str) -> None:
        self.reset(0, status)
        self.phase, self.load_run = "", None
        self.series_thr, self.series_ttft, self.levels, self.verdicts = [], [], [], []

    def _point(self, label: str, svc: Any, first: bool) -> None:
        thr = _get(svc, "output_throughput")
        ttft = _get(_get(svc, "ttft_ms"), "p50")
        if first:  # one point a level/window: the first service's (the baseline's)
            self.series_thr.append(float(thr or 0.0))
            self.series_ttft.append(float(ttft or 0.0))
        self.levels.append(
            {
                "label": label,
                "ref": str(_get(svc, "service", default="?")),
                "n": _get(svc, "n", default=0),
                "failed": _get(svc, "failed", default=0),
                "thr": thr,
                "rps": _get(svc, "request_throughput"),
                "ttft": ttft,
                "ttft99": _get(_get(svc, "ttft_ms"), "p99"),
                "tpot": _get(_get(svc, "tpot_ms"), "p50"),
                "goodput": _get(svc, "goodput_pct"),
                "sat": bool(_get(svc, "saturated", default=False)),
            }
        )

    def apply_load(self, kind: str, ev: Any) -> bool:
        """Load-shape, soak and agentic events; True when `ev` was one."""
        if kind == "level_started":
            self.running = True
            self.phase = f"level {ev.index + 1}/{ev.count} {ev.label}"
            self.status = f"load · {self.phase}"
        elif kind == "level_finished":
            res = ev.result
            for i, svc in enumerate(res.services):
                self._point(res.label, svc, i == 0)
            self.verdicts = [
                f"{res.label} {d.service} {d.metric}: {d.verdict}" for d in res.deltas
            ] + self.verdicts[: 12 - len(res.deltas)]
        elif kind == "soak_window":
            self.running = True
            self.phase = f"soak window {ev.index} ({ev.start_s:.0f}-{ev.end_s:.0f} s)"
            self.status = f"soak · {self.phase}"
            first = not self.levels or self.levels[-1]["label"] != f"w{ev.index}"
            self._point(f"w{ev.index}", ev.metrics, first)
        elif kind == "load_finished":
            self.load_run = ev.run
            self.running = False
            run = ev.run
            knee = ", ".join(f"{k}: {v or 'none'}" for k, v in run.knee.items())
            self.status = f"load finished ({run.status}) · {len(run.levels)} level(s) · knee {knee}"
        elif kind == "turn":
            self.phase = f"agentic {ev.session} turn {ev.turn}"
            self.status = f"agentic · {self.phase}"
            if ev.ok:
                self.series_thr.append(float(ev.cached_tokens or 0))
                self.series_ttft.append(float(ev.ttft_ms or 0.0))
        else:
            return False
        return True

    def apply(self, ev: Any) -> None:
        """Fold one ddtree_tui.bench.models event (RunStarted, PromptStarted, TokensReceived, PromptFinished,
        RunFinished) into the rows; read by `kind` and field names."""
        kind = str(_get(ev, "kind", default=type(ev).__name__)).lower()
        if type(ev).__name__ == "TurnResult":
            kind = "turn"
        if self.apply_load(kind, ev):
            return
        if kind in ("run_started", "runstarted"):
            self.reset(int(_get(ev, "total", default=0) or 0), "running")
            return
        if kind in ("run_finished", "runfinished"):
            self.run = _get(ev, "run", default=ev)
            self.running = False
            status = _get(self.run, "status", default="complete")
            self.status = f"finished ({status}) · {self.done}/{self.total} requests"
            if _get(self.run, "client_bound", default=False):  # the client limited the numbers: say so
                why = _get(_get(self.run, "client"), "reason", default=None)
                self.status += " · CLIENT-BOUND" + (f": {why}" if why else "")
            return
        res = _get(ev, "result")
        src = res if res is not None else ev
        ref = str(_get(src, "service", "ref", default="?"))
        prompt = str(_get(src, "prompt_id", "prompt", default="?"))
        warm = bool(_get(src, "warmup", default=False))
        rep = _get(src, "repeat", default=0)
        key = f"{ref}|{prompt}|{'w' if warm else rep}"
        label = f"{prompt}" + (" (warm-up)" if warm else (f" #{rep}" if rep else ""))
        row = self.rows.setdefault(
            key, {"ref": ref, "prompt": label, "tokens": 0, "tok_s": None, "ttft": None, "state": "…"}
        )
        if kind in ("prompt_started", "promptstarted"):
            row["state"] = "sending"
        elif kind in ("tokens_received", "tokensreceived"):
            row["tokens"] = _get(ev, "tokens", default=row["tokens"])
            row["tok_s"] = _get(ev, "tok_s", default=row["tok_s"])
            row["state"] = "streaming"
        elif kind in ("prompt_finished", "promptfinished"):
            row["tokens"] = _get(src, "output_tokens", default=row["tokens"])
            row["tok_s"] = _get(src, "tok_s", default=row["tok_s"])
            ttft = _get(src, "ttft_s")
            row["ttft"] = ttft * 1000.0 if ttft is not None else row["ttft"]
            row["accept"] = _get(src, "accept_length")
            ok = _get(src, "ok", default=True)
            row["state"] = "done" if ok else f"error: {_get(src, 'error', default='failed')}"
            self.done = int(_get(ev, "done", default=self.done + (0 if warm else 1)))
            self.total = int(_get(ev, "total", default=self.total))
        if self.running:
            self.status = f"running · {self.done}/{self.total} requests"
            if self.phase:
                self.status = f"{self.phase} · {self.done} requests"


def run_summaries(run: Any) -> list[Any]:
    return list(_get(run, "summary", "summaries", default=[]) or [])


def _mode(s: Any) -> str:
    algo = str(_get(s, "algorithm", default="-"))
    mode = _get(s, "mode")
    return f"{algo} {mode}" if mode and mode != "-" else algo


class BenchPane(Pane):
    pane_number = 5
    pane_title = "Bench"
    BINDINGS = [
        Binding("C", "load_ladder", "Load ladder", tooltip="concurrency ladder on the ready services"),
        Binding("O", "soak", "Soak", tooltip="a 60 s soak in 5 s windows on the ready services"),
        Binding("A", "agentic", "Agentic", tooltip="4 closed-loop agentic sessions on the ready services"),
    ]
    # what C runs (the grammar of bench/load.py); settable, e.g. "rate:2,4,8" or "poisson:4,7"
    load_text = "concurrency:1,2,4,8,16,32"
    DEFAULT_CSS = """
    BenchPane #bench-load { height: 3; }
    BenchPane #bench-load Sparkline { width: 1fr; height: 3; }
    BenchPane #bench-load-labels { height: 1; }
    BenchPane #bench-levels { height: auto; max-height: 8; }
    BenchPane #bench-verdicts { height: auto; max-height: 4; }
    BenchPane #bench-top { height: 1; }
    BenchPane #bench-status { width: 1fr; }
    BenchPane ProgressBar { width: 30; }
    BenchPane #bench-live { height: 1fr; min-height: 3; }
    BenchPane #bench-results { height: auto; max-height: 8; }
    BenchPane #bench-history { height: auto; max-height: 6; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.live = BenchLive()

    def compose(self) -> ComposeResult:
        with Horizontal(id="bench-top"):
            yield Static(self.live.status, id="bench-status")
            yield ProgressBar(total=None, show_eta=False, id="bench-progress")
        live: DataTable[Any] = DataTable(id="bench-live", cursor_type="row")
        live.add_columns("Service", "Prompt", "Tokens", "tok/s", "TTFT", "State")
        yield live
        yield Static("", id="bench-load-labels")
        with Horizontal(id="bench-load"):
            yield Sparkline([], id="bench-spark-thr")
            yield Sparkline([], id="bench-spark-ttft")
        levels: DataTable[Any] = DataTable(id="bench-levels", cursor_type="row")
        levels.add_columns(
            "Level", "Service", "ok", "err", "out tok/s", "req/s", "TTFT p50/p99", "TPOT", "goodput", ""
        )
        yield levels
        yield Static("", id="bench-verdicts")
        res: DataTable[Any] = DataTable(id="bench-results", cursor_type="row")
        res.add_columns("Service", "Mode", "tok/s", "Δ vs base", "Accept", "TTFT ms", "Errors")
        yield res
        hist: DataTable[Any] = DataTable(id="bench-history", cursor_type="row")
        hist.add_columns("When", "Prompts", "Services", "Best tok/s", "Baseline")
        yield hist

    def render_view(self, view: View) -> None:
        live = self.live
        self.query_one("#bench-status", Static).update(live.status)
        bar = self.query_one(ProgressBar)
        if live.total:
            bar.update(total=live.total, progress=live.done)
        rows = []
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
        sync_table(self.query_one("#bench-live", DataTable), rows)
        self._render_load()
        history = view.extra.get("bench_history")
        run = live.run or (history[-1] if history else None)
        self._render_results(run)
        self._render_history(history or [])

    def _render_load(self) -> None:
        live = self.live
        self.query_one("#bench-spark-thr", Sparkline).data = list(live.series_thr) or [0.0]
        self.query_one("#bench-spark-ttft", Sparkline).data = list(live.series_ttft) or [0.0]
        if live.series_thr:
            what = "cached tokens" if live.phase.startswith("agentic") else "out tok/s"
            labels = (
                f"{what} (last {live.series_thr[-1]:.0f})  ·  TTFT p50 ms (last {live.series_ttft[-1]:.0f})"
                + (f"  ·  {live.phase}" if live.phase else "")
            )
        else:
            labels = "C load ladder · O soak · A agentic sessions (on the ready services)"
        self.query_one("#bench-load-labels", Static).update(labels)
        rows = []
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
                        self.t("SATURATED", "warn") if r["sat"] else "",
                    ],
                )
            )
        sync_table(self.query_one("#bench-levels", DataTable), rows)
        self.query_one("#bench-verdicts", Static).update("\n".join(live.verdicts[:4]))

    def _ready_refs(self) -> list[str]:
        snap = self.app.fleet.snapshot()  # type: ignore[attr-defined]
        return [f"{h.name}/{s.name}" for h in snap.hosts for s in h.services if s.state == "ready"]

    def _start(self, what: str, **kw: Any) -> None:
        refs = self._ready_refs()
        if not refs:
            self.app.notify("no ready service to load: launch one first", severity="warning")
            return
        self.live.reset_load(f"starting {what} on {', '.join(refs)}")
        self.run_worker(self._do(refs, kw), group="bench", exclusive=True, name="load")

    async def _do(self, refs: list[str], kw: dict[str, Any]) -> None:
        try:
            run = await self.app.fleet.run_load_shape(refs, **kw)  # type: ignore[attr-defined]
        except Exception as e:
            self.live.running = False
            self.live.status = f"failed: {e}"
            self.app.notify(f"load run failed: {e}", severity="error", timeout=10)
            return
        self.live.running = False
        if getattr(run, "kind", None) == "soak":
            drift = "; ".join(f"{d.service} {d.kind} from window {d.window}" for d in run.drift)
            self.live.status = f"soak finished ({run.status}) · {drift or 'no drift'}"
        elif getattr(run, "kind", None) == "agentic":
            self.live.status = f"agentic finished · {len(run.session_results)} sessions · {run.failed} failed"

    def action_load_ladder(self) -> None:
        self._start(self.load_text, load=self.load_text, max_new_tokens=64)

    def action_soak(self) -> None:
        self._start("a soak", load="sync", soak=True, duration_s=60.0, window_s=5.0, max_new_tokens=64)

    def action_agentic(self) -> None:
        self._start("agentic sessions", sessions=4, turns=4, max_new_tokens=64)

    def _render_results(self, run: Any) -> None:
        rows = []
        if run is not None:
            baseline = _get(run, "baseline")
            sums = run_summaries(run)
            base_tps = None
            for s in sums:
                if _get(s, "service", "ref") == baseline:
                    base_tps = _get(s, "tok_s_median", "tok_s")
            for s in sums:
                ref = str(_get(s, "service", "ref", default="?"))
                tps = _get(s, "tok_s_median", "tok_s")
                delta = _get(s, "delta_tok_s_pct", "delta_pct")
                delta_text = (
                    "baseline"
                    if ref == baseline
                    else (f"{delta:+.1f}%" if delta is not None else fmt.pct_delta(tps, base_tps))
                )
                badge = (
                    "ok"
                    if delta_text.startswith("+")
                    else ("bad" if delta_text.startswith("-") and delta_text != "-" else "dim")
                )
                rows.append(
                    (
                        ref,
                        [
                            self.t(ref, "accent"),
                            _mode(s),
                            fmt.num(tps, "{:.1f}"),
                            self.t(delta_text, badge),
                            fmt.num(_get(s, "accept_length_mean", "accept_length"), "{:.2f}"),
                            fmt.num(_get(s, "ttft_ms_median", "ttft_ms"), "{:.0f}"),
                            str(_get(s, "failed", "errors", default=0)),
                        ],
                    )
                )
        sync_table(self.query_one("#bench-results", DataTable), rows)

    def _render_history(self, history: list[Any]) -> None:
        rows = []
        for i, run in enumerate(reversed(history[-20:])):
            started = _get(run, "started_at", "ts", "finished_at")
            if isinstance(started, dt.datetime):
                when = started.astimezone().strftime("%m-%d %H:%M")
            elif isinstance(started, int | float):
                when = dt.datetime.fromtimestamp(float(started)).strftime("%m-%d %H:%M")
            else:
                when = "-"
            sums = run_summaries(run)
            best = max((_get(s, "tok_s_median", "tok_s") or 0 for s in sums), default=None)
            rows.append(
                (
                    f"{_get(run, 'id', 'run_id', default='')}#{i}",
                    [
                        when,
                        str(_get(run, "prompt_set", "prompts", default="-")),
                        ", ".join(str(_get(s, "service", "ref", default="?")) for s in sums),
                        fmt.num(best, "{:.1f}"),
                        str(_get(run, "baseline", default="-")),
                    ],
                )
            )
        sync_table(self.query_one("#bench-history", DataTable), rows)
