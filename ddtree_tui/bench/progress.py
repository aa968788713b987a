"""One progress reducer for every face: the bench events of a run (plain, load ladder, soak, agentic) folded
into what a user is shown while it runs: requests done of how many (never past 100 %: a load level or a soak
runs for a time, so it counts requests without a total), each request's state, the current level or window,
the per-level rows and verdicts. Pure: no I/O, no clock, no Textual; the TUI's bench pane paints it and the
headless printer (cli/bench.py) counts with it."""

from __future__ import annotations

from typing import TypedDict

from ddtree_tui.bench.models import (
    BenchRun,
    PromptCancelled,
    PromptFinished,
    PromptStarted,
    RequestResult,
    RunFinished,
    RunStarted,
    TokensReceived,
)
from ddtree_tui.bench.results import (
    LevelFinished,
    LevelService,
    LevelStarted,
    LoadFinished,
    LoadRun,
    SoakWindow,
    TurnResult,
)
from ddtree_tui.bench.tables import extras_lines, reached_cell


class LiveRow(TypedDict, total=False):
    """One request of the run streaming now, as the live list shows it."""

    ref: str
    prompt: str
    tokens: int
    tok_s: float | None
    ttft: float | None
    accept: float | None
    state: str


class LevelRow(TypedDict):
    """One load level (or soak window) × service in the per-level table."""

    label: str
    ref: str
    n: int
    failed: int
    thr: float | None
    rps: float | None
    ttft: float | None
    ttft99: float | None
    tpot: float | None
    goodput: float | None
    sat: bool
    reach: str  # what the level reached beside what was asked (tables.reached_cell)
    missed: bool  # the level did not reach its target: no conclusion drawn from it


class BenchProgress:
    """A run's progress, folded from its events: what the TUI's bench pane paints and what the headless
    printer counts with. `done` never passes `total` (a time-bounded load or soak run has no total: 0)."""

    def __init__(self) -> None:
        self.rows: dict[str, LiveRow] = {}
        self.total = 0  # counted requests planned; 0: a time-bounded run (load level, soak), no total
        self.done = 0
        self.shaped = False  # a load, soak or agentic run: requests are counted, not against a total
        self.status = "no run in this session: press b to benchmark the selected services"
        self.run: BenchRun | None = None
        self.running = False
        self.current: str | None = None  # the row of the request streaming now (the live list follows it)
        # load shapes / soak / agentic (bench/loadrun.py, soak.py, agentic.py)
        self.phase = ""  # "level 3/6 c=4" or "soak window 7"
        self.series_thr: list[float] = []  # output tok/s over time: per finished level or soak window
        self.series_ttft: list[float] = []  # TTFT p50 ms, same points
        self.levels: list[LevelRow] = []  # one row a level × service (or soak window × service)
        self.verdicts: list[str] = []
        self.load_run: LoadRun | None = None
        # issue 26: energy, acceptance, server vs client TTFT, cache flushes, the saturation test of the
        # finished run (tables.extras_lines), one line each
        self.extras: list[str] = []

    def reset(self, total: int, status: str) -> None:
        self.rows.clear()
        self.shaped = False
        self.total, self.done, self.status, self.run, self.running = total, 0, status, None, True
        self.current = None
        self.extras = []

    def reset_load(self, status: str) -> None:
        self.reset(0, status)
        self.shaped = True
        self.phase, self.load_run = "", None
        self.series_thr, self.series_ttft, self.levels, self.verdicts = [], [], [], []

    def _point(self, label: str, svc: LevelService, first: bool) -> None:
        thr, ttft = svc.output_throughput, svc.ttft_ms.p50
        if first:  # one point a level/window: the first service's (the baseline's)
            self.series_thr.append(float(thr or 0.0))
            self.series_ttft.append(float(ttft or 0.0))
        self.levels.append(
            {
                "label": label,
                "ref": svc.service,
                "n": svc.n,
                "failed": svc.failed,
                "thr": thr,
                "rps": svc.request_throughput,
                "ttft": ttft,
                "ttft99": svc.ttft_ms.p99,
                "tpot": svc.tpot_ms.p50,
                "goodput": svc.goodput_pct,
                "sat": svc.saturated,
                "reach": reached_cell(svc),
                "missed": not svc.reached,
            }
        )

    def apply_load(self, ev: object) -> bool:
        """Load-shape, soak and agentic events; True when `ev` was one."""
        if isinstance(ev, LevelStarted | SoakWindow | TurnResult):
            # a shaped run counts requests without a total, whichever face started it (an attached TUI
            # sees a headless soak's events without having called reset_load)
            self.shaped, self.total = True, 0
        if isinstance(ev, LevelStarted):
            self.running = True
            self.phase = f"level {ev.index + 1}/{ev.count} {ev.label}"
            self.status = f"load · {self.phase}"
        elif isinstance(ev, LevelFinished):
            res = ev.result
            for i, svc in enumerate(res.services):
                self._point(res.label, svc, i == 0)
            self.verdicts = [
                f"{res.label} {d.service} {d.metric}: {d.verdict}" for d in res.deltas
            ] + self.verdicts[: 12 - len(res.deltas)]
        elif isinstance(ev, SoakWindow):
            self.running = True
            self.phase = f"soak window {ev.index} ({ev.start_s:.0f}-{ev.end_s:.0f} s)"
            self.status = f"soak · {self.phase}"
            first = not self.levels or self.levels[-1]["label"] != f"w{ev.index}"
            self._point(f"w{ev.index}", ev.metrics, first)
        elif isinstance(ev, LoadFinished):
            self.load_run = ev.run
            self.extras = extras_lines(ev.run)
            self.running = False
            run = ev.run
            knee = ", ".join(f"{k}: {v}" for k, v in run.knee_lines().items())
            self.status = f"load finished ({run.status}) · {len(run.levels)} level(s) · knee {knee}"
        elif isinstance(ev, TurnResult):
            self.phase = f"agentic {ev.session} turn {ev.turn}"
            self.status = f"agentic · {self.phase}"
            if ev.ok:
                self.series_thr.append(float(ev.cached_tokens or 0))
                self.series_ttft.append(float(ev.ttft_ms or 0.0))
        else:
            return False
        return True

    def count(self, ev: PromptFinished) -> None:
        """A counted request finished: `done` from the engine; `total` only for a plain run, and never below
        `done` (a soak's runner plans one pass of the prompts, then keeps sending for its duration)."""
        if ev.result.warmup:
            return
        self.done = ev.done
        self.total = 0 if self.shaped else max(ev.total, ev.done)

    @property
    def fraction(self) -> float | None:
        """done / total in 0..1; None without a total."""
        return min(1.0, self.done / self.total) if self.total else None

    def counted(self) -> str:
        """`running · 3/6 requests`, or for a time-bounded run `level 2/4 c=2 · 9 requests`."""
        if self.total:
            return f"running · {min(self.done, self.total)}/{self.total} requests"
        return f"{self.phase or 'running'} · {self.done} requests"

    def apply(self, ev: object) -> None:
        """Fold one engine event (bench/models.py, loadrun.py, soak.py, agentic.py) into what the pane shows,
        matched on its model; anything else (a newer engine's event) is ignored."""
        if self.apply_load(ev):
            return
        if isinstance(ev, RunStarted):
            self.reset(ev.total, "running")
            return
        if isinstance(ev, RunFinished):
            self.run = ev.run
            self.extras = extras_lines(ev.run)
            self.running = False
            counted = self.counted().split(" · ", 1)[1]
            if ev.run.status == "interrupted":  # stopped (x, Esc, Ctrl-C): it did not finish (issue 28)
                self.status = f"⚠ stopped · {counted} measured, saved to the history as interrupted"
            else:
                self.status = f"finished ({ev.run.status}) · {counted}"
            self.current = None
            if ev.run.client_bound:  # the client limited the numbers: say so
                why = ev.run.client.reason if ev.run.client is not None else None
                self.status += " · CLIENT-BOUND" + (f": {why}" if why else "")
            return
        if isinstance(ev, PromptFinished):
            src: PromptStarted | TokensReceived | PromptCancelled | RequestResult = ev.result
        elif isinstance(ev, PromptStarted | TokensReceived | PromptCancelled):
            src = ev
        else:
            return
        key = f"{src.service}|{src.prompt_id}|{'w' if src.warmup else src.repeat}"
        # 1-based like the headless report (`p1 #1` is the first measured request, `#2` the first repeat)
        label = f"{src.prompt_id}" + (" (warm-up)" if src.warmup else f" #{src.repeat + 1}")
        row = self.rows.setdefault(
            key, {"ref": src.service, "prompt": label, "tokens": 0, "tok_s": None, "ttft": None, "state": "…"}
        )
        if isinstance(ev, PromptStarted):
            row["state"] = "sending"
            self.current = key
        elif isinstance(ev, TokensReceived):
            row["tokens"] = ev.tokens
            row["tok_s"] = ev.tok_s if ev.tok_s is not None else row["tok_s"]
            if row["ttft"] is None:  # the first tokens: time to first token, until the result has it exactly
                row["ttft"] = ev.elapsed_s * 1000.0
            row["state"] = "streaming"
            self.current = key
        elif isinstance(ev, PromptCancelled):  # closed by the client on purpose: not failed, not counted
            row["state"] = f"cancelled after {ev.delay_s:g} s"
        else:
            r = ev.result
            row["tokens"] = r.output_tokens if r.output_tokens is not None else row["tokens"]
            row["tok_s"] = r.tok_s if r.tok_s is not None else row["tok_s"]
            row["ttft"] = r.ttft_s * 1000.0 if r.ttft_s is not None else row["ttft"]
            row["accept"] = r.accept_length
            row["state"] = "done" if r.ok else f"error: {r.error or 'failed'}"
            self.count(ev)
        if self.running:
            self.status = self.counted()
