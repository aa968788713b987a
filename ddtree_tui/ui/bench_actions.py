"""The app's bench actions: the bench dialog (b, a service's `bench`), a plain run (BenchRequest) and a load
shape, soak or agentic run (ShapeRequest), each built once and carried to the fleet in a worker while the bench pane shows
its progress. Kept out of ui/app.py so the view stays a layout and its keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddtree_tui.bench.models import BenchRequest, BenchRun, ShapeRequest
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
        pane = app.query_one(BenchPane)
        pane.live.reset(0, f"starting: {params.prompt_set} on {', '.join(params.refs)}")
        app.ctl.dirty.add("bench")
        app.action_focus_pane(5)
        app.run_worker(self._do_bench(params), group="bench", exclusive=True, name="bench")

    async def _do_bench(self, params: BenchRequest) -> BenchRun | None:
        app = self.app
        live = app.query_one(BenchPane).live
        try:
            run = await app.fleet.run_bench(params)
        except Exception as e:
            live.running = False
            live.status = f"failed: {e}"
            app.notify(f"bench failed: {e}", severity="error", timeout=10)
            app.ctl.dirty.add("bench")
            return None
        if isinstance(run, BenchRun):
            live.run = run
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
        pane = app.query_one(BenchPane)
        pane.live.reset_load(f"starting {params.what} on {', '.join(refs)}")
        req = params if params.refs else params.model_copy(update={"refs": refs})
        app.run_worker(self._do_shape(req), group="bench", exclusive=True, name="load")

    async def _do_shape(self, params: ShapeRequest) -> None:
        app = self.app
        live = app.query_one(BenchPane).live
        try:
            if not isinstance(app.fleet, LoadShaper):
                raise RuntimeError("this fleet runs no load shapes")
            run = await app.fleet.run_load_shape(params)
        except Exception as e:
            live.running = False
            live.status = f"failed: {e}"
            app.notify(f"load run failed: {e}", severity="error", timeout=10)
            return
        live.running = False
        if run.kind == "soak":
            drift = "; ".join(f"{d.service} {d.kind} from window {d.window}" for d in run.drift)
            live.status = f"soak finished ({run.status}) · {drift or 'no drift'}"
        elif run.kind == "agentic":
            live.status = f"agentic finished · {len(run.session_results)} sessions · {run.failed} failed"
