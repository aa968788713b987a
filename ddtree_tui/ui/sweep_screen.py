"""The tuning lab in the TUI (key w on a selected service, or "sweep HOST/SVC" in the palette): pick the
service and the dimensions, watch the grid of points (pending / starting / measuring / done / failed) with
the current best and a text Pareto chart, and Apply the best into the host profile (a confirm dialog whose
default is Cancel, with the diff). The sweep itself is core code (ddtree_tui/sweep/runner.py) run through the
Fleet in a worker; this screen only draws its events and the analysis."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Label, Static

from ddtree_tui.fleet.protocol import Door, SweepFleet
from ddtree_tui.lib import paths
from ddtree_tui.model.intents import Kill
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.sweep import output
from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep import state as st
from ddtree_tui.sweep.spec import SweepError, parse_set
from ddtree_tui.ui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost

STATUS_MARK = {"pending": "·", "starting": "◌", "measuring": "◐", "done": "●", "failed": "✗", "rejected": "⊘", "skipped": "-", "pruned": "✂"}  # fmt: skip


def preset_dims(fleet: object, ref: str) -> str:
    """The profile's ready-made [[sweep]] for this service as `KEY=v1,v2 ...`, or a budget example."""
    if not isinstance(fleet, SweepFleet):
        return "budget=8,16,32"
    try:
        profile, spec = fleet.spec_of(ref)
    except Exception:
        return "budget=8,16,32"
    for p in profile.sweep:
        if p.service == spec.name:
            return " ".join(
                f"{k}={','.join(str(v).lower() if isinstance(v, bool) else str(v) for v in vs)}"
                for k, vs in p.set.items()
            )
    return "budget=8,16,32"


KEY_HINTS = "^r start · x stop (service put back) · ^a apply best · Tab field · Esc close"
GRID_COLUMNS = ("#", "point", "status", "tok/s", "Δ vs base", "TTFT p90", "accept", "rank", "front")


class SweepScreen(Screen[None]):
    """The tuning lab: a title saying what runs, the form on two lines, the buttons on one, the points grid
    (filled as points finish; the best marked ★, the Pareto fronts L/A), the best, the chart, the keys."""

    DEFAULT_CSS = """
    SweepScreen { layout: vertical; }
    SweepScreen #sweep-title { height: 1; padding: 0 1; text-style: bold; background: $boost; }
    SweepScreen .sweep-row { height: 1; padding: 0 1; margin-top: 1; }
    SweepScreen .sweep-row Label { width: auto; padding: 0 1 0 0; }
    SweepScreen .sweep-row Input { width: 1fr; margin-right: 1; }
    SweepScreen .sweep-row Input.small { width: 8; }
    SweepScreen #sweep-buttons { height: 1; padding: 0 1; margin-top: 1; }
    SweepScreen #sweep-buttons Button { margin-right: 1; }
    SweepScreen #sweep-grid { height: 1fr; min-height: 4; margin-top: 1; }
    SweepScreen #sweep-best { height: auto; padding: 0 1; text-style: bold; }
    SweepScreen #sweep-chart { height: auto; max-height: 12; padding: 0 1; color: $text-muted; }
    SweepScreen #sweep-keys { height: 1; padding: 0 1; color: $text-muted; background: $boost; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("ctrl+r", "start", "Start sweep", priority=True),
        Binding("x", "stop", "Stop", tooltip="stop after the current point; the service is put back"),
        Binding("ctrl+a", "apply", "Apply best", priority=True),
    ]

    def __init__(self, fleet: object, ref: str, out: Path | None = None) -> None:
        super().__init__()
        self.fleet = fleet
        self.ref = ref
        self.out = out
        self.runner: Any = None
        self.results: rs.SweepResults | None = None
        self.running = False
        self.stopping = False
        self.phase = "set the dimensions, then Start (ctrl+r)"
        self.written: Path | None = None  # the results.json of the last sweep

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="sweep-title")
        with Horizontal(classes="sweep-row"):
            yield Label("service")
            yield Input(self.ref, id="sweep-ref", compact=True)
            yield Label("repeats")
            yield Input("2", id="sweep-repeats", compact=True, classes="small")
            yield Label("tokens")
            yield Input("64", id="sweep-tokens", compact=True, classes="small")
        with Horizontal(classes="sweep-row"):
            yield Label("dimensions")
            yield Input(
                preset_dims(self.fleet, self.ref),
                id="sweep-dims",
                placeholder="budget=8,16 env.X=1,2",
                compact=True,
            )
        with Horizontal(id="sweep-buttons"):
            yield Button("Start ^r", id="sweep-start", variant="primary", compact=True)
            yield Button("Stop x", id="sweep-stop", variant="error", compact=True)
            yield Button("Apply best ^a", id="sweep-apply", compact=True)
            yield Button("Close Esc", id="sweep-close", compact=True)
        yield DataTable(id="sweep-grid", cursor_type="row")
        yield Static("best: -", id="sweep-best")
        yield Static("", id="sweep-chart")
        yield Static(KEY_HINTS, id="sweep-keys")

    def on_mount(self) -> None:
        t = self.query_one("#sweep-grid", DataTable)
        t.add_columns(*GRID_COLUMNS)
        self._show_phase()

    def _title(self) -> str:
        return f"Sweep · {self.ref} · {self.phase}"

    def _show_phase(self, phase: str | None = None) -> None:
        if phase is not None:
            self.phase = phase
        self.query_one("#sweep-title", Static).update(self._title())
        self.query_one("#sweep-stop", Button).disabled = not self.running or self.stopping
        self.query_one("#sweep-start", Button).disabled = self.running

    # --- actions ---------------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"sweep-start": self.action_start, "sweep-stop": self.action_stop, "sweep-apply": self.action_apply,
         "sweep-close": self.action_close}[event.button.id or "sweep-close"]()  # fmt: skip

    def action_close(self) -> None:
        if self.running:
            self.notify("a sweep is running: x stops it (and puts the service back)", severity="warning")
            return
        self.app.pop_screen()

    def action_stop(self) -> None:
        if self.runner is None or not self.running:
            self.notify("no sweep is running", severity="warning", timeout=3)
            return
        if self.stopping:
            self.notify("already stopping: the service is being put back", timeout=3)
            return
        self.stopping = True
        self.runner.stop.set()
        self._show_phase("stopping after the current point; then the service is put back")
        self.notify("stopping after the current point; the service goes back to its profile config")

    def action_start(self) -> None:
        if self.running:
            self.notify("a sweep is already running", severity="warning")
            return
        from ddtree_tui.sweep.runner import SweepRunner, SweepSettings

        ref = self.query_one("#sweep-ref", Input).value.strip()
        try:
            dims = [parse_set(w) for w in self.query_one("#sweep-dims", Input).value.split()]
            if not dims:
                raise SweepError("give at least one dimension, e.g. budget=8,16,32")
            settings = SweepSettings(
                ref=ref,
                dims=dims,
                repeats=int(self.query_one("#sweep-repeats", Input).value or "2"),
                max_new_tokens=int(self.query_one("#sweep-tokens", Input).value or "64"),
            )
            out = self.out or paths.SWEEPS / time.strftime("%Y%m%d-%H%M%S")
            if not isinstance(self.fleet, SweepFleet):
                self.notify(
                    "this view has no live core (static fleet): sweeps need real hosts", severity="error"
                )
                return
            self.runner = SweepRunner(self.fleet, settings, out, on_event=self._on_event)
        except (SweepError, ValueError) as e:
            self.notify(str(e), severity="error", timeout=10)
            return
        self.ref = ref
        self.results = None
        self.written = None
        # how the service was before (headless keeps the same): a stopped one is stopped again at the end
        self.runner.state.service_before = self.runner.state.service_before or _before(self.fleet, ref)
        t = self.query_one("#sweep-grid", DataTable)
        t.clear()
        for rec in self.runner.state.points:
            t.add_row(
                str(rec.index),
                rec.label(),
                STATUS_MARK.get(rec.status, "") + " " + rec.status,
                *([""] * (len(GRID_COLUMNS) - 3)),
                key=str(rec.index),
            )
        n, secs, how = self.runner.estimate()
        self.notify(f"{n} point(s), about {secs / 60:.1f} min ({how})")
        self.running, self.stopping = True, False
        self._show_phase(f"running: {n} point(s), about {secs / 60:.1f} min · results in {out}")
        t.focus()  # so x (stop) is not typed into a field
        self.run_worker(self._run(), exclusive=True, group="sweep")

    async def _run(self) -> None:
        runner = self.runner
        try:
            state = await runner.run()
        except Exception as e:
            self.notify(f"sweep stopped: {e}", severity="error", timeout=15)
            self.running = False
            self._show_phase(f"failed: {e}")
            return
        try:
            if state.service_before == "stopped" and isinstance(
                self.fleet, Door
            ):  # stopped again, as headless
                res = await self.fleet.do(Kill(ref=ServiceRef.parse(state.ref)))
                state.restored = res.ok
                if not res.ok:
                    state.caveats.append(f"could not stop the service again as it was: {res.message}")
            if self.stopping:
                state.stopped_by = "Stop (TUI)"
            await asyncio.to_thread(st.save, state, runner.out)
            self.results = await asyncio.to_thread(output.write_results, runner.out, state)
            self.written = runner.out / "results.json"
        except Exception as e:
            self.notify(f"sweep results not written: {e}", severity="error", timeout=15)
        finally:
            self.running = False
        self._refresh_results()
        ok = sum(1 for p in state.points if p.status == "done")
        word = "stopped" if self.stopping else "finished"
        back = {True: "service put back", False: "service NOT put back", None: ""}[state.restored]
        where = f"results in {runner.out}/results.json and results.csv" if self.written else "no results file"
        self._show_phase(
            f"{word}: {ok}/{len(state.points)} measured · {back} · {where}".replace(" ·  ·", " ·")
        )
        self.notify(f"sweep {word}: {ok}/{len(state.points)} measured; {where}")

    def _on_event(self, ev: Any) -> None:
        if ev.index < 0:
            self.query_one("#sweep-best", Static).update(f"baseline: {ev.status}")
            return
        t = self.query_one("#sweep-grid", DataTable)
        try:
            t.update_cell(
                str(ev.index), t.ordered_columns[2].key, STATUS_MARK.get(ev.status, "") + " " + ev.status
            )
        except Exception:
            return
        if ev.status in ("done", "failed", "rejected", "pruned"):
            self._refresh_results()

    def _refresh_results(self) -> None:
        if self.runner is None:
            return
        if self.results is None or self.running:
            self.results = rs.analyse(self.runner.state)
        res = self.results
        t = self.query_one("#sweep-grid", DataTable)
        cols = [c.key for c in t.ordered_columns]
        for p in res.points:
            if p.status != "done":
                continue
            delta = "" if p.delta_pct is None else f"{p.delta_pct:+.1f} %"
            rank = ("★ " if p.index == res.best else "") + (str(p.rank) if p.rank else "✗")
            front = ("L" if p.pareto_latency else "") + ("A" if p.pareto_accept else "")
            vals = ["" if v is None else v for v in (f"{p.tok_s:.1f}" if p.tok_s else None, delta,
                    f"{p.ttft_p90:.0f}" if p.ttft_p90 else None, f"{p.accept_length:.2f}" if p.accept_length else None,
                    rank, front)]  # fmt: skip
            for col, v in zip(cols[3:], vals, strict=True):
                with contextlib.suppress(Exception):
                    t.update_cell(str(p.index), col, v)
        best = next((p for p in res.points if p.index == res.best), None)
        self.query_one("#sweep-best", Static).update(
            f"best: #{best.index} {best.label} ★ — {best.verdict}  (front: L tok/s vs TTFT p90, A accept vs step)"
            if best
            else "best: none yet"
        )
        self.query_one("#sweep-chart", Static).update(rs.pareto_chart(res, width=40, height=8))

    def action_apply(self) -> None:
        if self.running:
            self.notify("wait for the sweep to finish before applying", severity="warning")
            return
        res = self.results
        if res is None or res.best is None or self.runner is None:
            self.notify("no measured point to apply yet", severity="warning")
            return
        from ddtree_tui.sweep.apply import diff, edit_profile_text

        path = Path(self.runner.state.profile_source or "")
        if not self.runner.state.profile_source or not path.is_file():
            self.notify("this profile was not loaded from a file: nothing to write", severity="error")
            return
        best = next(p for p in res.points if p.index == res.best)
        try:
            old = path.read_text(encoding="utf-8")
            new = edit_profile_text(old, path, self.ref.split("/", 1)[1], best.overrides)
        except Exception as e:
            self.notify(f"cannot apply: {e}", severity="error", timeout=10)
            return
        d = diff(old, new, path) or "(the profile already has these settings)"

        def done(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._write(path, new, best.label), group="sweep-apply")

        self.app.push_screen(
            ConfirmScreen(
                f"Write point #{best.index} into {path.name}?", detail=d[-1500:], confirm_label="Apply"
            ),
            done,
        )

    async def _write(self, path: Path, text: str, label: str) -> None:
        from ddtree_tui.sweep.apply import write_profile

        try:
            await asyncio.to_thread(write_profile, path, text)
        except Exception as e:
            self.notify(f"not written: {e}", severity="error", timeout=10)
            return
        self.notify(f"wrote {label} into {path}; redeploy with r (restart) on {self.ref}", timeout=10)


def _before(fleet: object, ref: str) -> Literal["running", "stopped"]:
    """'stopped' when the service is not running before the sweep (it is stopped again after), else
    'running': the rule the headless sweep uses."""
    if not isinstance(fleet, SweepFleet):
        return "running"
    host, name = ref.split("/", 1)
    view = next((h for h in fleet.snapshot().hosts if h.name == host), None)
    svc = next((s for s in view.services if s.name == name), None) if view is not None else None
    return "stopped" if svc is not None and svc.state in ("stopped", "crashed") else "running"


def open_sweep(app: AppHost, ref: str | None = None) -> None:
    """The hook the app calls (key w, palette): the Sweep screen for `ref` or the selected service."""
    ref = ref or app.selected_service
    if not ref:
        snap = app.current_snapshot()
        ref = next((f"{h.name}/{s.name}" for h in snap.hosts for s in h.services), None)
    if not ref:
        app.notify("no service to sweep", severity="warning")
        return
    app.push_screen(SweepScreen(app.fleet, ref))
