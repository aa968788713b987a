"""The app's bench actions: the bench dialog (b, a service's `bench`), a plain run (BenchRequest) and a load
shape, soak or agentic run (ShapeRequest), each built once and carried to the fleet in a worker while the bench pane shows
its progress. Every run can be stopped (x, Esc in the Bench pane, the pane's Stop button, the palette): a
plain run, a ladder or a soak ends as Ctrl-C ends it headless (the engine's `stop` event: what was measured is
kept, the run goes into the history marked interrupted); agentic sessions have no stop hook in their engine,
so their worker is cancelled and the pane says nothing was saved. Kept out of ui/app.py so the view stays a
layout and its keys."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ddtree_tui.bench.models import BenchRequest, BenchRun, ShapeRequest
from ddtree_tui.bench.results import LoadRun, ShapeRun, SoakRun
from ddtree_tui.ui.backend import LoadShaper
from ddtree_tui.ui.messages import BenchIntent
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.widgets.bench import BenchPane

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost


class BenchActions:
    """What the app does for the bench: open the dialog, start runs, fold their results into the pane."""

    def __init__(self, app: AppHost) -> None:
        self.app = app
        self.stop_event: asyncio.Event | None = None  # set while a run of ours is in flight
        self.what = ""  # "bench", "load", "soak" or "agentic": the run in flight
        self.stopped = False  # the run in flight was asked to stop

    # --- stop ----------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """A run started here is in flight (Stop is offered)."""
        return self.stop_event is not None

    def stop(self) -> bool:
        """Stop the run in flight, keeping what it measured; False (and a word) when nothing runs."""
        app = self.app
        if self.stop_event is None:
            app.notify("nothing is running to stop", severity="warning", timeout=3)
            return False
        live = app.query_one(BenchPane).live
        if self.stopped:
            app.notify("already stopping: saving what was measured …", timeout=3)
            return True
        self.stopped = True
        self.stop_event.set()
        if self.what == "agentic":  # its engine has no stop event: end the worker (nothing to save)
            app.workers.cancel_group(app, "bench")
            live.running = False
            live.status = "agentic sessions stopped: nothing saved (sessions are not kept half-done)"
        else:
            live.status = "stopping: saving what was measured …"
        app.notify(f"stopping the {self.what} run: what was measured is kept", timeout=4)
        app.ctl.dirty.add("bench")
        return True

    def _begin(self, what: str) -> asyncio.Event | None:
        """A fresh stop event for a new run, or None (and a word) while another still runs."""
        if self.stop_event is not None:
            self.app.notify(
                f"a {self.what} run is in flight: stop it first (x)", severity="warning", timeout=5
            )
            return None
        self.stop_event, self.what, self.stopped = asyncio.Event(), what, False
        return self.stop_event

    def _end(self) -> None:
        self.stop_event, self.stopped = None, False

    def ready_refs(self) -> list[str]:
        snap = self.app.ctl.snap
        return [f"{h.name}/{s.name}" for h in snap.hosts for s in h.services if s.state == "ready"]

    def open_ready(self) -> None:
        """The dialog with the ready services chosen (else the selected one, unless it is not running)."""
        sel = self.app.selected_service
        self.open(self.ready_refs() or ([sel] if sel else []))

    def open(self, preselect: list[str]) -> None:
        app = self.app
        refs = [(f"{h.name}/{s.name}", s.state) for h in app.ctl.snap.hosts for s in h.services]
        if not refs:
            app.notify("no services to benchmark", severity="warning")
            return

        def done(res: dict[str, Any] | None) -> None:
            if res and "shape" in res:  # a load shape, soak or agentic sessions: the pane runs and shows it
                app.action_focus_pane(5)
                self.start_shape(res["refs"], res["shape"])
            elif res:
                app.post_message(BenchIntent(res["params"]))

        app.push_screen(BenchSetupScreen(refs, preselect), done)

    def start_bench(self, params: BenchRequest) -> None:
        app = self.app
        if self._begin("bench") is None:
            return
        pane = app.query_one(BenchPane)
        pane.live.reset(0, f"starting: {params.prompt_set} on {', '.join(params.refs)}")
        app.ctl.dirty.add("bench")
        app.action_focus_pane(5)
        app.run_worker(self._do_bench(params), group="bench", exclusive=True, name="bench")

    async def _do_bench(self, params: BenchRequest) -> BenchRun | None:
        app = self.app
        live = app.query_one(BenchPane).live
        fleet = app.fleet
        try:
            if isinstance(fleet, LoadShaper):  # the real core: Stop ends it with what was measured
                run: BenchRun | Any = await fleet.run_bench(params, self.stop_event)
            else:
                run = await fleet.run_bench(params)
        except Exception as e:
            live.running = False
            live.status = f"failed: {e}"
            app.notify(f"bench failed: {e}", severity="error", timeout=10)
            app.ctl.dirty.add("bench")
            return None
        finally:
            stopped = self.stopped
            self._end()
        if isinstance(run, BenchRun):
            live.run = run
            if stopped or run.status == "interrupted":
                live.status = (
                    f"stopped: {params.prompt_set} · {len(run.results)} requests measured, saved to the"
                    " history as interrupted"
                )
            else:
                live.status = f"finished: {params.prompt_set} · {len(params.refs)} services"
        else:  # refused (a frozen or attached fleet), in words
            live.status = run.message or "bench did not run"
        live.running = False
        await app.ctl.load_bench_history()
        app.ctl.dirty.add("bench")
        return run if isinstance(run, BenchRun) else None

    def start_shape(self, refs: list[str] | None, params: ShapeRequest) -> None:
        """A load shape, soak or agentic sessions (from the dialog or a key in the pane) through
        Fleet.run_load_shape, the engine headless mode uses; the pane follows its events."""
        app = self.app
        refs = self.ready_refs() if refs is None else refs
        if not refs:
            app.notify("no ready service to load: launch one first", severity="warning")
            return
        what = "agentic" if params.sessions else ("soak" if params.soak else "load")
        if self._begin(what) is None:
            return
        pane = app.query_one(BenchPane)
        pane.live.reset_load(f"starting {params.what} on {', '.join(refs)}")
        req = params if params.refs else params.model_copy(update={"refs": refs})
        app.ctl.dirty.add("bench")
        app.run_worker(self._do_shape(req), group="bench", exclusive=True, name="load")

    async def _do_shape(self, params: ShapeRequest) -> None:
        app = self.app
        live = app.query_one(BenchPane).live
        try:
            if not isinstance(app.fleet, LoadShaper):
                raise RuntimeError("this fleet runs no load shapes")
            run: ShapeRun = await app.fleet.run_load_shape(params, self.stop_event)
        except Exception as e:
            live.running = False
            live.status = f"failed: {e}"
            app.notify(f"load run failed: {e}", severity="error", timeout=10)
            app.ctl.dirty.add("bench")
            return
        finally:
            stopped = self.stopped
            self._end()
        live.running = False
        app.ctl.dirty.add("bench")
        if isinstance(run, LoadRun | SoakRun) and (stopped or run.status == "interrupted"):
            kept = f"{len(run.windows)} windows" if isinstance(run, SoakRun) else f"{len(run.levels)} levels"
            live.status = f"{run.kind} stopped: {kept} measured, saved to the history as interrupted"
        elif run.kind == "soak":
            drift = "; ".join(f"{d.service} {d.kind} from window {d.window}" for d in run.drift)
            live.status = f"soak finished ({run.status}) · {drift or 'no drift'}"
        elif run.kind == "agentic":
            live.status = f"agentic finished · {len(run.session_results)} sessions · {run.failed} failed"
        await app.ctl.load_bench_history()  # the run just appended (a stopped one too) is in the list
