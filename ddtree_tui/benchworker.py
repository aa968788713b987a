"""A bench worker process's entry point: `python -m ddtree_tui.benchworker` (bench/worker.py starts it).

Outside the bench package on purpose: importing anything under `ddtree_tui.bench` runs its `__init__`, which
makes the bench's pydantic models, and pydantic builds a model's validator when its class is made: dozens a
worker never uses (~0.13 s of a worker's ~0.39 s start, per process: 16 of them at c=256, issue 26). Here
every build is deferred (pydantic's own `defer_build`, set before the first model exists); the worker builds
the few it uses before its first job (`bench/worker.py` `_build_used_models`), never in a measurement.
DDTREE_BENCH_WORKER_BOOT=plain starts it without deferring (a side-by-side measurement).
"""

from __future__ import annotations

import os

import pydantic

BOOT_ENV = "DDTREE_BENCH_WORKER_BOOT"


def main() -> None:
    if os.environ.get(BOOT_ENV) != "plain":
        pydantic.BaseModel.model_config = pydantic.ConfigDict(defer_build=True)
    from ddtree_tui.bench.worker import main as worker_main

    worker_main()


if __name__ == "__main__":
    main()
