"""A bench worker process's entry point: `python -m ddtree_tui.benchworker` (bench/worker.py starts it).

Outside the bench package on purpose. A worker's start is CPU that every run pays once per process (16 of
them at c=256, issue 26), so a worker imports only the stream client: bench/worker.py, bench/client.py
(`measure_raw`), bench/stream.py, bench/timeline.py, bench/loadmon.py, bench/evloop.py, bench/sse.py. The
runner builds each request's bytes and turns what the worker measured into a RequestResult
(bench/worker.py), so no request or result model is imported here. The package's own `__init__` exports those
models for the faces; it is not run in a worker (`_bench_package`): the worker's modules are loaded from the
package's folder as usual. The one model a worker validates is bench/stream.py's StreamLimits; pydantic looks
for plugins before it builds the first validator of a process, reading the entry points of every installed
distribution (about 0.1 s here), so a worker starts with pydantic's plugins off (PYDANTIC_DISABLE_PLUGINS,
pydantic's own switch; a user's setting of it is kept). DDTREE_BENCH_WORKER_BOOT=plain starts a worker as any
process (the package's `__init__` run, plugins looked for): a side-by-side measurement of the start.
"""

from __future__ import annotations

import importlib.util
import os
import sys

BOOT_ENV = "DDTREE_BENCH_WORKER_BOOT"
PACKAGE = "ddtree_tui.bench"


def _bench_package() -> None:
    """Register `ddtree_tui.bench` with its folder as its path, without running its `__init__` (the faces'
    exports of every request and result model): its submodules then import as usual."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return  # not a package here: the plain import below says why
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = pkg
    import ddtree_tui

    ddtree_tui.bench = pkg  # type: ignore[attr-defined]


def main() -> None:
    if os.environ.get(BOOT_ENV) != "plain":
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
        _bench_package()
    from ddtree_tui.bench.worker import main as worker_main

    worker_main()


if __name__ == "__main__":
    main()
