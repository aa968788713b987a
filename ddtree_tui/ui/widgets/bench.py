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
        name = type(ev).__name__.lower()
        kind = str(_get(ev, "kind", "type", default="")).lower()
        tag = name + " " + kind
        ref = str(_get(ev, "ref", "service", "target", default="?"))
        prompt = str(_get(ev, "prompt_id", "prompt", "prompt_index", "index", default="?"))
        rep = _get(ev, "repeat", default=0)
        key = f"{ref}|{prompt}|{rep}"
        if "runstart" in tag or "run_start" in tag:
            total = int(_get(ev, "total", "total_requests", "n_requests", default=0) or 0)
            self.reset(total, "running")
        elif "promptstart" in tag or "prompt_start" in tag:
            self.running = True
            self.rows[key] = {
                "ref": ref,
                "prompt": prompt,
                "tokens": 0,
                "tok_s": None,
                "ttft": None,
                "state": "…",
            }
        elif "token" in tag:
            row = self.rows.setdefault(key, {"ref": ref, "prompt": prompt, "state": "…", "ttft": None})
            row["tokens"] = _get(ev, "tokens", "n_tokens", "completion_tokens", default=row.get("tokens", 0))
            row["tok_s"] = _get(ev, "tok_s", "tokens_per_s", "running_tok_s", default=row.get("tok_s"))
            row["ttft"] = _get(ev, "ttft_ms", "ttft", default=row.get("ttft"))
        elif "promptfinish" in tag or "prompt_finish" in tag or "promptdone" in tag or "prompt_done" in tag:
            row = self.rows.setdefault(key, {"ref": ref, "prompt": prompt})
            err = _get(ev, "error")
            row["tokens"] = _get(ev, "tokens", "completion_tokens", "n_tokens", default=row.get("tokens", 0))
            row["tok_s"] = _get(ev, "tok_s", "tokens_per_s", default=row.get("tok_s"))
            row["ttft"] = _get(ev, "ttft_ms", "ttft", default=row.get("ttft"))
            row["state"] = f"error: {err}" if err else "done"
            self.done += 1
            total = _get(ev, "total", default=None)
            if total:
                self.total = int(total)
        elif "runfinish" in tag or "run_finish" in tag or "rundone" in tag or "run_done" in tag:
            self.run = _get(ev, "run", "result", default=ev)
            self.running = False
            self.status = "finished"
        if self.total:
            self.status = f"running · {self.done}/{self.total} requests" if self.running else self.status


def run_summaries(run: Any) -> list[Any]:
    return list(_get(run, "summaries", "services", "results", default=[]) or [])


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
        res.add_columns("Service", "Mode", "tok/s", "TTFT ms", "Accept", "Δ vs baseline", "Errors")
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
                if _get(s, "ref", "service") == baseline:
                    base_tps = _get(s, "tok_s", "tokens_per_s", "mean_tok_s")
            for s in sums:
                ref = str(_get(s, "ref", "service", default="?"))
                tps = _get(s, "tok_s", "tokens_per_s", "mean_tok_s")
                delta = _get(s, "delta_pct", "delta_vs_baseline_pct")
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
                            str(_get(s, "mode", "algorithm", default="-")),
                            fmt.num(tps, "{:.1f}"),
                            fmt.num(_get(s, "ttft_ms", "mean_ttft_ms", "ttft"), "{:.0f}"),
                            fmt.num(_get(s, "accept_length", "mean_accept_length"), "{:.2f}"),
                            self.t(delta_text, badge),
                            str(_get(s, "errors", "n_errors", default=0)),
                        ],
                    )
                )
        sync_table(self.query_one("#bench-results", DataTable), rows)

    def _render_history(self, history: list[Any]) -> None:
        rows = []
        for i, run in enumerate(reversed(history[-20:])):
            started = _get(run, "started_at", "ts", "finished_at")
            when = dt.datetime.fromtimestamp(float(started)).strftime("%m-%d %H:%M") if started else "-"
            sums = run_summaries(run)
            best = max((_get(s, "tok_s", "tokens_per_s", "mean_tok_s") or 0 for s in sums), default=None)
            rows.append(
                (
                    str(_get(run, "run_id", "id", default=i)),
                    [
                        when,
                        str(_get(run, "prompt_set", "prompts", default="-")),
                        ", ".join(str(_get(s, "ref", "service", default="?")) for s in sums),
                        fmt.num(best, "{:.1f}"),
                        str(_get(run, "baseline", default="-")),
                    ],
                )
            )
        sync_table(self.query_one("#bench-history", DataTable), rows)
