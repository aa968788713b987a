"""Typed bench-history records for the tests (todo evidence, the history, the summaries): BenchRun lines as
bench/history.py writes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ddtree_tui.bench.models import BenchRun, RequestResult, SamplingParams


def bench_run(prompt_set: str, results: list[tuple[str, str | None]], status: str = "complete") -> BenchRun:
    """A run with one request per (HOST/SVC, error or None) pair."""
    return BenchRun.model_validate(
        {
            "id": f"r-{prompt_set}-{len(results)}",
            "status": status,
            "started_at": "2026-01-01T00:00:00Z",
            "prompt_set": prompt_set,
            "sampling": {},
            "repeats": 1,
            "warmup": 0,
            "concurrency": 1,
            # every service it measured, with the verified identity a run records (issue 29)
            "targets": [
                {
                    "ref": svc,
                    "base_url": "http://127.0.0.1:1",
                    "algorithm": "dflash",
                    "mode": None,
                    "identity": {"ref": svc, "kind": "launched", "verdict": "ours", "verified": True},
                }
                for svc in dict.fromkeys(s for s, _ in results)
            ],
            "results": [
                RequestResult(
                    service=svc,
                    algorithm="dflash",
                    mode=None,
                    prompt_id=f"p{i}",
                    repeat=0,
                    seq=i,
                    started_at=0.0,
                    ok=err is None,
                    error=err,
                ).model_dump(mode="json")
                for i, (svc, err) in enumerate(results)
            ],
        }
    )


def plain_run(run_id: str, **fields: Any) -> BenchRun:
    """A seed3 run of 2026-01-01, default sampling, one repeat, no warmup, concurrency 1, baseline h/a;
    `fields` override or add (results, rows, ...)."""
    base: dict[str, Any] = {
        "id": run_id,
        "started_at": datetime(2026, 1, 1, tzinfo=UTC),
        "prompt_set": "seed3",
        "sampling": SamplingParams(),
        "repeats": 1,
        "warmup": 0,
        "concurrency": 1,
        "baseline": "h/a",
    }
    return BenchRun(**(base | fields))


def history_line(run: BenchRun) -> str:
    return run.model_dump_json(by_alias=True)


def write_history(path: Path, lines: list[BenchRun | str]) -> None:
    """The history file: runs as JSON lines; a str is written as it is (a torn or foreign line)."""
    path.write_text("\n".join(x if isinstance(x, str) else history_line(x) for x in lines) + "\n")
