"""The streaming benchmark: prompts, clients, metrics, runner, reports, history.

Public entry points: `run_bench(req, targets, on_event=None, stop=None) -> BenchRun` and the models below.
"""

from ddtree_tui.bench.models import (
    BENCH_SCHEMA,
    BenchEvent,
    BenchRequest,
    BenchRun,
    BenchTarget,
    PromptFinished,
    PromptRow,
    PromptStarted,
    RequestResult,
    RunFinished,
    RunStarted,
    SamplingParams,
    ServiceSummary,
    TokensReceived,
)
from ddtree_tui.bench.runner import BenchUsageError, run_bench

__all__ = [
    "BENCH_SCHEMA",
    "BenchEvent",
    "BenchRequest",
    "BenchRun",
    "BenchTarget",
    "BenchUsageError",
    "PromptFinished",
    "PromptRow",
    "PromptStarted",
    "RequestResult",
    "RunFinished",
    "RunStarted",
    "SamplingParams",
    "ServiceSummary",
    "TokensReceived",
    "run_bench",
]
