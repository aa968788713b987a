"""Many services, one study: a worker per service (HOST/SVC running the same model) pulls trials from the
shared Optuna study, relaunches its service with the trial's settings, measures it window by window
(reporting each window to the pruner) and tells the study. No point is relaunched twice (optimizer.ask);
a worker whose host is lost mid-point fails the trial and enqueues it again, so another worker measures it.

Workers are asyncio tasks of one process, one per service, sharing the process's Fleet: the Fleet is the one
door to the hosts (their SSH connections, holds, telemetry), and the work of a worker is waiting on a remote
service, not CPU. Study calls are short and synchronous, so the tasks never touch the storage at once.
Another process (another machine's `ddtree-tui sweep ... --storage URL`) joins the same study through the
database; heartbeats fail and retry the trials of a process that died (sweep/study.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol, Self, TypeVar

import optuna
from optuna.trial import TrialState
from pydantic import BaseModel, Field

from ddtree_tui.bench.models import BenchRun, BenchTarget, PromptFinished
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.fleet.protocol import SweepFleet
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.sweep import optimizer as opt
from ddtree_tui.sweep import state as st
from ddtree_tui.sweep import study as sy
from ddtree_tui.sweep.results import NOT_CHOSEN
from ddtree_tui.sweep.spec import Dimension, SweepError, apply_overrides

T = TypeVar("T")
# await report(step, value) -> prune this point now? (the study is asked on the study thread)
Report = Callable[[int, float], Awaitable[bool]]


class StudySettings(Protocol):
    """What the workers read of a sweep's settings (sweep/runner.py SweepSettings)."""

    ref: str
    dims: list[Dimension]
    strategy: str
    prompts: str
    repeats: int
    objective: str
    baseline_ref: str | None
    seed: int
    trials: int | None
    storage: str | None
    workers: list[str]
    prune: bool
    pareto: list[str]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


class PointRunner(Protocol):
    """The sweep runner's steps the workers use (sweep/runner.py PointRunner, structurally: this module
    stays below the runner, which hands a study-driven sweep to `run_fleet_study`)."""

    fleet: SweepFleet
    out: Path
    owner: str
    stop: asyncio.Event
    state: st.SweepState
    profile: HostProfile
    base_spec: ServiceSpec
    specs: dict[str, ServiceSpec]

    @property
    def s(self) -> StudySettings: ...

    def _save(self) -> None: ...
    def _set(self, rec: st.PointRecord, status: st.PointStatus, text: str = "") -> None: ...
    def _gpus(self, spec: ServiceSpec) -> list[st.GpuInfo]: ...
    async def _start(self, spec: ServiceSpec) -> tuple[bool, str | None, list[str], float]: ...
    async def _measure(
        self,
        concurrency: int,
        on_event: Callable[[object], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> tuple[BenchRun, list[BenchTarget]]: ...
    def _measurement(
        self, run: BenchRun, ref: str, concurrency: int, spec: ServiceSpec
    ) -> st.Measurement: ...
    async def _baseline(self, after: int) -> None: ...


class Outcome(BaseModel):
    """What measuring one point gave: its objective values, or why it stopped."""

    kind: Literal["done", "pruned", "refused", "lost", "stopped"]
    values: dict[str, float] = Field(default_factory=dict)  # objective name -> value
    reason: str = ""


class Evaluator(Protocol):
    """Relaunches `worker` with `overrides` and measures it (the Fleet's, or the landscape's in the lab)."""

    async def evaluate(
        self, worker: str, trial: int, overrides: dict[str, str], report: Report
    ) -> Outcome: ...


class WorkerStats(BaseModel):
    worker: str
    measured: int = 0
    pruned: int = 0
    refused: int = 0
    lost: bool = False
    busy_s: float = 0.0


class StudyRun(BaseModel):
    """How one run of the workers went (this process only)."""

    workers: list[WorkerStats]
    relaunches: int
    duplicates: int
    retries: int
    wall_s: float


def _pick(values: Mapping[str, float], objectives: Sequence[str]) -> list[float] | None:
    out = []
    for o in objectives:
        v = values.get(o)
        if v is None:
            return None
        out.append(float(v))
    return out


def _waiting(study: optuna.Study) -> bool:
    return bool(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


async def run_workers(
    study: optuna.Study,
    space: opt.Space,
    objectives: Sequence[str],
    evaluator: Evaluator,
    workers: Sequence[str],
    *,
    budget: int | None = None,
    stop: asyncio.Event | None = None,
    on_trial: Callable[[str, int, dict[str, str], Outcome], None] | None = None,
    remeasure: int | None = None,
) -> StudyRun:
    """One task per worker, each asking the study for the next point until `budget` relaunches are judged
    (measured, pruned, refused or being measured: a point cut off by a lost host or a stop is not, and is
    measured again), every point is judged, or `stop` is set. Enqueued retries run even past the budget.
    The last `remeasure` of the budget (default optimizer.remeasure_count) measure the top candidates
    again, never pruned, so the pick (optimizer.best_params) is a mean, not one lucky measurement."""
    stop = stop or asyncio.Event()
    multi = len(objectives) > 1
    # every study call runs on one thread of its own, one at a time: a database round trip (hundreds of ms
    # for SQLite on a busy disk) never blocks the event loop, where the other workers' requests are timed
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study")
    loop = asyncio.get_running_loop()

    async def call(fn: Callable[[], T]) -> T:
        return await loop.run_in_executor(pool, fn)

    # the last `remeasures` of the budget re-measure top candidates (optimizer.py): the robust final pick
    remeasures = opt.remeasure_count(budget, len(objectives)) if remeasure is None else remeasure

    def explored() -> bool:
        """Every new point the budget allows is judged (or the whole grid is)."""
        judged = len(opt.judged_keys(study, space))
        if _waiting(study):
            return False
        return judged >= space.size or (budget is not None and judged >= budget - remeasures)

    last_stale = [float("-inf")]

    def stale() -> None:
        """Fail (and enqueue again) the trials of workers that stopped beating: once a heartbeat period."""
        if time.monotonic() - last_stale[0] < sy.HEARTBEAT_S:
            return
        last_stale[0] = time.monotonic()
        with contextlib.suppress(Exception):
            sy.fail_stale(study)

    def next_trial(worker: str) -> optuna.Trial | None:
        """The budget check and the ask in one study call, so two workers cannot both take the last one."""
        stale()
        if explored():
            if opt.remeasures(study) >= remeasures:
                return None
            p = opt.next_remeasure(study, space)
            if p is None:
                return None
            opt.enqueue_remeasure(study, p)
        return opt.ask(study, space, worker)

    async def beat(trial: optuna.Trial) -> None:
        while True:
            with contextlib.suppress(Exception):
                await call(lambda: sy.record_heartbeat(study, trial))
            await asyncio.sleep(sy.HEARTBEAT_S)

    stats = {w: WorkerStats(worker=w) for w in workers}
    dup0 = _count(study, opt.DUPLICATE_OF)
    retry0 = _count(study, opt.RETRY_OF)
    rel0 = opt.relaunches(study)
    t0 = time.monotonic()

    async def work(worker: str) -> None:
        ws = stats[worker]
        while not stop.is_set():
            trial = await call(functools.partial(next_trial, worker))
            if trial is None:
                return
            params = space.values(trial.params)
            again = opt.REMEASURE_OF in trial.user_attrs  # a candidate confirmed: measured to the end

            def judge(step: int, value: float, trial: optuna.Trial = trial) -> bool:
                trial.report(value, step)
                return trial.should_prune()

            async def report(
                step: int, value: float, judge: Callable[[int, float], bool] = judge, again: bool = again
            ) -> bool:
                if multi or again:
                    return False  # Optuna prunes single-objective studies only
                return await call(lambda: judge(step, value))

            beating = asyncio.ensure_future(beat(trial))
            t1 = time.monotonic()
            try:
                out = await evaluator.evaluate(worker, trial.number, params, report)
            except Exception as e:  # a transport error mid-point: the host is lost to this worker
                out = Outcome(kind="lost", reason=f"{type(e).__name__}: {e}")
            finally:
                beating.cancel()
                ws.busy_s += time.monotonic() - t1
            await call(functools.partial(_tell, study, trial, out, objectives, ws))
            if on_trial is not None:
                with contextlib.suppress(Exception):
                    on_trial(worker, trial.number, params, out)
            if out.kind == "lost":
                ws.lost = True
                return
            if out.kind == "stopped":
                return

    try:
        await asyncio.gather(*(work(w) for w in workers))
    finally:
        pool.shutdown(wait=True)
    return StudyRun(
        workers=list(stats.values()),
        relaunches=opt.relaunches(study) - rel0,
        duplicates=_count(study, opt.DUPLICATE_OF) - dup0,
        retries=_count(study, opt.RETRY_OF) - retry0,
        wall_s=time.monotonic() - t0,
    )


def _tell(
    study: optuna.Study, trial: optuna.Trial, out: Outcome, objectives: Sequence[str], ws: WorkerStats
) -> None:
    vals = _pick(out.values, objectives) if out.kind == "done" else None
    if out.kind == "done" and vals is not None:
        opt.complete(study, trial, vals)
        ws.measured += 1
    elif out.kind == "done":
        opt.fail(study, trial, out.reason or "no value for an objective", refused=True, retry=False)
        ws.refused += 1
    elif out.kind == "pruned":
        opt.prune(study, trial, out.reason)
        ws.pruned += 1
    elif out.kind == "refused":
        opt.fail(study, trial, out.reason, refused=True, retry=False)
        ws.refused += 1
    else:  # lost or stopped: measured again, by another worker or on resume (a re-measure: chosen afresh)
        opt.fail(study, trial, out.reason, refused=False, retry=opt.REMEASURE_OF not in trial.user_attrs)


def _count(study: optuna.Study, attr: str) -> int:
    return sum(1 for t in study.get_trials(deepcopy=False) if attr in t.user_attrs)


# --- measuring through the Fleet ---------------------------------------------------------------------------


def metric_values(ms: Sequence[st.Metrics | None], objectives: Sequence[str]) -> dict[str, float]:
    """Each objective as the mean over the point's load levels of the metric it reads (a level without it:
    the objective is left out, and the point has no value)."""
    out: dict[str, float] = {}
    for o in objectives:
        field = opt.OBJECTIVES[o][1]
        vals = [getattr(m, field, None) if m is not None else None for m in ms]
        if vals and all(v is not None for v in vals):
            out[o] = statistics.fmean(float(v) for v in vals if v is not None)
    return out


# what a done point's record keeps when a re-measure of it does not finish
_KEPT = ("status", "error", "measurement", "finished_at", "log_tail", "argv", "trial", "worker", "startup_s",
         "measure_s", "gpus", "server_info", "fairness")  # fmt: skip


class FleetEvaluator:
    """Measures a point on one worker service through the sweep runner's own steps (restart with the
    overrides, wait ready, smoke, bench every load level), into the sweep's shared state."""

    def __init__(self, runner: PointRunner, objectives: Sequence[str]) -> None:
        self.runner = runner
        self.objectives = list(objectives)
        self.views: dict[str, PointRunner] = {}
        self.window = max(1, self._n_prompts())

    def _n_prompts(self) -> int:
        from ddtree_tui.bench.prompts import load_prompts

        try:
            return len(load_prompts(self.runner.s.prompts))
        except Exception:
            return 5

    def view(self, worker: str) -> PointRunner:
        """The runner as seen from one worker service: same state and settings, that service's spec."""
        v = self.views.get(worker)
        if v is None:
            v = copy.copy(self.runner)
            vars(v)["s"] = self.runner.s.model_copy(
                update={"ref": worker}
            )  # `s` is read-only in the protocol
            v.profile, v.base_spec = self.runner.fleet.spec_of(worker)
            v.specs = {}
            self.views[worker] = v
        return v

    def spec(self, v: PointRunner, overrides: dict[str, str]) -> ServiceSpec:
        key = opt.key_of(overrides)
        if key not in v.specs:
            v.specs[key] = apply_overrides(v.base_spec, overrides)
        return v.specs[key]

    def _lost(self, worker: str) -> str | None:
        host = worker.split("/", 1)[0]
        view = self.runner.fleet.snapshot().host(host)
        if view is not None and view.state != "connected":
            return f"host {host} lost: {view.error or view.state}"
        return None

    async def evaluate(self, worker: str, trial: int, overrides: dict[str, str], report: Report) -> Outcome:
        """Measure the point; one measured before (a top candidate measured again, optimizer.py) shows its
        latest measurement, or keeps its earlier one when the re-measure does not finish."""
        v = self.view(worker)
        key = opt.key_of(overrides)
        kept = [
            (r, r.model_copy())
            for r in v.state.points
            if opt.key_of(r.overrides) == key and r.status == "done"
        ]
        out = await self._evaluate(worker, trial, overrides, report)
        if out.kind != "done" and kept:
            for rec, old in kept:
                for f in _KEPT:
                    setattr(rec, f, getattr(old, f))
            v._save()
        return out

    async def _evaluate(self, worker: str, trial: int, overrides: dict[str, str], report: Report) -> Outcome:
        v = self.view(worker)
        key = opt.key_of(overrides)
        group = [r for r in v.state.points if opt.key_of(r.overrides) == key]
        if not group:
            return Outcome(kind="refused", reason=f"no point of this sweep has {key}")
        try:
            spec = self.spec(v, overrides)
        except SweepError as e:
            for rec in group:
                rec.error = str(e)
                v._set(rec, "rejected", rec.error)
            return Outcome(kind="refused", reason=str(e))
        cmd = build_launch(v.profile, spec)
        for rec in group:
            rec.argv, rec.error, rec.log_tail = cmd.display(), None, []
            rec.attempts += 1
            rec.trial, rec.worker = trial, worker
            rec.measurement = None
        check = await v.fleet.preflight(worker, spec)
        if check is not None and check.ok is False:
            for rec in group:
                rec.error = check.summary()
                v._set(rec, "rejected", rec.error)
            return Outcome(kind="refused", reason=check.summary())
        v._set(group[0], "starting", f"on {worker}")
        try:
            ok, err, tail, dt = await v._start(spec)
        except Exception as e:
            ok, err, tail, dt = False, f"{type(e).__name__}: {e}", [], 0.0
        for rec in group:
            rec.startup_s = dt
        if not ok:
            lost = self._lost(worker)
            for rec in group:
                rec.error, rec.log_tail, rec.finished_at = lost or err, tail, time.time()
                v._set(rec, "pending" if lost else "failed", rec.error or "")
            return Outcome(kind="lost" if lost else "refused", reason=lost or err or "did not start")
        metrics: list[st.Metrics | None] = []
        for li, rec in enumerate(group):
            out = await self._measure_level(v, rec, spec, li, report)
            if out is not None:
                if out.kind == "pruned":
                    for r in group[li + 1 :]:
                        r.error, r.finished_at = out.reason, time.time()
                        v._set(r, "pruned", out.reason)
                elif out.kind in ("lost", "stopped"):
                    for r in group[li:]:
                        r.status, r.measurement = "pending", None
                    v._save()
                return out
            metrics.append(rec.measurement.metrics if rec.measurement else None)
        values = metric_values(metrics, self.objectives)
        return Outcome(kind="done", values=values, reason="" if values else "every request failed")

    async def _measure_level(
        self, v: PointRunner, rec: st.PointRecord, spec: ServiceSpec, level: int, report: Report
    ) -> Outcome | None:
        """Measure one load level in windows of one pass over the prompts; None when it was measured."""
        v._set(rec, "measuring", f"on {v.s.ref}")
        pruned = asyncio.Event()
        halt = asyncio.Event()
        toks: list[float] = []
        own = [0]  # this service's counted requests finished (a --baseline service's are not windows)
        judging: list[asyncio.Future[None]] = []
        windows_per_level = max(1, v.s.repeats)
        why: list[str] = []

        def on_event(ev: object) -> None:
            if not isinstance(ev, PromptFinished) or ev.result.service != v.s.ref or ev.result.warmup:
                return
            own[0] += 1
            if ev.result.ok and ev.result.tok_s is not None:
                toks.append(ev.result.tok_s)
            if own[0] % self.window or not toks or self.objectives[0] != "tok_s":
                return
            step = level * windows_per_level + own[0] // self.window - 1
            judging.append(asyncio.ensure_future(judge(step, statistics.fmean(toks))))

        async def judge(step: int, value: float) -> None:
            if await report(step, value) and not pruned.is_set():
                why.append(
                    f"pruned by the median rule after window {step + 1}: {value:.1f} tok/s per request, "
                    "below the median of earlier points at that window"
                )
                pruned.set()
                halt.set()

        async def relay() -> None:
            await v.stop.wait()
            halt.set()

        watcher = asyncio.ensure_future(relay())
        t0 = time.monotonic()
        try:
            run, _targets = await v._measure(rec.concurrency, on_event=on_event, stop=halt)
        except Exception as e:
            lost = self._lost(v.s.ref)
            if lost:
                return Outcome(kind="lost", reason=lost)
            rec.error, rec.finished_at = f"measurement failed: {type(e).__name__}: {e}", time.time()
            v._set(rec, "failed", rec.error)
            return Outcome(kind="refused", reason=rec.error)
        finally:
            watcher.cancel()
            if judging:  # each window reported (a decision that comes after the last request is moot)
                await asyncio.gather(*judging, return_exceptions=True)
        rec.measure_s = time.monotonic() - t0
        rec.measurement = v._measurement(run, v.s.ref, rec.concurrency, spec)
        rec.finished_at = time.time()
        if pruned.is_set():
            rec.error = why[0]
            v._set(rec, "pruned", rec.error)
            return Outcome(kind="pruned", reason=rec.error)
        if run.status != "complete":
            lost = self._lost(v.s.ref)
            return Outcome(kind="lost" if lost else "stopped", reason=lost or "the sweep stopped mid-point")
        info = next((t for t in run.targets if t.ref == v.s.ref), None)
        if info is not None:
            rec.server_info = info.server_args
        rec.gpus = v._gpus(spec)
        m = rec.measurement.metrics
        if m is not None and m.n and m.failed == m.n:
            lost = self._lost(v.s.ref)
            if lost:
                return Outcome(kind="lost", reason=lost)
            rec.error = "every request failed"
            v._set(rec, "failed", rec.error)
            return Outcome(kind="refused", reason=rec.error)
        v._set(rec, "done", f"{m.tok_s:.1f} tok/s" if m and m.tok_s else "")
        return None


def study_objectives(s: object) -> list[str]:
    """The study's objectives: nsga2 the Pareto set (default tok/s per request, throughput, TTFT p90), else
    the sweep's one objective."""
    strategy = getattr(s, "strategy", "grid")
    if strategy == "nsga2":
        return list(getattr(s, "pareto", None) or opt.PARETO_DEFAULT)
    objective = str(getattr(s, "objective", "tok_s"))
    return [objective if objective in opt.OBJECTIVES else "tok_s"]


async def run_fleet_study(runner: PointRunner) -> st.SweepState:
    """PointRunner.run for a study-driven sweep: hold every worker service, measure each one's baseline
    (the profile as written), run the workers, put every service back, and record the study in the state."""
    s = runner.s
    workers = [s.ref, *[w for w in s.workers if w != s.ref]]
    for w in workers[1:]:
        runner.fleet.spec_of(w)  # raises for an unknown ref
    objectives = study_objectives(s)
    space = opt.Space(dims={d.key: list(d.values) for d in s.dims})
    url = s.storage or sy.default_storage(runner.out)
    if s.storage is None:
        runner.out.mkdir(parents=True, exist_ok=True)
    study = sy.open_study(
        runner.state.id, url, s.strategy, space.grid(), opt.directions(objectives), s.seed, s.prune
    )
    if s.storage is None:  # only this sweep uses the study: what was running was cut off with it
        opt.fail_running(study)
    evaluator = FleetEvaluator(runner, objectives)
    runner.state.study = st.StudyState(
        name=runner.state.id,
        storage=sy.redact_url(url),
        strategy=s.strategy,
        seed=s.seed,
        objectives=objectives,
        directions=opt.directions(objectives),
        trials=s.trials,
        pruner=type(study.pruner).__name__,
        workers=workers,
    )
    held: list[str] = []
    try:
        for w in workers:
            runner.fleet.hold(w, runner.owner)
            held.append(w)
        runner._save()
        if s.baseline_ref is None and not runner.state.baselines:
            await asyncio.gather(*(_baseline(evaluator.view(w)) for w in workers))
        await run_workers(study, space, objectives, evaluator, workers, budget=s.trials, stop=runner.stop)
        _record(runner.state, study, space)
        for rec in runner.state.points:
            if rec.status == "pending" and not runner.stop.is_set():
                rec.status, rec.error = "skipped", f"{NOT_CHOSEN} ({s.strategy})"
        _link(runner.state)
        runner.state.finished = not runner.stop.is_set()
        runner._save()
        return runner.state
    finally:
        await asyncio.shield(_restore_all([evaluator.view(w) for w in workers], runner))
        for w in held:
            runner.fleet.release(w, runner.owner)


async def _baseline(v: PointRunner) -> None:
    n = len(v.state.baselines)
    await v._baseline(-1)
    for b in v.state.baselines[n:]:
        b.worker = v.s.ref
    v._save()


def _record(state: st.SweepState, study: optuna.Study, space: opt.Space) -> None:
    info = state.study
    if info is None:
        return
    info.relaunches = opt.relaunches(study)
    info.duplicates = _count(study, opt.DUPLICATE_OF)
    info.retries = _count(study, opt.RETRY_OF)
    if len(info.objectives) == 1:
        info.best = opt.best_params(study, space)
    else:
        info.pareto = opt.pareto_params(study, space)


def _link(state: st.SweepState) -> None:
    """Each point is compared with its own worker's baseline measurements at its concurrency."""
    for rec in state.points:
        if rec.status != "done":
            continue
        rec.baseline_seqs = [
            b.seq
            for b in state.baselines
            if b.ok and b.measurement.concurrency == rec.concurrency and b.worker in (None, rec.worker)
        ]


async def _restore_all(views: Sequence[PointRunner], runner: PointRunner) -> None:
    """Every worker service back as its profile has it, all at once; `restored` only when all of them are
    (a failure is a caveat naming the service)."""

    async def one(v: PointRunner) -> bool:
        try:
            ok, err, _tail, _dt = await v._start(v.base_spec)
        except Exception as e:  # a lost host: reported, the others are still put back
            ok, err = False, f"{type(e).__name__}: {e}"
        if not ok:
            runner.state.caveats.append(f"could not put {v.s.ref} back as the profile has it: {err}")
        return ok

    results = await asyncio.gather(*(one(v) for v in views))
    runner.state.restored = bool(results) and all(results)
    with contextlib.suppress(Exception):
        runner._save()
