"""The event loop every measuring process runs on: uvloop's (libuv; a socket read and a callback cost less than
in asyncio's pure-Python selector loop, which is most of what the measured client spends per chunk), else
asyncio's. One factory for the runner's own process (`ddtree-tui --run-bench`) and for its worker processes
(bench/worker.py), so both read with the same loop. `DDTREE_BENCH_LOOP=asyncio` picks asyncio's for a
side-by-side measurement (benchmarks/peers.py)."""

from __future__ import annotations

import asyncio
import os

LOOP_ENV = "DDTREE_BENCH_LOOP"


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for measuring: uvloop's where installed and not switched off, else asyncio's."""
    if os.environ.get(LOOP_ENV) != "asyncio":
        try:
            import uvloop
        except ImportError:  # not on this platform (uvloop has no Windows build): asyncio's
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """`uvloop` or `asyncio`: which loop a process measured on (recorded with the run's client figures)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
