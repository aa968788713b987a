"""Benchmark pane: per-prompt tok/s growing live while tokens stream, a progress bar, then the comparison
table (tok/s, TTFT, accept length, delta vs baseline, each service's mode) and past runs from history.

Bench engine events are read by shape (class name and field names), so the pane keeps working while the
engine's models grow fields."""

from __future__ import annotations

import datetime as dt
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, ProgressBar, Static

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

    def reset(self, total: int, status: str) -> None:
        self.rows.clear()
        self.total, self.done, self.status, self.run, self.running = total, 0, status, None, True

    def apply(self, ev: Any) -> None:
        """Fold one ddtree_tui.bench.models event (RunStarted, PromptStarted, TokensReceived, PromptFinished,
        RunFinished) into the rows; read by `kind` and field names."""
        kind = str(_get(ev, "kind", default=type(ev).__name__)).lower()
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


def run_summaries(run: Any) -> list[Any]:
    return list(_get(run, "summary", "summaries", default=[]) or [])


def _mode(s: Any) -> str:
    algo = str(_get(s, "algorithm", default="-"))
    mode = _get(s, "mode")
    return f"{algo} {mode}" if mode and mode != "-" else algo


class BenchPane(Pane):
    pane_number = 5
    pane_title = "Bench"
    DEFAULT_CSS = """
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
        history = view.extra.get("bench_history")
        run = live.run or (history[-1] if history else None)
        self._render_results(run)
        self._render_history(history or [])

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
