"""The streaming benchmark: prompts, clients, metrics, runner, reports, history.

The request and result types are here (`bench/models.py`, `bench/results.py`); the engines (`runner.py`
`run_bench`, `loadrun.py`, `soak.py`, `agentic.py`) are imported from their modules by the fleet's bench desk
only, so naming a type never loads an engine.

The names below are loaded when first asked for (PEP 562 `__getattr__`): importing a small module of this
package (`bench.defaults`, `bench.history`) must not build every request and result model first (pydantic:
about a quarter of a second of CPU in each simulator, CLI run and worker process that starts, issue 24)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtree_tui.lib.lazyexports import lazy_getattr

if TYPE_CHECKING:
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


# a model named in `__all__` imported from bench/models.py the first time it is asked for; a submodule
# (`from ddtree_tui.bench import history`) imported as usual
__getattr__ = lazy_getattr(globals(), dict.fromkeys(__all__, "ddtree_tui.bench.models"), __name__)
