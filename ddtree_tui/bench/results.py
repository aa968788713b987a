"""What a benchmark run produces, as types: every run kind's record (BenchRun, LoadRun, SoakRun, AgenticRun)
with the parts they are made of, the events the engines stream, and the "any run" unions, declared once.

Kept apart from the engines (runner.py, loadrun.py, soak.py, agentic.py) so that the UI, the report, the
todo evidence, the collector and the fleet can name a result without importing the code that measures it.
The models of a plain run and its events stay in models.py (with the request) and are re-exported here.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from ddtree_tui.bench.acceptance import AcceptanceSummary
from ddtree_tui.bench.energy import LevelEnergy, RunEnergy
from ddtree_tui.bench.levels import LevelDelta, LevelResult, LevelService, Pctl, knee_verdict
from ddtree_tui.bench.load import LoadSpec, Slo
from ddtree_tui.bench.models import (
    BENCH_SCHEMA,
    BenchEvent,
    BenchRun,
    ClientStats,
    PromptFinished,
    PromptRow,
    PromptStarted,
    RequestResult,
    RunFinished,
    RunStarted,
    ServiceSummary,
    ShapeRunHead,
    TargetInfo,
    TokensReceived,
)
from ddtree_tui.bench.windows import CacheFlush, SaturationTest, ServerMetrics, SliceSet
from ddtree_tui.bench.workloads.record import WorkloadRecord
from ddtree_tui.model.identity import TargetIdentity

LOAD_SCHEMA = 2
SOAK_SCHEMA = 2
AGENTIC_SCHEMA = 2


class LoadRun(ShapeRunHead):
    """A `--load` run: schema 2 (a plain run stays schema 1). See README "Load shapes"."""

    schema_version: int = Field(default=LOAD_SCHEMA, alias="schema")
    kind: Literal["load"] = "load"
    finished_at: datetime | None = None
    wall_s: float | None = None
    load: LoadSpec
    load_text: str
    duration_s: float | None = None  # per service per level
    requests: int | None = None  # per service per level
    rounds: int = 1
    warmup: int = 0
    warmup_tokens: int | None = (
        None  # what each warm-up request asked for at most (0: whole); None: older runs
    )
    slo: Slo | None = None
    prompt_set: str
    sampling: dict[str, Any] = Field(default_factory=dict)
    targets: list[TargetInfo] = Field(default_factory=list)
    baseline: str | None = None
    levels: list[LevelResult] = Field(default_factory=list)
    knee: dict[str, str | None] = Field(default_factory=dict)  # service → label of its knee level
    # service → the knee's sentence, from reached levels only (levels.knee_verdict)
    knee_verdict: dict[str, str] = Field(default_factory=dict)
    stopped: str | None = None  # why the ladder ended before its last level
    failed: int = 0
    results: list[RequestResult] = Field(default_factory=list)
    # --- issue 26 (W-GPU): --energy over the run and per level; per-request acceptance per service ---
    energy: RunEnergy | None = None
    level_energy: list[LevelEnergy] = Field(default_factory=list)
    acceptance: list[AcceptanceSummary] = Field(default_factory=list)
    # --- workloads (issue 26): the schedule planned vs done, the trace replayed, cancellations (counted apart)
    workload: WorkloadRecord | None = None
    # --- issue 26 (w-server): bench/windows.py (slices, server metrics, cache flushes) -----------------------
    slices: SliceSet | None = None
    server_metrics: list[ServerMetrics] = Field(default_factory=list)
    cache_flushes: list[CacheFlush] = Field(default_factory=list)
    saturation_tests: list[SaturationTest] = Field(default_factory=list)  # per level × service
    # issue 26: the client processes that read the streams, and why that many (bench/worker.py plan_workers)
    client_workers: int = 1
    client_workers_reason: str | None = None
    # the client's own CPU and loop lag over every level's measured part, as a plain run's `client`
    client: ClientStats | None = None

    def knee_lines(self) -> dict[str, str]:
        """service → the knee's sentence every face prints: the stored one, or (a run saved before it was
        stored) the same function over the stored levels."""
        refs = list(dict.fromkeys([*self.knee, *(s.service for lv in self.levels for s in lv.services)]))
        return {ref: self.knee_verdict.get(ref) or knee_verdict(self.levels, ref)[1] for ref in refs}

    def not_reached(self) -> list[str]:
        """'c=8 h/a: 4.0 in flight on average, at most 4, of 8 asked' for each level × service that did not
        reach its target."""
        return [
            f"{lv.label} {s.service}: {s.shortfall}"
            for lv in self.levels
            for s in lv.services
            if not s.reached
        ]


class _LevelEvent(BaseModel):
    """An event about level `index` of run `run_id` (a subclass names its `kind`, which keeps its place)."""

    kind: str
    run_id: str
    index: int


class LevelStarted(_LevelEvent):
    kind: Literal["level_started"] = "level_started"
    count: int
    level: float
    label: str


class LevelFinished(_LevelEvent):
    kind: Literal["level_finished"] = "level_finished"
    result: LevelResult


class LoadFinished(BaseModel):
    kind: Literal["load_finished"] = "load_finished"
    run: LoadRun


DriftKind = Literal["tok_s_decay", "ttft_growth", "gpu_memory_creep", "error_onset", "restart", "unhealthy"]


class GpuWindow(BaseModel):
    index: int
    memory_used_mib: float | None = None
    utilization_pct: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None


class ServiceProbe(BaseModel):
    """The service at a window's end."""

    healthy: bool | None = None
    health_status: int | None = None
    health_ms: float | None = None
    restarted: bool = False
    gpus: list[GpuWindow] = Field(default_factory=list)
    gpu_source: str | None = None  # nvml / nvidia-smi / replay / prometheus / sim
    note: str | None = None


class SoakWindow(BaseModel):
    kind: Literal["soak_window"] = "soak_window"
    run_id: str
    index: int
    start_s: float  # since the soak began
    end_s: float
    service: str
    metrics: LevelService
    probe: ServiceProbe

    def gpu_memory_mib(self) -> float | None:
        """GPU memory used over the service's GPUs at the window's end (None when no GPU reported it)."""
        v = [g.memory_used_mib for g in self.probe.gpus if g.memory_used_mib is not None]
        return sum(v) if v else None


class Drift(BaseModel):
    service: str
    kind: DriftKind
    window: int  # where it began
    at_s: float
    detail: str


class SoakRun(ShapeRunHead):
    schema_version: int = Field(default=SOAK_SCHEMA, alias="schema")
    kind: Literal["soak"] = "soak"
    wall_s: float | None = None
    load_text: str
    concurrency: int
    duration_s: float
    window_s: float
    slo: Slo | None = None
    prompt_set: str
    targets: list[TargetInfo] = Field(default_factory=list)
    windows: list[SoakWindow] = Field(default_factory=list)
    drift: list[Drift] = Field(default_factory=list)
    failed: int = 0
    log_path: str | None = None
    client: ClientStats | None = None  # the client's own CPU and loop lag while measuring (a plain run's)
    # --- issue 26 (w-server): bench/windows.py (server metrics, cache flushes; its slices are its windows) ----
    server_metrics: list[ServerMetrics] = Field(default_factory=list)
    cache_flushes: list[CacheFlush] = Field(default_factory=list)


class TurnResult(BaseModel):
    session: str
    service: str
    turn: int  # 1-based
    ok: bool
    error: str | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    accept_length: float | None = None
    prompt_chars: int = 0
    reply_chars: int = 0
    reply_in_prompt: bool | None = None  # the previous turn's reply is in this turn's prompt (turn > 1)
    started_at: float | None = None  # issue 26: unix time the turn was sent (its time slice)


class SessionResult(BaseModel):
    session: str
    service: str
    turns_done: int
    turns_planned: int
    completion_s: float | None = None  # first send → last reply, think time included
    failed: bool = False


class AgenticRun(BaseModel):
    schema_version: int = Field(default=AGENTIC_SCHEMA, alias="schema")
    kind: Literal["agentic"] = "agentic"
    id: str
    started_at: datetime
    wall_s: float | None = None
    source: str  # "agentic" or the dataset file
    sessions: int
    turns: int
    think_time_s: float
    turns_results: list[TurnResult] = Field(default_factory=list)
    identities: list[TargetIdentity] = Field(default_factory=list)  # per service, as checked (issue 29)
    session_results: list[SessionResult] = Field(default_factory=list)
    failed: int = 0
    # --- issue 26 (w-server): bench/windows.py (slices, server metrics, cache flushes) -----------------------
    slices: SliceSet | None = None
    server_metrics: list[ServerMetrics] = Field(default_factory=list)
    cache_flushes: list[CacheFlush] = Field(default_factory=list)
    client: ClientStats | None = None  # the client's own CPU and loop lag while measuring (a plain run's)
    model_config = {"populate_by_name": True}

    def cached_by_turn(self, service: str | None = None) -> list[float | None]:
        """Median cached_tokens at each turn number (over sessions)."""
        out: list[float | None] = []
        for k in range(1, self.turns + 1):
            v = [
                t.cached_tokens
                for t in self.turns_results
                if t.turn == k and t.cached_tokens is not None and (service is None or t.service == service)
            ]
            out.append(statistics.median(v) if v else None)
        return out


ShapeRun = LoadRun | SoakRun | AgenticRun
"""A load, soak or agentic run: schema 2 records, each with its `kind`."""

AnyRun = BenchRun | LoadRun | SoakRun | AgenticRun
"""Any run this version writes (a plain run is schema 1, the others schema 2)."""

ShapeEvent = Annotated[LevelStarted | LevelFinished | LoadFinished | SoakWindow, Field(discriminator="kind")]
"""What a load or soak run streams besides the plain run's BenchEvent (agentic runs stream TurnResult)."""

__all__ = [
    "AGENTIC_SCHEMA",
    "BENCH_SCHEMA",
    "LOAD_SCHEMA",
    "SOAK_SCHEMA",
    "AgenticRun",
    "AnyRun",
    "BenchEvent",
    "BenchRun",
    "Drift",
    "DriftKind",
    "GpuWindow",
    "LevelDelta",
    "LevelFinished",
    "LevelResult",
    "LevelService",
    "LevelStarted",
    "LoadFinished",
    "LoadRun",
    "Pctl",
    "PromptFinished",
    "PromptRow",
    "PromptStarted",
    "RequestResult",
    "RunFinished",
    "RunStarted",
    "ServiceProbe",
    "ServiceSummary",
    "SessionResult",
    "ShapeEvent",
    "ShapeRun",
    "SoakRun",
    "SoakWindow",
    "TokensReceived",
    "TurnResult",
]
