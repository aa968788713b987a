"""Runs a sweep through the Fleet: per launch config one restart with the overrides, wait ready (the spec's
real startup timeout), smoke, warm up, measure every load level with the bench runner; the baseline
measured interleaved; a checkpoint after every point; the service held for the whole sweep and put back as
the profile has it at the end, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from ddtree_tui import __version__
from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchTarget, RequestResult
from ddtree_tui.bench.prompts import load_prompts
from ddtree_tui.bench.runner import run_bench
from ddtree_tui.config import ServiceSpec, redact_env
from ddtree_tui.fleet.protocol import SweepFleet
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.sweep import state as st
from ddtree_tui.sweep.fairness import FairnessSettings, before_measurement
from ddtree_tui.sweep.results import WARMUP_CAVEAT, warmup_caveat
from ddtree_tui.sweep.spec import (
    Constraint,
    Dimension,
    SweepError,
    apply_overrides,
    parse_constraint,
    plan_points,
    sweep_id,
)

READY_STATES = {"ready", "crashed", "stopped", "unhealthy"}
CAVEATS = [
    "Startup time is measured from launch to the first ready /health; on a real GPU host it includes model "
    "load and CUDA-graph capture, which the simulator does not model (its load_time is a constant).",
    "Each point is measured after one warm-up request; CUDA-graph and allocator warm-up beyond that, JIT "
    "kernels compiled on first use of a batch size, and thermal state are not controlled: a real host can "
    "drift, which is why the baseline is re-measured between points and every delta has an interval.",
    "GPU memory is read from the host's telemetry at the end of each point; with source = replay it is a "
    "recording, not this service, and is labelled so.",
    "Accept length and verify passes are what the server reports; a server that does not report them "
    "leaves them empty.",
]


class SweepSettings(BaseModel):
    ref: str
    dims: list[Dimension]
    loads: list[int] = Field(default_factory=lambda: [1])
    strategy: str = "grid"
    prompts: str = "seed3"
    repeats: int = 3
    warmup: int = 1
    max_new_tokens: int = 128
    objective: str = "tok_s"
    constraints: list[str] = Field(default_factory=list)
    baseline_ref: str | None = None
    baseline_every: int = Field(default=3, ge=1)  # launch configs between same-service baseline re-measures
    fairness: FairnessSettings = Field(default_factory=FairnessSettings)  # sweep/fairness.py
    max_time: float | None = None
    smoke_timeout: float = 60.0
    request_timeout: float = 300.0
    # the optimizer (sweep/study.py, sweep/workers.py): strategy tpe/nsga2, or grid over several workers
    seed: int = 0
    trials: int | None = Field(default=None, ge=1)  # configs to judge (None: until every point is judged)
    storage: str | None = None  # the study's database URL (None: SQLite in the sweep's directory)
    workers: list[str] = Field(default_factory=list)  # more HOST/SVC, same model, measured in parallel
    prune: bool = True  # stop a point early when its windows trail the median of earlier points
    pareto: list[str] = Field(default_factory=list)  # nsga2's objectives (default: optimizer.PARETO_DEFAULT)


def uses_study(s: SweepSettings) -> bool:
    """The points are chosen by an Optuna study: an optimizer strategy, or a grid shared by several workers."""
    return s.strategy in ("tpe", "nsga2") or (s.strategy == "grid" and bool(s.workers))


class SweepEvent(BaseModel):
    """Published to `on_event`: one point changed (or a baseline measurement, index -1)."""

    index: int
    status: str
    label: str
    text: str = ""


def _pct(xs: Sequence[float], q: float) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# what a Sample takes from a RequestResult under the same name (ttft and the verify count are renamed)
_SAMPLE_AS_IS = set(st.Sample.model_fields) - {"ttft_ms", "verify_ct"}
# what a new SweepState takes from the settings under the same name
_STATE_FROM_SETTINGS = {"ref", "baseline_ref", "dims", "loads", "strategy", "prompts", "repeats", "warmup",
                        "max_new_tokens", "objective", "constraints"}  # fmt: skip


def samples_of(results: Sequence[RequestResult], ref: str) -> list[st.Sample]:
    return [
        st.Sample(
            **r.model_dump(include=_SAMPLE_AS_IS),
            ttft_ms=r.ttft_s * 1000 if r.ttft_s is not None else None,
            verify_ct=r.spec_verify_ct,
        )
        for r in results
        if r.service == ref and not r.warmup
    ]


def metrics_of(
    run: BenchRun, ref: str, constraints: Sequence[Constraint], gpu_mem: int | None = None
) -> st.Metrics:
    res = [r for r in run.results if r.service == ref and not r.warmup]
    ok = [r for r in res if r.ok]
    ttft = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    itl = [r.itl_p50_ms for r in ok if r.itl_p50_ms is not None]
    toks = [r.tok_s for r in ok if r.tok_s is not None]
    verify = [(r.output_tokens or 0, r.spec_verify_ct) for r in ok if r.spec_verify_ct]
    tpc = [r.tokens_per_chunk for r in ok if r.tokens_per_chunk is not None]
    summ = next((s for s in run.summary if s.service == ref), None)
    itl_mean = [r.itl_mean_ms for r in ok if r.itl_mean_ms is not None]
    step = statistics.fmean(itl_mean) * statistics.fmean(tpc) if itl_mean and tpc else None
    # goodput: output throughput counting only requests that meet the per-request constraints (TTFT, ITL)
    per_req = [c for c in constraints if c.metric.startswith(("ttft", "itl"))]

    def meets(r: RequestResult) -> bool:
        for c in per_req:
            v = r.ttft_s * 1000 if c.metric.startswith("ttft") and r.ttft_s is not None else None
            if c.metric.startswith("itl"):
                v = r.itl_p50_ms
            if not c.ok(v):
                return False
        return True

    out_tp = summ.output_throughput if summ else None
    total = sum(r.output_tokens or 0 for r in ok)
    good = sum(r.output_tokens or 0 for r in ok if meets(r))
    goodput = out_tp * good / total if out_tp is not None and total else None
    return st.Metrics(
        n=len(res),
        failed=len(res) - len(ok),
        tok_s=statistics.fmean(toks) if toks else None,
        output_throughput=out_tp,
        goodput=goodput,
        ttft_p50=_pct(ttft, 0.5),
        ttft_p90=_pct(ttft, 0.9),
        ttft_p99=_pct(ttft, 0.99),
        itl_p50=_pct(itl, 0.5),
        itl_p90=_pct(itl, 0.9),
        accept_length=(sum(a for a, _ in verify) / sum(v for _, v in verify)) if verify else None,
        verify_passes=sum(v for _, v in verify) if verify else None,
        tokens_per_chunk=statistics.fmean(tpc) if tpc else None,
        step_ms=step,
        gpu_mem_mb=gpu_mem,
    )


class SweepRunner:
    """One sweep over one service of a started Fleet."""

    def __init__(
        self,
        fleet: SweepFleet,
        settings: SweepSettings,
        out: Path,
        *,
        resume: bool = False,
        redo: Sequence[int] = (),
        redo_failed: bool = False,
        on_event: Callable[[SweepEvent], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.fleet = fleet
        self.s = settings
        self.out = Path(out)
        self.on_event = on_event
        self.stop = stop or asyncio.Event()
        self.constraints = [parse_constraint(c) for c in settings.constraints]
        self.profile, self.base_spec = fleet.spec_of(settings.ref)
        self.owner = f"sweep {self.out}"
        points = plan_points(settings.dims, settings.loads, settings.strategy)  # type: ignore[arg-type]
        if not points:
            raise SweepError("the sweep has no points")
        # the profile model judges every value before anything is relaunched
        self.specs: dict[str, ServiceSpec] = {}
        for p in points:
            if p.launch_key not in self.specs:
                self.specs[p.launch_key] = apply_overrides(self.base_spec, p.overrides)
        if settings.baseline_ref is not None:
            fleet.spec_of(settings.baseline_ref)  # raises for an unknown ref
            if settings.baseline_ref == settings.ref:
                raise SweepError("--baseline names the swept service itself; leave it out for that")
        sid = sweep_id(
            settings.ref,
            settings.dims,
            settings.loads,
            settings.strategy,
            {
                "prompts": settings.prompts,
                "repeats": settings.repeats,
                "max_new_tokens": settings.max_new_tokens,
                "baseline": settings.baseline_ref,
            },
        )
        now = time.time()
        if (self.out / "sweep.json").exists():
            if not resume:
                raise SweepError(
                    f"{self.out} already holds a sweep; pass --resume to continue it, or another --out"
                )
            self.state = st.load(self.out)
            if self.state.id != sid:
                raise SweepError(
                    f"{self.out}/sweep.json is a different sweep (its dimensions, loads or prompts differ); "
                    "use another --out"
                )
            for rec in self.state.points:
                again = rec.index in set(redo) or (redo_failed and rec.status == "failed")
                if rec.status not in st.FINISHED or again:
                    rec.status = "pending"  # a point cut off mid-measure is measured again from scratch
                    rec.measurement = None
                    rec.baseline_measurement = None
            self.state.finished = False
            self.state.objective = settings.objective
            self.state.constraints = list(settings.constraints)
        else:
            self.state = st.SweepState(
                **settings.model_dump(include=_STATE_FROM_SETTINGS),  # copies: the state owns its lists
                id=sid,
                profile_source=self.profile.source,
                points=[
                    st.PointRecord(index=p.index, overrides=p.overrides, concurrency=p.concurrency)
                    for p in points
                ],
                started_at=now,
                updated_at=now,
                caveats=[warmup_caveat(self.s.warmup) if c.startswith(WARMUP_CAVEAT) else c for c in CAVEATS],
            )
        self.points = points
        self._t0 = time.monotonic()
        self._wall_before = self.state.wall_s

    # --- bookkeeping -----------------------------------------------------------------------------------
    def _emit(self, index: int, status: str, label: str, text: str = "") -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):
                self.on_event(SweepEvent(index=index, status=status, label=label, text=text))

    def _save(self) -> None:
        self.state.updated_at = time.time()
        self.state.wall_s = self._wall_before + (time.monotonic() - self._t0)
        st.save(self.state, self.out)

    def _set(self, rec: st.PointRecord, status: st.PointStatus, text: str = "") -> None:
        rec.status = status
        self._save()
        self._emit(rec.index, status, rec.label(), text)

    def estimate(self) -> tuple[int, float, str]:
        """(points left, seconds, how it was estimated): points x (startup + measure)."""
        left = [r for r in self.state.points if r.status not in st.FINISHED]
        configs = {self.points[r.index].launch_key for r in left}
        done = [r for r in self.state.points if r.startup_s is not None]
        if done:
            startup = statistics.fmean(r.startup_s for r in done if r.startup_s is not None)
            how = "from the points measured so far"
        elif self.base_spec.launcher == "sim":
            startup = self.base_spec.sim.load_time + 3.0
            how = "the simulator's load time + 3 s"
        else:
            startup = min(self.base_spec.startup_timeout, 300.0)
            how = f"a guess of {startup:.0f} s a restart (startup_timeout {self.base_spec.startup_timeout:.0f} s)"
        measured = [r.measure_s for r in self.state.points if r.measure_s is not None]
        try:
            n_prompts = len(load_prompts(self.s.prompts))
        except Exception:
            n_prompts = 5
        n_req = n_prompts * self.s.repeats + self.s.warmup
        if self.base_spec.launcher == "sim":
            rate = self.base_spec.sim.decode_rate * (self.base_spec.sim.accept_length or 3.4)
        else:
            rate = 50.0  # a guess until the first point is measured
        measure = statistics.fmean(measured) if measured else n_req * self.s.max_new_tokens / rate
        n_base = (len(configs) // self.s.baseline_every + 2) if self.s.baseline_ref is None else 0
        total = (
            len(configs) * startup + len(left) * measure + n_base * (startup + measure * len(self.s.loads))
        )
        return len(left), total, how

    def _gpus(self, spec: ServiceSpec) -> list[st.GpuInfo]:
        snap = self.fleet.snapshot()
        host = self.s.ref.split("/", 1)[0]
        view = next((h for h in snap.hosts if h.name == host), None)
        if view is None:
            return []
        src = view.telemetry.source if view.telemetry is not None else None
        return [
            st.GpuInfo(
                index=g.index, name=g.name, mem_used_mb=g.mem_used_mb, mem_total_mb=g.mem_total_mb, source=src
            )
            for g in view.gpus
            if not spec.gpus or g.index in spec.gpus
        ]

    # --- the steps -------------------------------------------------------------------------------------
    async def _start(self, spec: ServiceSpec) -> tuple[bool, str | None, list[str], float]:
        """Restart with `spec` and wait for ready: (ok, error, log tail, seconds)."""
        t0 = time.monotonic()
        res = await self.fleet.deploy(self.s.ref, spec, holder=self.owner)
        if not res.ok:
            tail = list(getattr(res.status, "last_log", []) or [])
            return False, res.message, tail, time.monotonic() - t0
        status = await self.fleet.wait_service(self.s.ref, READY_STATES, spec.startup_timeout)
        dt = time.monotonic() - t0
        if status.state != "ready":
            tail = list(status.last_log or [])
            if not tail:
                with contextlib.suppress(Exception):
                    tail = await self.fleet.logs(self.s.ref, 20)
            why = status.detail or ""
            if status.state == "starting":
                return (
                    False,
                    f"not ready after {spec.startup_timeout:.0f} s (startup_timeout)",
                    tail[-20:],
                    dt,
                )
            return False, f"service {status.state} at start{': ' + why if why else ''}", tail[-20:], dt
        smoke = await self.fleet.smoke(self.s.ref, max_new_tokens=8, timeout=self.s.smoke_timeout)
        if not smoke.ok:
            return False, f"smoke failed: {smoke.error}", [], dt
        return True, None, [], dt

    async def _measure(
        self,
        concurrency: int,
        on_event: Callable[[object], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> tuple[BenchRun, list[BenchTarget]]:
        refs = [self.s.ref] + ([self.s.baseline_ref] if self.s.baseline_ref else [])
        targets = await self.fleet.bench_targets(refs)
        req = BenchRequest(
            prompts=self.s.prompts,
            repeats=self.s.repeats,
            warmup=self.s.warmup,
            concurrency=concurrency,
            max_new_tokens=self.s.max_new_tokens,
            ignore_eos=True,
            timeout=self.s.request_timeout,
            baseline=self.s.baseline_ref or self.s.ref,
        )
        return await run_bench(req, targets, on_event, stop=stop or self.stop), targets

    def _measurement(self, run: BenchRun, ref: str, concurrency: int, spec: ServiceSpec) -> st.Measurement:
        gpus = self._gpus(spec)
        mem = sum(g.mem_used_mb for g in gpus if g.mem_used_mb is not None) if gpus else None
        return st.Measurement(
            concurrency=concurrency,
            samples=samples_of(run.results, ref),
            metrics=metrics_of(run, ref, self.constraints, mem),
            bench_run_id=run.id,
        )

    # --- fair arms: the one hook called before every measurement (sweep/fairness.py) -------------------
    async def _before_measure(self, spec: ServiceSpec, index: int, label: str) -> st.FairnessRecord:
        """Flush the caches and wait for the GPUs before one measurement; the record says what was done."""
        rec = await before_measurement(
            self.fleet, self.s.ref, spec.gpus, self.s.fairness, self.stop,
            also_flush=[self.s.baseline_ref] if self.s.baseline_ref else [],
        )  # fmt: skip
        for flag in rec.flags:
            self._emit(index, "flagged", label, flag)
        return rec

    async def _baseline(self, after: int) -> None:
        """Same-service baseline: the profile as written, every load level."""
        if self.s.baseline_ref is not None:
            return
        self._emit(-1, "starting", "baseline (profile)")
        ok, err, _tail, _dt = await self._start(self.base_spec)
        for n in self.s.loads:
            seq = len(self.state.baselines)
            if not ok:
                self.state.baselines.append(
                    st.BaselineRecord(
                        seq=seq,
                        at=time.time(),
                        after_point=after,
                        measurement=st.Measurement(concurrency=n),
                        ok=False,
                        error=err,
                    )
                )
                continue
            fair = await self._before_measure(self.base_spec, -1, f"baseline (profile) c={n}")
            self._emit(-1, "measuring", f"baseline (profile) c={n}")
            run, _ = await self._measure(n)
            self.state.baselines.append(
                st.BaselineRecord(
                    seq=seq, at=time.time(), after_point=after,
                    measurement=self._measurement(run, self.s.ref, n, self.base_spec), fairness=fair,
                )
            )  # fmt: skip
        self._save()
        self._emit(-1, "done" if ok else "failed", "baseline (profile)", err or "")

    async def _rejections(self) -> dict[str, str]:
        """launch_key -> why the host's parser refuses that config (asked once per config, nothing launched)."""
        out: dict[str, str] = {}
        for key, spec in self.specs.items():
            if all(
                r.status in st.FINISHED for r in self.state.points if self.points[r.index].launch_key == key
            ):
                continue
            check = await self.fleet.preflight(self.s.ref, spec)
            if check is not None and check.ok is False:
                out[key] = check.summary()
        return out

    async def run(self) -> st.SweepState:
        if uses_study(self.s):
            from ddtree_tui.sweep.workers import run_fleet_study  # the optimizer's loop (imports optuna)

            return await run_fleet_study(self)
        ref = self.s.ref
        self.fleet.hold(ref, self.owner)
        try:
            self._save()
            rejected = await self._rejections()
            for rec in self.state.points:
                key = self.points[rec.index].launch_key
                if key in rejected and rec.status == "pending":
                    rec.error = rejected[key]
                    rec.argv = build_launch(self.profile, self.specs[key]).display()
                    self._set(rec, "rejected", rejected[key])
            pending = [r for r in self.state.points if r.status == "pending"]
            if not pending:
                self.state.finished = True
                return self.state
            if self.s.baseline_ref is None and not self.state.baselines:
                await self._baseline(-1)
            groups: list[list[st.PointRecord]] = []
            for rec in pending:
                key = self.points[rec.index].launch_key
                if groups and self.points[groups[-1][0].index].launch_key == key:
                    groups[-1].append(rec)
                else:
                    groups.append([rec])
            since_baseline = 0
            for group in groups:
                if self.stop.is_set():
                    break
                if self.s.max_time is not None:
                    _n, est, _how = self._estimate_group(len(group))
                    if time.monotonic() - self._t0 + est > self.s.max_time:
                        for rec in group:
                            rec.error = f"--max-time {self.s.max_time:g} s would be exceeded"
                            self._set(rec, "skipped", rec.error)
                        continue
                await self._run_group(group)
                since_baseline += 1
                if self.s.baseline_ref is None and since_baseline >= self.s.baseline_every:
                    await self._baseline(max(r.index for r in group))
                    since_baseline = 0
            if self.s.baseline_ref is None and since_baseline > 0 and not self.stop.is_set():
                await self._baseline(max(r.index for r in self.state.points))  # also puts the profile back
            self._link_baselines()
            self.state.finished = not self.stop.is_set()
            return self.state
        finally:
            await asyncio.shield(self._restore())
            self.fleet.release(ref, self.owner)

    def _estimate_group(self, n: int) -> tuple[int, float, str]:
        done = [r for r in self.state.points if r.startup_s is not None and r.measure_s is not None]
        if not done:
            _left, total, how = self.estimate()
            per = total / max(1, len([r for r in self.state.points if r.status not in st.FINISHED]))
            return n, per * n, how
        startup = statistics.fmean(r.startup_s or 0.0 for r in done)
        measure = statistics.fmean(r.measure_s or 0.0 for r in done)
        return n, startup + n * measure, "measured"

    async def _run_group(self, group: list[st.PointRecord]) -> None:
        key = self.points[group[0].index].launch_key
        spec = self.specs[key]
        cmd = build_launch(self.profile, spec)
        for rec in group:
            rec.argv = cmd.display()
            rec.attempts += 1
            rec.error = None
            rec.log_tail = []
        self._set(group[0], "starting")
        for rec in group[1:]:
            rec.status = "starting"
        try:
            ok, err, tail, dt = await self._start(spec)
        except Exception as e:  # a lost host, a transport error: recorded, the sweep goes on
            ok, err, tail, dt = False, f"{type(e).__name__}: {e}", [], 0.0
        for rec in group:
            rec.startup_s = dt
        if not ok:
            for rec in group:
                rec.error, rec.log_tail, rec.finished_at = err, tail, time.time()
                self._set(rec, "failed", err or "")
            return
        for rec in group:
            if self.stop.is_set():
                rec.status = "pending"
                self._save()
                return
            rec.fairness = await self._before_measure(spec, rec.index, rec.label())
            self._set(rec, "measuring")
            t0 = time.monotonic()
            try:
                run, _targets = await self._measure(rec.concurrency)
            except Exception as e:
                rec.error, rec.finished_at = f"measurement failed: {type(e).__name__}: {e}", time.time()
                self._set(rec, "failed", rec.error)
                continue
            if run.status != "complete":
                rec.status = "pending"  # interrupted: measured again on --resume
                self._save()
                return
            rec.measure_s = time.monotonic() - t0
            rec.measurement = self._measurement(run, self.s.ref, rec.concurrency, spec)
            if self.s.baseline_ref:
                rec.baseline_measurement = self._measurement(run, self.s.baseline_ref, rec.concurrency, spec)
            info = next((t for t in run.targets if t.ref == self.s.ref), None)
            if info is not None:
                rec.server_info = info.server_args
                rec.versions = {
                    "ddtree_tui": __version__,
                    "server": info.server_version,
                    "simulated": info.simulated,
                    "model_path": info.model_path,
                }
            rec.gpus = self._gpus(spec)
            rec.finished_at = time.time()
            m = rec.measurement.metrics
            if m is not None and m.n and m.failed == m.n:
                rec.error = "every request failed"
                self._set(rec, "failed", rec.error)
                continue
            self._set(rec, "done", f"{m.tok_s:.1f} tok/s" if m and m.tok_s else "")

    def _link_baselines(self) -> None:
        """Each point is compared with the baseline measurements taken just before and just after it."""
        if self.s.baseline_ref is not None:
            return
        for rec in self.state.points:
            if rec.status != "done":
                continue
            same = [b for b in self.state.baselines if b.ok and b.measurement.concurrency == rec.concurrency]
            before = [b for b in same if b.after_point < rec.index]
            after = [b for b in same if b.after_point >= rec.index]
            chosen = ([before[-1]] if before else []) + ([after[0]] if after else [])
            rec.baseline_seqs = [b.seq for b in chosen]
        self._save()

    async def _restore(self) -> None:
        """Put the service back as the profile has it (unless the final baseline already did)."""
        try:
            spec_now = self._current_spec()
            if spec_now == self.base_spec and self.state.baselines and self._last_was_baseline:
                self.state.restored = True
            else:
                ok, err, _tail, _dt = await self._start(self.base_spec)
                self.state.restored = ok
                if not ok:
                    self.state.caveats.append(f"could not put the service back as the profile has it: {err}")
            self._save()
        except Exception as e:  # pragma: no cover - reported
            self.state.restored = False
            with contextlib.suppress(Exception):
                self.state.caveats.append(f"could not put the service back: {e}")
                self._save()

    @property
    def _last_was_baseline(self) -> bool:
        if not self.state.baselines:
            return False
        last_b = max(b.at for b in self.state.baselines)
        last_p = max((r.finished_at or 0.0) for r in self.state.points)
        return last_b >= last_p

    def _current_spec(self) -> ServiceSpec | None:
        with contextlib.suppress(Exception):
            spec: ServiceSpec = self.fleet.current_spec(self.s.ref)
            return spec
        return None


def redacted_env(spec: ServiceSpec) -> dict[str, str]:
    return redact_env(spec.env)
