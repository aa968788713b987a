"""`ddtree-tui sim`'s arguments model, apart from the other modes' (cli/args.py re-exports it): a simulator
process, started by the hundred in the tests and once per simulated service by the demo, makes this one
model only (issue 24)."""

from __future__ import annotations

from typing import Literal

from ddtree_tui.cli.argbase import CliArgs


class SimArgs(CliArgs):
    """`sim`: one simulated server; `cli/sim.config_from_args` turns these into its SimConfig."""

    algorithm: Literal["dflash", "ddtree", "baseline"] = "dflash"
    sim_mode: Literal["linear", "shadow-linear", "tree"] | None = None
    port: int
    host: str = "127.0.0.1"
    accept_length: float | None = None
    decode_rate: float = 40.0
    load_time: float = 2.0
    seed: int = 0
    model_path: str = "sim/Qwen3.6-35B-A3B"
    incremental_streaming_output: bool = False
    decode_log_interval: int = 40
    fault: list[str] = []
    block_size: int | None = None
    draft_window: int | None = None
    budget: int | None = None
    hybrid: bool = False
    allow_hybrid_unsafe: bool = False
    realistic: bool = False
    health_latency: float | None = None
    prefill_rate: float | None = None
    batch_slowdown: bool = False
    kv_capacity: int | None = None
    max_running_requests: int | None = None
    disconnect_abort: float | None = None
    slowdown_after: float | None = None
    slowdown_factor: float | None = None
    mem_creep_after: float | None = None
    mem_creep: float | None = None
    reasoning: bool = False
    usage_on_finish: bool = False
    no_done: bool = False
    detail_errors: bool = False
    strict_openai: bool = False
    openai_style: Literal["sglang", "transformers"] | None = None
    no_metrics: bool = False  # issue 26: /metrics answers 404
