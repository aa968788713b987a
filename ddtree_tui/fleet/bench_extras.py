"""What the bench desk adds around an engine's run (issue 26), kept apart from the desk's orchestration:
the finished-run event held until the run carries its extras, the GPU recorder and per-request acceptance
(`--energy`, `--spec-details`), the cache flush / server-metrics scrape / time slices (`RunExtras`), and
the shape engines (agentic sessions, a soak, a load ladder) a ShapeRequest runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from ddtree_tui.bench.acceptance import summarize
from ddtree_tui.bench.agentic import run_agentic
from ddtree_tui.bench.load import LoadSpec, Slo
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchTarget, RunFinished, ShapeRequest
from ddtree_tui.bench.results import AnyRun, LoadFinished, LoadRun, ShapeRun
from ddtree_tui.bench.runextras import RunExtras
from ddtree_tui.bench.runner import RunHooks, with_model
from ddtree_tui.bench.servermetrics import LogLines
from ddtree_tui.bench.soak import GpuProbe, SoakSettings, run_soak
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.fleet.bench_energy import EnergyFleet, GpuRecorder, finish, finish_load, url_energy
from ddtree_tui.fleet.bench_targets import BenchFleet


class HeldFinish:
    """The engine's events, published as they come, except the finished-run event (RunFinished,
    LoadFinished), held until the desk has attached what it adds after the engine (acceptance, energy,
    slices, server figures, cache flushes): a face that shows the finished run sees them (issue 26).
    `release` publishes what was held, also when the run ends by an exception (a stop, a cancel)."""

    def __init__(self, publish: Callable[[object], None]) -> None:
        self.publish = publish
        self.held: list[object] = []

    def __call__(self, ev: object) -> None:
        if isinstance(ev, RunFinished | LoadFinished):
            self.held.append(ev)
        else:
            self.publish(ev)

    def release(self) -> None:
        held, self.held = self.held, []
        for ev in held:
            self.publish(ev)


# --- GPU telemetry and energy, per-request acceptance (W-GPU) ------------------------------------------------
def recorder(fleet: BenchFleet, req: BenchRequest, targets: Sequence[BenchTarget]) -> GpuRecorder | None:
    """With `energy`, a recorder of the targets' GPUs from the fleet's telemetry, started now."""
    if not req.energy or req.urls or not isinstance(fleet, EnergyFleet):
        return None
    rec = GpuRecorder(fleet, targets)
    rec.start()
    return rec


async def joined(req: BenchRequest, run: BenchRun | ShapeRun, rec: GpuRecorder | None) -> None:
    """A plain run or a load ladder with its per-service acceptance and, with `energy`, its GPUs' numbers and
    energy (a soak's or agentic sessions' run is left as it is: the faces refuse `energy` for them)."""
    if not isinstance(run, BenchRun | LoadRun):
        return
    run.acceptance = summarize(run.results, [t.ref for t in run.targets])
    if rec is not None:
        await (finish(rec, run) if isinstance(run, BenchRun) else finish_load(rec, run))
    elif req.energy:
        run.energy = url_energy(bool(req.urls))


# --- cache reset, server metrics, time slices around every run (w-server) ------------------------------------
def extras_for(
    fleet: BenchFleet, req: BenchRequest, targets: Sequence[BenchTarget], slo: Slo | None = None
) -> RunExtras:
    """The run's extras; a fleet service's log is followed for the metrics fallback (a --url server has
    none we can follow)."""
    urls = set(req.urls)

    def logs(ref: str) -> LogLines | None:
        if urls or ref not in req.refs:
            return None
        return lambda: fleet.follow_log(ref)

    return RunExtras(req, targets, logs, slo)


def attach(extras: RunExtras, run: AnyRun, word: Callable[[str], None]) -> None:
    """The slices and the server's figures on the run; a bug there costs them, never the run's record."""
    try:
        extras.attach(run)
    except Exception as e:
        word(f"time slices / server metrics not recorded: {type(e).__name__}: {e}")


# --- the shape engines --------------------------------------------------------------------------------------
async def run_shape_engine(
    req: ShapeRequest, targets: list[BenchTarget], spec: LoadSpec, slo: Slo | None, extras: RunExtras,
    hooks: RunHooks, on_turn: Callable[[object], None], gpu_probe: Callable[[], Awaitable[GpuProbe]],
    history_path: Path,
) -> ShapeRun:  # fmt: skip
    """The engine of a shape request (agentic sessions, a soak or a load ladder)."""
    if req.sessions:
        if req.api != "generate":
            async with StreamClient() as client:
                targets = [await with_model(client, t, req.model) for t in targets]
        return await run_agentic(
            req, targets, sessions=req.sessions, turns=req.turns, think_time_s=req.think_time_s,
            dataset=None if req.prompts == "agentic" else req.prompt_set, on_turn=on_turn,
        )  # fmt: skip
    if req.soak:
        soak = SoakSettings(
            duration_s=req.duration_s or 60.0, window_s=req.window_s, slo=slo,
            log_path=Path(req.soak_log) if req.soak_log else None, gpu_probe=await gpu_probe(),
            history_path=history_path,  # the start line and windows as they come
        )  # fmt: skip
        return await run_soak(req, targets, spec, soak, extras.hooks(hooks))
    settings = LoadSettings(
        requests=req.requests, duration_s=req.duration_s, slo=slo,
        stop_on_saturation=req.stop_on_saturation, saturation_test=req.saturation_test,
        saturation_alpha=req.saturation_alpha, saturation_window=req.saturation_window,
    )  # fmt: skip
    return await run_load(req, targets, spec, settings, extras.hooks(hooks, spec))


__all__ = ["HeldFinish", "attach", "extras_for", "joined", "recorder", "run_shape_engine"]
