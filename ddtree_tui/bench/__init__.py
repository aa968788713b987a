"""The streaming benchmark: prompts, clients, metrics, runner, reports, history.

The request and result types are here (`bench/models.py`, `bench/results.py`); the engines (`runner.py`
`run_bench`, `loadrun.py`, `soak.py`, `agentic.py`) are imported from their modules by the fleet's bench desk
only, so naming a type never loads an engine.
"""

from ddtree_tui.bench.models import (
    BENCH_SCHEMA,
    BenchEvent,
    BenchRequest,
    BenchRun,
    BenchTarget,
    BenchUsageError,
    PromptFinished,
    PromptRow,
    PromptStarted,
    RequestResult,
    RunFinished,
    RunStarted,
    SamplingParams,
    ServiceSummary,
    ShapeRequest,
    TokensReceived,
)

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
    "ShapeRequest",
    "TokensReceived",
]
