"""The sweep's persisted state (`DIR/sweep.json`, schema 1), written atomically after every point.

Documented in README ("Tuning lab"). A point's status: pending → starting → measuring → done, or failed
(did not start, crashed, smoke failed, measurement error; with the log tail), rejected (the host's SGLang
parser refused its command line: never launched) or skipped (`--max-time` ran out).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.atomicio import is_special, write_file
from ddtree_tui.sweep.spec import Dimension

SWEEP_SCHEMA = 1
PointStatus = Literal["pending", "starting", "measuring", "done", "failed", "rejected", "skipped", "pruned"]
# pruned: stopped early by the optimizer, its reason in the point's error
FINISHED = ("done", "failed", "rejected", "pruned")


class Sample(BaseModel):
    """One counted request of a point (or of a baseline measurement)."""

    prompt_id: str
    repeat: int
    ok: bool
    tok_s: float | None = None
    ttft_ms: float | None = None
    itl_p50_ms: float | None = None
    e2e_s: float | None = None
    output_tokens: int | None = None
    accept_length: float | None = None
    verify_ct: int | None = None
    tokens_per_chunk: float | None = None
    started_at: float | None = (
        None  # unix time it was sent: the concurrency a level reached is computed from it
    )


class Metrics(BaseModel):
    """A point's numbers. Times in ms; tok_s is the mean per-request output tok/s."""

    n: int = 0
    failed: int = 0
    tok_s: float | None = None
    output_throughput: float | None = None
    goodput: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p90: float | None = None
    accept_length: float | None = None
    verify_passes: int | None = None
    tokens_per_chunk: float | None = None
    step_ms: float | None = None  # time of one verify pass ≈ ITL × tokens per chunk
    gpu_mem_mb: int | None = None


class GpuInfo(BaseModel):
    index: int
    name: str | None = None
    mem_used_mb: int | None = None
    mem_total_mb: int | None = None
    source: str | None = None  # nvml, nvidia-smi, replay (a recording, not this service), none


class Measurement(BaseModel):
    """What one measured load level produced (a point's, or a baseline's)."""

    concurrency: int = 1
    samples: list[Sample] = Field(default_factory=list)
    metrics: Metrics | None = None
    bench_run_id: str | None = None


class GpuCheck(BaseModel):
    """One GPU as the fleet's telemetry saw it just before a point or a baseline measurement started."""

    index: int
    temp_c: int | None = None
    sm_clock_mhz: int | None = None
    throttle_reasons: list[str] = Field(default_factory=list)
    source: str | None = None  # nvml, nvidia-smi, replay (a recording, not this service's GPU), none
    sampled_at: float | None = None  # unix time of the telemetry sample


class FairnessRecord(BaseModel):
    """What sweep/fairness.py did before one measurement so the arms start alike: the prefix cache flushed
    (`POST /flush_cache` to the measured server), the GPU read from telemetry and waited for while hot or
    throttled (up to a bound), and why the point is flagged when it could not be made fair."""

    at: float  # unix time the checks began
    flushed: bool | None = None  # None: not asked (--no-flush); False: asked and refused (flush_error)
    flush_error: str | None = None
    gpus: list[GpuCheck] = Field(default_factory=list)  # the last reading, after any wait
    waited_s: float = 0.0  # how long the GPU was waited for
    flags: list[str] = Field(default_factory=list)  # why this measurement may not be comparable, in words


class PointRecord(BaseModel):
    index: int
    overrides: dict[str, str] = Field(default_factory=dict)
    concurrency: int = 1
    status: PointStatus = "pending"
    error: str | None = None
    log_tail: list[str] = Field(default_factory=list)
    argv: str | None = None  # the effective launch line (secrets masked)
    server_info: dict[str, Any] | None = None
    versions: dict[str, Any] = Field(default_factory=dict)
    gpus: list[GpuInfo] = Field(default_factory=list)
    measurement: Measurement | None = None
    baseline_measurement: Measurement | None = None  # --baseline HOST/SVC: measured interleaved, same run
    fairness: FairnessRecord | None = None  # the before-point checks (sweep/fairness.py)
    baseline_seqs: list[int] = Field(
        default_factory=list
    )  # same-service baseline measurements it is compared to
    startup_s: float | None = None
    measure_s: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    trial: int | None = None  # the study's trial number (--strategy tpe/nsga2, or several workers)
    worker: str | None = None  # the service (HOST/SVC) that measured it, when the sweep had several

    def label(self) -> str:
        words = [f"{k}={v}" for k, v in self.overrides.items()] or ["(profile)"]
        return " ".join(words) + (f" c={self.concurrency}" if self.concurrency != 1 else "")


class BaselineRecord(BaseModel):
    seq: int
    at: float
    after_point: int  # measured after this many points had finished (-1: before the first)
    measurement: Measurement
    fairness: FairnessRecord | None = None
    ok: bool = True
    error: str | None = None
    worker: str | None = None  # the service it was measured on, when the sweep had several workers


class StudyState(BaseModel):
    """The study a sweep's points were chosen by (sweep/study.py); the storage URL without a password."""

    name: str
    storage: str
    strategy: str
    seed: int
    objectives: list[str]
    directions: list[str]
    trials: int | None = None  # the relaunch budget (None: until every point is judged)
    pruner: str | None = None
    workers: list[str] = Field(default_factory=list)
    relaunches: int = 0
    duplicates: int = 0  # suggestions answered from an earlier trial without a relaunch
    retries: int = 0  # trials enqueued again after their host was lost or the sweep stopped mid-point
    best: dict[str, str] | None = None  # single objective: the best measured point's settings
    pareto: list[dict[str, str]] = Field(default_factory=list)  # several objectives: the front's settings


class SweepState(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_version: int = Field(default=SWEEP_SCHEMA, alias="schema")
    id: str
    ref: str
    baseline_ref: str | None = None  # None: the profile as written, on the same service
    dims: list[Dimension]
    loads: list[int]
    strategy: str
    prompts: str
    repeats: int
    warmup: int
    max_new_tokens: int
    objective: str
    constraints: list[str] = Field(default_factory=list)
    profile_source: str | None = None
    points: list[PointRecord]
    baselines: list[BaselineRecord] = Field(default_factory=list)
    started_at: float
    updated_at: float
    wall_s: float = 0.0
    finished: bool = False
    restored: bool | None = None  # the service was put back at the end: as the profile has it, or stopped
    service_before: Literal["running", "stopped"] | None = None  # how it was before: what "put back" means
    stopped_by: str | None = None  # the signal that stopped the sweep (SIGTERM, SIGHUP, SIGINT), if one did
    caveats: list[str] = Field(default_factory=list)
    study: StudyState | None = None  # the Optuna study behind the point selection (None: the plain grid)


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so a reader (or a crash) sees the old file or the new one, never half
    (ddtree_tui.atomicio: the file keeps its permissions; a symlink another user owns is refused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_special(path) or (path.exists() and not path.is_file()):
        raise OSError(f"{path} is not a regular file; not replaced")
    write_file(path, text)


def save(state: SweepState, out: Path) -> None:
    atomic_write(out / "sweep.json", state.model_dump_json(indent=1, by_alias=True))


def load(out: Path) -> SweepState:
    p = out / "sweep.json"
    try:
        return SweepState.model_validate_json(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: no sweep here (run a sweep with --out {out} first)") from None
    except ValueError as e:
        raise ValueError(f"{p}: not a sweep state file: {str(e).splitlines()[0]}") from None
