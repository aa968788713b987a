"""The benchmark's data: what is asked (BenchRequest, BenchTarget), what is measured (RequestResult), what
is reported (PromptRow, ServiceSummary, BenchRun) and what is streamed live (BenchEvent).

Pydantic models because they cross module boundaries (runner → TUI, report, history) and are persisted as
versioned JSON. The schema is documented in report.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, TypedDict

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ddtree_tui.bench.acceptance import AcceptanceSummary
from ddtree_tui.bench.defaults import DEFAULT_MAX_NEW_TOKENS as DEFAULT_MAX_NEW_TOKENS  # re-exported
from ddtree_tui.bench.defaults import DEFAULT_WARMUP_TOKENS as DEFAULT_WARMUP_TOKENS  # re-exported
from ddtree_tui.bench.energy import RunEnergy
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.windows import CacheFlush, ServerMetrics, SliceSet
from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.model.identity import TargetIdentity

BENCH_SCHEMA = 1

Api = Literal["generate", "chat", "completions"]
DEFAULT_TIMEOUT = 300.0


class BenchUsageError(ValueError):
    """The request cannot run as asked (unknown baseline, no targets, duplicate services)."""


class BenchTarget(BaseModel):
    """One service to measure: `ref` is HOST/SVC; `mode` is linear / shadow-linear / tree (None: baseline)."""

    model_config = ConfigDict(frozen=True)

    ref: str
    base_url: str
    algorithm: str
    mode: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)  # e.g. Authorization; never persisted
    # for the report's manifest (optional): the command the service runs with, its GPUs, where GPU numbers
    # come from (nvml, replay, ...)
    argv: list[str] | None = None
    gpus: list[int] | None = None
    telemetry: str | None = None
    model: str | None = None  # the OpenAI "model" field: --model, else what /v1/models lists
    identity: TargetIdentity | None = None  # who answered on its port when checked; the run records it

    @property
    def label(self) -> str:
        return f"{self.ref} ({self.algorithm}/{self.mode or '-'})"


class SamplingParams(BaseModel):
    """Recorded with every result: acceptance depends on them (thinking mode above all)."""

    model_config = ConfigDict(frozen=True)

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    ignore_eos: bool = False
    api: Api = "generate"
    model: str | None = None  # --model, when given
    # --- issue 26, per-request acceptance (W-GPU): the OpenAI APIs ask for SGLang's sglext spec details
    spec_details: bool = False


class BenchRequest(BaseModel):
    """A plain run as a face asks for it (the TUI's bench dialog, `--run-bench`, the collector's bench
    intent): built once there and handed on as it is, through the fleet to the engine, so every default is
    written here once. `refs` names the services (HOST/SVC) and `urls` running servers measured by URL
    (`--url`); `prompts` is a set name (seed3, agentic, longctx), a FILE.jsonl path or the prompts."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    refs: list[str] = Field(default_factory=list, description="HOST/SVC of each service to measure")
    urls: list[str] = Field(default_factory=list, description="running servers by base URL (--url)")
    prompts: str | list[Prompt] = Field(
        default="seed3", validation_alias=AliasChoices("prompts", "prompt_set")
    )
    repeats: int = Field(default=1, ge=1, le=10000)
    warmup: int = Field(default=1, ge=0, le=1000)
    warmup_tokens: int = Field(
        default=DEFAULT_WARMUP_TOKENS,
        ge=0,
        le=1_000_000,
        description="new tokens a warm-up request asks for at most (0: as many as a measured one)",
    )
    concurrency: int = Field(default=1, ge=1, le=4096)
    max_new_tokens: int = Field(default=DEFAULT_MAX_NEW_TOKENS, ge=1, le=1_000_000)
    temperature: float = Field(default=0.0, ge=0)
    ignore_eos: bool = False
    api: Api = "generate"
    model: str | None = None
    timeout: float | None = Field(default=DEFAULT_TIMEOUT, gt=0, description="per-request limit, seconds")
    baseline: str | None = None
    tokens_event_interval: float = Field(default=0.1, ge=0, description="min seconds between token events")
    workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="client processes; >1 spreads the requests over child processes; 0 = auto: one per "
        "few thousand chunks/s planned (bench/worker.py plan_workers)",
    )
    force: bool = Field(
        default=False,
        description="measure a service whose port is held by something other than the process we launched "
        "(recorded as forced, never counted as verified)",
    )
    # --- issue 26, GPU telemetry / energy and per-request acceptance (W-GPU) ---
    energy: bool = Field(
        default=False,
        description="sample the services' GPUs through the run from the fleet's telemetry: per-window GPU "
        "numbers, energy, J/token and per-request energy (bench/energy.py)",
    )
    spec_details: bool = Field(
        default=False,
        description="OpenAI APIs: ask for SGLang's per-request spec details (return_spec_tokens_details)",
    )
    # --- workloads (issue 26): the seed of generated prompts (gsp:, trace: text, sharegpt: order), arrivals
    # and cancellation picks; None: 0 (a run is reproducible either way, the seed is recorded)
    seed: int | None = Field(default=None, description="seed of generated prompts, arrivals, cancellations")
    # --- issue 26 (w-server): time slices, server metrics scraped during the run, cache reset ----------------
    slice_s: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="every metric also per window of this many seconds (--slice)",
    )
    server_metrics: bool = Field(default=False, description="scrape each server's /metrics during the run")
    server_metrics_every_s: float = Field(default=2.0, gt=0, le=3600, description="seconds between scrapes")
    flush_cache: bool = Field(
        default=False,
        description="POST /flush_cache (vLLM: /reset_prefix_cache) before the run and each level",
    )

    @property
    def prompt_set(self) -> str:
        """The prompts' name as runs record it ("custom" for prompts given inline)."""
        return self.prompts if isinstance(self.prompts, str) else "custom"

    @property
    def services(self) -> list[str]:
        """What the run measures, by name: the refs, else the URLs."""
        return list(self.refs or self.urls)

    def sampling(self, max_new_tokens: int | None = None) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=max_new_tokens or self.max_new_tokens,
            temperature=self.temperature,
            ignore_eos=self.ignore_eos,
            api=self.api,
            model=self.model,
            spec_details=self.spec_details and self.api != "generate",
        )


class ShapeRequest(BenchRequest):
    """A load ladder (`load`), a soak (`soak`, for `duration_s` in windows of `window_s`) or agentic
    sessions (`sessions`): a BenchRequest with its shape. The texts (`load`, `slo`) are parsed by
    bench/load.py where the face builds it, so a bad one never reaches a run."""

    load: str = "sync"
    requests: int | None = Field(default=None, ge=1, description="counted requests per service per level")
    duration_s: float | None = Field(default=None, gt=0, description="per level; a soak's whole length")
    slo: str | None = None
    stop_on_saturation: bool = True
    soak: bool = False
    window_s: float = Field(default=10.0, gt=0)
    soak_log: str | None = Field(default=None, description="a soak's windows as JSON lines, as they come")
    sessions: int | None = Field(default=None, ge=1, description="agentic: conversations at once")
    turns: int = Field(default=6, ge=1)
    think_time_s: float = Field(default=0.0, ge=0)
    # --- workloads (issue 26): bench/workloads/. `trace` the mooncake JSONL replayed (load "trace:SPEED"),
    # `max_concurrency` caps an open loop's requests in flight, `cancel` is "FRACTION,DELAY"
    trace: str | None = Field(default=None, description="mooncake-format JSONL trace replayed (--trace)")
    max_concurrency: int | None = Field(
        default=None, ge=1, le=4096, description="open loop: in flight at most"
    )
    cancel: str | None = Field(default=None, description="FRACTION,DELAY: requests aborted by the client")
    # --- issue 26 (w-server): the statistical over-saturation test (bench/saturation.py) -----------------------
    saturation_test: Literal["fixed", "trend", "either"] = Field(
        default="fixed",
        description="what stops a ladder: the fixed rule of levels.py, the Mann-Kendall trend test, or either",
    )
    saturation_alpha: float = Field(default=0.05, gt=0, lt=1)
    saturation_window: int = Field(default=40, ge=10, le=500, description="requests in the test's window")

    @property
    def what(self) -> str:
        """How the run is named in the pane's status line."""
        if self.sessions:
            return f"{self.sessions} agentic sessions"
        if self.soak:
            return f"a {self.duration_s or 0:g} s soak ({self.load})"
        return self.load


class RequestKey(TypedDict):
    """Which request a result is: the fields every RequestResult starts with, measured or failed."""

    service: str
    algorithm: str
    mode: str | None
    prompt_id: str
    repeat: int
    seq: int
    warmup: bool


def request_key(target: BenchTarget, prompt: Prompt, *, seq: int, repeat: int, warmup: bool) -> RequestKey:
    return RequestKey(
        service=target.ref, algorithm=target.algorithm, mode=target.mode, prompt_id=prompt.id, repeat=repeat,
        seq=seq, warmup=warmup,
    )  # fmt: skip


class RequestResult(BaseModel):
    """One request, measured. Times in seconds, ITL in milliseconds; None where not measurable."""

    service: str
    algorithm: str
    mode: str | None
    prompt_id: str
    repeat: int
    seq: int  # dispatch order within the run (warm-ups are negative)
    warmup: bool = False
    started_at: float  # unix time the request was sent
    ok: bool = True
    error: str | None = None
    status_code: int | None = None  # HTTP status of a refused request, or the status of a server abort
    aborted: bool = False  # the server ended it with finish_reason type "abort" (e.g. decode retraction)
    ttft_s: float | None = None
    first_answer_s: float | None = None  # send → first answer token (after any reasoning); = TTFT without it
    e2e_s: float | None = None
    server_e2e_s: float | None = None  # the server's own meta_info.e2e_latency, when it reports one
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    tok_s: float | None = None  # output tokens / end-to-end time
    decode_tok_s: float | None = None  # tokens after the first chunk / time after the first chunk
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    tokens_per_chunk: float | None = None
    chunks: int = 0
    # socket reads that brought token-bearing chunks (ITL's unit of time: bench/metrics.py), and of those the
    # reads that held several chunks (such a read's gap is spread over its tokens)
    reads: int = 0
    coalesced_reads: int = 0
    accept_length: float | None = None  # from this request's meta_info
    accept_rate: float | None = None
    spec_verify_ct: int | None = None
    finish_reason: str | None = None
    text_mode: Literal["cumulative", "incremental"] | None = None
    tokens_source: Literal["meta_info", "usage", "usage-estimated", "chunks"] | None = None
    output_chars: int = 0
    reasoning_chars: int = 0
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    # distributions for the HTML report (optional, added without a schema bump: readers ignore them)
    itl_quantiles_ms: list[float] | None = None  # per-token ITL at 0, 5, …, 100 % (21 values)
    chunk_tokens_hist: dict[int, int] | None = None  # tokens in a chunk -> how many chunks had that many
    level: float | None = None  # the load level it was sent at (--load runs: concurrency or req/s)
    round: int | None = None  # --load runs: which interleaving round of the level
    # --- issue 26, GPU energy (W-GPU): joules of its GPUs attributed to it (bench/energy.py), with --energy
    energy_j: float | None = None


class PromptRow(BaseModel):
    """One prompt × service: the repeats of it aggregated (median, min, max)."""

    prompt_id: str
    service: str
    algorithm: str
    mode: str | None
    n: int = 0
    failed: int = 0
    tok_s_median: float | None = None
    tok_s_min: float | None = None
    tok_s_max: float | None = None
    decode_tok_s_median: float | None = None
    ttft_ms_median: float | None = None
    ttft_ms_min: float | None = None
    ttft_ms_max: float | None = None
    e2e_s_median: float | None = None
    output_tokens_median: float | None = None
    accept_length_median: float | None = None
    itl_ms_median: float | None = None
    tokens_per_chunk_median: float | None = None
    delta_tok_s_pct: float | None = None  # vs the baseline service on the same prompt
    delta_ttft_pct: float | None = None
    # --- issue 26, GPU energy (W-GPU): Σ attributed joules / Σ output tokens of its requests (--energy)
    j_per_token: float | None = None


class ServiceCounts(BaseModel):
    """A service's counted requests: which service, how many succeeded, failed, were aborted. The head of a
    plain run's summary row and of a load level's row, counted alike (`of`)."""

    service: str
    algorithm: str
    mode: str | None
    n: int = 0
    failed: int = 0
    aborted: int = 0  # of the failed: ended by the server with an abort finish_reason

    @classmethod
    def of(cls, t: BenchTarget, rs: Sequence[RequestResult]) -> ServiceCounts:
        ok = sum(1 for r in rs if r.ok)
        return ServiceCounts(
            service=t.ref, algorithm=t.algorithm, mode=t.mode, n=ok, failed=len(rs) - ok,
            aborted=sum(1 for r in rs if r.aborted),
        )  # fmt: skip


class ServiceSummary(ServiceCounts):
    tok_s_median: float | None = None  # median over all successful requests
    tok_s_mean_of_prompts: float | None = None  # mean of the per-prompt medians
    decode_tok_s_median: float | None = None
    ttft_ms_median: float | None = None
    accept_length_mean: float | None = None  # Σ tokens / Σ verify passes over the requests that report them
    output_tokens: int = 0
    output_throughput: float | None = None  # Σ output tokens / wall time this service was being measured
    request_throughput: float | None = None  # successful requests / that wall time
    # Σ over the successful requests: token-bearing socket reads, and those with several chunks
    reads: int = 0
    coalesced_reads: int = 0
    delta_tok_s_pct: float | None = None  # (tok_s_mean − baseline's) / baseline's, %
    # the statistic both the tok/s column and Δ use: mean over prompts of the per-prompt mean tok/s
    tok_s_mean: float | None = None
    delta_tok_s_lo_pct: float | None = None  # Δ's 95 % interval (stats.delta_of_means)
    delta_tok_s_hi_pct: float | None = None
    delta_n: int | None = None
    delta_method: str | None = None  # bootstrap (≥ 2 requests a prompt) or t-paired (one a prompt)
    delta_verdict: str | None = None  # "no measurable difference (Δ …)" / "B slower by 3.1 % ± 1.0 % (…)"
    # TTFT against the baseline, the same function (metrics.baseline_delta): stored so no face recomputes it
    delta_ttft_mean_pct: float | None = None
    delta_ttft_lo_pct: float | None = None
    delta_ttft_hi_pct: float | None = None
    delta_ttft_n: int | None = None
    delta_ttft_method: str | None = None
    delta_ttft_verdict: str | None = None


class ClientStats(BaseModel):
    """How hard the benchmark client itself worked while measuring, so a run limited by the client is never
    reported as the server's rate. With several worker processes the numbers are the busiest process's
    (a process's loop is what falls behind), cpu_s is their sum."""

    workers: int = 1
    workers_reason: str | None = None  # why that many: "--workers N", or auto's sum (bench/worker.py)
    wall_s: float = 0.0  # the measured phase (warm-up excluded)
    cpu_s: float = 0.0  # client CPU time in that phase, all processes
    cpu_core_max: float = 0.0  # the busiest process: its CPU time / wall time (1.0 = a whole core)
    loop_lag_ms_p50: float | None = None  # how late a 25 ms timer fired on the busiest loop
    loop_lag_ms_p99: float | None = None
    loop_lag_ms_max: float | None = None
    cpu_us_per_token: float | None = None  # cpu_s / output tokens
    cpu_pressure_pct: float | None = None  # the machine's: % of the last 10 s some task waited for a core
    client_bound: bool = False
    reason: str | None = None  # why client_bound
    reads: str | None = None  # how streams were read and their times stamped (bench/stream.py read_mode)


class TargetInfo(BaseModel):
    """A measured service, with what its /server_info said (so a simulated server is never mistaken)."""

    ref: str
    base_url: str
    algorithm: str
    mode: str | None
    speculative_algorithm: str | None = None
    model_path: str | None = None
    server_version: str | None = None
    simulated: bool | None = None
    argv: list[str] | None = None  # the launch command as the host profile builds it
    gpus: list[int] | None = None  # CUDA_VISIBLE_DEVICES of the profile
    telemetry: str | None = None  # the host's GPU telemetry source: nvml, nvidia-smi, replay (a recording)
    server_args: dict[str, Any] | None = None  # the speculative / serving settings /server_info reported
    identity: TargetIdentity | None = None  # who answered on its port when the run checked (issue 29)


class PromptInfo(BaseModel):
    id: str
    title: str
    approx_tokens: int
    turns: int = 1
    max_new_tokens: int | None = None


class BenchRun(BaseModel):
    """One benchmark run; persisted as JSON (`schema` versioned) and one line of the history file."""

    model_config = ConfigDict(populate_by_name=True)

    schema_version: int = Field(default=BENCH_SCHEMA, alias="schema")
    id: str
    status: Literal["complete", "interrupted"] = "complete"
    started_at: datetime
    finished_at: datetime | None = None
    wall_s: float | None = None
    prompt_set: str
    prompts: list[PromptInfo] = Field(default_factory=list)
    sampling: SamplingParams
    repeats: int
    warmup: int
    warmup_tokens: int | None = (
        None  # what each warm-up request asked for at most (0: whole); None: older runs
    )
    concurrency: int
    timeout: float | None = None
    targets: list[TargetInfo] = Field(default_factory=list)
    baseline: str | None = None
    order: list[str] = Field(default_factory=list)  # "HOST/SVC prompt #repeat" in dispatch order
    results: list[RequestResult] = Field(default_factory=list)
    rows: list[PromptRow] = Field(default_factory=list)
    summary: list[ServiceSummary] = Field(default_factory=list)
    failed: int = 0
    aborted: int = 0  # of the failed: aborted by the server (finish_reason abort, e.g. KV retraction)
    warmup_failed: int = 0
    requests_per_batch: int | None = None  # in flight at once; above len(prompts) the prompts were cycled
    prompts_cycled: bool = False
    client: ClientStats | None = None
    client_bound: bool = False  # the client, not the server, limited what was measured: see client.reason
    # --- issue 26 (W-GPU): GPU telemetry and energy of the run (--energy), per-request acceptance per service
    energy: RunEnergy | None = None
    acceptance: list[AcceptanceSummary] = Field(default_factory=list)
    # --- workloads (issue 26): the seed generated prompts (gsp:, sharegpt: order, trace: text) were made with
    seed: int | None = None
    # --- issue 26 (w-server): bench/windows.py (slices, server metrics, cache flushes) -----------------------
    slices: SliceSet | None = None
    server_metrics: list[ServerMetrics] = Field(default_factory=list)
    cache_flushes: list[CacheFlush] = Field(default_factory=list)


class ShapeRunHead(BaseModel):
    """What a load-shape or soak run record starts with; a subclass names its `kind` and its schema, and
    each keeps its place in the record."""

    model_config = ConfigDict(populate_by_name=True)

    schema_version: int = Field(alias="schema")
    kind: str
    id: str
    status: Literal["complete", "interrupted"] = "complete"
    started_at: datetime


class RunStarted(BaseModel):
    kind: Literal["run_started"] = "run_started"
    run_id: str
    total: int  # counted requests planned
    targets: list[BenchTarget]
    prompts: list[str]
    concurrency: int = 1
    workers: int = 1
    prompts_cycled: bool = False


class _RequestEvent(BaseModel):
    """An event about one request: which run, service, prompt, repeat and dispatch slot (a subclass names
    its `kind`, which keeps its place first)."""

    kind: str
    run_id: str
    service: str
    prompt_id: str
    repeat: int
    seq: int
    warmup: bool = False


class PromptStarted(_RequestEvent):
    kind: Literal["prompt_started"] = "prompt_started"


class TokensReceived(_RequestEvent):
    kind: Literal["tokens_received"] = "tokens_received"
    tokens: int  # running count, from the server's numbers
    elapsed_s: float
    tok_s: float | None  # tokens so far / elapsed since the request was sent


class PromptCancelled(_RequestEvent):
    """A request the client closed on purpose (`--cancel`, issue 26): neither finished nor failed, and not
    counted; its row in a live list says so (the run records it in `workload.cancelled`)."""

    kind: Literal["prompt_cancelled"] = "prompt_cancelled"
    delay_s: float  # how long after its send it was closed


class PromptFinished(BaseModel):
    kind: Literal["prompt_finished"] = "prompt_finished"
    run_id: str
    result: RequestResult
    done: int  # counted requests finished so far
    total: int


class RunFinished(BaseModel):
    kind: Literal["run_finished"] = "run_finished"
    run: BenchRun


BenchEvent = Annotated[
    RunStarted | PromptStarted | TokensReceived | PromptFinished | RunFinished | PromptCancelled,
    Field(discriminator="kind"),
]


def dump(model: BaseModel) -> JsonObject:
    return model.model_dump(mode="json", by_alias=True)
