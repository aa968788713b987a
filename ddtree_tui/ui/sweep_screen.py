"""The tuning lab in the TUI (key w on a selected service, or "sweep HOST/SVC" in the palette): pick the
service and the dimensions, watch the grid of points (pending / starting / measuring / done / failed) with
the current best and a text Pareto chart, and Apply the best into the host profile (a confirm dialog whose
default is Cancel, with the diff). The sweep itself is core code (ddtree_tui/sweep/runner.py) run through the
Fleet in a worker; this screen only draws its events and the analysis."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Label, Static

from ddtree_tui.fleet.protocol import SweepFleet
from ddtree_tui.lib import paths
from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep.spec import SweepError, parse_set
from ddtree_tui.ui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost

STATUS_MARK = {"pending": "·", "starting": "◌", "measuring": "◐", "done": "●", "failed": "✗", "rejected": "⊘", "skipped": "-"}  # fmt: skip


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


class SweepScreen(Screen[None]):
    DEFAULT_CSS = """
    SweepScreen { layout: vertical; }
    SweepScreen #sweep-form { height: auto; padding: 0 1; }
    SweepScreen #sweep-form Input { width: 1fr; }
    SweepScreen #sweep-form Label { width: auto; padding: 1 1 0 0; }
    SweepScreen #sweep-buttons { height: auto; padding: 0 1; }
    SweepScreen #sweep-buttons Button { margin-right: 1; }
    SweepScreen #sweep-grid { height: 1fr; }
    SweepScreen #sweep-best { height: auto; padding: 0 1; text-style: bold; }
    SweepScreen #sweep-chart { height: auto; padding: 0 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("ctrl+r", "start", "Start sweep", priority=True),
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

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-form"):
            with Horizontal():
                yield Label("service")
                yield Input(self.ref, id="sweep-ref")
                yield Label("repeats")
                yield Input("2", id="sweep-repeats")
                yield Label("tokens")
                yield Input("64", id="sweep-tokens")
            with Horizontal():
                yield Label("dimensions")
                yield Input(
                    preset_dims(self.fleet, self.ref), id="sweep-dims", placeholder="budget=8,16 env.X=1,2"
                )
        with Horizontal(id="sweep-buttons"):
            yield Button("Start", id="sweep-start", variant="primary")
            yield Button("Stop", id="sweep-stop")
            yield Button("Apply best…", id="sweep-apply")
            yield Button("Close", id="sweep-close")
        yield DataTable(id="sweep-grid", cursor_type="row")
        yield Static("best: -", id="sweep-best")
        yield Static("", id="sweep-chart")

    def on_mount(self) -> None:
        t = self.query_one("#sweep-grid", DataTable)
        t.add_columns("#", "point", "status", "tok/s", "Δ vs base", "TTFT p90", "accept", "rank")

    # --- actions ---------------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"sweep-start": self.action_start, "sweep-stop": self.action_stop, "sweep-apply": self.action_apply,
         "sweep-close": self.action_close}[event.button.id or "sweep-close"]()  # fmt: skip

    def action_close(self) -> None:
        if self.running:
            self.notify("a sweep is running: Stop it first (it puts the service back)", severity="warning")
            return
        self.app.pop_screen()

    def action_stop(self) -> None:
        if self.runner is not None and self.running:
            self.runner.stop.set()
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
        t = self.query_one("#sweep-grid", DataTable)
        t.clear()
        for rec in self.runner.state.points:
            t.add_row(
                str(rec.index),
                rec.label(),
                STATUS_MARK.get(rec.status, "") + " " + rec.status,
                "",
                "",
                "",
                "",
                "",
                key=str(rec.index),
            )
        n, secs, how = self.runner.estimate()
        self.notify(f"{n} point(s), about {secs / 60:.1f} min ({how})")
        self.running = True
        self.run_worker(self._run(), exclusive=True, group="sweep")

    async def _run(self) -> None:
        try:
            state = await self.runner.run()
            self._refresh_results()
            ok = sum(1 for p in state.points if p.status == "done")
            self.notify(f"sweep finished: {ok}/{len(state.points)} measured; results in {self.runner.out}")
        except Exception as e:
            self.notify(f"sweep stopped: {e}", severity="error", timeout=15)
        finally:
            self.running = False

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
        if ev.status in ("done", "failed", "rejected"):
            self._refresh_results()

    def _refresh_results(self) -> None:
        if self.runner is None:
            return
        self.results = res = rs.analyse(self.runner.state)
        t = self.query_one("#sweep-grid", DataTable)
        cols = [c.key for c in t.ordered_columns]
        for p in res.points:
            if p.status != "done":
                continue
            delta = "" if p.delta_pct is None else f"{p.delta_pct:+.1f} %"
            vals = ["" if v is None else v for v in (f"{p.tok_s:.1f}" if p.tok_s else None, delta,
                    f"{p.ttft_p90:.0f}" if p.ttft_p90 else None, f"{p.accept_length:.2f}" if p.accept_length else None,
                    str(p.rank) if p.rank else "✗")]  # fmt: skip
            for col, v in zip(cols[3:], vals, strict=True):
                t.update_cell(str(p.index), col, v)
        best = next((p for p in res.points if p.index == res.best), None)
        self.query_one("#sweep-best", Static).update(
            f"best: #{best.index} {best.label} — {best.verdict}" if best else "best: none yet"
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
