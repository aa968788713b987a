"""The parsed command line as types: one pydantic model per mode family, built once from argparse's
namespace (`Model.of(ns)`) by the `handler` decorator, so a handler reads `args.timeout` (typed, with its
default) instead of `getattr(ns, "timeout", None)`.

Field names are argparse's `dest`s; a value a mode's parser does not define takes the model's default
(argparse leaves suppressed options out of the namespace). `--json` lands in `as_json` (the name `json` is
BaseModel's). The sim mode's options already become one typed SimConfig (`cli/sim.config_from_namespace`);
`--run-bench`'s options are BenchArgs here, turned into its one request (bench/models.py) by cli/bench.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ddtree_tui.bench.defaults import DEFAULT_MAX_NEW_TOKENS
from ddtree_tui.cli.argbase import CliArgs as CliArgs  # re-exported: every mode's model derives from it
from ddtree_tui.cli.simargs import SimArgs as SimArgs  # re-exported (the simulator imports only that module)

if TYPE_CHECKING:
    from ddtree_tui.collector.recording import SessionOptions

Api = Literal["generate", "chat", "completions"]


class StatusArgs(CliArgs):
    as_json: bool = Field(False, alias="json")
    timeout: float = 8.0


class ServiceArgs(CliArgs):
    """launch / kill / restart / move / logs."""

    service: str
    timeout: float | None = None
    dry_run: bool = False
    force: bool = False
    to_host: str | None = None  # move
    follow: bool = False  # logs
    lines: int = 40  # logs


class SmokeArgs(CliArgs):
    service: str  # HOST/SVC or a base URL
    api: Api = "generate"
    model: str | None = None
    prompt: str = "Say hello in one short sentence."
    max_new_tokens: int = 32
    timeout: float = 30.0
    as_json: bool = Field(False, alias="json")
    force: bool = False


class PatchesArgs(CliArgs):
    action: Literal["status", "apply", "revert", "list"]
    host: str | None = None
    patch: str | None = None
    patches_dir: str | None = None


class DoctorArgs(CliArgs):
    host: str | None = None
    as_json: bool = Field(False, alias="json")


class TodoArgs(CliArgs):
    action: Literal["list", "add", "start", "done", "cancel", "check"] = "list"
    arg: str | None = None
    priority: Literal["high", "medium", "low"] = "medium"
    check_expr: str | None = None
    as_json: bool = Field(False, alias="json")
    history: str | None = None  # the bench history the evidence reads (a top-level option)
    timeout: float | None = None  # for the snapshot `check` takes (a top-level option)


class ReportArgs(CliArgs):
    runs: list[str]
    html_out: str | None = None


class SessionArgs(CliArgs):
    """A mode that can record its session or replay one (the TUI modes and serve)."""

    record: str | None = None
    record_max_mb: float | None = None
    replay: str | None = None
    speed: float | None = None

    def session(self) -> SessionOptions:
        from ddtree_tui.collector.recording import SessionOptions  # only the modes that record load it

        return SessionOptions(
            record=self.record, record_max_mb=self.record_max_mb, replay=self.replay, speed=self.speed
        )


class TuiArgs(SessionArgs):
    """The terminal UI and its variants: attached to a collector, replaying, recording."""

    theme: str | None = None
    attach: str | None = None
    token_file: str | None = None
    readonly: bool = False  # issue 28: no intents from the TUI


class GuardArgs(CliArgs):
    """serve's and web's Host/Origin allow-lists and connection limits (`cli._guard_args`)."""

    allow_host: list[str] = []
    allow_origin: list[str] = []
    max_connections: int | None = None
    header_timeout: float | None = None


class ServeArgs(SessionArgs, GuardArgs):
    listen: str | None = None
    token_file: str | None = None
    intents: bool = False


class WebArgs(GuardArgs):
    web_listen: str | None = None
    attach: str | None = None
    web_token_file: str | None = None
    token_file: str | None = None  # the collector's
    theme: str | None = None


class SweepArgs(CliArgs):
    """`sweep HOST/SVC ...`, `sweep show DIR`, `sweep apply DIR` (dests keep the parser's `sw_` prefix: the
    top-level --load, --prompts, ... of --run-bench share the namespace)."""

    target: str
    dir: str | None = None
    sw_set: list[str] = []
    sw_preset: str | None = None
    sw_load: str | None = None
    sw_prompts: str | None = None
    sw_repeats: int | None = None
    sw_warmup: int = 1
    sw_max_new: int | None = None
    sw_strategy: Literal["grid", "one-at-a-time", "tpe", "nsga2"] | None = None
    sw_trials: int | None = None
    sw_seed: int = 0
    sw_storage: str | None = None
    sw_worker: list[str] = []
    sw_no_prune: bool = False
    sw_out: str | None = None
    sw_resume: bool = False
    sw_redo: list[int] = []
    sw_redo_failed: bool = False
    sw_max_time: float | None = None
    sw_objective: Literal["tok_s", "goodput", "ttft"] | None = None
    sw_constraint: list[str] | None = None
    sw_baseline: str | None = None
    sw_baseline_every: int = 3
    sw_point: int | None = None
    sw_to: str | None = None
    sw_yes: bool = False
    sw_json: bool = False
    sw_html: str | None = None
    sw_no_telemetry: bool = False
    # the schedule per concurrency and the fair arms
    sw_levels: str | None = None
    sw_schedule: bool = False
    sw_dry_run: bool = False
    sw_no_flush: bool = False
    sw_gpu_max_temp: float = 83.0
    sw_settle: float = 30.0


class BenchArgs(CliArgs):
    """`--run-bench`: the options as parsed (sizes and durations still text: cli/bench.py parses them and
    words a bad one); cli/bench.build_request turns them into the run's BenchRequest or ShapeRequest."""

    services: str | None = None
    prompts: str = "seed3"
    repeats: int = 1
    warmup: int = 1
    warmup_tokens: int | None = None
    concurrency: int = 1
    load: str | None = None
    duration: str | None = None
    requests: int | None = None
    slo: str | None = None
    no_saturation_stop: bool = False
    sessions: int | None = None
    turns: int | None = None
    think_time: float | None = None
    soak: bool = False
    window: str | None = None
    soak_log: str | None = None
    workers: int | Literal["auto"] = "auto"  # issue 26: auto sizes the client's processes (bench/worker.py)
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    api: Api = "generate"
    url: str | None = None
    model: str | None = None
    ignore_eos: bool = False
    timeout: float | None = None
    max_line_bytes: str | None = None
    max_response_bytes: str | None = None
    read_tick_ms: float | None = None
    baseline: str | None = None
    force: bool = False  # measure a listener that is not the service we launched (recorded as forced)
    # --- issue 26 (W-GPU) ---
    energy: bool = False  # GPU telemetry per window and energy joined to the run (bench/energy.py)
    spec_details: bool = False  # OpenAI APIs: return_spec_tokens_details
    json_out: str | None = None
    csv_out: str | None = None
    html_out: str | None = None
    history: str | None = None
    # --- workloads (issue 26): bench/workloads/; cli/bench.py turns them into ShapeRequest fields
    trace: str | None = None
    trace_speed: float | None = None
    max_concurrency: int | None = None
    cancel: str | None = None
    bench_seed: int | None = None
    # --- issue 26 (w-server): time slices, server metrics, cache reset, over-saturation test
    slice: str | None = None
    server_metrics: bool = False
    server_metrics_every: str | None = None
    flush_cache: bool = False
    saturation_test: Literal["fixed", "trend", "either"] | None = None
    saturation_alpha: float | None = None
    saturation_window: int | None = None
    slices_csv: str | None = None
